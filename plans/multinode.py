"""Multi-node plans: memory channels inside a node, port channels (proxy + network) across.

Ranks are laid out node-major: rank r is node r // L, local index r % L, for L ranks per node
(the order of mpiexec's block mapping and of `mscclpp-bench --nodes K`). Rank (n, l) talks
across nodes only to its *node peers* (n', l), the ranks with the same local index, so every
rank drives one network stripe and no pair of ranks on two nodes carries the same data twice.

Two algorithm families, one generator each, for every layout in LAYOUTS:

* hierarchical (plans/multinode/<K>x<L>/, registered by the executor when the communicator
  spans K nodes of L ranks, so `mscclpp_allreduce` and friends pick them):
  - allreduce: intra-node reduce-scatter over memory channels (local rank l reduces the
    node's stripe l, K chunks), inter-node reduce-scatter then allgather of that stripe among
    node peers over port channels (one chunk each), intra-node allgather of the stripes.
  - allgather: inter-node exchange of the inputs among node peers (port), then an intra-node
    allgather of the K chunks each rank now holds (memory).
  - reducescatter: intra-node reduce of the chunks bound for the node peers' stripe (memory),
    then inter-node exchange of the K node partials and a final reduce (port).
  - alltoall: every rank sends node n' the L chunks bound for its ranks in one put to its node
    peer (port), which forwards them to its local peers with the node's own chunks (memory).
  - broadcast (root 0): the root sends to the node leaders (n', 0) (port) and its local peers;
    each leader broadcasts inside its node (memory).
  Cross-node bytes per rank are the minimum of each collective (no chunk crosses twice).
* flat (plans/multinode/flat/<K>x<L>/, not registered; for comparison with --plan): every
  rank sends to every peer directly, one network round, a memory put inside the node and a
  put-with-signal-and-flush across.

Every plan starts with a ready handshake on each channel it writes through, so a fast rank
never overwrites a peer's scratch slot while that peer still reads it in the previous launch;
port puts are flushed before the launch ends (the caller may reuse the source at once).
"""

from _common import MAX_MESSAGE, main, peers_of
from mscclpp.language import (
    AllGather, AllReduce, AllToAll, Broadcast, Buffer, CollectiveProgram, MemoryChannel,
    PortChannel, Rank, ReduceScatter, SyncType,
)

LAYOUTS = [(2, 1), (2, 2), (2, 3), (2, 4), (4, 2)]  # (nodes, ranks per node)
# 8 nodes of 8 (the shape of a cluster of 8-GPU machines): hierarchical plans only; the flat
# all-pairs ones would be 64 ranks x 63 peers
SCALE_LAYOUTS = [(8, 8)]
COLLECTIVES = ["allgather", "allreduce", "alltoall", "broadcast", "reducescatter"]


class Topo:
    """K nodes of L ranks, node-major, with the channels a plan uses (made on first use, one
    per ordered pair: a memory channel inside a node, a port channel across)."""

    def __init__(self, nodes, per_node):
        self.K, self.L = nodes, per_node
        self.N = nodes * per_node
        self._chan = {}

    def node(self, r):
        return r // self.L

    def local(self, r):
        return r % self.L

    def rank(self, n, l):
        return n * self.L + l

    def same_node(self, a, b):
        return self.node(a) == self.node(b)

    def local_peers(self, r):
        """The other ranks of r's node, starting after r."""
        n, l = self.node(r), self.local(r)
        return [self.rank(n, (l + k) % self.L) for k in range(1, self.L)]

    def node_peers(self, r):
        """The ranks with r's local index on the other nodes, starting after r's node."""
        n, l = self.node(r), self.local(r)
        return [self.rank((n + k) % self.K, l) for k in range(1, self.K)]

    def chan(self, src, dst):
        """The channel src -> dst; its pair dst -> src is made with it, so the i-th channel
        of each direction pairs up whatever order the plan first uses them in."""
        if (src, dst) not in self._chan:
            kind = MemoryChannel if self.same_node(src, dst) else PortChannel
            self._chan[(src, dst)] = kind(dst, src)
            self._chan[(dst, src)] = kind(src, dst)
        return self._chan[(src, dst)]


