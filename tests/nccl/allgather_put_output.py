"""Allgather that writes straight into the peers' output buffers (tests/nccl, realloc case).

Rank r: a relaxed ready handshake with every peer, then it puts its input into chunk r of every
peer's output and copies it to its own; signal, wait. Unlike the built-in plans (which touch
only the peers' scratch), every context of this plan maps the peers' output allocations, so a
context kept across ncclMemFree would write into a peer's old memory.

    python3 -m mscclpp compile allgather_put_output.py -o plans/ag_put_2.json -- --num_ranks 2
"""

import argparse
import os
import sys

try:
    import mscclpp  # noqa: F401
except ImportError:  # run from a source tree without installing the package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))

from mscclpp.language import (  # noqa: E402
    AllGather, CollectiveProgram, MemoryChannel, Rank, SyncType,
)


def allgather_put_output(n):
    with CollectiveProgram(f"test_allgather_put_output_{n}", AllGather(n, 1, False), n,
                           instances=1, protocol="Simple", min_message_size=0,
                           max_message_size=2**64 - 1) as prog:
        chan = {(r, p): MemoryChannel(p, r) for r in range(n) for p in range(n) if p != r}
        for r in range(n):
            rank = Rank(r)
            inp = rank.get_input_buffer()
            peers = [(r + k) % n for k in range(1, n)]
            for p in peers:
                chan[(r, p)].signal(tb=0, relaxed=True, data_sync=SyncType.none)
            for p in peers:
                chan[(r, p)].wait(tb=0, relaxed=True, data_sync=SyncType.after)
            for p in peers:
                chan[(r, p)].put(Rank(p).get_output_buffer()[r:r + 1], inp[0:1], tb=0)
            rank.copy(rank.get_output_buffer()[r:r + 1], inp[0:1], tb=0)
            for p in peers:
                chan[(r, p)].signal(tb=0, data_sync=SyncType.before)
            for p in peers:
                chan[(r, p)].wait(tb=0, data_sync=SyncType.after)
    return prog


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--num_ranks", type=int, default=2)
    print(allgather_put_output(ap.parse_args().num_ranks).to_json())
