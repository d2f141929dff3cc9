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

ATTACKS = {
    "get-flood": get_flood.attack,
    "metrics-labels": metrics_labels.attack,
    "search": search.attack,
    "near": near.attack,
    "big-comments": big_comments.attack,
    "slow-body": slow_body.attack,
    "buffered-bodies": buffered_bodies.attack,
    "backups": backups.attack,
    "writer": writer.attack,
    "deferred-queue": deferred_queue.attack,
    "many-errors": many_errors.attack,
    "anonymous-bodies": anonymous_bodies.attack,
    "playlist-moves": playlist_moves.attack,
    "feed-pages": feed_pages.attack,
    "idle-streams": idle_streams.attack,
    "behind-proxy": behind_proxy.attack,
}