def _program(kind, coll, nodes, per_node, collective):
    suffix = "" if kind == "hier" else "_flat"
    return CollectiveProgram(f"multinode_{coll}_{nodes}x{per_node}{suffix}", collective,
                             nodes * per_node, instances=1, protocol="Simple",
                             min_message_size=0, max_message_size=MAX_MESSAGE)


def _handshake(t, r, peers):
    """Tell every peer r is ready (its slots on r are free again) and wait for theirs."""
    for p in peers:
        t.chan(r, p).signal(tb=0, relaxed=True, data_sync=SyncType.none)
    for p in peers:
        t.chan(r, p).wait(tb=0, relaxed=True, data_sync=SyncType.after)


def _put(t, r, p, dst, src, flush=False):
    """r's src into p's dst: a memory put inside the node; across, a put with signal (and
    flush when asked: the source may be reused right after the launch)."""
    c = t.chan(r, p)
    if t.same_node(r, p):
        c.put(dst, src, tb=0)
    elif flush:
        c.put_with_signal_and_flush(dst, src, tb=0)
    else:
        c.put_with_signal(dst, src, tb=0)


def _publish(t, r, peers):
    """Release r's memory puts to the peers inside the node (port puts signal themselves)."""
    for p in peers:
        if t.same_node(r, p):
            t.chan(r, p).signal(tb=0, data_sync=SyncType.before)


def _await(t, r, peers):
    for p in peers:
        t.chan(r, p).wait(tb=0, data_sync=SyncType.after)


def _flush(t, r, peers):
    """Wait until the proxy has finished every put r made to node peers: the launch may not
    end while the network still reads r's buffers."""
    for p in peers:
        if not t.same_node(r, p):
            t.chan(r, p).flush(tb=0, data_sync=SyncType.none)


# ---- flat: all pairs, one round -----------------------------------------------------------

def _flat_round(t, r, sends, peers):
    """sends(p) -> [(dst chunk on p, src chunk on r)]; then publish and wait."""
    _handshake(t, r, peers)
    for p in peers:
        for dst, src in sends(p):
            _put(t, r, p, dst, src, flush=True)
    return peers


def flat(coll, nodes, per_node):
    """The flat plans: every rank sends straight to every peer (one network round)."""
    t = Topo(nodes, per_node)
    N = t.N
    if coll == "broadcast":
        return _flat_broadcast(t)
    spec = {
        "allgather": (AllGather(N, 1, False), N),
        "allreduce": (AllReduce(N, 1, False), N * N),
        "reducescatter": (ReduceScatter(N, 1, False), N),
        "alltoall": (AllToAll(N, 1, False), N),
    }[coll]
    with _program("flat", coll, nodes, per_node, spec[0]) as prog:
        scratch = [Buffer(r, spec[1]) for r in range(N)]
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            peers = peers_of(r, N)
            if coll == "allreduce":
                sends = lambda p: [(scratch[p][r * N:(r + 1) * N], inp[0:N])]  # noqa: E731
            elif coll == "allgather":
                sends = lambda p: [(scratch[p][r:r + 1], inp[0:1])]  # noqa: E731
            else:
                sends = lambda p: [(scratch[p][r:r + 1], inp[p:p + 1])]  # noqa: E731
            _flat_round(t, r, sends, peers)
            if coll in ("allgather", "alltoall"):
                src = inp[0:1] if coll == "allgather" else inp[r:r + 1]
                rank.copy(out[r:r + 1], src, tb=0)
            _publish(t, r, peers)
            _await(t, r, peers)
            if coll == "allreduce":
                rank.reduce(inp[0:N], [scratch[r][p * N:(p + 1) * N] for p in peers], tb=0,
                            dst_chunk=out[0:N])
            elif coll == "reducescatter":
                rank.reduce(inp[r:r + 1], [scratch[r][p:p + 1] for p in peers], tb=0,
                            dst_chunk=out[0:1])
            else:
                for p in peers:
                    rank.copy(out[p:p + 1], scratch[r][p:p + 1], tb=0)
    return prog


