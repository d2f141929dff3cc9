"""feed-pages: 8 connections each, anonymous: GET /v1/changes?limit=1000 (from the
beginning, no since) back to back; the victim alternates its GET with GET
/v1/changes?since=<the feed's end at setup> (an empty page), in the notes"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


def setup(s):
    s.config["victim_feed"] = f"/v1/changes?since={latest_token(s.port, s.key)}"


async def attack(self):
    request = [("GET", request_bytes("GET", "/v1/changes?limit=1000"))]

    def seen(method, status, size, seconds):
        name = f"bytes:{method} {status}"
        self.notes[name] = max(self.notes.get(name, 0), size)
    await asyncio.gather(*(self.exchange_loop(lambda: request, timeout=SLOW_READ_TIMEOUT, on_response=seen)
                           for _ in range(8)))
