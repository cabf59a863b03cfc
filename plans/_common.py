"""Shared settings of the default plans (imported by the plan programs beside it)."""

import os
import sys

try:
    import mscclpp  # noqa: F401
except ImportError:  # running from a source tree without installing the package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

RANK_COUNTS = range(2, 9)          # one node, 2..8 ranks
PACKET_MAX_MESSAGE = 256 * 1024    # LL allreduce up to 256 KiB (inclusive) ...
SIMPLE_MIN_MESSAGE = PACKET_MAX_MESSAGE + 1  # ... Simple allreduce right above it
# The host backend (CPU ranks) moves LL packets far slower than plain copies: measured on 2
# cores, the Simple allreduce beats the LL one from 1-2 KiB (docs/performance.md). Its own
# variants live in plans/host/, which the executor registers before the generic plans.
HOST_PACKET_MAX_MESSAGE = 1024
MAX_MESSAGE = 2**64 - 1
INSTANCES = 4                      # thread blocks per rank for the Simple plans


def memory_channels(n):
    """One memory channel from every rank to every other: chan[(r, p)] goes r -> p."""
    from mscclpp.language import MemoryChannel
    return {(r, p): MemoryChannel(p, r) for r in range(n) for p in range(n) if p != r}


def peers_of(r, n):
    """The other ranks, starting after r (so ranks do not all hit rank 0 first)."""
    return [(r + k) % n for k in range(1, n)]


def ready_handshake(chan, r, peers):
    """Tell every peer r is ready (relaxed: it orders no data) and wait for theirs."""
    from mscclpp.language import SyncType
    for p in peers:
        chan[(r, p)].signal(tb=0, relaxed=True, data_sync=SyncType.none)
    for p in peers:
        chan[(r, p)].wait(tb=0, relaxed=True, data_sync=SyncType.after)


def publish_and_wait(chan, r, peers):
    """Release r's writes to every peer (signal after a block sync) and wait for theirs."""
    from mscclpp.language import SyncType
    for p in peers:
        chan[(r, p)].signal(tb=0, data_sync=SyncType.before)
    for p in peers:
        chan[(r, p)].wait(tb=0, data_sync=SyncType.after)


def main(build, default_ranks=4):
    import argparse

    ap = argparse.ArgumentParser(description=build.__doc__)
    ap.add_argument("--num_ranks", type=int, default=default_ranks)
    args = ap.parse_args()
    print(build(args.num_ranks).to_json())
