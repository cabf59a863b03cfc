"""Allreduce in one hop with LL packets, for small messages (memory channels, one node).

Input and output are cut into B equal ranges, one per thread block (B = BLOCKS). Block b of
rank r:
  1. puts input range b as packets into slot (r, b) of every peer's scratch: one op with N-1
     destinations, so each word of the input is read once for all peers;
  2. reduces input range b with the N-1 packet ranges (p, b) that arrive in its own scratch
     into output range b (one packet reduce, which waits on each packet's flag).
Every rank reduces the whole message itself: one cross-rank step, against two for the
reduce-scatter + all-gather of allreduce_pkt.py (MSCCL++'s all-pairs packet allreduce). Packets
carry their own flags, so no signal is needed; the double scratch buffer keeps the next
launch's packets away from packets a slow peer may still be reading. Only peers' scratch is
addressed remotely.

In place (input == output) a block reads its input range (step 1) before it writes the same
range of the output (step 2, element by element after reading it), and no other block or rank
reads that range; a block sync between the two steps orders every thread's reads before any
thread's writes. The in-place variants are otherwise the same programs, with "inplace": true.

256 threads per block: small messages pay for every thread a block starts and syncs (measured
on an H200: an 8-byte allreduce took 17.6 us with 1024 threads, 12.5 us with 256).
"""

from _common import ALLPAIRS_BLOCKS, ALLPAIRS_MAX_MESSAGE, ALLPAIRS_THREADS, \
    CUDA_ALLPAIRS_SMALL_MAX, RANK_COUNTS, main, memory_channels, peers_of
from mscclpp.language import (
    AllReduce, Buffer, CollectiveProgram, Rank,
)


def allreduce_allpairs(num_ranks, blocks=ALLPAIRS_BLOCKS, max_message_size=ALLPAIRS_MAX_MESSAGE,
                       inplace=False, threads=ALLPAIRS_THREADS, variant=""):
    """Allreduce, LL packets, one hop."""
    N, B = num_ranks, blocks
    name = f"default_allreduce_allpairs{'_ip' if inplace else ''}{variant}_{N}"
    # N * B chunks: block b owns chunks [b*N, (b+1)*N) of input and output
    with CollectiveProgram(name, AllReduce(N, B, inplace), N, protocol="LL",
                           use_double_scratch_buffer=True, num_threads_per_block=threads,
                           max_message_size=max_message_size) as prog:
        # scratch slot (p, b) of every rank: chunks [(p*B + b)*N, (p*B + b + 1)*N)
        scratch = [Buffer(r, N * B * N) for r in range(N)]
        chan = memory_channels(N)
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            peers = peers_of(r, N)
            for b in range(B):
                mine = slice(b * N, (b + 1) * N)
                for p in peers:
                    slot = (r * B + b) * N
                    chan[(r, p)].put_packets(scratch[p][slot:slot + N], inp[mine], tb=b)
                if inplace:  # the reduce overwrites what the put reads: every thread's put first
                    rank.barrier([b])
                rank.reduce(inp[mine],
                            [scratch[r][(p * B + b) * N:(p * B + b + 1) * N] for p in peers],
                            tb=b, dst_chunk=out[mine], packet=True)
    return prog


def default_plans():
    for n in RANK_COUNTS:
        yield f"allreduce_allpairs_{n}.json", allreduce_allpairs(n)
    for n in RANK_COUNTS:
        yield f"allreduce_allpairs_ip_{n}.json", allreduce_allpairs(n, inplace=True)
    # CUDA, up to 1 KiB: one block per rank (_common.py, CUDA_ALLPAIRS_SMALL_MAX)
    for ip in (False, True):
        for n in RANK_COUNTS:
            yield (f"cuda/allreduce_allpairs{'_ip' if ip else ''}_small_{n}.json",
                   allreduce_allpairs(n, blocks=1, max_message_size=CUDA_ALLPAIRS_SMALL_MAX,
                                      inplace=ip, variant="_small_cuda"))


if __name__ == "__main__":
    main(allreduce_allpairs)
