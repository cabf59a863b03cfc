"""Direct allreduce (Simple protocol, memory channels, one node): the fewest bytes.

Rank r reads its peers' INPUT and writes its peers' OUTPUT in place of going through their
scratch, replicated over INSTANCES thread blocks (each instance works on its own interleaved
share of every chunk):
  1. reduce input chunk r with chunk r of every peer's input (read remotely) into output chunk
     r and store the result into chunk r of every peer's output (one fused read-reduce-send);
  2. signal every peer and wait for theirs: r's output is complete, and no peer still reads
     r's input when the call returns.
No handshake opens the call: the launch fence already says that every peer is in this launch,
its input ready, and done with r's output of the last call (_common.direct_ranks).
Each rank reads S (its chunk of every input) and writes S (its chunk into every output): 2 S
per rank for a message of S bytes, the minimum (mscclpp_collective_min_traffic), where the
scratch plan (allreduce_simple.py) moves 4 S. The peers' buffers are addressed through the
offsets the launch fence publishes (docs/nccl.md), so both buffers must be memory the peers can
map on every rank (mscclpp_malloc, driver device memory; else staged stand-ins); the plans live in
plans/direct/ and, per backend, plans/direct/<backend>/ (_common.direct_variants,
plans/README.md). The in-place twin (_ip) is safe as written: rank r rewrites chunk r of a
peer's buffer only after reading it, and nobody else reads that chunk of that rank.
"""

from _common import (INSTANCES, MAX_MESSAGE, SIMPLE_MIN_MESSAGE, direct_ranks, direct_variants,
                     main_variants, memory_channels)
from mscclpp.language import AllReduce, CollectiveProgram, Rank


def allreduce_direct(num_ranks, instances=INSTANCES, min_message_size=SIMPLE_MIN_MESSAGE,
                     variant="", inplace=False, ready=False):
    """Allreduce, Simple protocol, peers' input and output addressed directly."""
    N = num_ranks
    name = f"direct_allreduce{'_ip' if inplace else ''}{variant}_{N}"
    with CollectiveProgram(name, AllReduce(N, 1, inplace), N, instances=instances,
                           protocol="Simple", min_message_size=min_message_size,
                           max_message_size=MAX_MESSAGE) as prog:
        chan = memory_channels(N)
        for r, peers in direct_ranks(chan, N, ready):  # the closing handshake after each
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            for k, p in enumerate(peers):  # fused into one rre: the peers' sources appended
                chan[(r, p)].reduce(inp[r:r + 1] if k == 0 else out[r:r + 1],
                                    [Rank(p).get_input_buffer()[r:r + 1]], tb=0,
                                    local_dst_chunk=out[r:r + 1])
            for p in peers:  # fused into the rre: rres with every peer's output chunk r
                chan[(r, p)].put(Rank(p).get_output_buffer()[r:r + 1], out[r:r + 1], tb=0)
    return prog


def default_plans(**extra):
    yield from direct_variants("allreduce", allreduce_direct, **extra)


if __name__ == "__main__":
    main_variants(allreduce_direct)
