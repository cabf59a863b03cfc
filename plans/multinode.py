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
* packet (LL) plans for small messages (plans/multinode/<K>x<L>/<coll>-pkt.json, registered
  with the hierarchical ones; allreduce, allgather, reducescatter): every byte travels as LL
  packets that carry the launch's flag, so a call needs no ready handshake (the flags tell
  launches apart and consecutive launches use alternate scratch halves), no signal and no
  trailing flush; a port channel relays packets already formatted in the sender's scratch
  (port `ppkt`). Each call costs one network one-way latency instead of the Simple plans'
  handshake + put-with-signal + wait + flush round trip. See PKT_IMAGE_MAX for their size cap
  and _pkt_max_message for the crossover to the Simple plans.

Every Simple plan starts with a ready handshake on each channel it writes through, so a fast rank
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
# Layout x collective whose files the plans the library makes for the job (executor/made.c)
# replace: made within 10 % of shipped or faster (geometric mean of the rows' median made /
# shipped ratios <= 1.10) in the quiet scripts/bench-made.sh runs of 2026-11-26 (-r 5 -n 20,
# 17:13-17:31 UTC; -r 7 -n 20, 20:18-20:42 UTC; docs/performance.md). Their programs stay here
# as the reference; no file is written for them (the hierarchical plan and, where there is
# one, the packet plan).
RETIRED = {(2, 1, "allgather"), (2, 1, "allreduce"), (2, 1, "alltoall"), (2, 1, "broadcast"),
           (2, 1, "reducescatter"), (2, 2, "allgather"), (2, 2, "allreduce"), (2, 2, "alltoall"),
           (2, 2, "broadcast"), (2, 2, "reducescatter"), (2, 3, "allgather"), (2, 3, "allreduce"),
           (2, 3, "alltoall"), (2, 3, "broadcast"), (2, 3, "reducescatter"), (2, 4, "allgather"),
           (2, 4, "allreduce"), (2, 4, "alltoall"), (2, 4, "broadcast"), (2, 4, "reducescatter"),
           (4, 2, "allgather"), (4, 2, "allreduce"), (4, 2, "alltoall"), (4, 2, "broadcast"),
           (4, 2, "reducescatter")}

# ---- packet plans: their size cap --------------------------------------------------------
# A port `ppkt` is one proxy put of the packet image (2 bytes per payload byte). Over UCX's
# tcp transport our puts are active messages; a message above UCX's rendezvous threshold is
# received in place (ucp_am_recv_data_nbx), written by the socket copy in whatever pieces it
# likes, so a reader polling the flags could see a packet whose flag landed before its data.
# Below the threshold the message arrives whole (eager) and the handler copies it with one
# store per aligned 8-byte word (transports/ucx/ucx.c), so packets are never torn. The
# threshold is UCX's own ("auto", from its link model): measured over the namespace veth with
# UCX 1.13, ucp_am_send_nbx with our 40-byte header went eager up to 19456 payload bytes and
# rendezvous from 19584 (docs/performance.md, "Packet plans across nodes"). Every port put of
# a packet plan stays at most PKT_IMAGE_MAX bytes (plus the chunk rounding, at most 32 bytes
# per chunk), a margin of ~3 KB under that. Cap is UCX_RNDV_THRESH-independent only as long
# as nobody lowers UCX_RNDV_THRESH below it (docs/multinode.md says so).
PKT_IMAGE_MAX = 16 * 1024
PKT_COLLECTIVES = ["allreduce", "allgather", "reducescatter"]
# File name of a packet plan: the executor registers a folder's plans in file-name order and
# the first match wins; "-" sorts before ".", so allgather-pkt.json comes before allgather.json
# (for a call the packet plan's layout refuses, the executor takes the next plan that fits:
# exec_registry_select_fit).
PKT_FILE = "{coll}-pkt.json"


