"""Clients for Benchmarks/changes.sh: a thousand long-polls or event streams on one
server, and how long each takes to see a write.

    changes_clients.py longpoll PORT KEY CLIENTS ROUNDS
    changes_clients.py stream   PORT KEY CLIENTS WRITES SERVER_PID

Latency is measured from the moment the write (a POST) is sent, so it includes the
write's own commit: an upper bound of commit-to-delivery.
"""

import asyncio
import json
import sys
import time


async def request(port, path, headers=None, body=None, method="GET"):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    data = body.encode() if body else b""
    if body:
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
    await writer.drain()
    return reader, writer


async def read_response(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    body = await reader.readexactly(length) if length else b""
    return status, body


async def fetch(port, path, headers=None, body=None, method="GET"):
    reader, writer = await request(port, path, headers, body, method)
    try:
        return await read_response(reader)
    finally:
        writer.close()


async def token(port):
    status, body = await fetch(port, "/v1/changes?types=game&limit=1000")
    page = json.loads(body)
    while page["hasMore"]:
        status, body = await fetch(port, "/v1/changes?types=game&limit=1000&since=" + page["nextToken"])
        page = json.loads(body)
    return page["nextToken"]


async def write(port, key, name):
    body = json.dumps({"name": name, "description": "benchmark", "imageName": "bench"})
    sent = time.monotonic()
    status, _ = await fetch(port, "/v1/games", {"Authorization": f"Bearer {key}"}, body, "POST")
    assert status == 201, status
    return sent


def summary(label, latencies):
    latencies = sorted(latencies)
    def at(q):
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000
    print(f"  {label}: {len(latencies)} deliveries, p50 {at(0.50):.1f} ms, p99 {at(0.99):.1f} ms, max {latencies[-1] * 1000:.1f} ms")


async def longpoll(port, key, clients, rounds):
    latencies = []
    for round_number in range(rounds):
        since = await token(port)
        polls = [await request(port, f"/v1/changes?types=game&wait=30&since={since}") for _ in range(clients)]
        await asyncio.sleep(1.5)  # every poll parked
        sent = await write(port, key, f"long-poll {round_number}")
        async def answer(reader):
            status, body = await read_response(reader)
            arrived = time.monotonic()
            assert status == 200 and json.loads(body)["changes"], body[:200]
            return arrived - sent
        latencies += await asyncio.gather(*(answer(reader) for reader, _ in polls))
        for _, writer in polls:
            writer.close()
    summary(f"long-poll wake-up, {clients} waiters x {rounds} writes", latencies)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def stream(port, key, clients, writes, pid):
    since = await token(port)
    before = rss_kib(pid)
    streams = [await request(port, f"/v1/changes?types=game&since={since}", {"Accept": "text/event-stream"}) for _ in range(clients)]
    for reader, _ in streams:
        head = await reader.readuntil(b"\r\n\r\n")
        assert b" 200 " in head.split(b"\r\n")[0], head
    await asyncio.sleep(1)
    during = rss_kib(pid)
    print(f"  server RSS: {before} KiB before, {during} KiB with {clients} streams: {(during - before) * 1024 / clients:.0f} bytes per stream")
    sent = {}
    latencies = []

    async def listen(reader):
        got = 0
        buffer = b""
        while got < writes:
            buffer += await reader.read(65536)
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                for line in event.split(b"\n"):
                    if line.startswith(b"data: "):
                        name = json.loads(line[6:])["resource"]["name"]
                        while name not in sent:
                            await asyncio.sleep(0.001)
                        latencies.append(time.monotonic() - sent[name])
                        got += 1
        return got

    listeners = [asyncio.ensure_future(listen(reader)) for reader, _ in streams]
    for index in range(writes):
        name = f"stream {index}"
        body = json.dumps({"name": name, "description": "benchmark", "imageName": "bench"})
        sent_at = time.monotonic()
        sent[name] = sent_at
        status, _ = await fetch(port, "/v1/games", {"Authorization": f"Bearer {key}"}, body, "POST")
        assert status == 201
        await asyncio.sleep(0.2)
    await asyncio.wait_for(asyncio.gather(*listeners), 30)
    for _, writer in streams:
        writer.close()
    summary(f"event-stream delivery, {clients} streams x {writes} writes", latencies)


if __name__ == "__main__":
    mode, port, key = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "longpoll":
        asyncio.run(longpoll(port, key, int(sys.argv[4]), int(sys.argv[5])))
    else:
        asyncio.run(stream(port, key, int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])))
