"""playlist-moves: PATCH /v1/playlists/{id}/entries/{entryId} {"position":4999} then
{"position":0} (merge patch), pipelined in pairs as fast as possible: the first entry of
a 5,000-entry playlist to the end and back, each attacker an editor user of its own on
its own playlist; the victim also posts, as in writer"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


async def attack(self):
    playlist, entry = self.config["move_playlists"][self.index], self.config["move_entries"][self.index]
    path = f"/v1/playlists/{playlist}/entries/{entry}"
    moves = [("PATCH", request_bytes("PATCH", path, self.key, json.dumps({"position": position}).encode(),
                                     content_type="application/merge-patch+json"))
             for position in (self.config["move_last"], 0)]  # to the end and back
    await self.exchange_loop(lambda: moves, timeout=SLOW_READ_TIMEOUT)