def _pkt_max_message(coll, nodes, per_node):
    """Largest message of the packet plan of `coll` on K nodes x L ranks: the size whose
    largest port put (one packet image) is PKT_IMAGE_MAX. Message size (plan-format 3.2):
    allreduce, reducescatter: the input; allgather: the output. Largest port put:
    allreduce: the rank's stripe (1/L of the message); allgather: the rank's input (1/N);
    reducescatter: one rank's chunk (1/N). Below these caps the packet plans were faster than
    the Simple ones at every size measured (docs/performance.md), so the cap is the
    crossover."""
    n = nodes * per_node
    per_put = {"allreduce": per_node, "allgather": n, "reducescatter": n}[coll]
    return PKT_IMAGE_MAX // 2 * per_put


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
    suffix = {"hier": "", "flat": "_flat", "pkt": "_pkt"}[kind]
    if kind == "pkt":
        return CollectiveProgram(f"multinode_{coll}_{nodes}x{per_node}{suffix}", collective,
                                 nodes * per_node, instances=1, protocol="LL",
                                 use_double_scratch_buffer=True, min_message_size=0,
                                 max_message_size=_pkt_max_message(coll, nodes, per_node))
    lo = 0
    if kind == "hier" and (nodes, per_node) in LAYOUTS and coll == "allreduce":
        # the packet plan serves every call below (its chunks never split a rank's block);
        # the packet allgather and reducescatter refuse rank blocks that are not whole 4-byte
        # words (61 float16 per rank), so their Simple plans keep serving every size: the
        # packet files sort first (PKT_FILE) and win where they fit
        lo = _pkt_max_message(coll, nodes, per_node) + 1
    return CollectiveProgram(f"multinode_{coll}_{nodes}x{per_node}{suffix}", collective,
                             nodes * per_node, instances=1, protocol="Simple",
                             min_message_size=lo, max_message_size=MAX_MESSAGE)


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

def _pair_allreduce(t):
    """Two nodes of one rank: one exchange of the whole input, then a local reduce.

    The hierarchical algorithm degenerates here to a reduce-scatter and an allgather across
    the pair: the same bytes on the wire (half the input twice against the whole input once)
    with one more dependent network step. Measured with --plan on the 2-core VM
    (docs/performance.md, "two nodes of one rank"), the exchange took 0.29-0.69x the time from
    16 KiB to 256 KiB and the same from 1 MiB up."""
    N = t.N
    with _program("hier", "allreduce", t.K, t.L, AllReduce(N, 1, False)) as prog:
        scratch = [Buffer(r, N) for r in range(N)]
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            p = 1 - r
            _handshake(t, r, [p])
            _put(t, r, p, scratch[p][0:N], inp[0:N], flush=True)
            _await(t, r, [p])
            rank.reduce(inp[0:N], [scratch[r][0:N]], tb=0, dst_chunk=out[0:N])
    return prog


def _hier_allreduce(t):
    """Chunk c (of N) belongs to stripe c // K, reduced inside each node by local rank
    c // K, and across nodes by node c % K of that stripe.

    Scratch of every rank (chunks): [0, N) intra reduce-scatter slots (local peer l' writes
    stripe l of its input at l'*K), [N, N+K) this node's partial sums of stripe l, [N+K,
    N+2K) node peers' partials of this rank's chunk, [N+2K, N+3K) node peers' full chunks,
    [N+3K, 2N+3K) intra allgather slots (local peer l' writes its full stripe at l'*K)."""
    K, L, N = t.K, t.L, t.N
    if K == 2 and L == 1:
        return _pair_allreduce(t)
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


# ---- packet (LL) plans for small messages --------------------------------------------------
#
# Full images. A port ppkt (and a memory rppkt) has only scratch descriptors, so the executor
# moves whole scratch slots (chunk count x the chunk size), and the sender first waits until
# every unit of the slot carries this launch's flag. A slot formatted from the input or the
# output holds only that chunk's bytes, which are fewer whenever the size does not split
# evenly (chunks rounded up to the alignment, the last ones short or empty): the relay would
# wait for units nobody writes. So every image that crosses a port is formatted from a PLAIN
# SCRATCH copy (`_plain`): scratch to scratch, whole slots, padding included (readers unpack
# or reduce only the data's length). The plain copies live at chunk index 2*M and up, M being
# the end of the packet slots: a packet slot c occupies bytes [2c, 2c + 2) x the chunk size,
# a plain one [c, c + 1) x the chunk size, so the two kinds never overlap.


