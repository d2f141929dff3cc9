#!/usr/bin/env python3
"""A Standard Webhooks receiver for the webhook tests and Benchmarks/webhooks.sh.

One asyncio HTTP/1.1 server (standard library, plus the reference verifier: PyPI
`standardwebhooks` 1.1.0, `pip install standardwebhooks==1.1.0`). Keep-alive and pipelining
are safe: requests on one connection are answered in order, bodies are read by
`Content-Length` or `Transfer-Encoding: chunked`, and `Expect: 100-continue` is answered.

    webhook_receiver.py [--host 127.0.0.1] [--port 0] [--port-file PATH] [--log PATH]
                        [--secrets-file PATH] [--fail-first N] [--delay SECONDS]
                        [--delay-file PATH]
                        [--status CODE | --hang | --redirect URL | --big-response BYTES]
                        [--exit-with-parent]

Answers (default 204 No Content at once):
  --fail-first N      500 with body `nope` to the first N requests of each webhook-id, then
                      the normal answer (the attempt count includes the failed ones).
  --status CODE       always CODE (empty body).
  --redirect URL      302 with `Location: URL`.
  --big-response N    200 with a body of N bytes of `x` (written with flow control).
  --hang              read every request, log it, never answer; the connection stays open.
  --delay SECONDS     answer each request SECONDS after its first byte arrived, without
                      holding up other connections (pipelined requests on one connection
                      still get their answers in order).
  --delay-file PATH   as each request is read, a number of seconds in this file (when it
                      holds one) replaces --delay for that request: a test can hold
                      answers, then let them go, without restarting the receiver.

--tls-cert PEM --tls-key PEM serve https instead of http.

--port-file PATH gets the bound port (decimal digits, no newline) by an atomic rename once
the socket listens. --secrets-file PATH holds one `whsec_…` secret a line; it is re-read
whenever it changes (its inode, size, mtime or ctime; and, for 2 s after a change, its
content on every request, since mtimes are coarser than quick successive writes). Each
request is verified with `standardwebhooks.Webhook(secret).verify` against each secret on
its own; the log records the indices (0-based lines of the file) that verified.

--log PATH: one JSON object a line, appended with one write() as each request is read
(before its answer, which may be delayed), with: id, timestamp, signature (the three
`webhook-*` header values or null), verified (list of secret indices), verifyError (why the
first usable secret failed, when none verified and the file has lines, else null), body (text),
attempt (1-based count of requests seen with this webhook-id, this one included), status
(what it answers: null with --hang), firstByte (time.time() when this request's first
byte arrived), latencyMs (firstByte minus the body's JSON `timestamp`, read as UTC, in
ms; null if absent or unparseable), userAgent, contentType, method, path.

SIGTERM and SIGINT stop it with exit status 0. --exit-with-parent also stops it when its
parent process ends (a killed test runner leaves no receiver behind).
"""

import argparse
import asyncio
import collections
import datetime
import http
import json
import os
import signal
import socket
import ssl
import sys
import time

try:
    from standardwebhooks.webhooks import Webhook
except ImportError:  # pragma: no cover - a set-up mistake, said plainly
    sys.stderr.write("webhook_receiver.py needs the reference verifier: pip install standardwebhooks==1.1.0\n")
    sys.exit(2)

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024
_CLOSE = object()  # in a connection's output queue: close once everything before it is written
_X = memoryview(b"x" * (256 * 1024))


def _reason(code):
    try:
        return http.HTTPStatus(code).phrase
    except ValueError:
        return "Status"


def _response(code, headers=(), body=b"", close=False, length=None):
    """The bytes of an answer: its head, and `body` (no Content-Length where none may be
    sent; `length` instead of the body's own when the body is written separately)."""
    lines = [f"HTTP/1.1 {code} {_reason(code)}"]
    lines += [f"{name}: {value}" for name, value in headers]
    if not (100 <= code < 200 or code in (204, 304)):
        lines.append(f"Content-Length: {len(body) if length is None else length}")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _parse_time(text):
    """Seconds since the epoch of an ISO 8601 time (`Z` or an offset; none means UTC)."""
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    moment = datetime.datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


