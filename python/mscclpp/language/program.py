"""CollectiveProgram: records DSL calls and compiles them into an execution plan."""

import json

from .internal.types import (
    BufferType, ChannelType, DSLError, ReplicationPolicy,
)
from .internal.ops import Op
from .internal import passes
from .internal.active import get_program  # noqa: F401 (MSCCL++ exports it here)
from .internal import active as _active

PLAN_FORMAT = "mscclpp-plan/1"
MAX_CHANNELS_PER_BLOCK = 16
MAX_RBUFS_PER_BLOCK = 16
MAX_OPS_PER_BLOCK = 64
MAX_BARRIERS = 16

# Executor limits per target. "mscclpp": MSCCL++'s executor (fixed per-block tables, spec 5.6),
# for plans meant to run there. "native" (default): this library's executor, which streams ops
# and descriptors from a blob (executor/plan.h: PLAN_MAX_OPS_PER_BLOCK, PLAN_MAX_DESCS) and runs
# unfused switch reduces (glre).
TARGETS = {
    "mscclpp": {"name": "mscclpp", "ops_per_block": MAX_OPS_PER_BLOCK, "descs_per_op": 10},
    "native": {"name": "native", "ops_per_block": 65535, "descs_per_op": 72},
}
# Target of programs that do not name one (python3 -m mscclpp compile --target sets it).
default_target = "native"

def set_program(program):
    """Make ``program`` the active program (or none with None), as MSCCL++'s set_program:
    for building a program outside a ``with`` block."""
    if program is not None and not isinstance(program, CollectiveProgram):
        raise DSLError(f"set_program expects a CollectiveProgram or None, "
                       f"got {type(program).__name__}")
    _active.set_current(program)


class _Gpu:
    """Per-rank state of a program being recorded."""

    __slots__ = ("rank", "input_chunks", "output_chunks", "scratch_chunks", "peers",
                 "switch_ids", "rb_index", "rb_list", "sems", "tbs", "sig", "wait",
                 "barriers")

    def __init__(self, rank, input_chunks, output_chunks):
        self.rank = rank
        self.input_chunks = input_chunks
        self.output_chunks = output_chunks
        self.scratch_chunks = 0
        self.peers = {"memory": [], "port": []}  # global channel index -> peer rank
        self.switch_ids = []   # program-level switch channel ids this rank belongs to
        self.rb_index = {}     # (owner, btype) -> gpu-level remote buffer id
        self.rb_list = []      # [owner, btype, [access types]]
        self.sems = []         # initial values
        self.tbs = {}          # tb -> [Op]
        self.sig = {}          # (ctype, gid) -> signals recorded on the channel
        self.wait = {}         # (ctype, gid) -> waits recorded on the channel
        self.barriers = {}     # tuple(tb list) -> barrier id

    def add_remote_buffer(self, owner, btype, access):
        key = (owner, btype)
        q = self.rb_index.get(key)
        if q is None:
            q = len(self.rb_list)
            self.rb_index[key] = q
            self.rb_list.append([owner, btype, [access]])
        elif access not in self.rb_list[q][2]:
            self.rb_list[q][2].append(access)
        return q


