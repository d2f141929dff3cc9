"""writer: PUT /v1/playlists/{id}/entries, a 5,000-entry order (the most a playlist holds;
reversed, shuffled), each attacker on its own playlist; the victim alternates its GET
with POST /v1/games (its own editor key); the victim columns and the target are its
GETs, its POSTs are reported in the notes"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


def setup(s):
    items = playlist_items(s)
    s.config["playlists"] = setup_writer(s.port, s.key, items)


async def attack(self):
    playlist = self.config["playlists"][self.index]
    items = list(self.config["playlist_items"])
    orders = [items[::-1]]
    for _ in range(3):
        shuffled = items[:]
        self.rng.shuffle(shuffled)
        orders.append(shuffled)
    orders.append(items)
    bodies = [request_bytes("PUT", f"/v1/playlists/{playlist}/entries", self.key,
                            json.dumps({"playableItemIds": order}).encode()) for order in orders]
    state = {"n": 0}

    def batch():
        state["n"] += 1
        return [("PUT", bodies[state["n"] % len(bodies)])]
    await self.exchange_loop(batch, timeout=SLOW_READ_TIMEOUT)


def setup_writer(port, key, items):
    return [setup_playlist(port, key, f"Noisy writer {index}", items) for index in range(ATTACKERS)]