class Secrets:
    """The secrets file, re-read when it changes."""

    RACY_SECONDS = 2.0

    def __init__(self, path):
        self.path = path
        self.key = None
        self.content = None
        self.hooks = []  # one per line: a Webhook, or None for a blank or unusable line

    def current(self):
        if self.path is None:
            return self.hooks
        try:
            st = os.stat(self.path)
        except OSError:
            self.key, self.content, self.hooks = None, None, []
            return self.hooks
        key = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        # A write within the same coarse clock tick as the last one can leave all four as
        # they were: while the file is that young, compare its bytes too.
        if key != self.key or time.time() - st.st_mtime < self.RACY_SECONDS:
            try:
                with open(self.path, "rb") as file:
                    content = file.read()
            except OSError:
                content = b""
            self.key = key
            if content != self.content:
                self.content = content
                self.hooks = [self._hook(line) for line in content.decode("utf-8", "replace").splitlines()]
        return self.hooks

    @staticmethod
    def _hook(line):
        line = line.strip()
        if not line:
            return None
        try:
            return Webhook(line)
        except Exception:
            return None

    def verify(self, body, msg_id, timestamp, signature):
        """The indices of the secrets that verify, and why the first one failed."""
        hooks = self.current()
        headers = {"webhook-id": msg_id or "", "webhook-timestamp": timestamp or "", "webhook-signature": signature or ""}
        verified, error = [], None
        for index, hook in enumerate(hooks):
            if hook is None:
                continue
            try:
                hook.verify(body, headers, json_parse=False)
                verified.append(index)
            except Exception as failure:  # WebhookVerificationError, or a malformed header's ValueError
                if error is None:
                    error = f"secret {index}: {type(failure).__name__}: {failure}"
        if verified or not hooks:
            return verified, None
        return verified, error or "no usable secret in the secrets file"


