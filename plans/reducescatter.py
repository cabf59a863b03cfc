"""Reduce-scatter (Simple protocol, out-of-place, memory channels, one node).

Rank r: ready handshake (relaxed); put input chunk p into peer p's scratch slot r; signal,
wait; reduce input chunk r with scratch slots [0, N) into the output. Only scratch is remote.
"""

from _common import INSTANCES, MAX_MESSAGE, RANK_COUNTS, main
from mscclpp.language import (
    Buffer, CollectiveProgram, MemoryChannel, Rank, ReduceScatter, SyncType,
)


def reducescatter(num_ranks, instances=INSTANCES):
    """Reduce-scatter, Simple protocol."""
    N = num_ranks
    with CollectiveProgram(f"default_reducescatter_{N}", ReduceScatter(N, 1, False), N,
                           instances=instances, protocol="Simple", min_message_size=0,
                           max_message_size=MAX_MESSAGE) as prog:
        scratch = [Buffer(r, N) for r in range(N)]
        chan = {(r, p): MemoryChannel(p, r) for r in range(N) for p in range(N) if p != r}
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            peers = [(r + k) % N for k in range(1, N)]
            for p in peers:
                chan[(r, p)].signal(tb=0, relaxed=True, data_sync=SyncType.none)
            for p in peers:
                chan[(r, p)].wait(tb=0, relaxed=True, data_sync=SyncType.after)
            for p in peers:
                chan[(r, p)].put(scratch[p][r:r + 1], inp[p:p + 1], tb=0)
            for p in peers:
                chan[(r, p)].signal(tb=0, data_sync=SyncType.before)
            for p in peers:
                chan[(r, p)].wait(tb=0, data_sync=SyncType.after)
            rank.reduce(inp[r:r + 1], [scratch[r][p:p + 1] for p in peers], tb=0,
                        dst_chunk=out[0:1])
    return prog


def default_plans():
    for n in RANK_COUNTS:
        yield f"reducescatter_{n}.json", reducescatter(n)


if __name__ == "__main__":
    main(reducescatter)
