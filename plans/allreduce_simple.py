"""Allreduce for large messages (Simple protocol, out-of-place, memory channels, one node).

Reduce-scatter then all-gather through the peers' scratch, replicated over INSTANCES thread
blocks (each instance works on its own interleaved share of every chunk):
  1. put input chunk p into peer p's scratch slot r (one fused put), signal, wait;
  2. reduce input chunk r with scratch slots [0, N) into output chunk r and store the result
     into every peer's scratch slot N + r (one fused reduce-send), signal, wait;
  3. copy scratch slots N + p into output chunks p.
Across launches no extra handshake is needed: a rank rewrites a peer's slot r only after that
peer's phase-2 signal (it has read slots [0, N)), and slot N + r only after the peer's phase-1
signal of the same launch (it has finished the previous launch). Only scratch is remote.
"""

from _common import (HOST_PACKET_MAX_MESSAGE, INSTANCES, MAX_MESSAGE, RANK_COUNTS,
                     SIMPLE_MIN_MESSAGE, cuda_allreduce_simple_min, cuda_instances, main,
                     memory_channels, peers_of, publish_and_wait)
from mscclpp.language import (
    AllReduce, Buffer, CollectiveProgram, Rank,
)


def allreduce_simple(num_ranks, instances=INSTANCES, min_message_size=SIMPLE_MIN_MESSAGE,
                     variant="", inplace=False):
    """Allreduce, Simple protocol."""
    N = num_ranks
    name = f"default_allreduce_simple{'_ip' if inplace else ''}{variant}_{N}"
    with CollectiveProgram(name, AllReduce(N, 1, inplace), N,
                           instances=instances, protocol="Simple",
                           min_message_size=min_message_size,
                           max_message_size=MAX_MESSAGE) as prog:
        scratch = [Buffer(r, 2 * N) for r in range(N)]
        chan = memory_channels(N)
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            peers = peers_of(r, N)
            for p in peers:
                chan[(r, p)].put(scratch[p][r:r + 1], inp[p:p + 1], tb=0)
            publish_and_wait(chan, r, peers)
            rank.reduce(inp[r:r + 1], [scratch[r][p:p + 1] for p in peers], tb=0,
                        dst_chunk=out[r:r + 1])
            for p in peers:
                chan[(r, p)].put(scratch[p][N + r:N + r + 1], out[r:r + 1], tb=0)
            publish_and_wait(chan, r, peers)
            for p in peers:
                rank.copy(out[p:p + 1], scratch[r][N + p:N + p + 1], tb=0)
    return prog


def default_plans():
    # each plan also as an in-place twin (_ip): input == output is safe as written (rank r reads
    # input chunk p before its first signal and rewrites output chunk p only after the second
    # wait; the reduce writes output chunk r element by element from input chunk r)
    for ip in ("", "_ip"):
        for n in RANK_COUNTS:
            yield f"allreduce_simple{ip}_{n}.json", allreduce_simple(n, inplace=bool(ip))
        for n in RANK_COUNTS:  # host backend: Simple from right above the host LL range, one
            # thread block per rank (CPU ranks usually get one core each)
            yield (f"host/allreduce_simple{ip}_{n}.json",
                   allreduce_simple(n, instances=1, min_message_size=HOST_PACKET_MAX_MESSAGE + 1,
                                    variant="_host", inplace=bool(ip)))
        for n in RANK_COUNTS:  # CUDA: many blocks per rank, from 128/256 KiB (generic LL below)
            yield (f"cuda/allreduce_simple{ip}_{n}.json",
                   allreduce_simple(n, instances=cuda_instances(n),
                                    min_message_size=cuda_allreduce_simple_min(n),
                                    variant="_cuda", inplace=bool(ip)))


if __name__ == "__main__":
    main(allreduce_simple)