def _flat_broadcast(t, root=0):
    N = t.N
    with _program("flat", "broadcast", t.K, t.L, Broadcast(N, 1, False, root=root)) as prog:
        peers = [p for p in range(N) if p != root]
        scratch = {p: Buffer(p, 1) for p in peers}
        for p in peers:  # ready: p has copied out the previous launch's data
            t.chan(p, root).signal(tb=0, relaxed=True, data_sync=SyncType.none)
        rank = Rank(root)
        inp, out = rank.get_input_buffer(), rank.get_output_buffer()
        for p in peers:
            t.chan(root, p).wait(tb=0, relaxed=True, data_sync=SyncType.after)
        for p in peers:
            _put(t, root, p, scratch[p][0:1], inp[0:1], flush=True)
        rank.copy(out[0:1], inp[0:1], tb=0)
        _publish(t, root, peers)
        for p in peers:
            t.chan(p, root).wait(tb=0, data_sync=SyncType.after)
            Rank(p).copy(Rank(p).get_output_buffer()[0:1], scratch[p][0:1], tb=0)
    return prog


# ---- hierarchical --------------------------------------------------------------------------

def _hier_allreduce(t):
    """Chunk c (of N) belongs to stripe c // K, reduced inside each node by local rank
    c // K, and across nodes by node c % K of that stripe.

    Scratch of every rank (chunks): [0, N) intra reduce-scatter slots (local peer l' writes
    stripe l of its input at l'*K), [N, N+K) this node's partial sums of stripe l, [N+K,
    N+2K) node peers' partials of this rank's chunk, [N+2K, N+3K) node peers' full chunks,
    [N+3K, 2N+3K) intra allgather slots (local peer l' writes its full stripe at l'*K)."""
    K, L, N = t.K, t.L, t.N
    with _program("hier", "allreduce", K, L, AllReduce(N, 1, False)) as prog:
        scratch = [Buffer(r, 2 * N + 3 * K) for r in range(N)]
        P, R2, R3, R4 = N, N + K, N + 2 * K, N + 3 * K
        for r in range(N):
            rank = Rank(r)
            inp, out, s = rank.get_input_buffer(), rank.get_output_buffer(), scratch[r]
            n, l = t.node(r), t.local(r)
            loc, rem = t.local_peers(r), t.node_peers(r)
            mine = l * K + n  # the one chunk this rank reduces across nodes
            _handshake(t, r, loc + rem)
            # 1. intra-node reduce-scatter: stripe l' of my input to local peer l'
            for p in loc:
                lp = t.local(p)
                _put(t, r, p, scratch[p][l * K:(l + 1) * K], inp[lp * K:(lp + 1) * K])
            _publish(t, r, loc)
            _await(t, r, loc)
            if loc:
                rank.reduce(inp[l * K:(l + 1) * K],
                            [s[t.local(p) * K:(t.local(p) + 1) * K] for p in loc], tb=0,
                            dst_chunk=s[P:P + K])
                part = lambda m: s[P + m:P + m + 1]  # noqa: E731
            else:  # one rank per node: the node's sum is the input
                part = lambda m: inp[m:m + 1]  # noqa: E731
            # 2a. inter-node reduce-scatter: partial chunk n' of the stripe to node n'
            for p in rem:
                np_ = t.node(p)
                _put(t, r, p, scratch[p][R2 + n:R2 + n + 1], part(np_))
            _await(t, r, rem)
            rank.reduce(part(n), [s[R2 + t.node(p):R2 + t.node(p) + 1] for p in rem],
                        tb=0, dst_chunk=out[mine:mine + 1])
            # 2b. inter-node allgather of the stripe's full chunks
            for p in rem:
                _put(t, r, p, scratch[p][R3 + n:R3 + n + 1], out[mine:mine + 1])
            _await(t, r, rem)
            for p in rem:
                np_ = t.node(p)
                rank.copy(out[l * K + np_:l * K + np_ + 1], s[R3 + np_:R3 + np_ + 1], tb=0)
            # 3. intra-node allgather of the full stripes
            for p in loc:
                _put(t, r, p, scratch[p][R4 + l * K:R4 + (l + 1) * K], out[l * K:(l + 1) * K])
            _publish(t, r, loc)
            _await(t, r, loc)
            for p in loc:
                lp = t.local(p)
                rank.copy(out[lp * K:(lp + 1) * K], s[R4 + lp * K:R4 + (lp + 1) * K], tb=0)
            _flush(t, r, rem)
    return prog


