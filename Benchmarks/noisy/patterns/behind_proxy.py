"""behind-proxy: nginx (/usr/sbin/nginx; skipped without it) in front of the server, which
runs with --trusted-proxies 127.0.0.1 (X-Forwarded-For, as deploy/nginx-replicas.conf:
HTTP/1.1, keep-alive upstream); the victim and the attackers connect to nginx (port 1000
above the pattern's server); each attacker holds 130 long-polls (GET
/v1/changes?since=<the feed's end>&wait=30) and runs get-flood"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)
from noisy.patterns.get_flood import attack as get_flood


def setup(s):
    s.config["feed_token"] = latest_token(s.port, s.key)
    s.config["polls_per_attacker"] = 130
    s.nginx = start_nginx(s.work, s.proxy_port, s.port)
    s.config["port"] = s.proxy_port  # the victim and the attackers go through nginx


async def attack(self):
    poll = request_bytes("GET", f"/v1/changes?since={self.config['feed_token']}&wait=30")

    async def open_one():
        sock = await self.raw_open()
        try:
            await self.raw_send(sock, poll)
        except BaseException:
            sock.close()
            raise
        return sock
    await asyncio.gather(self.hold(self.config["polls_per_attacker"], open_one, tick=1.0, label="poll "),
                         get_flood(self))
