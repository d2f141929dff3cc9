"""big-comments: 100 comments of ~1 MiB (1 letter + combining marks) on one item; attackers
pipeline 8 × GET …/comments?limit=100 per connection, never read, hold 20 each"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


async def attack(self):
    path = f"/v1/playable-items/{self.config['comments_item']}/comments?limit=100"
    requests = request_bytes("GET", path) * 8

    async def open_one():
        sock = await self.raw_open()
        try:
            await self.raw_send(sock, requests)
        except BaseException:
            sock.close()
            raise
        self.count("sent", 8)
        return sock
    await self.hold(20, open_one, tick=0.5, open_interval=0.1, peek=True)
