"""metrics-labels: 16 pipelined requests with random 4 KB method names, and GET /metrics
(admin)"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


async def attack(self):
    table = bytes(65 + b % 26 for b in range(256))
    metrics = ("GET", request_bytes("GET", "/metrics", self.key))
    state = {"batches": 0}

    def batch():
        requests = [("X", os.urandom(4096).translate(table) + b" /v1/games HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    for _ in range(16)]
        state["batches"] += 1
        if state["batches"] % 4 == 0:
            requests.append(metrics)
        return requests

    def seen(method, status, size, seconds):
        if method == "GET" and status == 200:
            self.notes["metrics_bytes"] = max(self.notes.get("metrics_bytes", 0), size)
            self.notes["metrics_seconds"] = max(self.notes.get("metrics_seconds", 0), seconds)
    await self.exchange_loop(batch, on_response=seen)
