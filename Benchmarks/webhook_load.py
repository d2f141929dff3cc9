#!/usr/bin/env python3
"""Driver for Benchmarks/webhooks.sh (Python 3 standard library only).

    webhook_load.py load --port PORT --key KEY [--rate 1000] [--seconds 20] [--connections 8]
                         [--path /v1/games] --ids FILE [--server-pid PID]
        Paced creates: request k is due at start + k / rate, sent on the first of the
        keep-alive connections that is free (one request at a time each, no pipelining);
        a request whose connection is not free when due goes late, and the lateness is
        reported. Writes the created ids (201 answers) to FILE, one a line, and prints the
        achieved rate, the answers' statuses, the creates' own latency, and (with
        --server-pid) the server's resident memory every 5 s.

    webhook_load.py report --ids FILE --healthy NAME=LOG... [--slow NAME=LOG...] [--wait 60]
        Reads the receivers' logs (Tests/Fixtures/webhook_receiver.py --log): for every
        created game, its `game.created` message. Waits up to --wait seconds for each
        healthy receiver to have all of them, then prints, per receiver: messages for the
        created games (distinct webhook-ids) against the creates, the missing, repeated
        deliveries, unverified requests, and commit → first byte latency (the receiver's
        latencyMs of each message's first delivery) p50 / p99 / max.

    webhook_load.py endpoint create PORT KEY URL SECRETS_FILE    prints the new endpoint's id
    webhook_load.py endpoint delete PORT KEY ID
    webhook_load.py endpoint show PORT KEY [NAME=URL...]          one line per endpoint

All requests go to 127.0.0.1 with `Authorization: Bearer KEY`.
"""

import argparse
import collections
import http.client
import json
import os
import selectors
import socket
import sys
import time


# ---------------------------------------------------------------- small helpers

