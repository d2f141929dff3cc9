"""anonymous-bodies: one attacker (127.0.0.10), up to 130 connections: POST /v1/games
without a credential, Content-Length 1048575, 16 KiB of body, then 1 KiB a second (every
other connection) or nothing more; the victim also posts, as in writer"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


async def attack(self):
    head = (f"POST /v1/games HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
            "Content-Length: 1048575\r\n\r\n").encode()
    first = b'{"name":"' + b"x" * (16384 - 9)
    trickling = set()  # every other connection sends 1 KiB a second after its first 16 KiB; the rest stall

    async def open_one():
        sock = await self.raw_open()
        try:
            await self.raw_send(sock, head + first, timeout=3.0)
        except BaseException:
            sock.close()
            raise
        self.count("sent")
        if self.counts["sent"] % 2:
            trickling.add(sock)
        return sock

    async def trickle(sock):
        if sock in trickling:
            await self.raw_send(sock, b"x" * 1024, 1.0)
    await self.hold(130, open_one, tick=1.0, on_tick=trickle)
