"""One module per load pattern, each with `attack(attacker)`: what one attacker process does
for the window (`Benchmarks/noisy-neighbour.sh` describes each)."""

from noisy.patterns import get_flood
from noisy.patterns import metrics_labels
from noisy.patterns import search
from noisy.patterns import near
from noisy.patterns import big_comments
from noisy.patterns import slow_body
from noisy.patterns import buffered_bodies
from noisy.patterns import backups
from noisy.patterns import writer
from noisy.patterns import deferred_queue
from noisy.patterns import many_errors
from noisy.patterns import anonymous_bodies
from noisy.patterns import playlist_moves
from noisy.patterns import feed_pages
from noisy.patterns import idle_streams
from noisy.patterns import behind_proxy
from noisy.patterns import image_uploads

# Each pattern's module, by the name noisy-neighbour.sh knows it by.
MODULES = {
    "get-flood": get_flood,
    "metrics-labels": metrics_labels,
    "search": search,
    "near": near,
    "big-comments": big_comments,
    "slow-body": slow_body,
    "buffered-bodies": buffered_bodies,
    "backups": backups,
    "writer": writer,
    "deferred-queue": deferred_queue,
    "many-errors": many_errors,
    "anonymous-bodies": anonymous_bodies,
    "playlist-moves": playlist_moves,
    "feed-pages": feed_pages,
    "idle-streams": idle_streams,
    "behind-proxy": behind_proxy,
    "image-uploads": image_uploads,
}
ATTACKS = {name: module.attack for name, module in MODULES.items()}
# The set-ups of the patterns that have one: each takes the driver's context (the port, the
# admin key, the item ids, the attackers' configuration to fill in, the notes).
SETUPS = {name: module.setup for name, module in MODULES.items() if hasattr(module, "setup")}