def percentile(sorted_values, fraction):
    """Nearest-rank percentile of an already sorted list (None when empty)."""
    if not sorted_values:
        return None
    rank = max(1, int(-(-fraction * len(sorted_values) // 1)))  # ceil
    return sorted_values[min(rank, len(sorted_values)) - 1]


def fmt_ms(value):
    return "-" if value is None else f"{value:.1f}"


def request(port, key, method, path, body=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Bearer {key}"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    connection.request(method, path, data, headers)
    response = connection.getresponse()
    payload = response.read()
    connection.close()
    return response.status, payload


def rss_kib(pid):
    """(VmRSS, VmHWM) in KiB, or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            values = dict(line.split(":", 1) for line in status if line.startswith(("VmRSS", "VmHWM")))
        return int(values["VmRSS"].split()[0]), int(values["VmHWM"].split()[0])
    except (OSError, KeyError, ValueError):
        return None


# ---------------------------------------------------------------- endpoints

def endpoint(arguments):
    action, port, key = arguments[0], int(arguments[1]), arguments[2]
    if action == "create":
        url, secrets_file = arguments[3], arguments[4]
        status, payload = request(port, key, "POST", "/v1/webhooks", {"url": url, "eventTypes": ["*"]})
        if status != 201:
            sys.exit(f"POST /v1/webhooks {url}: {status} {payload[:500]!r}")
        created = json.loads(payload)
        temporary = f"{secrets_file}.{os.getpid()}.tmp"
        with open(temporary, "w") as file:
            file.write(created["secret"] + "\n")
        os.replace(temporary, secrets_file)
        print(created["id"])
    elif action == "delete":
        status, payload = request(port, key, "DELETE", f"/v1/webhooks/{arguments[3]}")
        if status != 204:
            sys.exit(f"DELETE /v1/webhooks/{arguments[3]}: {status} {payload[:500]!r}")
    elif action == "show":
        names = dict(reversed(label.split("=", 1)) for label in arguments[3:])  # URL → NAME
        status, payload = request(port, key, "GET", "/v1/webhooks")
        if status != 200:
            sys.exit(f"GET /v1/webhooks: {status} {payload[:500]!r}")
        document = json.loads(payload)
        for hook in document.get("items", []) if isinstance(document, dict) else document:
            print(f"  {names.get(hook.get('url'), hook.get('url'))}: pending {hook.get('pending')}, dropped {hook.get('dropped')}, "
                  f"enabled {hook.get('enabled')}{', failing since ' + hook['failingSince'] if hook.get('failingSince') else ''}")
    else:
        sys.exit(f"endpoint {action}? create, delete or show")


# ---------------------------------------------------------------- paced load

class Client:
    """One keep-alive connection with at most one request in flight."""

    __slots__ = ("sock", "buffer", "sent_at", "busy")

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.buffer = bytearray()
        self.sent_at = 0.0
        self.busy = False

    def response(self):
        """(status, headers, body) once a whole answer is buffered, else None."""
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        lines = bytes(self.buffer[:end]).split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        start = end + 4
        if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            body, position = bytearray(), start
            while True:
                line_end = self.buffer.find(b"\r\n", position)
                if line_end < 0:
                    return None
                size = int(bytes(self.buffer[position:line_end]).split(b";")[0], 16)
                if size == 0:
                    trailer_end = self.buffer.find(b"\r\n\r\n", line_end)
                    if trailer_end < 0:
                        return None
                    del self.buffer[:trailer_end + 4]
                    return status, headers, bytes(body)
                if len(self.buffer) < line_end + 2 + size + 2:
                    return None
                body += self.buffer[line_end + 2:line_end + 2 + size]
                position = line_end + 2 + size + 2
        length = int(headers.get(b"content-length", b"0"))
        if len(self.buffer) < start + length:
            return None
        body = bytes(self.buffer[start:start + length])
        del self.buffer[:start + length]
        return status, headers, body


def created_id(headers, body):
    location = headers.get(b"location")
    if location:
        return location.decode().rstrip("/").rsplit("/", 1)[-1]
    try:
        return json.loads(body)["id"]
    except Exception:
        return None


def load(options):
    total = int(options.rate * options.seconds)
    path = options.path
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{options.port}\r\nAuthorization: Bearer {options.key}\r\n"
            "Content-Type: application/json\r\n")
    clients = [Client(options.port) for _ in range(options.connections)]
    selector = selectors.DefaultSelector()
    for client in clients:
        selector.register(client.sock, selectors.EVENT_READ, client)
    free = collections.deque(clients)
    statuses = collections.Counter()
    latencies, lateness, ids, failures = [], [], [], []
    rss_samples = []
    next_sample = 0.0
    start = time.monotonic() + 0.05
    sent = answered = 0
    run = os.getpid()

    def send(client, index, due):
        name = f"Webhook bench {run}-{index}"
        body = json.dumps({"name": name, "description": "Created by Benchmarks/webhooks.sh at a steady pace.", "imageName": "x.png"})
        data = body.encode()
        client.sock.sendall((head + f"Content-Length: {len(data)}\r\n\r\n").encode() + data)
        client.sent_at = time.monotonic()
        client.busy = True
        lateness.append(client.sent_at - due)

    progress = time.monotonic()
    while answered < total:
        now = time.monotonic()
        if now - progress > 30:
            sys.exit(f"no answer for 30 s ({answered} of {sent} sent answered)")
        if options.server_pid and now >= next_sample:
            sample = rss_kib(options.server_pid)
            if sample:
                rss_samples.append((now - start, *sample))
            next_sample = now + 1.0
        # Send every request that is due, while a connection is free.
        while sent < total and free:
            due = start + sent / options.rate
            if due > now:
                break
            send(free.popleft(), sent, due)
            sent += 1
        if sent < total and free:
            timeout = max(0.0, start + sent / options.rate - time.monotonic())
        else:
            timeout = 1.0
        for key, _ in selector.select(min(timeout, 1.0)):
            client = key.data
            try:
                chunk = client.sock.recv(65536)
            except BlockingIOError:
                continue
            if not chunk:
                sys.exit("the server closed a connection")
            client.buffer += chunk
            while client.busy and (answer := client.response()) is not None:
                status, headers, body = answer
                answered += 1
                progress = time.monotonic()
                statuses[status] += 1
                latencies.append(time.monotonic() - client.sent_at)
                if status == 201:
                    identifier = created_id(headers, body)
                    if identifier:
                        ids.append(identifier)
                elif len(failures) < 3:
                    failures.append(f"{status} {body[:300]!r}")
                client.busy = False
                if headers.get(b"connection", b"").lower() == b"close":
                    sys.exit(f"the server closed a connection after a {status}")
                free.append(client)
    elapsed = time.monotonic() - start
    for client in clients:
        client.sock.close()

    with open(options.ids, "w") as file:
        file.write("".join(f"{identifier}\n" for identifier in ids))
    latencies.sort()
    lateness.sort()
    late = sum(1 for value in lateness if value > 0.010)
    print(f"  creates: {answered} in {elapsed:.1f} s = {answered / elapsed:.0f}/s (asked {options.rate:g}/s over "
          f"{options.connections} connections); answers {dict(sorted(statuses.items()))}")
    print(f"  create latency p50 {fmt_ms(percentile(latencies, 0.5) * 1000)} ms, p99 {fmt_ms(percentile(latencies, 0.99) * 1000)} ms, "
          f"max {fmt_ms(latencies[-1] * 1000)} ms; sent more than 10 ms late: {late} (max {fmt_ms(lateness[-1] * 1000)} ms)")
    for failure in failures:
        print(f"  e.g. {failure}")
    if rss_samples:
        shown = rss_samples[::5] + ([rss_samples[-1]] if (len(rss_samples) - 1) % 5 else [])
        print("  server RSS during the load (s: MiB): "
              + ", ".join(f"{max(0.0, elapsed_s):.0f}: {rss / 1024:.1f}" for elapsed_s, rss, _ in shown)
              + f"; peak {max(sample[2] for sample in rss_samples) / 1024:.1f} MiB")
    return 0 if statuses.get(201, 0) == answered else 1


# ---------------------------------------------------------------- delivery report

class Log:
    """A receiver's log, read as it grows."""

    def __init__(self, name, path, created):
        self.name, self.path, self.created = name, path, created
        self.offset = 0
        self.partial = b""
        self.lines = 0
        self.first = {}  # webhook-id → latencyMs of its first delivery (created games only)
        self.games = set()  # created games with a message here
        self.requests = collections.Counter()  # webhook-id → requests (created games only)
        self.unverified = 0
        self.statuses = collections.Counter()
        self.other = 0  # requests not about a created game (other events, or unreadable)

    def read(self):
        try:
            with open(self.path, "rb") as file:
                file.seek(self.offset)
                data = file.read()
        except FileNotFoundError:
            return
        self.offset += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            if line:
                self.add(json.loads(line))

    def add(self, record):
        self.lines += 1
        self.statuses[record.get("status")] += 1
        if not record.get("verified"):
            self.unverified += 1
        try:
            message = json.loads(record["body"])
            game = message["data"]["id"]
            kind = message["type"]
        except Exception:
            self.other += 1
            return
        if kind != "game.created" or game not in self.created:
            self.other += 1
            return
        msg_id = record.get("id")
        self.requests[msg_id] += 1
        if msg_id not in self.first:
            self.first[msg_id] = record.get("latencyMs")
        self.games.add(game)

    def complete(self):
        return len(self.games) >= len(self.created)

    def summary(self, healthy):
        """Two lines: what arrived, and how long after its commit."""
        latencies = sorted(value for value in self.first.values() if value is not None)
        repeated = sum(count - 1 for count in self.requests.values() if count > 1)
        missing = len(self.created) - len(self.games)
        mark = ("✔ " if missing == 0 else "✘ ") if healthy else ""
        target = ""
        if healthy and latencies:
            target = "  ✔" if percentile(latencies, 0.99) <= 200 else "  ✘"
        kind = "" if healthy else " (slow receiver)"
        return (f"  {self.name:10s} {len(self.first):>7} messages for {len(self.created)} creates{kind} {mark}(games covered {len(self.games)}, "
                f"missing {missing}); repeated deliveries {repeated}; unverified {self.unverified}; other {self.other}; "
                f"answers {dict(sorted(self.statuses.items(), key=lambda item: str(item[0])))}\n"
                f"  {'':10s} commit → first byte: p50 {fmt_ms(percentile(latencies, 0.5))} ms, p99 {fmt_ms(percentile(latencies, 0.99))} ms, "
                f"max {fmt_ms(latencies[-1] if latencies else None)} ms{target}")


def report(options):
    with open(options.ids) as file:
        created = {line.strip() for line in file if line.strip()}
    healthy = [Log(*spec.split("=", 1), created) for spec in options.healthy]
    slow = [Log(*spec.split("=", 1), created) for spec in options.slow]
    start = time.monotonic()
    while True:
        for log in healthy + slow:
            log.read()
        if all(log.complete() for log in healthy) or time.monotonic() - start >= options.wait:
            break
        time.sleep(0.5)
    waited = time.monotonic() - start
    done = all(log.complete() for log in healthy)
    print(f"  all delivered to the healthy receivers: {'yes' if done else 'NO'} "
          f"({'after' if done else 'gave up after'} {waited:.1f} s of waiting once the load ended)")
    for log in healthy:
        print(log.summary(True))
    for log in slow:
        print(log.summary(False))
    return 0 if done else 1


# ---------------------------------------------------------------- main

def main():
    if len(sys.argv) > 1 and sys.argv[1] == "endpoint":
        endpoint(sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    paced = commands.add_parser("load")
    paced.add_argument("--port", type=int, required=True)
    paced.add_argument("--key", required=True)
    paced.add_argument("--rate", type=float, default=1000.0)
    paced.add_argument("--seconds", type=float, default=20.0)
    paced.add_argument("--connections", type=int, default=8)
    paced.add_argument("--path", default="/v1/games")
    paced.add_argument("--ids", required=True)
    paced.add_argument("--server-pid", type=int)
    deliveries = commands.add_parser("report")
    deliveries.add_argument("--ids", required=True)
    deliveries.add_argument("--healthy", nargs="+", default=[], metavar="NAME=LOG")
    deliveries.add_argument("--slow", nargs="*", default=[], metavar="NAME=LOG")
    deliveries.add_argument("--wait", type=float, default=60.0)
    options = parser.parse_args()
    return load(options) if options.command == "load" else report(options)


if __name__ == "__main__":
    sys.exit(main())
