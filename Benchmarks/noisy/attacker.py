"""The attackers' machinery: one process each, connections, exchanges, held sockets; what
an attacker does comes from its pattern's module."""

from noisy.common import *  # noqa: F401,F403
from noisy.patterns import ATTACKS


class Attacker:
    def __init__(self, config, index):
        self.config = config
        self.index = index
        self.port = config["port"]
        self.source = f"127.0.0.{10 + index}"
        keys = config.get("attacker_keys")  # users of their own, in some patterns
        self.key = keys[index] if keys else config["admin_key"]
        self.ids = config["ids"]
        self.end = config["start"] + config["duration"]
        self.counts = {}
        self.notes = {}
        self.rng = random.Random(index * 7919 + 1)

    def count(self, name, amount=1):
        self.counts[name] = self.counts.get(name, 0) + amount

    def over(self):
        return time.monotonic() >= self.end

    # --- stream helpers

    async def open(self):
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(HOST, self.port, local_addr=(self.source, 0), limit=1 << 20), READ_TIMEOUT)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return reader, writer

    @staticmethod
    async def _read_response(reader, method="GET"):
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        lower = head.lower()
        keep_alive = b"\r\nconnection: close" not in lower
        length = None
        at = lower.find(b"\r\ncontent-length:")
        if at >= 0:
            length = int(lower[at + 17:lower.index(b"\r\n", at + 2)])
        size = 0
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            pass
        elif b"\r\ntransfer-encoding: chunked" in lower:
            while True:
                line = await reader.readuntil(b"\r\n")
                chunk = int(line.split(b";")[0], 16)
                if chunk == 0:
                    while await reader.readuntil(b"\r\n") != b"\r\n":
                        pass
                    break
                await reader.readexactly(chunk + 2)
                size += chunk
        elif length is not None:
            await reader.readexactly(length)
            size = length
        else:
            size = len(await reader.read())
            keep_alive = False
        return status, keep_alive, size

    async def read_response(self, reader, timeout=READ_TIMEOUT, method="GET"):
        return await asyncio.wait_for(self._read_response(reader, method), timeout)

    @staticmethod
    def close(writer):
        try:
            writer.close()
        except Exception:  # noqa: BLE001
            pass

    async def exchange_loop(self, make_batch, timeout=READ_TIMEOUT, on_response=None, by_method=False):
        """Keep-alive loop: send a batch (list of (method, bytes)), read every answer, repeat;
        reconnect whenever the connection ends. by_method counts statuses as "METHOD status"."""
        while not self.over():
            try:
                reader, writer = await self.open()
            except Exception as error:  # noqa: BLE001
                self.count(failure_name(error))
                await asyncio.sleep(0.01)
                continue
            try:
                while not self.over():
                    batch = make_batch()
                    writer.write(b"".join(data for _, data in batch))
                    await writer.drain()
                    for number, (method, _) in enumerate(batch):
                        started = time.monotonic()
                        status, keep_alive, size = await self.read_response(reader, timeout, method)
                        self.count(f"{method} {status}" if by_method else str(status))
                        if on_response:
                            on_response(method, status, size, time.monotonic() - started)
                        if not keep_alive:
                            raise EOFError("closed by the server") if number < len(batch) - 1 else _Reconnect()
            except _Reconnect:
                pass
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001
                self.count(failure_name(error))
            finally:
                self.close(writer)

    # --- raw-socket helpers (connections that are held and not read)

    async def raw_open(self, receive_buffer=None):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if receive_buffer:  # before connect, so that the window offered stays small
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            sock.bind((self.source, 0))
            await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, (HOST, self.port)), READ_TIMEOUT)
        except BaseException:
            sock.close()
            raise
        return sock

    async def raw_send(self, sock, data, timeout=READ_TIMEOUT):
        await asyncio.wait_for(asyncio.get_running_loop().sock_sendall(sock, data), timeout)

    def raw_poll(self, sock, peek=False):
        """Without blocking: None while the connection is open and silent (or, with peek,
        open with an answer waiting that stays unread), else what ended it (a status the
        server sent, or closed/reset)."""
        try:
            data = sock.recv(1 if peek else 65536, socket.MSG_PEEK if peek else 0)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as error:
            return failure_name(error)
        if not data:
            return "closed"
        if peek:
            return None
        if data.startswith(b"HTTP/1."):
            return data[9:12].decode("latin-1")
        return "data"

    async def hold(self, limit, open_one, tick, on_tick=None, open_interval=0.0, peek=False, label=""):
        """Keeps up to `limit` connections made by open_one() open; every `tick` seconds
        checks them (a connection the server answered or closed is counted and replaced)
        and calls on_tick(sock) on the live ones. Counts are named with `label` first."""
        live = []
        next_tick = time.monotonic() + tick
        try:
            while not self.over():
                while len(live) < limit and not self.over():
                    try:
                        live.append(await open_one())
                    except asyncio.CancelledError:
                        raise
                    except Exception as error:  # noqa: BLE001
                        self.count(label + failure_name(error))
                        break
                    if open_interval:
                        await asyncio.sleep(open_interval)
                        if time.monotonic() >= next_tick:
                            break
                wait = next_tick - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                next_tick = max(next_tick + tick, time.monotonic())
                still = []
                for sock in live:
                    outcome = self.raw_poll(sock, peek)
                    if outcome is None and on_tick is not None:
                        try:
                            await on_tick(sock)
                        except asyncio.CancelledError:
                            raise
                        except Exception as error:  # noqa: BLE001
                            outcome = failure_name(error)
                    if outcome is None:
                        still.append(sock)
                    else:
                        self.count(label + outcome)
                        sock.close()
                live = still
        finally:
            self.count(label + "held", len([s for s in live if self.raw_poll(s, peek) is None]))
            for sock in live:
                sock.close()

    # --- the patterns

    async def run(self, pattern):
        delay = self.config["start"] - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.ensure_future(ATTACKS[pattern](self))
        try:
            await asyncio.wait_for(asyncio.shield(task), max(0.0, self.end - time.monotonic()))
        except asyncio.TimeoutError:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass


class _Reconnect(Exception):
    pass


def attacker_main(config_path, index):
    raise_file_limit()
    config = json.load(open(config_path))
    attacker = Attacker(config, index)
    try:
        asyncio.run(attacker.run(config["pattern"]))
    except Exception as error:  # noqa: BLE001
        attacker.count("driver-error:" + type(error).__name__)
    json.dump({"counts": attacker.counts, "notes": attacker.notes}, sys.stdout)