class CollectiveProgram:
    """A collective algorithm for a fixed number of ranks (plan-format §7.1).

    Extensions to the MSCCL++ 0.9 signature:
      ``rank_subset``: iterable of ranks; only their operations are recorded and written
      (``"rank_subset"`` at the top level of the plan), for very large worlds where each rank
      compiles its own part. Entries of other ranks are stubs that keep what setup needs
      (their channels to and remote buffers on the subset's ranks).
      ``check_limits``: raise when a block exceeds the limits of the target executor (default).
      ``target``: "native" (this library, the default) or "mscclpp" (MSCCL++'s executor: 64 ops
      per block, 10 descriptors per op, no unfused switch reduce); None takes
      ``program.default_target``.
    """

    def __init__(self, name, collective, num_ranks, instances=1, protocol="Simple",
                 instr_fusion=True, auto_sync=True,
                 replication_policy=ReplicationPolicy.interleaved, reuse_resources=False,
                 num_threads_per_block=1024, use_double_scratch_buffer=False,
                 buffer_alignment=16, min_message_size=0, max_message_size=2**64 - 1,
                 rank_subset=None, check_limits=True, target=None):
        from .collectives import Collective

        if not isinstance(collective, Collective):
            raise DSLError(f"collective must be a Collective object such as AllReduce(...), "
                           f"got {collective!r}")
        if protocol not in ("Simple", "LL"):
            raise DSLError(f"protocol must be 'Simple' or 'LL', got {protocol!r}")
        if not isinstance(num_ranks, int) or num_ranks < 1:
            raise DSLError(f"num_ranks must be a positive integer, got {num_ranks!r}")
        if collective.num_ranks != num_ranks:
            raise DSLError(f"the collective is for {collective.num_ranks} ranks but the program "
                           f"for {num_ranks}")
        if not isinstance(instances, int) or instances < 1:
            raise DSLError(f"instances must be a positive integer, got {instances!r}")
        if not 1 <= num_threads_per_block <= 1024:
            raise DSLError("num_threads_per_block must be in 1..1024")
        if buffer_alignment <= 0 or buffer_alignment % 4:
            raise DSLError("buffer_alignment must be a positive multiple of 4")
        if min_message_size > max_message_size:
            raise DSLError("min_message_size is larger than max_message_size")
        if isinstance(replication_policy, str):
            replication_policy = ReplicationPolicy(replication_policy)
        self.name = name
        self.collective = collective
        self.num_ranks = num_ranks
        self.instances = instances
        self.protocol = protocol
        self.instr_fusion = instr_fusion
        self.auto_sync = auto_sync
        self.replication_policy = replication_policy
        self.reuse_resources = reuse_resources
        self.num_threads_per_block = num_threads_per_block
        self.use_double_scratch_buffer = use_double_scratch_buffer
        self.buffer_alignment = buffer_alignment
        self.min_message_size = min_message_size
        self.max_message_size = max_message_size
        self.check_limits = check_limits
        target = default_target if target is None else target
        if target not in TARGETS:
            raise DSLError(f"target must be one of {', '.join(sorted(TARGETS))}, got {target!r}")
        self.target = target
        self.limits = TARGETS[target]
        self.rank_subset = None if rank_subset is None else sorted(set(rank_subset))
        if self.rank_subset is not None:
            for r in self.rank_subset:
                self.check_rank(r)
        self._subset = None if rank_subset is None else frozenset(self.rank_subset)
        self.gpus = [_Gpu(r, collective.input_chunks(r), collective.output_chunks(r))
                     for r in range(num_ranks)]
        self.switch_channels = []  # [(ranks, btype)]
        self.loop_context = None
        self._processed = None
        self._entered = False

    # ---- context manager ----------------------------------------------------------------------
    def __enter__(self):
        if _active.current() is not None and _active.current() is not self:
            raise DSLError("CollectiveProgram blocks cannot be nested")
        _active.set_current(self)
        self._entered = True
        return self

    def __exit__(self, exc_type, exc, tb):
        _active.set_current(None)
        if self.loop_context is not None:
            self.loop_context = None
        return False

    @classmethod
    def from_spec(cls, spec, **overrides):
        """Build a program from an :class:`AlgoSpec` (use it as a context manager)."""
        collective = spec.collective
        if spec.in_place is not None and bool(spec.in_place) != bool(collective.inplace):
            raise DSLError(f"AlgoSpec.in_place={spec.in_place} contradicts the collective "
                           f"(inplace={collective.inplace})")
        if spec.world_size != collective.num_ranks:
            raise DSLError(f"AlgoSpec.world_size={spec.world_size} but the collective is for "
                           f"{collective.num_ranks} ranks")
        kwargs = dict(
            instances=spec.instances, protocol=spec.protocol, instr_fusion=spec.instr_fusion,
            auto_sync=spec.auto_sync, replication_policy=spec.replication_policy,
            reuse_resources=spec.reuse_resources,
            num_threads_per_block=spec.num_threads_per_block,
            use_double_scratch_buffer=spec.use_double_scratch_buffer,
            buffer_alignment=spec.buffer_alignment, min_message_size=spec.min_message_size,
            max_message_size=spec.max_message_size)
        kwargs.update(overrides)
        return cls(spec.name, collective, spec.world_size, **kwargs)

    # ---- recording helpers (used by the API modules) -------------------------------------------
    def check_rank(self, rank, what="rank"):
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < self.num_ranks:
            raise DSLError(f"{what} {rank!r} is out of range for a {self.num_ranks}-rank program")

    def records(self, rank):
        return self._subset is None or rank in self._subset

    def record(self, rank, tb, op):
        if not isinstance(tb, int) or isinstance(tb, bool) or tb < 0:
            raise DSLError(f"thread block id must be a non-negative integer, got {tb!r}")
        self._processed = None
        if self.loop_context is not None:
            self.loop_context.add(rank, tb, op)
            return
        if self._subset is not None and rank not in self._subset:
            return
        ops = self.gpus[rank].tbs.get(tb)
        if ops is None:
            ops = self.gpus[rank].tbs[tb] = []
        ops.append(op)

    def add_channel(self, src_rank, dst_rank, ctype):
        self.check_rank(src_rank, "source rank")
        self.check_rank(dst_rank, "destination rank")
        if src_rank == dst_rank:
            raise DSLError(f"a {ctype} channel needs two different ranks, got {src_rank} -> "
                           f"{dst_rank} (channel to self)")
        peers = self.gpus[src_rank].peers[ctype]
        peers.append(dst_rank)
        self._processed = None
        return len(peers) - 1

    def add_switch_channel(self, ranks, btype):
        sid = len(self.switch_channels)
        self.switch_channels.append((list(ranks), btype))
        local_ids = {}
        for r in ranks:
            g = self.gpus[r]
            local_ids[r] = len(g.switch_ids)
            g.switch_ids.append(sid)
        self._processed = None
        return local_ids

    def barrier_id(self, rank, tb_list):
        g = self.gpus[rank]
        key = tuple(tb_list)
        bid = g.barriers.get(key)
        if bid is None:
            bid = len(g.barriers)
            g.barriers[key] = bid
        return bid

    def set_loop_context(self, ctx):
        if ctx is not None and self.loop_context is not None:
            raise DSLError("Loop.iteration contexts cannot be nested")
        self.loop_context = ctx

    # ---- compilation ------------------------------------------------------------------------------
    def validate_signal_wait(self):
        """Every signal on the i-th channel from A to B must be matched by a wait on the i-th
        channel from B to A (memory channels first, then port; plan-format §5.2), and vice versa."""
        pairs = []  # per rank: {peer: [(ctype, gid), ...]}
        for g in self.gpus:
            by_peer = {}
            for ctype in ("memory", "port"):
                for gid, peer in enumerate(g.peers[ctype]):
                    by_peer.setdefault(peer, []).append((ctype, gid))
            pairs.append(by_peer)
        for a, g in enumerate(self.gpus):
            for b, chans in pairs[a].items():
                back = pairs[b].get(a, [])
                for i, (ctype, gid) in enumerate(chans):
                    nsig = g.sig.get((ctype, gid), 0)
                    nwait = g.wait.get((ctype, gid), 0)
                    if i >= len(back):
                        if nsig or nwait:
                            raise DSLError(
                                f"rank {a} uses its {ctype} channel {gid} to rank {b} for "
                                f"signal/wait, but rank {b} has no matching channel to rank {a} "
                                f"(the i-th channel from A to B pairs with the i-th from B to A)")
                        continue
                    bctype, bgid = back[i]
                    bwait = self.gpus[b].wait.get((bctype, bgid), 0)
                    if nsig != bwait:
                        if bwait > nsig:
                            raise DSLError(
                                f"wait without a signal: rank {b} waits {bwait} time(s) on its "
                                f"{bctype} channel {bgid} (to rank {a}) but rank {a} signals "
                                f"only {nsig} time(s) on the matching {ctype} channel {gid}")
                        raise DSLError(
                            f"signal without a wait: rank {a} signals {nsig} time(s) on its "
                            f"{ctype} channel {gid} (to rank {b}) but rank {b} waits only "
                            f"{bwait} time(s) on the matching {bctype} channel {bgid}; "
                            f"counters must balance")

    def post_process_operations(self):
        """Validate, fuse and insert synchronisation; idempotent (the recorded program is never
        modified, so calling it again, or calling to_json twice, changes nothing)."""
        if self._processed is not None:
            return self._processed
        if self.loop_context is not None:
            raise DSLError("compile the program after the Loop.iteration block has ended")
        self.validate_signal_wait()
        processed = []
        for g in self.gpus:
            sw_types = {i: self.switch_channels[sid][1] for i, sid in enumerate(g.switch_ids)}
            if g.tbs:
                nblocks = max(g.tbs) + 1
                # MSCCL++'s executor stores a put only to peers: no local destination there
                blocks = [passes.process_block(g.tbs.get(b, []), self.instr_fusion,
                                               self.auto_sync, sw_types,
                                               local_put=self.target == "native")
                          for b in range(nblocks)]
            else:
                blocks = []
            processed.append(blocks)
        self._processed = processed
        return processed

    # ---- serialisation -----------------------------------------------------------------------------
    def _gpu_dict(self, g, blocks):
        n = self.instances
        interleaved = self.replication_policy == ReplicationPolicy.interleaved
        cm = n if interleaved else 1
        channels = []
        for ctype in ("memory", "port"):
            if g.peers[ctype]:
                channels.append({"channel_type": ctype,
                                 "connected_to": [p for p in g.peers[ctype] for _ in range(n)]})
        for sid in g.switch_ids:
            ranks, btype = self.switch_channels[sid]
            entry = {"channel_type": "switch", "buffer_type": btype,
                     "rank_groups": [{"size": len(ranks), "ranks": list(ranks)}]}
            channels.extend(entry for _ in range(n))
        remote_buffers = [{"rank": o, "type": t, "access_channel_types": list(acc)}
                          for o, t, acc in g.rb_list]
        tbs = []
        for b, ops in enumerate(blocks):
            for i in range(n):
                bid = b * n + i
                rops = ops if n == 1 else [passes.replicate_op(op, n, i, interleaved)
                                           for op in ops]
                tbs.append(self._block_dict(g, bid, rops))
        return {
            "id": g.rank,
            "input_chunks": g.input_chunks * cm,
            "output_chunks": g.output_chunks * cm,
            "scratch_chunks": g.scratch_chunks * cm,
            "threadblocks": tbs,
            "channels": channels,
            "remote_buffers": remote_buffers,
            "semaphores": [{"init_value": v} for v in g.sems for _ in range(n)],
        }

    def _block_dict(self, g, bid, ops):
        chan_tables = {"memory": {}, "port": {}, "switch": {}}
        rb_tables = {"memory": {}, "port": {}}
        where = f"rank {g.rank} thread block {bid}"
        count = 0
        stack = list(reversed(ops))
        while stack:
            op = stack.pop()
            count += 1
            if op.body is not None:
                stack.extend(reversed(op.body))
            if self.check_limits:
                passes.check_op_limits(op, where, self.limits)
                if op.name == "barrier" and op.barrier_id >= MAX_BARRIERS:
                    raise DSLError(f"{where}: barrier id {op.barrier_id} exceeds the "
                                   f"{MAX_BARRIERS} device barriers")
            if op.ctype in chan_tables:
                t = chan_tables[op.ctype]
                for c in op.chans:
                    if c not in t:
                        t[c] = len(t)
            if op.ctype in rb_tables:
                t = rb_tables[op.ctype]
                for d in op.src + op.dst:
                    if d[0] == "R":
                        q = g.rb_index[(d[1], d[2])]
                        if q not in t:
                            t[q] = len(t)
        if self.check_limits:
            if count > self.limits["ops_per_block"]:
                raise DSLError(f"{where} has {count} operations (limit "
                               f"{self.limits['ops_per_block']} of target {self.target}, "
                               f"pipeline bodies included); spread the work over more blocks")
            for ctype, t in chan_tables.items():
                if len(t) > MAX_CHANNELS_PER_BLOCK:
                    raise DSLError(f"{where} uses {len(t)} {ctype} channels (limit "
                                   f"{MAX_CHANNELS_PER_BLOCK})")
            for ctype, t in rb_tables.items():
                if len(t) > MAX_RBUFS_PER_BLOCK:
                    raise DSLError(f"{where} addresses {len(t)} remote buffers through {ctype} "
                                   f"channels (limit {MAX_RBUFS_PER_BLOCK})")
        return {
            "id": bid,
            "ops": [_op_dict(op, g, chan_tables, rb_tables) for op in ops],
            "channels": [{"channel_type": ct, "channel_ids": list(t)}
                         for ct, t in chan_tables.items() if t],
            "remote_buffer_refs": [{"access_channel_type": ct, "remote_buffer_ids": list(t)}
                                   for ct, t in rb_tables.items() if t],
        }

    def _stub_dict(self, g, subset):
        n = self.instances
        cm = n if self.replication_policy == ReplicationPolicy.interleaved else 1
        channels = []
        for ctype in ("memory", "port"):
            peers = [p for p in g.peers[ctype] if p in subset]
            if peers:
                channels.append({"channel_type": ctype,
                                 "connected_to": [p for p in peers for _ in range(n)]})
        for sid in g.switch_ids:
            ranks, btype = self.switch_channels[sid]
            if any(r in subset for r in ranks):
                entry = {"channel_type": "switch", "buffer_type": btype,
                         "rank_groups": [{"size": len(ranks), "ranks": list(ranks)}]}
                channels.extend(entry for _ in range(n))
        return {
            "id": g.rank,
            "input_chunks": g.input_chunks * cm,
            "output_chunks": g.output_chunks * cm,
            "scratch_chunks": g.scratch_chunks * cm,
            "threadblocks": [],
            "channels": channels,
            "remote_buffers": [{"rank": o, "type": t, "access_channel_types": list(acc)}
                               for o, t, acc in g.rb_list if o in subset],
            "semaphores": [],
        }

    def to_dict(self, rank=None):
        """The plan as a dict. With ``rank`` (an int or a list of ints), only those ranks' parts
        are written in full (see ``rank_subset``)."""
        processed = self.post_process_operations()
        subset = self._subset
        if rank is not None:
            want = frozenset([rank] if isinstance(rank, int) else rank)
            for r in want:
                self.check_rank(r)
            if subset is not None and not want <= subset:
                raise DSLError(f"ranks {sorted(want - subset)} were not recorded "
                               f"(rank_subset={self.rank_subset})")
            subset = want
        gpus = []
        for g, blocks in zip(self.gpus, processed):
            if subset is None or g.rank in subset:
                gpus.append(self._gpu_dict(g, blocks))
            else:
                gpus.append(self._stub_dict(g, subset))
        plan = {
            "format": PLAN_FORMAT,
            "name": self.name,
            "collective": self.collective.name,
            "protocol": self.protocol,
            "inplace": bool(self.collective.inplace),
            "reuse_resources": bool(self.reuse_resources),
            "gpus": gpus,
            "num_threads_per_block": self.num_threads_per_block,
            "use_double_scratch_buffer": bool(self.use_double_scratch_buffer),
            "buffer_alignment": self.buffer_alignment,
            "min_message_size": self.min_message_size,
            "max_message_size": self.max_message_size,
        }
        plan.update(self.collective.extra_plan_fields())
        if subset is not None:
            plan["rank_subset"] = sorted(subset)
        return plan

    def to_json(self, indent=2, rank=None, **json_kwargs):
        return json.dumps(self.to_dict(rank=rank), indent=indent, **json_kwargs)

    def check(self, **kwargs):
        """Simulate the plan at chunk level and check that it computes its collective."""
        from ..simulator import simulate

        if self._subset is not None:
            raise DSLError("check() needs every rank; this program records only "
                           f"rank_subset={self.rank_subset}")
        return simulate(self.to_dict(), **kwargs)


