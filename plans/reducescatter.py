"""Reduce-scatter (Simple protocol, out-of-place, memory channels, one node).

Rank r: ready handshake (relaxed); put input chunk p into peer p's scratch slot r; signal,
wait; reduce input chunk r with scratch slots [0, N) into the output. Only scratch is remote.
"""

from _common import (CUDA_SIMPLE_MIN_MESSAGE, INSTANCES, MAX_MESSAGE, RANK_COUNTS, cuda_instances,
                     main, memory_channels, peers_of, publish_and_wait, ready_handshake)
from mscclpp.language import (
    Buffer, CollectiveProgram, Rank, ReduceScatter,
)


def reducescatter(num_ranks, instances=INSTANCES, min_message_size=0, variant=""):
    """Reduce-scatter, Simple protocol."""
    N = num_ranks
    with CollectiveProgram(f"default_reducescatter{variant}_{N}", ReduceScatter(N, 1, False), N,
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
            publish_and_wait(chan, r, peers)
            rank.reduce(inp[r:r + 1], [scratch[r][p:p + 1] for p in peers], tb=0,
                        dst_chunk=out[0:1])
    return prog


def default_plans():
    for n in RANK_COUNTS:
        yield f"reducescatter_{n}.json", reducescatter(n)
    for n in RANK_COUNTS:  # CUDA: many blocks per rank above 1 MiB (generic plan below)
        yield (f"cuda/reducescatter_{n}.json",
               reducescatter(n, instances=cuda_instances(n),
                             min_message_size=CUDA_SIMPLE_MIN_MESSAGE, variant="_cuda"))


if __name__ == "__main__":
    main(reducescatter)
