"""image-uploads: one member (every attacker holds the same member's key) uploads a
1600 × 1200 JPEG as its avatar, 4 pipelined at a time per attacker, as fast as possible;
the expensive rate budget, the image pool's share per caller and the member's quota bound
what it costs everyone else"""

import struct
import zlib

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


def setup(s):
    # The picture is the server's own: a PNG written here, uploaded by the admin as a game's
    # artwork, fetched back as a JPEG rendition (what an iPhone uploads is a JPEG).
    status, answer = setup_call(s.port, "POST", "/v1/games", s.key, {"name": "Noisy artwork", "imageName": "noisy"})
    if status != 201:
        raise RuntimeError(f"POST /v1/games: {status} {answer[:200]!r}")
    game = json.loads(answer)["id"]
    status, answer = raw_call(s.port, "PUT", f"/v1/games/{game}/image", s.key, png(1600, 1200), "image/png")
    if status != 200:
        raise RuntimeError(f"PUT /v1/games/{game}/image: {status} {answer[:200]!r}")
    url = json.loads(answer)["image"]["url"]
    status, jpeg = setup_call(s.port, "GET", url + "?w=2048&format=jpeg&q=90", s.key)
    if status != 200:
        raise RuntimeError(f"GET {url}: {status}")
    member = setup_users(s.port, s.key, "member", 1, "Noisy uploader")[0]
    status, answer = setup_call(s.port, "GET", "/v1/me", member)
    s.config["attacker_keys"] = [member] * ATTACKERS
    s.config["upload_path"] = f"/v1/users/{json.loads(answer)['id']}/image"
    s.config["upload_jpeg"] = jpeg.hex()
    s.notes.append(f"each upload: a 1600 × 1200 JPEG of {len(jpeg)} bytes")


async def attack(self):
    jpeg = bytes.fromhex(self.config["upload_jpeg"])
    upload = ("PUT", request_bytes("PUT", self.config["upload_path"], self.key, jpeg, content_type="image/jpeg"))
    await self.exchange_loop(lambda: [upload] * 4, timeout=SLOW_READ_TIMEOUT)


def raw_call(port, method, path, key, body, content_type):
    """One request with a body of bytes of `content_type`: (status, body bytes)."""
    connection = BlockingConnection(port, SETUP_ADDRESS, 60.0)
    try:
        status, answer, _ = connection.exchange(request_bytes(method, path, key, body, content_type=content_type), 60.0, method)
        return status, answer
    finally:
        connection.close()


def png(width, height):
    """An RGB PNG of a smooth gradient with a little texture (compresses like a photo would not)."""
    rows = b"".join(b"\x00" + bytes(v for x in range(width) for v in ((x * 255) // width, (y * 255) // height, (x * y) % 251))
                    for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b""))
