"""Direct reduce-scatter (Simple protocol, memory channels, one node): the fewest bytes.

Rank r, replicated over INSTANCES thread blocks (each on its own share of every chunk), before the
closing handshake of _common.direct_ranks (none opens the call: the launch fence does its work):
  reduce its input chunk r with chunk r of every peer's INPUT (read remotely) into its output
  (one fused read-reduce).
Each rank reads its whole input (chunk r of every rank's) and writes its output: S + S / N per
rank for an input of S bytes, the minimum (mscclpp_collective_min_traffic), where the scratch
plan (reducescatter.py) first puts N - 1 chunks into the peers' scratch and reads them back.
In place (_ip: the output is the rank's own chunk r of its input) the reduce rewrites chunk r,
which no peer reads (peers read chunk p of rank r, never chunk r). The peers' inputs are
addressed through the offsets the launch fence publishes (docs/nccl.md), so both buffers must be
memory the peers can map on every rank; the plans live in plans/direct/ and
plans/direct/<backend>/ (plans/README.md).
"""

from _common import (INSTANCES, MAX_MESSAGE, direct_ranks, direct_variants, main_variants,
                     memory_channels)
from mscclpp.language import CollectiveProgram, Rank, ReduceScatter


def reducescatter_direct(num_ranks, instances=INSTANCES, min_message_size=0, variant="",
                         inplace=False, ready=False):
    """Reduce-scatter, Simple protocol, peers' inputs read directly."""
    N = num_ranks
    name = f"direct_reducescatter{'_ip' if inplace else ''}{variant}_{N}"
    with CollectiveProgram(name, ReduceScatter(N, 1, inplace), N, instances=instances,
                           protocol="Simple", min_message_size=min_message_size,
                           max_message_size=MAX_MESSAGE) as prog:
        chan = memory_channels(N)
        for r, peers in direct_ranks(chan, N, ready):  # the closing handshake after each
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            for k, p in enumerate(peers):  # fused into one rre: the peers' sources appended
                chan[(r, p)].reduce(inp[r:r + 1] if k == 0 else out[0:1],
                                    [Rank(p).get_input_buffer()[r:r + 1]], tb=0,
                                    local_dst_chunk=out[0:1])
    return prog


def default_plans(**extra):
    yield from direct_variants("reducescatter", reducescatter_direct, **extra)


if __name__ == "__main__":
    main_variants(reducescatter_direct)
