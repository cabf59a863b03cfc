"""All-pairs allreduce, written with the MSCCL++ DSL, for the NCCL LD_PRELOAD example.

Every rank puts its whole input into slot r of every peer's scratch, then reduces its input
with the N-1 slots it received into its output: one step, N-1 puts per rank, good for small
messages on few ranks. A relaxed ready handshake at the start keeps a fast rank from writing a
peer's scratch while that peer still reads it in the previous launch.

    python3 -m mscclpp compile allpairs_allreduce.py -o plans/allpairs_allreduce_2.json \
        -- --num_ranks 2
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
    AllReduce, Buffer, CollectiveProgram, MemoryChannel, Rank, SyncType,
)


def allpairs_allreduce(n):
    with CollectiveProgram(f"example_allpairs_allreduce_{n}", AllReduce(n, 1, False), n,
                           instances=1, protocol="Simple", min_message_size=0,
                           max_message_size=2**64 - 1) as prog:
        # the input is n chunks; peer r's copy lands in scratch chunks [r*n, (r+1)*n)
        scratch = [Buffer(r, n * n) for r in range(n)]
        chan = {(r, p): MemoryChannel(p, r) for r in range(n) for p in range(n) if p != r}
        for r in range(n):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            peers = [(r + k) % n for k in range(1, n)]
            for p in peers:
                chan[(r, p)].signal(tb=0, relaxed=True, data_sync=SyncType.none)
            for p in peers:
                chan[(r, p)].wait(tb=0, relaxed=True, data_sync=SyncType.after)
            for p in peers:
                chan[(r, p)].put(scratch[p][r * n:(r + 1) * n], inp[0:n], tb=0)
            for p in peers:
                chan[(r, p)].signal(tb=0, data_sync=SyncType.before)
            for p in peers:
                chan[(r, p)].wait(tb=0, data_sync=SyncType.after)
            rank.reduce(inp[0:n], [scratch[r][p * n:(p + 1) * n] for p in peers], tb=0,
                        dst_chunk=out[0:n])
    return prog


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--num_ranks", type=int, default=2)
    print(allpairs_allreduce(ap.parse_args().num_ranks).to_json())