def _plain(M):
    """First chunk of the plain scratch region after M chunks of packet slots."""
    return 2 * M


def _pkt_allreduce(t):
    """Hierarchical, in packets; chunk c (of N) belongs to stripe c // K.

    1. intra-node reduce-scatter: stripe l' of my input as packets to local peer l'
       (memory ppkt); I reduce my stripe l with theirs (the node's partial stripe);
    2. inter-node: the partial stripe, formatted once into my scratch (cpkt), relayed to every
       node peer (port ppkt: one put per peer, no signal); I reduce my partial with theirs
       into my output stripe (the full sum);
    3. intra-node allgather: my full stripe as packets to every local peer; unpack theirs.
    One network one-way latency; with one rank per node steps 1 and 3 vanish and this is the
    all-pairs one-shot allreduce.

    Scratch (chunks). Packets: [0, N) intra slots (local peer l' writes its stripe l at
    l'*K), [N, N+K*K) partial stripes by node, [N+K*K, 2N+K*K) allgather slots (local peer l'
    writes its full stripe at l'*K). Plain, from 2M (M = 2N+K*K): my partial stripe (K)."""
    K, L, N = t.K, t.L, t.N
    with _program("pkt", "allreduce", K, L, AllReduce(N, 1, False)) as prog:
        A, B, C = 0, N, N + K * K
        P = _plain(2 * N + K * K)
        scratch = [Buffer(r, P + K) for r in range(N)]
        for r in range(N):
            rank = Rank(r)
            inp, out, s = rank.get_input_buffer(), rank.get_output_buffer(), scratch[r]
            n, l = t.node(r), t.local(r)
            loc, rem = t.local_peers(r), t.node_peers(r)
            mine = slice(l * K, (l + 1) * K)

            def stripe(buf, base, i):
                return buf[base + i * K:base + (i + 1) * K]
            for p in loc:  # 1.
                lp = t.local(p)
                t.chan(r, p).put_packets(stripe(scratch[p], A, l), stripe(inp, 0, lp), tb=0)
            if loc:  # (into the output first: a reduce into P then cpkt would fuse, recpkt,
                # and format only the data's bytes)
                rank.reduce(inp[mine], [stripe(s, A, t.local(p)) for p in loc], tb=0,
                            dst_chunk=out[mine], packet=True)
                rank.copy(s[P:P + K], out[mine], tb=0)
            else:
                rank.copy(s[P:P + K], inp[mine], tb=0)
            rank.copy_packets(stripe(s, B, n), s[P:P + K], tb=0)  # 2.
            for p in rem:
                t.chan(r, p).put_packets(stripe(scratch[p], B, n), stripe(s, B, n), tb=0)
            rank.reduce(s[P:P + K], [stripe(s, B, t.node(p)) for p in rem], tb=0,
                        dst_chunk=out[mine], packet=True)
            for p in loc:  # 3.
                t.chan(r, p).put_packets(stripe(scratch[p], C, l), out[mine], tb=0)
            for p in loc:
                lp = t.local(p)
                rank.unpack_packets(stripe(out, 0, lp), stripe(s, C, lp), tb=0)
    return prog


