"""many-errors: POST /v1/playable-items/{id}/comments and PATCH /v1/me (merge patch),
pipelined in pairs as fast as possible, each body a JSON object of as many unknown
members as fit in 256 KiB (~32,000); each attacker a member user of its own (made with
the admin key); the notes give the largest answer of each method and status"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


async def attack(self):
    body = self.config["errors_body"].encode()
    me = ("PATCH", request_bytes("PATCH", "/v1/me", self.key, body, content_type="application/merge-patch+json"))

    def batch():
        path = f"/v1/playable-items/{self.rng.choice(self.ids)}/comments"
        return [("POST", request_bytes("POST", path, self.key, body)), me]

    def seen(method, status, size, seconds):
        name = f"bytes:{method} {status}"
        self.notes[name] = max(self.notes.get(name, 0), size)
    await self.exchange_loop(batch, timeout=SLOW_READ_TIMEOUT, on_response=seen, by_method=True)
