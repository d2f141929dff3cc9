"""search: GET /v1/playable-items?q=a b c … p (16 one-letter words), alternating with
q=sample"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


async def attack(self):
    state = {"n": 0}
    def batch():
        state["n"] += 1
        return [("GET", request_bytes("GET", SEARCH_QUERIES[state["n"] % 2]))]
    await self.exchange_loop(batch)
