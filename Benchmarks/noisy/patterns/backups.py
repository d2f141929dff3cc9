"""backups: POST /admin/backups back to back (admin key); reports what the backup dir holds"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


async def attack(self):
    request = [("POST", request_bytes("POST", "/admin/backups", self.key))]
    await self.exchange_loop(lambda: request, timeout=SLOW_READ_TIMEOUT)
