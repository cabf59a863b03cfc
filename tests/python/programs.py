"""DSL programs used by the tests and by bench_compile.py (a variety of algorithms and features)."""

from mscclpp.language import *


def _chan(chans, cls, r, p):
    key = (cls.__name__, r, p)
    if key not in chans:
        chans[key] = cls(p, r)
    return chans[key]


def ring_allreduce(N, inplace=False):
    """Ring reduce-scatter + ring all-gather, one block, Simple protocol."""
    coll = AllReduce(N, 1, inplace)
    # one block walks all 2(N-1) steps: above 7 ranks that exceeds 64 ops per block, which only
    # matters to an executor, not to the simulator
    with CollectiveProgram(f"ring_allreduce_{N}", coll, N, check_limits=N <= 7) as prog:
        scr = [Buffer(r, N) for r in range(N)]
        ch = {}
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            if not inplace:
                rank.copy(out[0:N], inp[0:N], tb=0)
            nxt, prv = (r + 1) % N, (r - 1) % N
            for s in range(N - 1):
                c = (r - s) % N
                _chan(ch, MemoryChannel, r, nxt).put(scr[nxt][s:s + 1], out[c:c + 1], tb=0)
                _chan(ch, MemoryChannel, r, nxt).signal(tb=0, data_sync=SyncType.before)
                _chan(ch, MemoryChannel, r, prv).wait(tb=0, data_sync=SyncType.after)
                c2 = (r - s - 1) % N
                rank.reduce(out[c2:c2 + 1], [scr[r][s:s + 1]], tb=0)
            for s in range(N - 1):
                c = (r + 1 - s) % N
                dst = Rank(nxt).get_output_buffer()
                _chan(ch, MemoryChannel, r, nxt).put(dst[c:c + 1], out[c:c + 1], tb=0)
                _chan(ch, MemoryChannel, r, nxt).signal(tb=0, data_sync=SyncType.before)
                _chan(ch, MemoryChannel, r, prv).wait(tb=0, data_sync=SyncType.after)
    return prog


def ring_allgather(N, chunk_factor=2):
    coll = AllGather(N, chunk_factor, False)
    cf = chunk_factor
    with CollectiveProgram(f"ring_allgather_{N}", coll, N) as prog:
        ch = {}
        for r in range(N):
            rank = Rank(r)
            rank.copy(rank.get_output_buffer()[r * cf:(r + 1) * cf],
                      rank.get_input_buffer()[0:cf], tb=0)
        for r in range(N):
            rank = Rank(r)
            out = rank.get_output_buffer()
            nxt, prv = (r + 1) % N, (r - 1) % N
            for s in range(N - 1):
                c = (r - s) % N
                dst = Rank(nxt).get_output_buffer()[c * cf:(c + 1) * cf]
                _chan(ch, MemoryChannel, r, nxt).put(dst, out[c * cf:(c + 1) * cf], tb=0)
                _chan(ch, MemoryChannel, r, nxt).signal(tb=0, data_sync=SyncType.before)
                _chan(ch, MemoryChannel, r, prv).wait(tb=0, data_sync=SyncType.after)
    return prog


def allpairs_allreduce_inplace(N, instances=2):
    """Like MSCCL++'s allreduce example: read-reduce from every peer, write back (rres)."""
    with CollectiveProgram(f"allpairs_rre_{N}", AllReduce(N, 1, True), N,
                           instances=instances) as prog:
        ch = {}
        for r in range(N):
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).signal(tb=0, relaxed=True)
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).wait(tb=0, relaxed=True,
                                                        data_sync=SyncType.after)
            buf = Rank(r).get_input_buffer()
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).reduce(
                        buf[r:r + 1], [Rank(p).get_input_buffer()[r:r + 1]], tb=0)
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).put(Rank(p).get_input_buffer()[r:r + 1],
                                                       buf[r:r + 1], tb=0)
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).signal(tb=0, data_sync=SyncType.before)
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).wait(tb=0, data_sync=SyncType.after)
    return prog


def packet_reducescatter(N):
    """LL reduce-scatter: packets into peers' scratch, then a packet reduce."""
    with CollectiveProgram(f"pkt_rs_{N}", ReduceScatter(N, 1, False), N, protocol="LL",
                           use_double_scratch_buffer=True) as prog:
        scr = [Buffer(r, N) for r in range(N)]
        ch = {}
        for r in range(N):
            rank = Rank(r)
            inp = rank.get_input_buffer()
            peers = [p for p in range(N) if p != r]
            for k, p in enumerate(peers):
                _chan(ch, MemoryChannel, r, p).put_packets(scr[p][r:r + 1], inp[p:p + 1], tb=k)
            rank.reduce(inp[r:r + 1], [scr[r][p:p + 1] for p in peers], tb=0,
                        dst_chunk=rank.get_output_buffer()[0:1], packet=True)
    return prog


