"""Direct broadcast from rank 0 (Simple protocol, memory channels, one node): the fewest bytes.

Replicated over INSTANCES thread blocks (each on its own share of the message):
  1. the root puts its input straight into every peer's OUTPUT and into its own output (in
     place it is already there): one fused put whose last destination is local (plan-format
     §2.4), so one load feeds every store;
  2. the root signals every peer (after a block sync), each peer waits: its output is complete.
No handshake opens the call: the executor fences every launch of a plan that reaches the
peers' output (_common.direct_ranks), so when the root's fence is through every peer is in this
launch, its output free of the caller's earlier work. (ready=True adds the peers' ready signals
back, for a side-by-side measurement.)
The root reads its input once and writes N outputs: (N + 1) S in all out of place, N S in
place, the fewest either way; the other ranks move nothing.
The scratch plan (broadcast.py) writes the peers' scratch and each peer copies it out again:
(3 N - 1) S. Other roots: the executor rotates the ranks (docs/plan-selection.md). The peers'
outputs are addressed through the offsets the launch fence publishes (docs/nccl.md), so both
buffers must be memory the peers can map on every rank; the plans live in plans/direct/ and
plans/direct/<backend>/ (plans/README.md).

With root_blocks = K > 1 (the CUDA variant, plans/direct/cuda/: _common.cuda_root_blocks) the
root alone runs K thread blocks and every other rank one: the peers only wait, so the blocks
they would idle on go to the root's copy. The put is one op split over the K blocks (a
thread-block group, plan-format §3.7), and a barrier of the K blocks orders their stores
before block 0's signal: K + N - 1 blocks in all, where the replicated plan has N x INSTANCES.
"""

from _common import INSTANCES, MAX_MESSAGE, cuda_root_blocks, direct_variants, main_variants
from mscclpp.language import (Broadcast, CollectiveProgram, MemoryChannel, Rank, SyncType,
                              ThreadBlockGroup)


def broadcast_direct(num_ranks, instances=INSTANCES, min_message_size=0, variant="",
                     inplace=False, root_blocks=1, ready=False):
    """Broadcast from rank 0, Simple protocol, peers' outputs written directly (root_blocks:
    the root's thread blocks, the put split over them; instances must then be 1; ready: open
    with the peers' ready signals, which the launch fence makes redundant)."""
    N = num_ranks
    K = root_blocks
    if K > 1 and instances != 1:
        raise ValueError("broadcast_direct: root_blocks > 1 takes instances=1")
    name = f"direct_broadcast{'_ip' if inplace else ''}{variant}_{N}"
    with CollectiveProgram(name, Broadcast(N, 1, inplace, root=0), N, instances=instances,
                           protocol="Simple", min_message_size=min_message_size,
                           max_message_size=MAX_MESSAGE) as prog:
        peers = range(1, N)
        down = {p: MemoryChannel(p, 0) for p in peers}  # root -> p
        up = {p: MemoryChannel(0, p) for p in peers}  # p -> root
        root = Rank(0)
        inp, out = root.get_input_buffer(), root.get_output_buffer()
        if ready:
            for p in peers:
                up[p].signal(tb=0, data_sync=SyncType.before)
            for p in peers:
                down[p].wait(tb=0, data_sync=SyncType.after)
        group = dict(tb=0) if K == 1 else dict(tb_group=ThreadBlockGroup(range(K)))
        if K > 1 and ready:  # every root block hears that the peers are ready
            root.barrier(range(K))
        for p in peers:  # fused into one put ...
            down[p].put(Rank(p).get_output_buffer()[0:1], inp[0:1], **group)
        if not inplace:  # ... with this copy as its last destination
            root.copy(out[0:1], inp[0:1], **group)
        if K > 1:  # every block's stores before block 0 signals
            root.barrier(range(K))
        for p in peers:
            down[p].signal(tb=0, data_sync=SyncType.before)
        for p in peers:
            up[p].wait(tb=0, data_sync=SyncType.after)
    return prog


def default_plans(**extra):
    yield from direct_variants(
        "broadcast", broadcast_direct,
        cuda_args=lambda n: dict(instances=1, root_blocks=cuda_root_blocks(n)), **extra)


if __name__ == "__main__":
    main_variants(broadcast_direct)
