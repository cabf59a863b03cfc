"""Multi-node plans: memory channels inside a node, port channels (proxy + network) across.

Ranks are laid out node-major: rank r is on node r // L for L ranks per node (the order of
mpiexec's block mapping, and of `mscclpp-bench --nodes K`). The files go to
plans/multinode/<K>x<L>/, which the executor registers first when the communicator spans K
nodes of L ranks.

allgather: every rank sends its input to every peer's scratch slot (memory put inside the node,
  put-with-signal across), copies its own chunk, then copies the peers' slots to the output.
reducescatter / alltoall: every rank sends input chunk p to peer p's scratch slot, then reduces
  (copies) its slots.
broadcast (root 0): the root sends its input to every peer's scratch, each peer copies it out.
allreduce: every rank sends its whole input to every peer's scratch slot, then reduces the N
  slots locally (an all-pairs allreduce: one network round, the latency-optimal choice for the
  message sizes multi-node latency dominates; the bandwidth-optimal hierarchical variant, intra
  reduce-scatter + inter-node exchange + intra allgather, is future work).
Cross-node puts are put-with-signal-and-flush. Both start with a ready handshake on every channel, so a fast rank never overwrites a peer's
scratch slot while that peer still reads it in the previous launch.
"""

from _common import MAX_MESSAGE, main, peers_of
from mscclpp.language import (
    AllGather, AllReduce, AllToAll, Broadcast, Buffer, CollectiveProgram, MemoryChannel,
    PortChannel, Rank, ReduceScatter, SyncType,
)

LAYOUTS = [(2, 1), (2, 2), (2, 3), (2, 4), (4, 2)]  # (nodes, ranks per node)