def _hier_allgather(t):
    """Scratch (chunks): [0, K) the inputs of this stripe's ranks by node (the own one copied
    in), [K, K+N) intra allgather slots: local peer l' writes its K chunks at K + l'*K."""
    K, L, N = t.K, t.L, t.N
    with _program("hier", "allgather", K, L, AllGather(N, 1, False)) as prog:
        scratch = [Buffer(r, K + N) for r in range(N)]
        for r in range(N):
            rank = Rank(r)
            inp, out, s = rank.get_input_buffer(), rank.get_output_buffer(), scratch[r]
            n, l = t.node(r), t.local(r)
            loc, rem = t.local_peers(r), t.node_peers(r)
            _handshake(t, r, loc + rem)
            for p in rem:  # 1. inter-node exchange among node peers
                _put(t, r, p, scratch[p][n:n + 1], inp[0:1])
            rank.copy(s[n:n + 1], inp[0:1], tb=0)
            rank.copy(out[r:r + 1], inp[0:1], tb=0)
            _await(t, r, rem)
            for p in loc:  # 2. intra-node allgather of the stripe
                _put(t, r, p, scratch[p][K + l * K:K + (l + 1) * K], s[0:K])
            _publish(t, r, loc)
            for p in rem:
                np_ = t.node(p)
                q = t.rank(np_, l)
                rank.copy(out[q:q + 1], s[np_:np_ + 1], tb=0)
            _await(t, r, loc)
            for p in loc:
                lp = t.local(p)
                for m in range(K):
                    q = t.rank(m, lp)
                    rank.copy(out[q:q + 1], s[K + lp * K + m:K + lp * K + m + 1], tb=0)
            _flush(t, r, rem)
    return prog


def _hier_reducescatter(t):
    """Scratch (chunks): [0, N) intra slots: local peer l' writes, for each node m, its input
    chunk (m, l) at l'*K + m; [N, N+K) this node's partials for the stripe's ranks by node;
    [N+K, N+2K) node peers' partials of this rank's chunk."""
    K, L, N = t.K, t.L, t.N
    with _program("hier", "reducescatter", K, L, ReduceScatter(N, 1, False)) as prog:
        scratch = [Buffer(r, N + 2 * K) for r in range(N)]
        P, R2 = N, N + K
        for r in range(N):
            rank = Rank(r)
            inp, out, s = rank.get_input_buffer(), rank.get_output_buffer(), scratch[r]
            n, l = t.node(r), t.local(r)
            loc, rem = t.local_peers(r), t.node_peers(r)
            _handshake(t, r, loc + rem)
            for p in loc:  # 1. intra-node: the chunks of p's stripe
                lp = t.local(p)
                for m in range(K):
                    q = t.rank(m, lp)
                    _put(t, r, p, scratch[p][l * K + m:l * K + m + 1], inp[q:q + 1])
            _publish(t, r, loc)
            _await(t, r, loc)
            parts = {}
            for m in range(K):
                q = t.rank(m, l)
                if loc:
                    rank.reduce(inp[q:q + 1],
                                [s[t.local(p) * K + m:t.local(p) * K + m + 1] for p in loc],
                                tb=0, dst_chunk=s[P + m:P + m + 1])
                    parts[m] = s[P + m:P + m + 1]
                else:
                    parts[m] = inp[q:q + 1]
            for p in rem:  # 2. inter-node: node m's partial to node peer m
                _put(t, r, p, scratch[p][R2 + n:R2 + n + 1], parts[t.node(p)])
            _await(t, r, rem)
            rank.reduce(parts[n], [s[R2 + t.node(p):R2 + t.node(p) + 1] for p in rem], tb=0,
                        dst_chunk=out[0:1])
            _flush(t, r, rem)
    return prog


