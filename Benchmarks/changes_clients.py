"""Clients for Benchmarks/changes.sh: a thousand long-polls or event streams on one
server, and how long each takes to see a write.

    changes_clients.py longpoll PORT KEY CLIENTS ROUNDS
    changes_clients.py stream   PORT KEY CLIENTS WRITES SERVER_PID

Latency runs from the moment the write (a POST) is sent to the moment the answer's first
bytes can be read on each client's socket (one epoll loop, so that the clients' own
parsing does not count): an upper bound of commit-to-delivery, as it includes the
write's own commit.
"""

import json
import select
import socket
import sys
import time


def connect(port):
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def exchange(port, method, path, headers=None, body=None):
    """One request on a new connection; the status and body."""
    sock = connect(port)
    data = body.encode() if body else b""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if body:
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
    response = b""
    while chunk := sock.recv(65536):
        response += chunk
    sock.close()
    head, _, rest = response.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), rest


def token(port):
    page = {"hasMore": True, "nextToken": None}
    while page["hasMore"]:
        path = "/v1/changes?types=game&limit=1000" + (f"&since={page['nextToken']}" if page["nextToken"] else "")
        page = json.loads(exchange(port, "GET", path)[1])
    return page["nextToken"]


def open_all(port, clients, path, headers=""):
    socks = []
    for _ in range(clients):
        sock = connect(port)
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n".encode())
        socks.append(sock)
    return socks


def write(port, key, name):
    """Sends a POST of a game; returns when it was sent (after the 201)."""
    body = json.dumps({"name": name, "description": "benchmark", "imageName": "bench"})
    sent = time.monotonic()
    status, _ = exchange(port, "POST", "/v1/games", {"Authorization": f"Bearer {key}"}, body)
    assert status == 201, status
    return sent


def arrivals(socks, sent, expect, timeout=10):
    """Per socket, seconds from `sent` until `expect(data)` holds for what it received."""
    poller = select.epoll()
    by_fd = {}
    for sock in socks:
        sock.setblocking(False)
        poller.register(sock.fileno(), select.EPOLLIN)
        by_fd[sock.fileno()] = [sock, b""]
    latencies = []
    deadline = time.monotonic() + timeout
    while by_fd and time.monotonic() < deadline:
        for fd, _ in poller.poll(0.5):
            entry = by_fd.get(fd)
            if entry is None:
                continue
            now = time.monotonic()
            try:
                entry[1] += entry[0].recv(65536)
            except BlockingIOError:
                continue
            if expect(entry[1]):
                latencies.append(now - sent)
                poller.unregister(fd)
                del by_fd[fd]
    poller.close()
    for sock in socks:
        sock.setblocking(True)
    return latencies, len(by_fd)


def summary(label, latencies, missing):
    latencies = sorted(latencies)
    def at(q):
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000
    print(f"  {label}: {len(latencies)} deliveries ({missing} missing), p50 {at(0.50):.1f} ms, p99 {at(0.99):.1f} ms, max {latencies[-1] * 1000:.1f} ms")


def longpoll(port, key, clients, rounds):
    latencies, missing = [], 0
    for round_number in range(rounds):
        since = token(port)
        socks = open_all(port, clients, f"/v1/changes?types=game&wait=30&since={since}")
        time.sleep(1.5)  # every poll parked
        sent = write(port, key, f"long-poll {round_number}")
        got, left = arrivals(socks, sent, lambda data: b"\r\n\r\n" in data)
        latencies += got
        missing += left
        for sock in socks:
            sock.close()
    summary(f"long-poll wake-up, {clients} waiters x {rounds} writes", latencies, missing)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def open_streams(port, clients, path, attempts=10):
    """`clients` event streams, each open (its head and first bytes read). One address
    opening a thousand at once is refused a few (503 and Retry-After: its share of the
    server's queue is full); those are opened again a second later, as EventSource would."""
    opened, wanted = [], clients
    for _ in range(attempts):
        socks = open_all(port, wanted, path, "Accept: text/event-stream\r\n")
        refused = []
        for sock in socks:
            data = b""
            sock.settimeout(10)
            while b"retry:" not in data and not (data.startswith(b"HTTP/1.1 503") and b"\r\n\r\n" in data):
                chunk = sock.recv(65536)
                assert chunk, f"a stream closed before opening: {data[:200]!r}"
                data += chunk
            (refused if data.startswith(b"HTTP/1.1 503") else opened).append(sock)
        for sock in refused:
            sock.close()
        wanted = len(refused)
        if wanted == 0:
            return opened
        print(f"  {wanted} streams refused (503), opened again after a second")
        time.sleep(1)
    raise AssertionError(f"{wanted} streams did not open")


def stream(port, key, clients, writes, pid):
    since = token(port)
    before = rss_kib(pid)
    socks = open_streams(port, clients, f"/v1/changes?types=game&since={since}")
    time.sleep(1)
    during = rss_kib(pid)
    print(f"  server RSS: {before} KiB before, {during} KiB with {clients} streams open: {(during - before) * 1024 / clients:.0f} bytes per stream")
    latencies, missing = [], 0
    for index in range(writes):
        name = f"stream {index}"
        sent = write(port, key, name)
        got, left = arrivals(socks, sent, lambda data, name=json.dumps(name).encode(): name in data)
        latencies += got
        missing += left
        time.sleep(0.2)
    print(f"  server RSS after {writes} writes: {rss_kib(pid)} KiB")
    for sock in socks:
        sock.close()
    summary(f"event-stream delivery, {clients} streams x {writes} writes", latencies, missing)


if __name__ == "__main__":
    mode, port, key = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "longpoll":
        longpoll(port, key, int(sys.argv[4]), int(sys.argv[5]))
    else:
        stream(port, key, int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