def packet_allgather_rppkt(N):
    """LL allgather relaying packets with read_put_packets (like MSCCL++'s example)."""
    with CollectiveProgram(f"pkt_ag_{N}", AllGather(N, 1, False), N, protocol="LL",
                           use_double_scratch_buffer=True) as prog:
        scr = [Buffer(r, 2 * N) for r in range(N)]
        ch = {}
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            rank.copy_packets(scr[r][N + r:N + r + 1], inp[0:1], tb=0)
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).read_put_packets(
                        scr[p][r:r + 1], scr[r][N + r:N + r + 1], tb=0)
            rank.copy(out[r:r + 1], inp[0:1], tb=0)
            for p in range(N):
                if p != r:
                    rank.unpack_packets(out[p:p + 1], scr[r][p:p + 1], tb=0)
    return prog


def alltoall_get(N):
    """All-to-all where every rank reads its data from the peers' input (get)."""
    with CollectiveProgram(f"a2a_get_{N}", AllToAll(N, 1, False), N) as prog:
        ch = {}
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).signal(tb=0, relaxed=True)
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).wait(tb=0, relaxed=True,
                                                        data_sync=SyncType.after)
            rank.copy(out[r:r + 1], inp[r:r + 1], tb=0)
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).get(
                        out[p:p + 1], Rank(p).get_input_buffer()[r:r + 1], tb=0)
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).signal(tb=0, data_sync=SyncType.before)
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).wait(tb=0, data_sync=SyncType.after)
    return prog


def port_allgather(N):
    """Allgather over port channels with put_with_signal."""
    with CollectiveProgram(f"port_ag_{N}", AllGather(N, 1, False), N) as prog:
        ch = {}
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            rank.copy(out[r:r + 1], inp[0:1], tb=0)
            for p in range(N):
                if p != r:
                    _chan(ch, PortChannel, r, p).put_with_signal(
                        Rank(p).get_output_buffer()[r:r + 1], inp[0:1], tb=0)
            for p in range(N):
                if p != r:
                    _chan(ch, PortChannel, r, p).wait(tb=0, data_sync=SyncType.after)
    return prog


def tbg_pipelined_allreduce(N, tbg_size=2):
    """Two-stage allreduce: a thread-block group copies the input to scratch inside a pipelined
    loop, semaphores hand over to a second group that exchanges through peers' scratch."""
    with CollectiveProgram(f"tbg_pipe_{N}", AllReduce(N, 1, False), N) as prog:
        scr = [Buffer(r, 2 * N) for r in range(N)]
        ch = {}
        g1 = ThreadBlockGroup(list(range(tbg_size)))
        g2 = ThreadBlockGroup(list(range(tbg_size, 2 * tbg_size)))
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            sems = [Semaphore(r, 0) for _ in range(tbg_size)]
            with Loop.iteration(unit=1 << 16, num_chunks=N) as it:
                rank.copy(scr[r][0:N], inp[0:N], tb_group=g1, iter_context=it)
            for t in range(tbg_size):
                sems[t].release(tb=t)
            for t in range(tbg_size):
                sems[t].acquire(tb=tbg_size + t)
            rank.barrier(g2.tb_list)
            first = g2.tb_list[0]
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).put(scr[p][N + r:N + r + 1],
                                                       scr[r][p:p + 1], tb_group=g2)
            for p in range(N):
                if p != r:
                    rank.barrier(g2.tb_list)
                    break
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).signal(tb=first)
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).wait(tb=first)
            rank.barrier(g2.tb_list)
            others = [scr[r][N + p:N + p + 1] for p in range(N) if p != r]
            rank.reduce(scr[r][r:r + 1], others, tb_group=g2, dst_chunk=out[r:r + 1])
            rank.barrier(g2.tb_list)
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).put(Rank(p).get_output_buffer()[r:r + 1],
                                                       out[r:r + 1], tb_group=g2)
            rank.barrier(g2.tb_list)
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).signal(tb=first)
            for p in range(N):
                if p != r:
                    _chan(ch, MemoryChannel, r, p).wait(tb=first)
    return prog