def _hier_alltoall(t):
    """Scratch (chunks): [0, N) by source node m and destination local index j: the chunk
    rank (m, l) sends to rank (n, j) at m*L + j (the own node's copied from the input);
    [N, 2N) intra slots: local peer l' writes the chunk of source (m, l') at N + l'*K + m."""
    K, L, N = t.K, t.L, t.N
    with _program("hier", "alltoall", K, L, AllToAll(N, 1, False)) as prog:
        scratch = [Buffer(r, 2 * N) for r in range(N)]
        for r in range(N):
            rank = Rank(r)
            inp, out, s = rank.get_input_buffer(), rank.get_output_buffer(), scratch[r]
            n, l = t.node(r), t.local(r)
            loc, rem = t.local_peers(r), t.node_peers(r)
            _handshake(t, r, loc + rem)
            for p in rem:  # 1. inter-node: the L chunks bound for node n' in one put
                b = t.node(p) * L
                _put(t, r, p, scratch[p][n * L:n * L + L], inp[b:b + L])
            rank.copy(s[n * L:n * L + L], inp[n * L:n * L + L], tb=0)
            _await(t, r, rem)
            for p in loc:  # 2. intra-node: to local peer j, what every node sent it
                j = t.local(p)
                for m in range(K):
                    _put(t, r, p, scratch[p][N + l * K + m:N + l * K + m + 1],
                         s[m * L + j:m * L + j + 1])
            _publish(t, r, loc)
            for m in range(K):  # from this stripe: (m, l) -> me
                q = t.rank(m, l)
                rank.copy(out[q:q + 1], s[m * L + l:m * L + l + 1], tb=0)
            _await(t, r, loc)
            for p in loc:
                lp = t.local(p)
                for m in range(K):
                    q = t.rank(m, lp)
                    rank.copy(out[q:q + 1], s[N + lp * K + m:N + lp * K + m + 1], tb=0)
            _flush(t, r, rem)
    return prog


def _hier_broadcast(t, root=0):
    """Root 0 -> node leaders (n', 0) over the network, and to its own local peers; each
    leader -> its local peers. Scratch: one chunk on every rank but the root."""
    K, L, N = t.K, t.L, t.N
    assert root == 0
    with _program("hier", "broadcast", K, L, Broadcast(N, 1, False, root=root)) as prog:
        scratch = {p: Buffer(p, 1) for p in range(N) if p != root}

        def sources(r):  # whom r receives from
            if r == root:
                return None
            return root if t.local(r) == 0 or t.same_node(r, root) else t.rank(t.node(r), 0)

        def targets(r):
            if r == root:
                return t.local_peers(r) + t.node_peers(r)
            return t.local_peers(r) if t.local(r) == 0 else []

        for r in range(N):  # ready: r has copied out the previous launch's data
            if r != root:
                t.chan(r, sources(r)).signal(tb=0, relaxed=True, data_sync=SyncType.none)
        for r in range(N):
            rank = Rank(r)
            out = rank.get_output_buffer()
            tg = targets(r)
            for p in tg:
                t.chan(r, p).wait(tb=0, relaxed=True, data_sync=SyncType.after)
            if r == root:
                src = rank.get_input_buffer()[0:1]
            else:
                src = scratch[r][0:1]
                t.chan(r, sources(r)).wait(tb=0, data_sync=SyncType.after)
            for p in tg:
                _put(t, r, p, scratch[p][0:1], src)
            _publish(t, r, tg)
            rank.copy(out[0:1], src, tb=0)
            _flush(t, r, tg)
    return prog


def hierarchical(coll, nodes, per_node):
    """The hierarchical plans (the executor's defaults across nodes)."""
    t = Topo(nodes, per_node)
    return {"allreduce": _hier_allreduce, "allgather": _hier_allgather,
            "reducescatter": _hier_reducescatter, "alltoall": _hier_alltoall,
            "broadcast": _hier_broadcast}[coll](t)


def default_plans():
    for k, l in LAYOUTS + SCALE_LAYOUTS:
        for coll in COLLECTIVES:
            yield f"multinode/{k}x{l}/{coll}.json", hierarchical(coll, k, l)
    for k, l in LAYOUTS:
        for coll in COLLECTIVES:
            yield f"multinode/flat/{k}x{l}/{coll}.json", flat(coll, k, l)


if __name__ == "__main__":
    main(lambda n: hierarchical("allreduce", 2, n // 2))
