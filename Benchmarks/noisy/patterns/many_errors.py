"""many-errors: POST /v1/playable-items/{id}/comments and PATCH /v1/me (merge patch),
pipelined in pairs as fast as possible, each body a JSON object of as many unknown
members as fit in 256 KiB (~32,000); each attacker a member user of its own (made with
the admin key); the notes give the largest answer of each method and status"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


def setup(s):
    s.config["attacker_keys"] = setup_users(s.port, s.key, "member", ATTACKERS, "Noisy member")
    s.config["errors_body"], members = unknown_members_body()
    s.notes.append(f"bodies of {len(s.config['errors_body']) / 1024:.0f} KiB, {members} unknown members")


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


def unknown_members_body(limit=BODY_LIMIT):
    """A JSON object of as many distinct unknown members ("0":0, "1":0, … named in base 36)
    as fit in `limit` bytes: (text, members)."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    parts, size, number = [], 2, 0
    while True:
        name, rest = "", number
        while True:
            name, rest = digits[rest % 36] + name, rest // 36
            if not rest:
                break
        number += 1
        if name == "id":  # a read-only member, not an unknown one
            continue
        piece = f'"{name}":0'
        grown = size + len(piece) + (1 if parts else 0)
        if grown > limit:
            break
        parts.append(piece)
        size = grown
    return "{" + ",".join(parts) + "}", len(parts)