def alltoall_blocks(N, peers_per_block=8, rank_subset=None):
    """All-to-all spread over blocks of at most ``peers_per_block`` peers (for large N)."""
    with CollectiveProgram(f"alltoall_{N}", AllToAll(N, 1, False), N,
                           rank_subset=rank_subset) as prog:
        scr = [Buffer(r, N) for r in range(N)]
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            peers = [(r + k) % N for k in range(1, N)]
            rank.copy(out[r:r + 1], inp[r:r + 1], tb=0)
            for b in range(0, len(peers), peers_per_block):
                tb = b // peers_per_block
                grp = peers[b:b + peers_per_block]
                chans = [MemoryChannel(p, r) for p in grp]
                for c in chans:
                    c.signal(tb=tb, relaxed=True, data_sync=SyncType.none)
                for c in chans:
                    c.wait(tb=tb, relaxed=True, data_sync=SyncType.after)
                for c, p in zip(chans, grp):
                    c.put(scr[p][r:r + 1], inp[p:p + 1], tb=tb)
                for c in chans:
                    c.signal(tb=tb, data_sync=SyncType.before)
                for c in chans:
                    c.wait(tb=tb, data_sync=SyncType.after)
                for p in grp:
                    rank.copy(out[p:p + 1], scr[r][p:p + 1], tb=tb)
    return prog


def hierarchical_allreduce(nodes, per_node, peers_per_block=8, rank_subset=None):
    """Allreduce over nodes x per_node ranks: intra-node reduce-scatter, cross-node all-pairs
    reduce-scatter/all-gather among ranks of equal local index (spread over blocks of at most
    ``peers_per_block`` peers), intra-node all-gather. Block 0 runs the intra-node phases."""
    N = nodes * per_node
    W = nodes  # chunks owned per local index
    with CollectiveProgram(f"hier_allreduce_{N}", AllReduce(N, 1, False), N,
                           rank_subset=rank_subset) as prog:
        A, B = 0, per_node * W
        C = B + nodes
        D = C + nodes
        scr = [Buffer(r, D + per_node * W) for r in range(N)]
        for r in range(N):
            n, l = divmod(r, per_node)
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            local = [n * per_node + x for x in range(per_node) if x != l]
            remote = [x * per_node + l for x in range(nodes) if x != n]
            groups = [remote[i:i + peers_per_block]
                      for i in range(0, len(remote), peers_per_block)]
            blocks = list(range(len(groups) + 1))
            lch = {p: MemoryChannel(p, r) for p in local}
            mine = out[l * W:(l + 1) * W]
            # phase 1: intra-node reduce-scatter of W-chunk ranges
            for p in local:
                lp = p % per_node
                lch[p].put(scr[p][A + l * W:A + (l + 1) * W], inp[lp * W:(lp + 1) * W], tb=0)
            for p in local:
                lch[p].signal(tb=0, data_sync=SyncType.before)
            for p in local:
                lch[p].wait(tb=0, data_sync=SyncType.after)
            srcs = [scr[r][A + (p % per_node) * W:A + (p % per_node + 1) * W] for p in local]
            if srcs:
                rank.reduce(inp[l * W:(l + 1) * W], srcs, tb=0, dst_chunk=mine)
            else:
                rank.copy(mine, inp[l * W:(l + 1) * W], tb=0)
            if len(blocks) > 1:
                rank.barrier(blocks)
            # phase 2: cross-node all-pairs on chunk l*W + node
            gch = {}
            for gi, grp in enumerate(groups):
                tb = gi + 1
                for p in grp:
                    gch[p] = MemoryChannel(p, r)
                    x = p // per_node
                    gch[p].put(scr[p][B + n:B + n + 1], out[l * W + x:l * W + x + 1], tb=tb)
                for p in grp:
                    gch[p].signal(tb=tb, data_sync=SyncType.before)
                for p in grp:
                    gch[p].wait(tb=tb, data_sync=SyncType.after)
            if len(blocks) > 1:
                rank.barrier(blocks)
                own = out[l * W + n:l * W + n + 1]
                xs = [p // per_node for p in remote]
                for i in range(0, len(xs), 8):
                    rank.reduce(own, [scr[r][B + x:B + x + 1] for x in xs[i:i + 8]], tb=0)
                rank.barrier(blocks)
            for gi, grp in enumerate(groups):
                tb = gi + 1
                for p in grp:
                    gch[p].put(scr[p][C + n:C + n + 1], out[l * W + n:l * W + n + 1], tb=tb)
                for p in grp:
                    gch[p].signal(tb=tb, data_sync=SyncType.before)
                for p in grp:
                    gch[p].wait(tb=tb, data_sync=SyncType.after)
                for p in grp:
                    x = p // per_node
                    rank.copy(out[l * W + x:l * W + x + 1], scr[r][C + x:C + x + 1], tb=tb)
            if len(blocks) > 1:
                rank.barrier(blocks)
            # phase 3: intra-node all-gather of the W-chunk ranges
            for p in local:
                lch[p].put(scr[p][D + l * W:D + (l + 1) * W], mine, tb=0)
            for p in local:
                lch[p].signal(tb=0, data_sync=SyncType.before)
            for p in local:
                lch[p].wait(tb=0, data_sync=SyncType.after)
            for p in local:
                lp = p % per_node
                rank.copy(out[lp * W:(lp + 1) * W], scr[r][D + lp * W:D + (lp + 1) * W], tb=0)
    return prog
