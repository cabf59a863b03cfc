"""Allgather (Simple protocol, out-of-place, memory channels, one node).

Rank r: tell every peer it is ready (relaxed signal) and wait for theirs; put the input into
every peer's scratch slot r and copy it to output chunk r (one put whose last destination is
local: one load feeds every store, plan-format §2.4); signal, wait; copy scratch slot p to
output chunk p. The ready handshake keeps a fast rank from overwriting a peer's scratch slot
while that peer still copies it out in the previous launch. Only scratch is remote.
"""

from _common import (CUDA_SIMPLE_MIN_MESSAGE, INSTANCES, MAX_MESSAGE, RANK_COUNTS, cuda_instances,
                     main, memory_channels, peers_of, publish_and_wait, ready_handshake)
from mscclpp.language import (
    AllGather, Buffer, CollectiveProgram, Rank,
)


def allgather(num_ranks, instances=INSTANCES, min_message_size=0, variant=""):
    """Allgather, Simple protocol."""
    N = num_ranks
    with CollectiveProgram(f"default_allgather{variant}_{N}", AllGather(N, 1, False), N,
                           instances=instances, protocol="Simple",
                           min_message_size=min_message_size,
                           max_message_size=MAX_MESSAGE) as prog:
        scratch = [Buffer(r, N) for r in range(N)]
        chan = memory_channels(N)
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            peers = peers_of(r, N)
            ready_handshake(chan, r, peers)
            for p in peers:
                chan[(r, p)].put(scratch[p][r:r + 1], inp[0:1], tb=0)
            rank.copy(out[r:r + 1], inp[0:1], tb=0)
            publish_and_wait(chan, r, peers)
            for p in peers:
                rank.copy(out[p:p + 1], scratch[r][p:p + 1], tb=0)
    return prog


def default_plans():
    for n in RANK_COUNTS:
        yield f"allgather_{n}.json", allgather(n)
    for n in RANK_COUNTS:  # CUDA: many blocks per rank above 1 MiB (generic plan below)
        yield (f"cuda/allgather_{n}.json",
               allgather(n, instances=cuda_instances(n),
                         min_message_size=CUDA_SIMPLE_MIN_MESSAGE, variant="_cuda"))


if __name__ == "__main__":
    main(allgather)
