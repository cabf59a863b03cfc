"""All-to-all (Simple protocol, out-of-place, memory channels, one node).

Rank r: ready handshake (relaxed); put input chunk p into peer p's scratch slot r and copy input
chunk r to output chunk r; signal, wait; copy scratch slot p to output chunk p. Only scratch is
remote.
"""

from _common import (CUDA_SIMPLE_MIN_MESSAGE, INSTANCES, MAX_MESSAGE, RANK_COUNTS, cuda_instances,
                     main, memory_channels, peers_of, publish_and_wait, ready_handshake)
from mscclpp.language import (
    AllToAll, Buffer, CollectiveProgram, Rank,
)


def alltoall(num_ranks, instances=INSTANCES, min_message_size=0, variant=""):
    """All-to-all, Simple protocol."""
    N = num_ranks
    with CollectiveProgram(f"default_alltoall{variant}_{N}", AllToAll(N, 1, False), N,
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
                chan[(r, p)].put(scratch[p][r:r + 1], inp[p:p + 1], tb=0)
            rank.copy(out[r:r + 1], inp[r:r + 1], tb=0)
            publish_and_wait(chan, r, peers)
            for p in peers:
                rank.copy(out[p:p + 1], scratch[r][p:p + 1], tb=0)
    return prog


def default_plans():
    for n in RANK_COUNTS:
        yield f"alltoall_{n}.json", alltoall(n)
    for n in RANK_COUNTS:  # CUDA: many blocks per rank above 1 MiB (generic plan below)
        yield (f"cuda/alltoall_{n}.json",
               alltoall(n, instances=cuda_instances(n),
                        min_message_size=CUDA_SIMPLE_MIN_MESSAGE, variant="_cuda"))


if __name__ == "__main__":
    main(alltoall)
