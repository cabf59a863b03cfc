"""Direct allgather (Simple protocol, memory channels, one node): the fewest bytes.

Rank r, replicated over INSTANCES thread blocks (each on its own share of every chunk):
  1. put the input straight into chunk r of every peer's OUTPUT and into its own output chunk r
     (in place it is already there): the put and the copy fuse into one put whose last
     destination is local (plan-format §2.4), so one load of each input element feeds all N
     stores;
  2. signal every peer and wait for theirs: r's output is complete.
No handshake opens the call: the launch fence already says that every peer is in this launch
and done with r's output of the last call (_common.direct_ranks).
Each rank reads its input once and writes N copies of it: (N + 1) / N S per rank for an output
of S bytes, (N + 1) S in all, the minimum (mscclpp_collective_min_traffic; in place N S), where
the scratch plan (allgather.py) moves 2 S through the peers' scratch and back. The peers' outputs are addressed through the
offsets the launch fence publishes (docs/nccl.md), so both buffers must be memory the peers can
map on every rank (a rank whose buffers are not runs it on staged stand-ins); the plans live in
plans/direct/ and, per backend, plans/direct/<backend>/ (_common.direct_variants, plans/README.md).
"""

from _common import (INSTANCES, MAX_MESSAGE, direct_ranks, direct_variants, main_variants,
                     memory_channels)
from mscclpp.language import AllGather, CollectiveProgram, Rank


def allgather_direct(num_ranks, instances=INSTANCES, min_message_size=0, variant="",
                     inplace=False, ready=False):
    """Allgather, Simple protocol, peers' outputs written directly."""
    N = num_ranks
    name = f"direct_allgather{'_ip' if inplace else ''}{variant}_{N}"
    with CollectiveProgram(name, AllGather(N, 1, inplace), N, instances=instances,
                           protocol="Simple", min_message_size=min_message_size,
                           max_message_size=MAX_MESSAGE) as prog:
        chan = memory_channels(N)
        for r, peers in direct_ranks(chan, N, ready):  # the closing handshake after each
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            for p in peers:  # fused into one put ...
                chan[(r, p)].put(Rank(p).get_output_buffer()[r:r + 1], inp[0:1], tb=0)
            if not inplace:  # ... with this copy as its last destination
                rank.copy(out[r:r + 1], inp[0:1], tb=0)
    return prog


def default_plans(**extra):
    yield from direct_variants("allgather", allgather_direct, **extra)


if __name__ == "__main__":
    main_variants(allgather_direct)
