"""big-comments: 100 comments of ~1 MiB (1 letter + combining marks) on one item; attackers
pipeline 8 × GET …/comments?limit=100 per connection, never read, hold 20 each"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


def setup(s):
    s.config["comments_item"] = s.ids[1]
    note, _ = setup_big_comments(s.port, s.key, s.ids[1])
    s.notes.append(note)


async def attack(self):
    path = f"/v1/playable-items/{self.config['comments_item']}/comments?limit=100"
    requests = request_bytes("GET", path) * 8

    async def open_one():
        sock = await self.raw_open()
        try:
            await self.raw_send(sock, requests)
        except BaseException:
            sock.close()
            raise
        self.count("sent", 8)
        return sock
    await self.hold(20, open_one, tick=0.5, open_interval=0.1, peek=True)


def setup_big_comments(port, key, item):
    """Posts 100 comments with the largest body the server takes; returns a note."""
    budget = (1 << 20) - len(b'{"body":"a"}') - 16
    candidates = [("a" + "\u0301" * (budget // 2), "'a' + {} combining acutes"),
                  ("a" + "\u0301" * (budget // 4), "'a' + {} combining acutes"),
                  ("a" * 5000, "5000 plain letters")]
    body = label = None
    for text, description in candidates:
        status, answer = setup_call(port, "POST", f"/v1/playable-items/{item}/comments", key, {"body": text}, 60)
        if status == 201:
            body, label = text, description.format(len(text) - 1)
            break
    if body is None:
        return f"no comment accepted (last: {status} {answer[:120]!r})", 0
    payload = json.dumps({"body": body}, ensure_ascii=False).encode()
    created, refused = 1, {}
    lock = threading.Lock()

    def post(_):
        nonlocal created
        try:
            status, _ = setup_call(port, "POST", f"/v1/playable-items/{item}/comments", key, payload, 60)
        except Exception as error:  # noqa: BLE001
            status = failure_name(error)
        with lock:
            if status == 201:
                created += 1
            else:
                refused[str(status)] = refused.get(str(status), 0) + 1
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(post, range(99)))
    note = f"{created} comments of {len(payload) / 1048576:.2f} MiB ({label})"
    if refused:
        note += ", refused " + " ".join(f"{k}×{v}" for k, v in refused.items())
    return note, created
