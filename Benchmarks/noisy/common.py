"""What the driver, the victim and the attackers share: settings, requests, blocking HTTP
calls for set-up, percentiles, and the victim process."""


import argparse
import asyncio
import errno
import json
import os
import random
import resource
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import http.client

HOST = "127.0.0.1"
VICTIM_ADDRESS = "127.0.0.2"
SETUP_ADDRESS = "127.0.0.3"
ATTACKERS = 4
VICTIM_INTERVAL = 0.020
VICTIM_TIMEOUT = 5.0
READ_TIMEOUT = 5.0
SLOW_READ_TIMEOUT = 15.0  # backups, 5,000-entry playlist writes, full feed pages
TARGET_P99_MS = 25.0
TARGET_RSS_MIB = 256.0
NGINX = "/usr/sbin/nginx"
BODY_LIMIT = 256 * 1024  # the most a route reads (but whole orders and imports: 1 MiB)
PLAYLIST_LIMIT = 5000  # the most entries a playlist holds

PATTERNS = ["baseline", "get-flood", "metrics-labels", "search", "near", "big-comments",
            "slow-body", "buffered-bodies", "backups", "writer", "deferred-queue",
            "many-errors", "anonymous-bodies", "playlist-moves", "feed-pages", "idle-streams",
            "behind-proxy", "image-uploads"]
# Patterns whose victim alternates its GET with POST /v1/games (its own editor key).
VICTIM_WRITES = ("writer", "anonymous-bodies", "playlist-moves")
# Patterns whose server metrics (streams, long-polls, connections, refusals) are read near
# the end of the window and reported in the notes.
SAMPLED = ("many-errors", "anonymous-bodies", "feed-pages", "idle-streams", "behind-proxy")

SEARCH_QUERIES = ["/v1/playable-items?q=a%20b%20c%20d%20e%20f%20g%20h%20i%20j%20k%20l%20m%20n%20o%20p",
                  "/v1/playable-items?q=sample"]


def raise_file_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))
        except (ValueError, OSError):
            pass