def channels(nodes, per_node):
    """chan[(r, p)]: memory channel within a node, port channel across nodes."""
    n = nodes * per_node
    return {(r, p): (MemoryChannel(p, r) if r // per_node == p // per_node else PortChannel(p, r))
            for r in range(n) for p in range(n) if p != r}


def _same(r, p, per_node):
    return r // per_node == p // per_node


def _handshake(chan, r, peers):
    for p in peers:
        chan[(r, p)].signal(tb=0, relaxed=True, data_sync=SyncType.none)
    for p in peers:
        chan[(r, p)].wait(tb=0, relaxed=True, data_sync=SyncType.after)


def _send(chan, r, peers, per_node, dst_of, src):
    """Data to every peer: a memory put inside the node, a put-with-signal-and-flush across
    (the flush keeps the launch from ending while the proxy still reads the source: the caller
    may reuse or free it as soon as the call returns)."""
    for p in peers:
        if _same(r, p, per_node):
            chan[(r, p)].put(dst_of(p), src, tb=0)
        else:
            chan[(r, p)].put_with_signal_and_flush(dst_of(p), src, tb=0)


def _publish_and_wait(chan, r, peers, per_node):
    for p in peers:
        if _same(r, p, per_node):
            chan[(r, p)].signal(tb=0, data_sync=SyncType.before)
    for p in peers:
        chan[(r, p)].wait(tb=0, data_sync=SyncType.after)


def allgather(nodes, per_node):
    """Allgather across nodes, Simple protocol."""
    N = nodes * per_node
    with CollectiveProgram(f"multinode_allgather_{nodes}x{per_node}", AllGather(N, 1, False), N,
                           instances=1, protocol="Simple", min_message_size=0,
                           max_message_size=MAX_MESSAGE) as prog:
        scratch = [Buffer(r, N) for r in range(N)]
        chan = channels(nodes, per_node)
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            peers = peers_of(r, N)
            _handshake(chan, r, peers)
            _send(chan, r, peers, per_node, lambda p: scratch[p][r:r + 1], inp[0:1])
            rank.copy(out[r:r + 1], inp[0:1], tb=0)
            _publish_and_wait(chan, r, peers, per_node)
            for p in peers:
                rank.copy(out[p:p + 1], scratch[r][p:p + 1], tb=0)
    return prog


def allreduce(nodes, per_node):
    """Allreduce across nodes (all-pairs), Simple protocol."""
    N = nodes * per_node
    with CollectiveProgram(f"multinode_allreduce_{nodes}x{per_node}", AllReduce(N, 1, False), N,
                           instances=1, protocol="Simple", min_message_size=0,
                           max_message_size=MAX_MESSAGE) as prog:
        scratch = [Buffer(r, N * N) for r in range(N)]
        chan = channels(nodes, per_node)
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            peers = peers_of(r, N)
            _handshake(chan, r, peers)
            _send(chan, r, peers, per_node, lambda p: scratch[p][r * N:(r + 1) * N], inp[0:N])
            _publish_and_wait(chan, r, peers, per_node)
            rank.reduce(inp[0:N], [scratch[r][p * N:(p + 1) * N] for p in peers], tb=0,
                        dst_chunk=out[0:N])
    return prog


def reducescatter(nodes, per_node):
    """Reduce-scatter across nodes, Simple protocol."""
    N = nodes * per_node
    with CollectiveProgram(f"multinode_reducescatter_{nodes}x{per_node}",
                           ReduceScatter(N, 1, False), N, instances=1, protocol="Simple",
                           min_message_size=0, max_message_size=MAX_MESSAGE) as prog:
        scratch = [Buffer(r, N) for r in range(N)]
        chan = channels(nodes, per_node)
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            peers = peers_of(r, N)
            _handshake(chan, r, peers)
            for p in peers:
                _send(chan, r, [p], per_node, lambda q: scratch[q][r:r + 1], inp[p:p + 1])
            _publish_and_wait(chan, r, peers, per_node)
            rank.reduce(inp[r:r + 1], [scratch[r][p:p + 1] for p in peers], tb=0,
                        dst_chunk=out[0:1])
    return prog


def alltoall(nodes, per_node):
    """All-to-all across nodes, Simple protocol."""
    N = nodes * per_node
    with CollectiveProgram(f"multinode_alltoall_{nodes}x{per_node}", AllToAll(N, 1, False), N,
                           instances=1, protocol="Simple", min_message_size=0,
                           max_message_size=MAX_MESSAGE) as prog:
        scratch = [Buffer(r, N) for r in range(N)]
        chan = channels(nodes, per_node)
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            peers = peers_of(r, N)
            _handshake(chan, r, peers)
            for p in peers:
                _send(chan, r, [p], per_node, lambda q: scratch[q][r:r + 1], inp[p:p + 1])
            rank.copy(out[r:r + 1], inp[r:r + 1], tb=0)
            _publish_and_wait(chan, r, peers, per_node)
            for p in peers:
                rank.copy(out[p:p + 1], scratch[r][p:p + 1], tb=0)
    return prog


def broadcast(nodes, per_node, root=0):
    """Broadcast from rank 0 across nodes, Simple protocol."""
    N = nodes * per_node
    with CollectiveProgram(f"multinode_broadcast_{nodes}x{per_node}",
                           Broadcast(N, 1, False, root=root), N, instances=1, protocol="Simple",
                           min_message_size=0, max_message_size=MAX_MESSAGE) as prog:
        chan = channels(nodes, per_node)
        peers = [p for p in range(N) if p != root]
        scratch = {p: Buffer(p, 1) for p in peers}
        for p in peers:  # ready: p has copied out the previous launch's data
            chan[(p, root)].signal(tb=0, relaxed=True, data_sync=SyncType.none)
        rank = Rank(root)
        inp, out = rank.get_input_buffer(), rank.get_output_buffer()
        for p in peers:
            chan[(root, p)].wait(tb=0, relaxed=True, data_sync=SyncType.after)
        _send(chan, root, peers, per_node, lambda p: scratch[p][0:1], inp[0:1])
        rank.copy(out[0:1], inp[0:1], tb=0)
        for p in peers:
            if _same(root, p, per_node):
                chan[(root, p)].signal(tb=0, data_sync=SyncType.before)
        for p in peers:
            chan[(p, root)].wait(tb=0, data_sync=SyncType.after)
            Rank(p).copy(Rank(p).get_output_buffer()[0:1], scratch[p][0:1], tb=0)
    return prog


def default_plans():
    for k, l in LAYOUTS:
        yield f"multinode/{k}x{l}/allgather.json", allgather(k, l)
        yield f"multinode/{k}x{l}/allreduce.json", allreduce(k, l)
        yield f"multinode/{k}x{l}/reducescatter.json", reducescatter(k, l)
        yield f"multinode/{k}x{l}/alltoall.json", alltoall(k, l)
        yield f"multinode/{k}x{l}/broadcast.json", broadcast(k, l)


if __name__ == "__main__":
    main(lambda n: allreduce(2, n // 2))
