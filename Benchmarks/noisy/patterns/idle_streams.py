"""idle-streams: 90 event streams each (GET /v1/changes?since=<the feed's end>, Accept:
text/event-stream; SO_RCVBUF 4 KiB set before connect), never read; attacker 1 also
replaces the order of a 5,000-entry playlist 5 times over the window (a change of ~0.5
MB each stream is to be sent); a stream the server cuts still counts as held (its FIN
waits behind the unread bytes): see the notes' count"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


def setup(s):
    items = playlist_items(s)
    s.config["stream_playlist"] = setup_playlist(s.port, s.key, "Noisy streams", items)
    s.config["feed_token"] = latest_token(s.port, s.key)  # after the playlist: only the big changes are new
    s.config["streams_per_attacker"] = 90
    s.config["big_changes"] = 5
    budget = "64 MiB (the default)"
    flags = s.args.server_flags.replace("=", " ").split()
    if "--max-unsent-stream-bytes" in flags[:-1]:
        budget = flags[flags.index("--max-unsent-stream-bytes") + 1] + " bytes"
    s.notes.append(f"stream budget {budget}; orders of {len(items)} entries")


async def attack(self):
    request = request_bytes("GET", f"/v1/changes?since={self.config['feed_token']}",
                            extra="Accept: text/event-stream\r\n")

    async def open_one():
        sock = await self.raw_open(receive_buffer=4096)
        try:
            await self.raw_send(sock, request)
        except BaseException:
            sock.close()
            raise
        return sock
    tasks = [self.hold(self.config["streams_per_attacker"], open_one, tick=1.0, peek=True, label="stream ")]
    if self.index == 0:
        tasks.append(big_changes(self))
    await asyncio.gather(*tasks)


async def big_changes(self):
    """Replaces the order of the 5,000-entry playlist a few times, spread over the window:
    each is one change of every entry, which every stream is to receive."""
    playlist, items = self.config["stream_playlist"], list(self.config["playlist_items"])
    changes = self.config["big_changes"]
    interval = max(0.5, (self.end - time.monotonic()) / (changes + 1))
    for _ in range(changes):
        await asyncio.sleep(interval)
        if self.over():
            break
        self.rng.shuffle(items)
        data = request_bytes("PUT", f"/v1/playlists/{playlist}/entries", self.key,
                             json.dumps({"playableItemIds": items}).encode())
        try:
            reader, writer = await self.open()
            try:
                writer.write(data)
                await writer.drain()
                status, _, _ = await self.read_response(reader, SLOW_READ_TIMEOUT, "PUT")
                self.count(f"PUT {status}")
            finally:
                self.close(writer)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001
            self.count("PUT " + failure_name(error))
