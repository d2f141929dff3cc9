"""get-flood: GET /v1/playable-items/{id}, 16 pipelined at a time, as fast as possible"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


async def attack(self):
    ids = self.ids
    def batch():
        return [("GET", request_bytes("GET", "/v1/playable-items/" + self.rng.choice(ids))) for _ in range(16)]
    await self.exchange_loop(batch)
