"""buffered-bodies: up to 75 connections each: POST /v1/games (admin key), Content-Length
1000000, 999,999 bytes sent, then nothing"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


async def attack(self):
    head = (f"POST /v1/games HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {self.key}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n").encode()
    body = b'{"name":"' + b"x" * (999999 - 9)

    async def open_one():
        sock = await self.raw_open()
        try:
            await self.raw_send(sock, head + body, timeout=3.0)
        except BaseException:
            sock.close()
            raise
        return sock
    await self.hold(75, open_one, tick=1.0)
