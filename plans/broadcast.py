"""Broadcast from rank 0 (Simple protocol, out-of-place, memory channels, one node).

Every other rank tells the root it is ready (relaxed signal); the root waits for that, puts its
input into each peer's scratch and copies it to its own output (one put whose last destination
is local: one load feeds every store, plan-format §2.4) and signals; each peer waits and
copies its scratch to its output. Only scratch is remote.
"""

from _common import (CUDA_SIMPLE_MIN_MESSAGE, INSTANCES, MAX_MESSAGE, RANK_COUNTS, cuda_instances,
                     main)
from mscclpp.language import (
    Broadcast, Buffer, CollectiveProgram, MemoryChannel, Rank, SyncType,
)


def broadcast(num_ranks, root=0, instances=INSTANCES, min_message_size=0, variant=""):
    """Broadcast, Simple protocol."""
    N = num_ranks
    with CollectiveProgram(f"default_broadcast{variant}_{N}", Broadcast(N, 1, False, root=root),
                           N,
                           instances=instances, protocol="Simple",
                           min_message_size=min_message_size,
                           max_message_size=MAX_MESSAGE) as prog:
        scratch = {p: Buffer(p, 1) for p in range(N) if p != root}
        down = {p: MemoryChannel(p, root) for p in scratch}
        up = {p: MemoryChannel(root, p) for p in scratch}
        for p in scratch:
            up[p].signal(tb=0, relaxed=True, data_sync=SyncType.none)
        rank = Rank(root)
        inp, out = rank.get_input_buffer(), rank.get_output_buffer()
        for p in scratch:
            down[p].wait(tb=0, relaxed=True, data_sync=SyncType.after)
        for p in scratch:
            down[p].put(scratch[p][0:1], inp[0:1], tb=0)
        rank.copy(out[0:1], inp[0:1], tb=0)
        for p in scratch:
            down[p].signal(tb=0, data_sync=SyncType.before)
        for p in scratch:
            up[p].wait(tb=0, data_sync=SyncType.after)
            Rank(p).copy(Rank(p).get_output_buffer()[0:1], scratch[p][0:1], tb=0)
    return prog


def default_plans():
    for n in RANK_COUNTS:
        yield f"broadcast_{n}.json", broadcast(n)
    for n in RANK_COUNTS:  # CUDA: many blocks per rank above 1 MiB (generic plan below)
        yield (f"cuda/broadcast_{n}.json",
               broadcast(n, instances=cuda_instances(n),
                         min_message_size=CUDA_SIMPLE_MIN_MESSAGE, variant="_cuda"))


if __name__ == "__main__":
    main(broadcast)