class Receiver:
    """What every connection shares: settings, the log, attempt counts."""

    def __init__(self, options):
        self.options = options
        self.secrets = Secrets(options.secrets_file)
        self.attempts = collections.Counter()
        self.log_fd = os.open(options.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if options.log else None
        self.connection_log_fd = (
            os.open(options.connection_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if options.connection_log else None
        )
        self.connections = set()
        self.loop = None
        self.requests = 0
        if options.hang:
            self.success = None
        elif options.redirect is not None:
            self.success = (302, _response(302, [("Location", options.redirect)]), 0)
        elif options.big_response is not None:
            self.success = (200, _response(200, [("Content-Type", "text/plain")], length=options.big_response), options.big_response)
        elif options.status is not None:
            self.success = (options.status, _response(options.status), 0)
        else:
            self.success = (204, _response(204), 0)
        self.failure = (500, _response(500, [("Content-Type", "text/plain")], b"nope"), 0)

    def delay(self):
        """Seconds to hold the answer to a request read now: --delay-file's number, when
        the file holds one, else --delay."""
        if self.options.delay_file:
            try:
                with open(self.options.delay_file, encoding="utf-8") as file:
                    return float(file.read().strip())
            except (OSError, ValueError):
                pass
        return self.options.delay

    def answer_for(self, attempt):
        """(status, head bytes, big body length) or None for no answer."""
        if self.success is None:
            return None
        if attempt <= self.options.fail_first:
            return self.failure
        return self.success

    def handle(self, method, target, headers, body, first_byte):
        msg_id = headers.get("webhook-id")
        timestamp = headers.get("webhook-timestamp")
        signature = headers.get("webhook-signature")
        self.attempts[msg_id] += 1
        attempt = self.attempts[msg_id]
        self.requests += 1
        verified, verify_error = self.secrets.verify(body, msg_id, timestamp, signature)
        answer = self.answer_for(attempt)
        if self.log_fd is not None:
            latency = None
            if body[:1] == b"{":
                try:
                    sent = json.loads(body).get("timestamp")
                    if isinstance(sent, str):
                        latency = round((first_byte - _parse_time(sent)) * 1000.0, 3)
                except Exception:
                    latency = None
            record = {
                "id": msg_id,
                "timestamp": timestamp,
                "signature": signature,
                "verified": verified,
                "verifyError": verify_error,
                "body": body.decode("utf-8", "replace"),
                "attempt": attempt,
                "status": None if answer is None else answer[0],
                "firstByte": first_byte,
                "latencyMs": latency,
                "userAgent": headers.get("user-agent"),
                "contentType": headers.get("content-type"),
                "method": method,
                "path": target,
            }
            os.write(self.log_fd, (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8"))
        return answer


class Connection(asyncio.Protocol):
    """One client connection: an incremental HTTP/1.1 request parser and an ordered,
    flow-controlled answer queue."""

    def __init__(self, receiver):
        self.receiver = receiver
        self.transport = None
        self.buf = bytearray()
        self.first_byte = None  # when the first byte of the request being read arrived
        self.head = None  # (method, target, headers, keep_alive) once the head is read
        self.length = 0  # Content-Length of the body being read
        self.chunked = None  # [body so far, unused, size of the chunk being read, state]
        self.hung = False  # an unanswered request: nothing after it on this connection is answered
        self.pending = collections.deque()  # (due, answer, close) waiting for --delay
        self.timer = None
        self.out = collections.deque()  # bytes, int (that many 'x'), or _CLOSE
        self.paused = False
        self.closed = False
        self.reading = True
        self.close_when_answered = False  # the client half-closed while answers were delayed

    # asyncio callbacks

    def connection_made(self, transport):
        self.transport = transport
        self.receiver.connections.add(self)
        if self.receiver.connection_log_fd is not None:
            os.write(self.receiver.connection_log_fd, (repr(transport.get_extra_info("peername")) + "\n").encode("utf-8"))
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def connection_lost(self, exc):
        self.closed = True
        self.receiver.connections.discard(self)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.pending.clear()
        self.out.clear()

    def pause_writing(self):
        self.paused = True

    def resume_writing(self):
        self.paused = False
        self._flush()

    def data_received(self, data):
        if not self.reading:
            return
        if self.first_byte is None:
            self.first_byte = time.time()
        self.buf += data
        try:
            self._parse()
        except _BadRequest as bad:
            self._fail(bad.status, str(bad))

    def eof_received(self):
        """The client half-closed: answer what was read, then close. A hung connection stays
        open; delayed answers are still sent."""
        self.reading = False
        if self.hung:
            return True
        if self.pending:
            self.close_when_answered = True
            return True
        return False  # asyncio closes once what is buffered is written

    # parsing

    def _parse(self):
        buf = self.buf
        while True:
            if self.head is None:
                # Tolerate empty lines before a request line (RFC 9112 §2.2).
                while buf[:2] == b"\r\n":
                    del buf[:2]
                if not buf:
                    self.first_byte = None
                    return
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > MAX_HEAD:
                        raise _BadRequest(431, "request head too large")
                    return
                self._read_head(bytes(buf[:end]))
                del buf[:end + 4]
            if self.chunked is not None:
                body = self._read_chunked()
                if body is None:
                    return
            else:
                if len(buf) < self.length:
                    return
                body = bytes(buf[:self.length])
                del buf[:self.length]
            method, target, headers, keep_alive = self.head
            self.head, self.chunked, self.length = None, None, 0
            first_byte = self.first_byte
            # What is left arrived with the latest data: the next request began by then.
            self.first_byte = time.time() if buf else None
            self._dispatch(method, target, headers, body, keep_alive, first_byte)
            if not keep_alive:
                self.reading = False
                buf.clear()
                return

    def _read_head(self, head):
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            raise _BadRequest(400, "bad request line")
        method, target, version = (part.decode("latin-1") for part in parts)
        headers = {}
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                raise _BadRequest(400, "bad header line")
            key = name.decode("latin-1").lower()
            if key not in headers:  # the first of repeated fields
                headers[key] = value.strip().decode("latin-1")
        connection = headers.get("connection", "").lower()
        keep_alive = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        self.length = 0
        self.chunked = None
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self.chunked = [bytearray(), 0, -1, "size"]
        elif "content-length" in headers:
            text = headers["content-length"]
            if not text.isdigit():
                raise _BadRequest(400, "bad Content-Length")
            self.length = int(text)
            if self.length > MAX_BODY:
                raise _BadRequest(413, "body too large")
        self.head = (method, target, headers, keep_alive)
        if headers.get("expect", "").lower() == "100-continue" and (self.chunked is not None or len(self.buf) - len(head) - 4 < self.length):
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _read_chunked(self):
        """The whole de-chunked body once it (and its trailer) has arrived, else None.
        Consumes what it parsed; keeps its place between calls."""
        state = self.chunked
        buf = self.buf
        while True:
            if state[3] == "size":
                end = buf.find(b"\r\n")
                if end < 0:
                    if len(buf) > 4096:
                        raise _BadRequest(400, "bad chunk size line")
                    return None
                size_text = bytes(buf[:end]).split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise _BadRequest(400, "bad chunk size")
                del buf[:end + 2]
                if size == 0:
                    state[3] = "trailer"
                else:
                    if len(state[0]) + size > MAX_BODY:
                        raise _BadRequest(413, "body too large")
                    state[2] = size
                    state[3] = "data"
            elif state[3] == "data":
                if len(buf) < state[2] + 2:
                    return None
                if buf[state[2]:state[2] + 2] != b"\r\n":
                    raise _BadRequest(400, "chunk not followed by CRLF")
                state[0] += buf[:state[2]]
                del buf[:state[2] + 2]
                state[3] = "size"
            else:  # trailer fields, until an empty line
                end = buf.find(b"\r\n")
                if end < 0:
                    if len(buf) > MAX_HEAD:
                        raise _BadRequest(431, "trailer too large")
                    return None
                del buf[:end + 2]
                if end == 0:
                    return bytes(state[0])

    # answering

    def _dispatch(self, method, target, headers, body, keep_alive, first_byte):
        answer = self.receiver.handle(method, target, headers, body, first_byte)
        if answer is None or self.hung:
            self.hung = True  # HTTP/1.1 answers go in order: nothing after this one is answered
            return
        delay = self.receiver.delay()
        if delay <= 0 and not self.pending:
            self._emit(answer, not keep_alive)
            return
        due = first_byte + delay
        self.pending.append((due, answer, not keep_alive))
        if self.timer is None:
            self._schedule()

    def _schedule(self):
        due = self.pending[0][0]
        loop = self.receiver.loop
        self.timer = loop.call_at(loop.time() + max(0.0, due - time.time()), self._due)

    def _due(self):
        self.timer = None
        now = time.time()
        while self.pending and self.pending[0][0] <= now + 0.0005 and not self.closed:
            _, answer, close = self.pending.popleft()
            self._emit(answer, close)
        if self.pending and not self.closed:
            self._schedule()
        elif self.close_when_answered and not self.closed:
            self.out.append(_CLOSE)
            self._flush()

    def _emit(self, answer, close):
        if self.closed:
            return
        _, head, big = answer
        if close:
            head = head[:-4] + b"\r\nConnection: close\r\n\r\n"
        self.out.append(head)
        if big:
            self.out.append(big)
        if close:
            self.out.append(_CLOSE)
        self._flush()

    def _flush(self):
        out = self.out
        transport = self.transport
        while out and not self.paused and not self.closed:
            if transport.is_closing():  # reset by the peer: connection_lost follows
                out.clear()
                return
            item = out[0]
            if item is _CLOSE:
                out.clear()
                self.transport.close()
                return
            if isinstance(item, int):
                n = min(item, len(_X))
                self.transport.write(_X[:n])
                if item > n:
                    out[0] = item - n
                else:
                    out.popleft()
            else:
                out.popleft()
                self.transport.write(item)

    def _fail(self, status, message):
        """A request that cannot be read: an error answer after those before it, then close."""
        self.reading = False
        self.buf.clear()
        if self.closed or self.hung:
            return
        answer = (status, _response(status, [("Content-Type", "text/plain")], message.encode()), 0)
        if not self.pending:
            self._emit(answer, True)
            return
        self.pending.append((self.pending[-1][0], answer, True))


class _BadRequest(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def _write_port_file(path, port):
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as file:
        file.write(str(port))
    os.replace(temporary, path)


async def serve(options):
    loop = asyncio.get_running_loop()
    receiver = Receiver(options)
    receiver.loop = loop
    context = None
    if options.tls_cert:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(options.tls_cert, options.tls_key)
    server = await loop.create_server(lambda: Connection(receiver), options.host, options.port, backlog=1024, reuse_address=True, ssl=context)
    port = server.sockets[0].getsockname()[1]
    if options.port_file:
        _write_port_file(options.port_file, port)
    stop = asyncio.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    if options.exit_with_parent:
        parent = os.getppid()

        def watch():
            if os.getppid() != parent:
                stop.set()
            else:
                loop.call_later(1.0, watch)

        loop.call_later(1.0, watch)
    await stop.wait()
    server.close()
    for connection in list(receiver.connections):
        if connection.transport is not None:
            connection.transport.abort()
    if receiver.log_fd is not None:
        os.close(receiver.log_fd)


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description="A Standard Webhooks receiver for tests and benchmarks.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: an ephemeral port (see --port-file)")
    parser.add_argument("--port-file", help="write the bound port here (atomically) once listening")
    parser.add_argument("--log", help="append one JSON line per request received")
    parser.add_argument("--connection-log", help="append one line per connection accepted (its peer), before it sends anything")
    parser.add_argument("--secrets-file", help="one whsec_ secret a line; re-read when it changes")
    parser.add_argument("--fail-first", type=int, default=0, metavar="N", help="500 `nope` to the first N requests of each webhook-id")
    parser.add_argument("--delay", type=float, default=0.0, metavar="SECONDS", help="wait this long after a request's first byte before answering")
    parser.add_argument("--delay-file", metavar="PATH", help="a number of seconds here replaces --delay for each request read while it does")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--status", type=int, metavar="CODE", help="always answer CODE")
    mode.add_argument("--hang", action="store_true", help="read requests, never answer")
    mode.add_argument("--redirect", metavar="URL", help="answer 302 with this Location")
    mode.add_argument("--big-response", type=int, metavar="BYTES", help="answer 200 with this many bytes of 'x'")
    parser.add_argument("--exit-with-parent", action="store_true", help="stop when the parent process ends")
    parser.add_argument("--tls-cert", metavar="PEM", help="serve https with this certificate (chain)")
    parser.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    options = parser.parse_args(argv)
    if options.status is not None and not 200 <= options.status <= 599:
        parser.error("--status must be 200…599")
    if options.big_response is not None and options.big_response < 0:
        parser.error("--big-response must be ≥ 0")
    return options


def main(argv=None):
    options = parse_arguments(argv)
    try:
        asyncio.run(serve(options))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
