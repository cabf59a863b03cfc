"""Every collective on a one-rank communicator (Simple protocol, out-of-place).

With one rank, allreduce, allgather, reducescatter, alltoall and broadcast all leave the output
equal to the input (a reduction over one contribution is that contribution, whatever the op),
so each plan is one copy of input chunk 0 to output chunk 0, replicated over INSTANCES thread
blocks. No channels, no scratch. In-place calls are served by the executor's staging of the
input (an out-of-place plan run from a copy), so no in-place variant is needed.
"""

from _common import INSTANCES, MAX_MESSAGE, main
from mscclpp.language import (
    AllGather, AllReduce, AllToAll, Broadcast, CollectiveProgram, Rank, ReduceScatter,
)

COLLECTIVES = {
    "allreduce": AllReduce,
    "allgather": AllGather,
    "reducescatter": ReduceScatter,
    "alltoall": AllToAll,
    "broadcast": Broadcast,
}


def one_rank(collective, instances=INSTANCES):
    """One rank: output = input, for `collective`."""
    spec = COLLECTIVES[collective](1, 1, False)
    with CollectiveProgram(f"default_{collective}_1", spec, 1, instances=instances,
                           protocol="Simple", min_message_size=0,
                           max_message_size=MAX_MESSAGE) as prog:
        rank = Rank(0)
        rank.copy(rank.get_output_buffer()[0:1], rank.get_input_buffer()[0:1], tb=0)
    return prog


def default_plans():
    for c in COLLECTIVES:
        yield f"{c}_1.json", one_rank(c)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=one_rank.__doc__)
    ap.add_argument("--collective", choices=sorted(COLLECTIVES), default="allreduce")
    print(one_rank(ap.parse_args().collective).to_json())