def _desc_dict(d, g, op, chan_tables, rb_tables):
    kind = d[0]
    if kind == "L":
        return {"type": d[1], "index": d[3], "size": d[4]}
    if kind == "R":
        q = g.rb_index[(d[1], d[2])]
        return {"buffer_id": rb_tables[op.ctype][q], "index": d[3], "size": d[4]}
    return {"switch_channel_id": chan_tables["switch"][d[1]], "index": d[3], "size": d[4]}


_CHANNEL_ONLY = frozenset(["signal", "rlxsignal", "wait", "rlxwait", "flush"])
_REDUCE = frozenset(["re", "repkt", "recpkt", "res", "respkt", "recspkt", "rre", "rres",
                     "glres"])


def _op_dict(op, g, chan_tables, rb_tables):
    name = op.name
    d = {"name": name}
    if name == "nop":
        return d
    if name == "barrier":
        d["barrier_id"] = op.barrier_id
        d["num_threadblocks"] = op.nblocks
        return d
    if name in _CHANNEL_ONLY:
        t = chan_tables[op.ctype]
        d["channel_ids"] = [t[c] for c in op.chans]
        d["channel_type"] = op.ctype
        return d
    if name in ("sem_acquire", "sem_release"):
        d["semaphore_ids"] = list(op.sems)
        return d
    if name == "pipeline":
        d["iter_context"] = {"unit_size": op.unit, "num_chunks": op.num_chunks}
        d["ops"] = [_op_dict(o, g, chan_tables, rb_tables) for o in op.body]
        return d
    d["src_buff"] = [_desc_dict(x, g, op, chan_tables, rb_tables) for x in op.src]
    d["dst_buff"] = [_desc_dict(x, g, op, chan_tables, rb_tables) for x in op.dst]
    if op.ctype == "port":
        t = chan_tables["port"]
        d["channel_ids"] = [t[c] for c in op.chans]
    if op.ctype != "none":
        d["channel_type"] = op.ctype
    if name in _REDUCE:
        d["reduce_op"] = op.reduce_op
    if op.tbg is not None:
        d["tbg_info"] = {"tb_id": op.tbg[0], "tbg_size": op.tbg[1]}
    return d


# The names ``from mscclpp.language.program import *`` gives in MSCCL++ (its program module
# imports them); imported last because those modules import this one.
from .collectives import (  # noqa: E402,F401
    AllGather, AllReduce, AllToAll, Collective, ReduceScatter, SendRecv, TestCollective,
)
from .rank import BaseBuffer, Chunk, Semaphore  # noqa: E402,F401
from .channel import MemoryChannel, PortChannel, SwitchChannel  # noqa: E402,F401
from .thread_block_group import ThreadBlockGroup  # noqa: E402,F401
from .utils import AlgoSpec  # noqa: E402,F401
from .internal.types import ReduceOperationType, SyncType  # noqa: E402,F401