def failure_name(error):
    """The short name an attacker or the victim records for a failed exchange."""
    if isinstance(error, (asyncio.TimeoutError, socket.timeout, TimeoutError)):
        return "timeout"
    if isinstance(error, ConnectionRefusedError):
        return "refused"
    if isinstance(error, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        return "reset"
    if isinstance(error, (asyncio.IncompleteReadError, EOFError)):
        return "closed"
    if isinstance(error, OSError) and error.errno:
        return errno.errorcode.get(error.errno, "oserror").lower()
    return type(error).__name__.lower()


def request_bytes(method, path, key=None, body=None, extra="", content_type="application/json"):
    head = f"{method} {path} HTTP/1.1\r\nHost: {HOST}\r\n"
    if key:
        head += f"Authorization: Bearer {key}\r\n"
    if body is not None:
        head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
    head += extra + "\r\n"
    return head.encode() + (body or b"")


# ---------------------------------------------------------------------------------------
# Blocking HTTP (victim and setup)

class BlockingConnection:
    def __init__(self, port, source, timeout):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock.bind((source, 0))
            self.sock.settimeout(timeout)
            self.sock.connect((HOST, port))
        except BaseException:
            self.sock.close()
            raise
        self.buffer = bytearray()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _fill(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("timed out")
        self.sock.settimeout(remaining)
        data = self.sock.recv(262144)
        if not data:
            raise EOFError("closed")
        self.buffer += data

    def _take_line(self, deadline):
        while True:
            index = self.buffer.find(b"\r\n")
            if index >= 0:
                line = bytes(self.buffer[:index])
                del self.buffer[:index + 2]
                return line
            self._fill(deadline)

    def _take(self, count, deadline):
        while len(self.buffer) < count:
            self._fill(deadline)
        data = bytes(self.buffer[:count])
        del self.buffer[:count]
        return data

    def exchange(self, data, timeout, method="GET"):
        """Sends one request, reads its answer: (status, body, keep_alive)."""
        deadline = time.monotonic() + timeout
        self.sock.settimeout(timeout)
        self.sock.sendall(data)
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end >= 0:
                break
            self._fill(deadline)
        head = bytes(self.buffer[:end]).decode("latin-1")
        del self.buffer[:end + 4]
        lines = head.split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        keep_alive = "close" not in headers.get("connection", "").lower()
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            body = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            while True:
                size = int(self._take_line(deadline).split(b";")[0], 16)
                if size == 0:
                    while self._take_line(deadline):
                        pass
                    break
                parts.append(self._take(size, deadline))
                self._take(2, deadline)
            body = b"".join(parts)
        elif "content-length" in headers:
            body = self._take(int(headers["content-length"]), deadline)
        else:
            try:
                while True:
                    self._fill(deadline)
            except EOFError:
                pass
            body, self.buffer = bytes(self.buffer), bytearray()
            keep_alive = False
        return status, body, keep_alive


def http_call(port, method, path, key=None, body=None, timeout=30.0, source=SETUP_ADDRESS):
    """One request on its own connection: (status, body bytes)."""
    data = body if body is None or isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    connection = BlockingConnection(port, source, timeout)
    try:
        status, answer, _ = connection.exchange(request_bytes(method, path, key, data), timeout, method)
        return status, answer
    finally:
        connection.close()


def setup_call(port, method, path, key, body=None, timeout=30.0, expect=(200, 201)):
    """A setup request, retried on 429/503 (honouring Retry-After up to 5 s) for up to 30 s."""
    give_up = time.monotonic() + 30
    while True:
        status, answer = http_call(port, method, path, key, body, timeout)
        if status in expect or status not in (429, 503) or time.monotonic() > give_up:
            return status, answer
        time.sleep(1.0)


# ---------------------------------------------------------------------------------------
# The victim

def percentile(sorted_values, p):
    if not sorted_values:
        return None
    index = max(0, min(len(sorted_values) - 1, -(-p * len(sorted_values) // 100) - 1))
    return sorted_values[int(index)]


def victim_main(config_path):
    config = json.load(open(config_path))
    port, start, duration = config["port"], config["start"], config["duration"]
    end = start + duration
    get_request = request_bytes("GET", "/v1/playable-items/" + config["victim_item"])
    editor_key = config.get("victim_key")
    requests = [("GET", get_request)]
    if editor_key:
        body = json.dumps({"name": "Victim game", "imageName": "victim"}).encode()
        requests.append(("POST", request_bytes("POST", "/v1/games", editor_key, body)))
    if config.get("victim_feed"):
        requests.append(("FEED", request_bytes("GET", config["victim_feed"])))
    samples = {kind: [] for kind, _ in requests}  # latency in ms, None for a failure
    failures = {}
    connection = None
    next_send = start
    index = 0
    delay = start - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    while True:
        now = time.monotonic()
        if now >= end:
            break
        if now < next_send:
            time.sleep(next_send - now)
        kind, data = requests[index % len(requests)]
        index += 1
        sent = time.perf_counter()
        try:
            if connection is None:
                connection = BlockingConnection(port, VICTIM_ADDRESS, VICTIM_TIMEOUT)
                sent = time.perf_counter()  # a reconnect is not the request's latency
            status, _, keep_alive = connection.exchange(data, min(VICTIM_TIMEOUT, end + 2 - time.monotonic() + 0.001))
            elapsed = (time.perf_counter() - sent) * 1000
            if 200 <= status < 300:
                samples[kind].append(elapsed)
            else:
                samples[kind].append(None)
                failures[str(status)] = failures.get(str(status), 0) + 1
            if not keep_alive:
                connection.close()
                connection = None
        except Exception as error:  # noqa: BLE001 - every failure is data
            samples[kind].append(None)
            name = failure_name(error)
            failures[name] = failures.get(name, 0) + 1
            if connection is not None:
                connection.close()
                connection = None
        next_send += VICTIM_INTERVAL
        if next_send < time.monotonic():
            next_send = time.monotonic()
    if connection is not None:
        connection.close()
    json.dump({"samples": samples, "failures": failures}, sys.stdout)


# ---------------------------------------------------------------------------------------
# Attackers


# Set-up helpers several patterns use

def setup_playlist(port, key, title, items):
    """A playlist of `items`, owned by the holder of `key`: its id."""
    status, answer = setup_call(port, "POST", "/v1/playlists", key, {"title": title})
    if status != 201:
        raise RuntimeError(f"POST /v1/playlists: {status} {answer[:200]!r}")
    playlist = json.loads(answer)["id"]
    status, answer = setup_call(port, "PUT", f"/v1/playlists/{playlist}/entries", key,
                                {"playableItemIds": items}, 60)
    if status != 200:
        raise RuntimeError(f"PUT /v1/playlists/{playlist}/entries: {status} {answer[:200]!r}")
    return playlist


def setup_users(port, key, role, count, name):
    """`count` users of `role`, each with an API key of that role, made through the API with
    the admin key: their keys' secrets."""
    secrets = []
    for index in range(count):
        status, answer = setup_call(port, "POST", "/v1/users", key, {"displayName": f"{name} {index}", "role": role})
        if status != 201:
            raise RuntimeError(f"POST /v1/users: {status} {answer[:200]!r}")
        user = json.loads(answer)["id"]
        status, answer = setup_call(port, "POST", "/v1/api-keys", key,
                                    {"name": f"{name} {index}", "userId": user, "role": role})
        if status != 201:
            raise RuntimeError(f"POST /v1/api-keys: {status} {answer[:200]!r}")
        secrets.append(json.loads(answer)["secret"])
    return secrets


def latest_token(port, key):
    """A sync token at the end of the change feed (paged with types=game, so that its pages
    are small whatever the catalog holds)."""
    token = None
    for _ in range(10000):
        path = "/v1/changes?types=game&limit=1000" + (f"&since={token}" if token else "")
        status, answer = setup_call(port, "GET", path, key, timeout=60)
        if status != 200:
            raise RuntimeError(f"GET {path}: {status} {answer[:200]!r}")
        page = json.loads(answer)
        token = page["nextToken"]
        if not page["hasMore"]:
            return token
    raise RuntimeError("the change feed did not end")


def start_nginx(work, port, upstream):
    """nginx on 127.0.0.1:port in front of the server, as deploy/nginx-replicas.conf (keep-alive
    upstream, X-Forwarded-For), in the foreground: its process."""
    root = os.path.join(work, "nginx")
    os.makedirs(root, exist_ok=True)
    conf = os.path.join(root, "nginx.conf")
    with open(conf, "w") as out:
        out.write(f"""worker_processes 1;
daemon off;
pid {root}/nginx.pid;
error_log {root}/error.log;
worker_rlimit_nofile 16384;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    upstream catalog {{ server 127.0.0.1:{upstream}; keepalive 32; }}
    server {{
        listen 127.0.0.1:{port};
        server_tokens off;
        keepalive_requests 1000000;
        location / {{
            proxy_pass http://catalog;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_read_timeout 660s;
            proxy_max_temp_file_size 0;
        }}
    }}
}}
""")
    process = subprocess.Popen([NGINX, "-c", conf, "-p", root + "/", "-e", os.path.join(root, "error.log")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and process.poll() is None:
        try:
            socket.create_connection((HOST, port), timeout=1.0).close()
            return process
        except OSError:
            time.sleep(0.05)
    stop_nginx(process)
    try:
        with open(os.path.join(root, "error.log")) as log:
            errors = log.read()[-2000:]
    except OSError:
        errors = ""
    raise RuntimeError(f"nginx did not start; its log:\n{errors}")


def stop_nginx(process):
    """Stops nginx (a fast shutdown: SIGTERM to its master), killing it and its workers after 10 s."""
    if process is None or process.poll() is not None:
        return
    try:
        with open(f"/proc/{process.pid}/task/{process.pid}/children") as children:
            workers = [int(pid) for pid in children.read().split()]
    except OSError:
        workers = []
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        for pid in workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def playlist_items(s):
    """The items of the playlists a pattern sets up (the most a playlist holds), the same
    for every run; kept in the attackers' configuration."""
    items = random.Random(7).sample(s.ids, min(PLAYLIST_LIMIT, len(s.ids)))
    s.config["playlist_items"] = items
    return items
