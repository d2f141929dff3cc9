"""deferred-queue: 64 pipelined POST /v1/games (admin key), never read, then a reset
(SO_LINGER 0)"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


async def attack(self):
    requests = b"".join(
        request_bytes("POST", "/v1/games", self.key,
                      json.dumps({"name": f"Deferred {self.index}-{n}", "imageName": "deferred"}).encode())
        for n in range(64))
    linger = struct.pack("ii", 1, 0)
    while not self.over():
        try:
            sock = await self.raw_open()
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001
            self.count(failure_name(error))
            await asyncio.sleep(0.01)
            continue
        try:
            await self.raw_send(sock, requests)
            self.count("sent", 64)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001
            self.count(failure_name(error))
        finally:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            except OSError:
                pass
            sock.close()
