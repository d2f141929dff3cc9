"""playlist-moves: PATCH /v1/playlists/{id}/entries/{entryId} {"position":4999} then
{"position":0} (merge patch), pipelined in pairs as fast as possible: the first entry of
a 5,000-entry playlist to the end and back, each attacker an editor user of its own on
its own playlist; the victim also posts, as in writer"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


def setup(s):
    items = playlist_items(s)
    s.config["attacker_keys"], s.config["move_playlists"], s.config["move_entries"] = setup_moves(s.port, s.key, items)
    s.config["move_last"] = len(items) - 1


async def attack(self):
    playlist, entry = self.config["move_playlists"][self.index], self.config["move_entries"][self.index]
    path = f"/v1/playlists/{playlist}/entries/{entry}"
    moves = [("PATCH", request_bytes("PATCH", path, self.key, json.dumps({"position": position}).encode(),
                                     content_type="application/merge-patch+json"))
             for position in (self.config["move_last"], 0)]  # to the end and back
    await self.exchange_loop(lambda: moves, timeout=SLOW_READ_TIMEOUT)


def setup_moves(port, key, items):
    """Per attacker: an editor of its own and its playlist of `items`: (keys, playlists,
    the first entry of each)."""
    keys = setup_users(port, key, "editor", ATTACKERS, "Noisy mover")
    playlists, entries = [], []
    for index, secret in enumerate(keys):
        playlist = setup_playlist(port, secret, f"Noisy moves {index}", items)
        status, answer = setup_call(port, "GET", f"/v1/playlists/{playlist}/entries?limit=1", secret)
        if status != 200:
            raise RuntimeError(f"GET /v1/playlists/{playlist}/entries: {status} {answer[:200]!r}")
        playlists.append(playlist)
        entries.append(json.loads(answer)["items"][0]["entryId"])
    return keys, playlists, entries