def _pkt_allgather(t):
    """Hierarchical, in packets. My input, formatted once into my scratch slot r, goes to every
    node peer (port ppkt) and as packets to every local peer (memory ppkt); what the node
    peers send me I forward to my local peers as it lands (memory rppkt), so every chunk
    crosses the network once. Scratch: packet slot q (of N) holds rank q's input; plain, from
    2N: my input."""
    K, L, N = t.K, t.L, t.N
    with _program("pkt", "allgather", K, L, AllGather(N, 1, False)) as prog:
        P = _plain(N)
        scratch = [Buffer(r, P + 1) for r in range(N)]
        for r in range(N):
            rank = Rank(r)
            inp, out, s = rank.get_input_buffer(), rank.get_output_buffer(), scratch[r]
            loc, rem = t.local_peers(r), t.node_peers(r)
            rank.copy(s[P:P + 1], inp[0:1], tb=0)
            rank.copy_packets(s[r:r + 1], s[P:P + 1], tb=0)
            for p in rem:
                t.chan(r, p).put_packets(scratch[p][r:r + 1], s[r:r + 1], tb=0)
            for p in loc:
                t.chan(r, p).put_packets(scratch[p][r:r + 1], inp[0:1], tb=0)
            rank.copy(out[r:r + 1], inp[0:1], tb=0)
            for q in rem:  # relay the node peers' (whole) images inside the node
                for p in loc:
                    t.chan(r, p).read_put_packets(scratch[p][q:q + 1], s[q:q + 1], tb=0)
            for q in peers_of(r, N):
                rank.unpack_packets(out[q:q + 1], s[q:q + 1], tb=0)
    return prog


def _pkt_reducescatter(t):
    """All pairs, in packets (one hop: a hierarchical one would add a second). Chunk q of my
    input goes to rank q: as packets over memory inside the node; copied to plain scratch,
    formatted and relayed (port ppkt) across. Scratch: packets [0, N) what rank q sent me at
    slot q, [N, 2N) my chunks for the ranks of other nodes, formatted, at N + q; plain, from
    4N: those chunks at 4N + q."""
    K, L, N = t.K, t.L, t.N
    with _program("pkt", "reducescatter", K, L, ReduceScatter(N, 1, False)) as prog:
        P = _plain(2 * N)
        scratch = [Buffer(r, P + N) for r in range(N)]
        for r in range(N):
            rank = Rank(r)
            inp, out, s = rank.get_input_buffer(), rank.get_output_buffer(), scratch[r]
            peers = peers_of(r, N)
            for q in peers:
                if t.same_node(r, q):
                    t.chan(r, q).put_packets(scratch[q][r:r + 1], inp[q:q + 1], tb=0)
                else:
                    rank.copy(s[P + q:P + q + 1], inp[q:q + 1], tb=0)
                    rank.copy_packets(s[N + q:N + q + 1], s[P + q:P + q + 1], tb=0)
                    t.chan(r, q).put_packets(scratch[q][r:r + 1], s[N + q:N + q + 1], tb=0)
            rank.reduce(inp[r:r + 1], [s[q:q + 1] for q in peers], tb=0, dst_chunk=out[0:1],
                        packet=True)
    return prog


def packet(coll, nodes, per_node):
    """The packet plans for small messages (registered with the hierarchical ones)."""
    t = Topo(nodes, per_node)
    return {"allreduce": _pkt_allreduce, "allgather": _pkt_allgather,
            "reducescatter": _pkt_reducescatter}[coll](t)


def hierarchical(coll, nodes, per_node):
    """The hierarchical plans (the executor's defaults across nodes)."""
    t = Topo(nodes, per_node)
    return {"allreduce": _hier_allreduce, "allgather": _hier_allgather,
            "reducescatter": _hier_reducescatter, "alltoall": _hier_alltoall,
            "broadcast": _hier_broadcast}[coll](t)


def default_plans():
    for k, l in LAYOUTS + SCALE_LAYOUTS:
        for coll in COLLECTIVES:
            if (k, l, coll) not in RETIRED:
                yield f"multinode/{k}x{l}/{coll}.json", hierarchical(coll, k, l)
    for k, l in LAYOUTS:
        for coll in PKT_COLLECTIVES:
            if (k, l, coll) not in RETIRED:
                yield f"multinode/{k}x{l}/" + PKT_FILE.format(coll=coll), packet(coll, k, l)
    for k, l in LAYOUTS:
        for coll in COLLECTIVES:
            yield f"multinode/flat/{k}x{l}/{coll}.json", flat(coll, k, l)


if __name__ == "__main__":
    main(lambda n: hierarchical("allreduce", 2, n // 2))
