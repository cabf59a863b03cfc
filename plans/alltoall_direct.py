"""Direct all-to-all (Simple protocol, memory channels, one node): the fewest bytes.

Rank r, replicated over INSTANCES thread blocks (each on its own share of every chunk), before the
closing handshake of _common.direct_ranks (none opens the call: the launch fence does its work):
  put its input chunk p straight into chunk r of peer p's OUTPUT, for every peer, and copy its
  input chunk r to its output chunk r.
Each rank reads its input once and writes S bytes of outputs: 2 S per rank for S bytes per
rank, the minimum (mscclpp_collective_min_traffic), where the scratch plan (alltoall.py) moves
the N - 1 chunks through the peers' scratch and copies them out again. No in-place twin: in
place, ranks r and p swap chunk p of r and chunk r of p, so one of them must keep its chunk
somewhere while the other's arrives, which is a scratch buffer (the scratch plan, with the
input staged). The peers' outputs are addressed through the offsets the launch fence publishes
(docs/nccl.md), so both buffers must be memory the peers can map on every rank; the plans live
in plans/direct/ and plans/direct/<backend>/ (plans/README.md).
"""

from _common import (INSTANCES, MAX_MESSAGE, direct_ranks, direct_variants, main_variants,
                     memory_channels)
from mscclpp.language import AllToAll, CollectiveProgram, Rank


def alltoall_direct(num_ranks, instances=INSTANCES, min_message_size=0, variant="",
                    inplace=False, ready=False):
    """All-to-all, Simple protocol, peers' outputs written directly (out of place only)."""
    if inplace:
        raise ValueError("alltoall_direct: no in-place variant (a swap needs scratch)")
    N = num_ranks
    with CollectiveProgram(f"direct_alltoall{variant}_{N}", AllToAll(N, 1, False), N,
                           instances=instances, protocol="Simple",
                           min_message_size=min_message_size,
                           max_message_size=MAX_MESSAGE) as prog:
        chan = memory_channels(N)
        for r, peers in direct_ranks(chan, N, ready):  # the closing handshake after each
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            for p in peers:
                chan[(r, p)].put(Rank(p).get_output_buffer()[r:r + 1], inp[p:p + 1], tb=0)
            rank.copy(out[r:r + 1], inp[r:r + 1], tb=0)
    return prog


def default_plans(**extra):
    yield from direct_variants("alltoall", alltoall_direct, inplace_twins=False, **extra)


if __name__ == "__main__":
    main_variants(alltoall_direct)
