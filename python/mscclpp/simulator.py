"""Chunk-level simulation of an execution plan (any source: our DSL, MSCCL++, hand-written).

Every rank's input/output/scratch buffer is modelled per chunk (split into sub-units when the plan
uses thread-block groups or pipelines). A value is the set of (rank, input chunk) contributions
that reached it and the reduction that combined them. Thread blocks of all ranks run as
interleaved sequential programs: a block runs until its next op is blocked (a wait without a
pending signal, a semaphore at zero, a barrier not yet full, a packet not yet written). When no
block can move the run ends; blocks left over are reported as a deadlock.

Ordering is checked too (race detection, on by default for plans up to a few thousand blocks):
each block carries a vector clock; ``nop``/``barrier`` make a block's writes visible to its own
threads, ``signal`` / ``sem_release`` publish what the block had made visible, and
``wait`` / ``sem_acquire`` import it (relaxed signals carry no data ordering). A read of plain data
written by another block (or another rank) that is not ordered before the read, a write over such
data, or a write over data another block may still be reading, is reported as a race. Packets
carry their own flags, so packet reads are never races.

At the end the output buffers are compared with what the plan's collective must produce and the
first wrong chunk is named; counters (channel signals, semaphores) must be balanced.

Before simulating, the plan is checked against every rule of the C loader (:mod:`.plan_check`).
The C library's ``mscclpp_plan_verify()`` (executor/plan_verify.c) implements the same model:
the two must give one verdict on every plan (tests/python/test_verify_agree.py).
"""

import os
from bisect import bisect_right
from math import gcd

from . import plan_check
from .plan_check import PlanError

_SIG = frozenset(["signal", "rlxsignal"])
_WAIT = frozenset(["wait", "rlxwait"])
MAX_UNITS = 1 << 26  # sub-chunks of all buffers of all ranks (plan_verify.c VERIFY_MAX_UNITS)


class CheckResult:
    """Outcome of :func:`simulate`. True when the plan computes its collective."""

    def __init__(self):
        self.ok = True
        self.errors = []
        self.warnings = []
        self.races = []
        self.first_wrong = None   # {"rank", "buffer", "index", "expected", "got"}
        self.wrong_chunks = 0
        self.deadlock = False
        self.collective = None
        self.checked_semantics = False
        self.stats = {}

    def __bool__(self):
        return self.ok

    def error(self, msg):
        self.ok = False
        self.errors.append(msg)

    def __str__(self):
        lines = []
        head = "OK" if self.ok else "FAILED"
        what = f" ({self.collective})" if self.collective else ""
        stats = ", ".join(f"{k}={v}" for k, v in self.stats.items())
        lines.append(f"{head}{what}" + (f": {stats}" if stats else ""))
        if self.ok and not self.checked_semantics and self.collective:
            lines.append(f"note: no reference result for collective '{self.collective}'; only "
                         "deadlocks, races and counter balance were checked")
        for e in self.errors:
            lines.append("error: " + e)
        for w in self.warnings:
            lines.append("warning: " + w)
        return "\n".join(lines)

    __repr__ = __str__


def read_plan(path):
    """Read a plan file as the C loader does. Raises PlanError with a sentence (a missing file,
    a directory, JSON it would refuse)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise PlanError("", f"{path}: no such file")
    except IsADirectoryError:
        raise PlanError("", f"{path}: is a directory, not a plan file")
    except OSError as e:
        raise PlanError("", f"{path}: cannot read it ({e.strerror or e})")
    return plan_check.parse(data, path)


def verify_plan(plan, **kwargs):
    """Check a plan given as a dict, a JSON string or a file path. Never raises for a bad plan:
    a missing file, bad JSON or a broken rule is an error of the result."""
    source = "<string>"
    try:
        if isinstance(plan, str) and plan.lstrip().startswith("{"):
            plan = plan_check.parse(plan, source)
        elif not isinstance(plan, dict):
            source = os.fspath(plan)
            plan = read_plan(source)
    except PlanError as e:
        res = CheckResult()
        res.error(f"invalid plan: {e}")
        return res
    return simulate(plan, source=source, **kwargs)


def _lcm(a, b):
    return a * b // gcd(a, b)


# ---- values -------------------------------------------------------------------------------------
# None: never written. (op, mask): op None for an unreduced input chunk, else the reduction.
# ("!", text): a value known to be wrong (double counted, mixed ops, garbage read).

def _combine(op, vals):
    acc = 0
    for v in vals:
        if v is None:
            return ("!", "a reduction read uninitialized data")
        if v[0] == "!":
            return v
        if v[0] is not None and v[0] != op:
            return ("!", f"{op} of a {v[0]} result (mixed reduction operations)")
        if acc & v[1] and op in ("sum", "prod"):
            return ("!", f"a {op} counted a contribution twice")
        acc |= v[1]
    return (op, acc)


class _Block:
    __slots__ = ("rank", "id", "gidx", "instrs", "pc", "done", "epoch", "vc", "pending",
                 "chan", "rb", "barrier_gen", "opseq", "blocked_on")

    def __init__(self, rank, bid, gidx):
        self.rank = rank
        self.id = bid
        self.gidx = gidx
        self.instrs = []
        self.pc = 0
        self.done = False
        self.epoch = 0
        self.vc = None
        self.pending = None
        self.chan = {}
        self.rb = {}
        self.barrier_gen = None
        self.opseq = 0
        self.blocked_on = ""


class _Sim:
    def __init__(self, plan, result, pipeline_iterations, max_resolution, race_check,
                 relaxed_orders=True):
        self.relaxed_orders = relaxed_orders
        self.plan = plan
        self.res = result
        self.K = pipeline_iterations
        self.race = race_check
        self.seq = 0
        self._parse(max_resolution)

    # ---- parsing ----------------------------------------------------------------------------------
    def _req(self, obj, key, path, types=None):
        if not isinstance(obj, dict) or key not in obj:
            raise PlanError(path, f"missing key '{key}'")
        v = obj[key]
        if types is not None and not isinstance(v, types):
            raise PlanError(f"{path}.{key}", f"expected {types}, got {type(v).__name__}")
        return v

    def _parse(self, max_resolution):
        plan = self.plan
        if not isinstance(plan, dict):
            raise PlanError("", "a plan is a JSON object")
        if "rank_subset" in plan:
            raise PlanError("rank_subset", "a partial plan (only some ranks' parts) cannot be "
                            "simulated; compile the full plan")
        self.collective = self._req(plan, "collective", "", str)
        self.inplace = bool(self._req(plan, "inplace", ""))
        gpus = self._req(plan, "gpus", "", list)
        self.N = N = len(gpus)
        if N == 0:
            raise PlanError("gpus", "no ranks")
        tbg_sizes = set()
        has_pipeline = False
        reduce_ops = set()

        def walk(ops, path):
            nonlocal has_pipeline
            for i, op in enumerate(ops):
                p = f"{path}[{i}]"
                if not isinstance(op, dict) or "name" not in op:
                    raise PlanError(p, "an op needs a 'name'")
                t = op.get("tbg_info")
                if t:
                    n = t.get("tbg_size", 1)
                    if not isinstance(n, int) or n < 1:
                        raise PlanError(p + ".tbg_info", "bad tbg_size")
                    if not 0 <= t.get("tb_id", 0) < n:
                        raise PlanError(p + ".tbg_info", "tb_id out of range")
                    tbg_sizes.add(n)
                if "reduce_op" in op:
                    reduce_ops.add(op["reduce_op"])
                if op["name"] == "pipeline":
                    has_pipeline = True
                    walk(self._req(op, "ops", p, list), p + ".ops")

        for r, g in enumerate(gpus):
            if self._req(g, "id", f"gpus[{r}]") != r:
                raise PlanError(f"gpus[{r}].id", f"must equal its position {r}")
            for b, tb in enumerate(self._req(g, "threadblocks", f"gpus[{r}]", list)):
                walk(self._req(tb, "ops", f"gpus[{r}].threadblocks[{b}]", list),
                     f"gpus[{r}].threadblocks[{b}].ops")
        R = 1
        for n in tbg_sizes:
            R = _lcm(R, n)
        if has_pipeline:
            R *= self.K
        self.R = R = max(1, min(R, max_resolution))
        self.reduce_op = reduce_ops.pop() if len(reduce_ops) == 1 else "sum"
        units = sum(g[k] for g in gpus for k in ("input_chunks", "output_chunks",
                                                 "scratch_chunks")) * R
        if units > MAX_UNITS:
            raise PlanError("", f"the plan is too large to verify: {units} sub-chunks of buffers "
                                f"in all (chunks x {R}), the limit is {MAX_UNITS}")

        self.gpus = []
        self.blocks = []
        self.bufsize = []  # per rank: {t: sub-units}
        for r, g in enumerate(gpus):
            p = f"gpus[{r}]"
            sizes = {}
            for key, t in (("input_chunks", "i"), ("output_chunks", "o"),
                           ("scratch_chunks", "s")):
                v = self._req(g, key, p, int)
                if v < 0:
                    raise PlanError(f"{p}.{key}", "must be non-negative")
                sizes[t] = v
            peers = {"memory": [], "port": []}
            switches = []
            for ci, ch in enumerate(self._req(g, "channels", p, list)):
                cp = f"{p}.channels[{ci}]"
                ct = self._req(ch, "channel_type", cp, str)
                if ct in peers:
                    for pi, peer in enumerate(self._req(ch, "connected_to", cp, list)):
                        if not isinstance(peer, int) or not 0 <= peer < N or peer == r:
                            raise PlanError(f"{cp}.connected_to[{pi}]", f"bad peer {peer!r}")
                        peers[ct].append(peer)
                elif ct == "switch":
                    bt = ch.get("buffer_type", ch.get("buff"))
                    if bt not in ("i", "o", "s"):
                        raise PlanError(cp + ".buffer_type", f"bad buffer type {bt!r}")
                    for gi, grp in enumerate(self._req(ch, "rank_groups", cp, list)):
                        ranks = self._req(grp, "ranks", f"{cp}.rank_groups[{gi}]", list)
                        if r not in ranks:
                            raise PlanError(f"{cp}.rank_groups[{gi}]",
                                            f"rank {r} is not a member of its own switch group")
                        switches.append((bt, list(ranks)))
                elif ct != "none":
                    raise PlanError(cp + ".channel_type", f"unknown channel type {ct!r}")
            rbufs = []
            for qi, rb in enumerate(self._req(g, "remote_buffers", p, list)):
                qp = f"{p}.remote_buffers[{qi}]"
                owner = self._req(rb, "rank", qp, int)
                t = self._req(rb, "type", qp, str)
                if not 0 <= owner < N or t not in ("i", "o", "s"):
                    raise PlanError(qp, f"bad remote buffer {rb}")
                rbufs.append((owner, t, set(rb.get("access_channel_types", []))))
            sems = [self._req(s, "init_value", f"{p}.semaphores[{i}]", int)
                    for i, s in enumerate(g.get("semaphores", []) or [])]
            # per access type: block-local remote ref index base -> ordinal of q among buffers
            # that list the access type
            self.gpus.append({"sizes": sizes, "peers": peers, "switches": switches,
                              "rbufs": rbufs, "sems": sems})
            self.bufsize.append({t: v * R for t, v in sizes.items()})
        nb = 0
        for r, g in enumerate(gpus):
            for b, tb in enumerate(g["threadblocks"]):
                p = f"gpus[{r}].threadblocks[{b}]"
                if tb.get("id", b) != b:
                    raise PlanError(p + ".id", f"must equal its position {b}")
                blk = _Block(r, b, nb)
                nb += 1
                for ci, ch in enumerate(tb.get("channels", []) or []):
                    cp = f"{p}.channels[{ci}]"
                    ct = self._req(ch, "channel_type", cp, str)
                    ids = self._req(ch, "channel_ids", cp, list)
                    limit = len(self.gpus[r]["switches"]) if ct == "switch" else \
                        len(self.gpus[r]["peers"].get(ct, []))
                    for k, gid in enumerate(ids):
                        if not isinstance(gid, int) or not 0 <= gid < limit:
                            raise PlanError(f"{cp}.channel_ids[{k}]",
                                            f"{gid!r} is out of range ({limit} {ct} channels)")
                    blk.chan.setdefault(ct, []).extend(ids)
                for ci, ref in enumerate(tb.get("remote_buffer_refs", []) or []):
                    cp = f"{p}.remote_buffer_refs[{ci}]"
                    ct = self._req(ref, "access_channel_type", cp, str)
                    ids = self._req(ref, "remote_buffer_ids", cp, list)
                    for k, q in enumerate(ids):
                        if not isinstance(q, int) or not 0 <= q < len(self.gpus[r]["rbufs"]):
                            raise PlanError(f"{cp}.remote_buffer_ids[{k}]",
                                            f"{q!r} is out of range")
                    blk.rb.setdefault(ct, []).extend(ids)
                self._flatten(blk, tb["ops"], f"{p}.ops", None)
                self.blocks.append(blk)
        self.NB = nb
        # channel pairing: i-th channel A->B (memory, then port) <-> i-th channel B->A
        lists = []
        for g in self.gpus:
            by_peer = {}
            for ct in ("memory", "port"):
                for gid, peer in enumerate(g["peers"][ct]):
                    by_peer.setdefault(peer, []).append((ct, gid))
            lists.append(by_peer)
        self.partner = {}
        for a in range(N):
            for b, chans in lists[a].items():
                back = lists[b].get(a, [])
                for i, (ct, gid) in enumerate(chans):
                    if i < len(back):
                        self.partner[(a, ct, gid)] = (b,) + back[i]
        self.inbox = {}  # (rank, ctype, gid) -> [vc or None]

    def _flatten(self, blk, ops, path, pipe):
        for i, op in enumerate(ops):
            p = f"{path}[{i}]"
            if op["name"] == "pipeline":
                if pipe is not None:
                    raise PlanError(p, "nested pipelines")
                ic = self._req(op, "iter_context", p, dict)
                nc = self._req(ic, "num_chunks", p + ".iter_context", int)
                if nc <= 0:
                    raise PlanError(p + ".iter_context.num_chunks", "must be positive")
                unit = -(-nc * self.R // self.K)
                for it in range(self.K):
                    self._flatten(blk, op["ops"], p + ".ops", (it * unit, unit))
            else:
                blk.instrs.append((op, p, pipe))

    # ---- buffers ------------------------------------------------------------------------------------
    def _phys(self, r, t, x):
        """In-place aliasing of input and output (plan-format §3.3)."""
        if not self.inplace:
            return t, x
        c = self.collective
        if c == "allgather":
            y = r * self.bufsize[r]["i"] + x
            if t == "i" and y < self.bufsize[r]["o"]:
                return "o", y
        elif c == "reducescatter":
            y = r * self.bufsize[r]["o"] + x
            if t == "o" and y < self.bufsize[r]["i"]:
                return "i", y
        elif t == "i" and self.bufsize[r]["i"] == self.bufsize[r]["o"]:
            return "o", x
        return t, x

    def _init_state(self):
        N, R = self.N, self.R
        self.in_base = []
        base = 0
        for r in range(N):
            self.in_base.append(base)
            base += self.bufsize[r]["i"]
        self.plain = []
        self.pkt = []
        self.wstamp = []
        self.rstamps = []
        for r in range(N):
            sz = self.bufsize[r]
            bufs = {t: [None] * n for t, n in sz.items()}
            self.plain.append(bufs)
            self.pkt.append({t: [None] * n for t, n in sz.items()})
            self.wstamp.append({t: [None] * n for t, n in sz.items()})
            self.rstamps.append({t: {} for t in sz})
        for r in range(N):
            for x in range(self.bufsize[r]["i"]):
                t, y = self._phys(r, "i", x)
                self.plain[r][t][y] = (None, 1 << (self.in_base[r] + x))
        for blk in self.blocks:
            blk.vc = [0] * self.NB if self.race else None
            blk.pending = [0] * self.NB if self.race else None
        self.sem = [list(g["sems"]) for g in self.gpus]
        self.semq = [[[None] * v for v in g["sems"]] for g in self.gpus]
        self.barriers = {}
        self.op_extra = None
        self._pkt_vc = None

    def _range(self, blk, op, d, pipe, path, packet=False):
        """Resolve a descriptor: returns (owners, t, start, length)."""
        R = self.R
        r = blk.rank
        if "type" in d:
            owners, t = [r], d["type"]
            if t not in ("i", "o", "s"):
                raise PlanError(path, f"bad buffer type {t!r}")
        elif "buffer_id" in d:
            ct = op.get("channel_type", "none")
            refs = blk.rb.get(ct, [])
            k = d["buffer_id"]
            if not isinstance(k, int) or not 0 <= k < len(refs):
                raise PlanError(path, f"buffer_id {k!r} is out of range for the block's {ct} "
                                      "remote buffer table")
            owner, t, _acc = self.gpus[r]["rbufs"][refs[k]]
            owners = [owner]
        elif "switch_channel_id" in d:
            chans = blk.chan.get("switch", [])
            k = d["switch_channel_id"]
            if not isinstance(k, int) or not 0 <= k < len(chans):
                raise PlanError(path, f"switch_channel_id {k!r} is out of range")
            t, owners = self.gpus[r]["switches"][chans[k]]
        else:
            raise PlanError(path, "a buffer descriptor needs type, buffer_id or "
                                  "switch_channel_id")
        index, size = d.get("index"), d.get("size")
        if not isinstance(index, int) or not isinstance(size, int) or index < 0 or size < 0:
            raise PlanError(path, f"bad index/size {index!r}/{size!r}")
        start, length = index * R, size * R
        for o in owners:
            if start + length > self.bufsize[o][t]:
                names = {"i": "input_chunks", "o": "output_chunks", "s": "scratch_chunks"}
                raise PlanError(path, f"chunks [{index}, {index + size}) are out of range for "
                                      f"rank {o}'s {names[t]}={self.bufsize[o][t] // R}")
        tbg = op.get("tbg_info")
        if tbg and tbg.get("tbg_size", 1) > 1:
            n, j = tbg["tbg_size"], tbg["tb_id"]
            q, rem = divmod(length, n)
            start += j * q + min(j, rem)
            length = q + (1 if j < rem else 0)
        if pipe is not None:
            off, unit = pipe
            length = max(0, min(length - off, unit))
            start += off
        return owners, t, start, length

    # ---- race detection -------------------------------------------------------------------------
    def _visible(self, stamp, blk):
        if stamp is None:
            return True
        g, e, s = stamp
        extra = self.op_extra
        if extra is not None and extra[g] > e:
            return True
        if g == blk.gidx:
            return s == self.seq or blk.epoch > e
        return blk.vc[g] > e

    def _race(self, kind, blk, path, r, t, x, stamp):
        if len(self.res.races) < 20:
            other = self.blocks[stamp[0]]
            self.res.races.append(
                f"{kind} race at {path}: rank {blk.rank} block {blk.id} and rank {other.rank} "
                f"block {other.id} both touch rank {r}'s {_BUF[t]}[{x // self.R}] without "
                f"synchronisation")
        self.res.ok = False

    def _read(self, blk, path, r, t, x):
        t, x = self._phys(r, t, x)
        if self.race:
            st = self.wstamp[r][t][x]
            if not self._visible(st, blk):
                self._race("read-after-write", blk, path, r, t, x, st)
            self.rstamps[r][t].setdefault(x, []).append((blk.gidx, blk.epoch, self.seq))
        return self.plain[r][t][x]

    def _write(self, blk, path, r, t, x, v):
        t, x = self._phys(r, t, x)
        if self.race:
            st = self.wstamp[r][t][x]
            if not self._visible(st, blk):
                self._race("write-after-write", blk, path, r, t, x, st)
            reads = self.rstamps[r][t].pop(x, None)
            if reads:
                for rs in reads:
                    if not self._visible(rs, blk):
                        self._race("write-after-read", blk, path, r, t, x, rs)
                        break
            self.wstamp[r][t][x] = (blk.gidx, blk.epoch, self.seq)
        self.plain[r][t][x] = v

    def _pkt_ready(self, r, t, start, length):
        p = self.pkt[r][t]
        for x in range(start, start + length):
            if p[x] is None:
                return False
        return True

    def _pkt_write(self, blk, path, r, t, x, v, vc):
        old = self.pkt[r][t][x]
        if old is not None and old[0] != v and len(self.res.warnings) < 20:
            self.res.warnings.append(
                f"{path}: packet slot {_BUF[t]}[{x // self.R}] of rank {r} is written twice in "
                "one launch with different data; a reader may see either")
        self.pkt[r][t][x] = (v, vc)

    # ---- execution ------------------------------------------------------------------------------
    def run(self):
        self._init_state()
        blocks = self.blocks
        progress = True
        steps = 0
        while progress:
            progress = False
            for blk in blocks:
                while not blk.done:
                    if blk.pc >= len(blk.instrs):
                        blk.done = True
                        break
                    op, path, pipe = blk.instrs[blk.pc]
                    self.seq += 1
                    if not self._step(blk, op, path, pipe):
                        break
                    blk.pc += 1
                    steps += 1
                    progress = True
        self.res.stats["ops_executed"] = steps
        stuck = [b for b in blocks if not b.done]
        if stuck:
            self.res.deadlock = True
            lines = []
            for b in stuck[:8]:
                op, path, _ = b.instrs[b.pc]
                lines.append(f"rank {b.rank} block {b.id} at {path} ({op['name']}): "
                             f"{b.blocked_on}")
            more = f" (and {len(stuck) - 8} more blocks)" if len(stuck) > 8 else ""
            self.res.error("deadlock: no block can proceed; " + "; ".join(lines) + more)

    def _sync_threads(self, blk):
        blk.epoch += 1
        if self.race:
            blk.pending[blk.gidx] = blk.epoch
            blk.vc = list(blk.pending)

    def _chan(self, blk, op, path, k):
        ct = op.get("channel_type", "none")
        table = blk.chan.get(ct, [])
        if not isinstance(k, int) or not 0 <= k < len(table):
            raise PlanError(path, f"channel id {k!r} is out of range for the block's {ct} "
                                  f"channel table ({len(table)} entries)")
        return ct, table[k]

    def _step(self, blk, op, path, pipe):
        name = op["name"]
        r = blk.rank
        if name == "nop":
            self._sync_threads(blk)
            return True
        if name in _SIG:
            ids = self._req(op, "channel_ids", path, list)
            relaxed = name == "rlxsignal" and op.get("channel_type") == "memory" \
                and not self.relaxed_orders
            for k in ids:
                ct, gid = self._chan(blk, op, path + ".channel_ids", k)
                partner = self.partner.get((r, ct, gid))
                if partner is None:
                    raise PlanError(path, f"signal on {ct} channel {gid} of rank {r}, which has "
                                          "no matching channel on the peer")
                msg = None if (relaxed or not self.race) else list(blk.pending)
                self.inbox.setdefault(partner, []).append(msg)
            return True
        if name in _WAIT:
            ids = self._req(op, "channel_ids", path, list)
            keys = [(r,) + self._chan(blk, op, path + ".channel_ids", k) for k in ids]
            for i, key in enumerate(keys):
                # a channel named twice needs two signals
                if len(self.inbox.get(key, ())) < keys[:i + 1].count(key):
                    peer = self.gpus[r]["peers"][key[1]][key[2]]
                    blk.blocked_on = f"waiting for a signal from rank {peer} on {key[1]} " \
                                     f"channel {key[2]}"
                    return False
            for key in keys:
                msg = self.inbox[key].pop(0)
                if msg is not None and self.race:
                    blk.pending = list(map(max, blk.pending, msg))
            return True
        if name == "flush":
            for k in op.get("channel_ids", []):
                self._chan(blk, op, path + ".channel_ids", k)
            return True
        if name == "sem_release":
            for s in self._sems(blk, op, path):
                self.sem[r][s] += 1
                self.semq[r][s].append(list(blk.pending) if self.race else None)
            return True
        if name == "sem_acquire":
            ids = self._sems(blk, op, path)
            need = {}
            for s in ids:
                need[s] = need.get(s, 0) + 1
            for s, n in need.items():
                if self.sem[r][s] < n:
                    blk.blocked_on = f"semaphore {s} is at {self.sem[r][s]}"
                    return False
            for s in ids:
                self.sem[r][s] -= 1
                msg = self.semq[r][s].pop(0) if self.semq[r][s] else None
                if msg is not None and self.race:
                    blk.pending = list(map(max, blk.pending, msg))
            return True
        if name == "barrier":
            bid = self._req(op, "barrier_id", path, int)
            n = self._req(op, "num_threadblocks", path, int)
            if not 0 <= bid < 16:
                raise PlanError(path + ".barrier_id", f"{bid} is out of range (16 barriers)")
            key = (r, bid)
            st = self.barriers.get(key)
            if st is None:
                st = self.barriers[key] = {"n": n, "arrived": [], "gen": 0}
            if st["n"] != n:
                raise PlanError(path, f"barrier {bid} of rank {r} is used with "
                                      f"num_threadblocks {st['n']} and {n}")
            if blk.barrier_gen is None:
                self._sync_threads(blk)
                blk.barrier_gen = st["gen"]
                st["arrived"].append(blk)
                if len(st["arrived"]) == n:
                    if self.race:
                        merged = [0] * self.NB
                        for b in st["arrived"]:
                            merged = list(map(max, merged, b.pending))
                        for b in st["arrived"]:
                            b.pending = list(merged)
                            b.vc = list(merged)
                    st["arrived"] = []
                    st["gen"] += 1
                elif len(st["arrived"]) > n:
                    raise PlanError(path, "too many blocks at a barrier")
            if st["gen"] > blk.barrier_gen:
                blk.barrier_gen = None
                return True
            blk.blocked_on = f"barrier {bid}: {len(st['arrived'])} of {n} blocks arrived"
            return False
        return self._data(blk, op, path, pipe)

    def _sems(self, blk, op, path):
        ids = self._req(op, "semaphore_ids", path, list)
        n = len(self.sem[blk.rank])
        for s in ids:
            if not isinstance(s, int) or not 0 <= s < n:
                raise PlanError(path + ".semaphore_ids", f"{s!r} is out of range ({n})")
        return ids

    def _descs(self, blk, op, key, path, pipe):
        lst = op.get(key)
        if not isinstance(lst, list) or not lst:
            raise PlanError(f"{path}.{key}", "missing or empty buffer list")
        return [self._range(blk, op, d, pipe, f"{path}.{key}[{i}]") for i, d in enumerate(lst)]

    def _data(self, blk, op, path, pipe):
        self.op_extra = None
        self._pkt_vc = None
        name = op["name"]
        r = blk.rank
        src = self._descs(blk, op, "src_buff", path, pipe)
        dst = self._descs(blk, op, "dst_buff", path, pipe)
        ct = op.get("channel_type", "none")
        red = op.get("reduce_op", "sum")

        def same_len(a, b, what):
            if a[3] != b[3]:
                raise PlanError(path, f"{what}: source and destination sizes differ")

        def blocked_pkts(ranges):
            for owners, t, s, n in ranges:
                for o in owners:
                    if not self._pkt_ready(o, t, s, n):
                        blk.blocked_on = f"waiting for packets in rank {o}'s {_BUF[t]}" \
                                         f"[{s // self.R}]"
                        return True
            return False

        def read_plain(rng):
            owners, t, s, n = rng
            o = owners[0]
            return [self._read(blk, path, o, t, x) for x in range(s, s + n)]

        def read_pkt(rng):
            # packets carry the writer's knowledge: what it read and wrote before producing
            # each packet happened before the reader's use of it (per element)
            owners, t, s, n = rng
            p = self.pkt[owners[0]][t][s:s + n]
            if self.race:
                seen = set()
                for _v, vc in p:
                    if vc is not None and id(vc) not in seen:
                        seen.add(id(vc))
                        self.op_extra = list(vc) if self.op_extra is None else \
                            list(map(max, self.op_extra, vc))
            return [v for v, _vc in p]

        def write_plain(rng, vals):
            owners, t, s, n = rng
            for o in owners:
                for i, x in enumerate(range(s, s + n)):
                    self._write(blk, path, o, t, x, vals[i])

        def write_pkt(rng, vals):
            owners, t, s, n = rng
            vc = None
            if self.race:
                if self._pkt_vc is None:
                    vc = list(blk.pending)
                    if self.op_extra is not None:
                        vc = list(map(max, vc, self.op_extra))
                    vc[blk.gidx] = max(vc[blk.gidx], blk.epoch + 1)
                    self._pkt_vc = vc
                vc = self._pkt_vc
            for o in owners:
                for i, x in enumerate(range(s, s + n)):
                    self._pkt_write(blk, path, o, t, x, vals[i], vc)

        def reduce_lists(lists):
            return [_combine(red, vs) for vs in zip(*lists)]

        if name == "copy":
            same_len(src[0], dst[0], name)
            write_plain(dst[0], read_plain(src[0]))
        elif name == "cpkt":
            same_len(src[0], dst[0], name)
            write_pkt(dst[0], read_plain(src[0]))
        elif name == "upkt":
            same_len(src[0], dst[0], name)
            if blocked_pkts(src[:1]):
                return False
            write_plain(dst[0], read_pkt(src[0]))
        elif name in ("put", "pws", "pwsf") or (name == "ppkt" and ct == "memory"):
            if len(src) != len(dst):
                raise PlanError(path, f"{name}: src_buff and dst_buff lengths differ")
            for s, d in zip(src, dst):
                same_len(s, d, name)
                vals = read_plain(s)
                (write_pkt if name == "ppkt" else write_plain)(d, vals)
            if name in ("pws", "pwsf") and ct == "port":
                # the proxy delivers the data before the flag: the signal covers the put (on
                # memory channels pws/pwsf are plain puts, plan-format P9)
                for k in self._req(op, "channel_ids", path, list):
                    cty, gid = self._chan(blk, op, path + ".channel_ids", k)
                    partner = self.partner.get((r, cty, gid))
                    if partner is None:
                        raise PlanError(path, f"{name} on {cty} channel {gid} of rank {r}, "
                                              "which has no matching channel on the peer")
                    msg = None
                    if self.race:
                        msg = list(blk.pending)
                        msg[blk.gidx] = max(msg[blk.gidx], blk.epoch + 1)
                    self.inbox.setdefault(partner, []).append(msg)
        elif name == "ppkt":  # port: relays packets
            if len(src) != len(dst):
                raise PlanError(path, "ppkt: src_buff and dst_buff lengths differ")
            if blocked_pkts(src):
                return False
            for s, d in zip(src, dst):
                same_len(s, d, name)
                write_pkt(d, read_pkt(s))
        elif name == "rppkt":
            if blocked_pkts(src[:1]):
                return False
            vals = read_pkt(src[0])
            for d in dst:
                same_len(src[0], d, name)
                write_pkt(d, vals)
        elif name == "get":
            if len(src) != len(dst):
                raise PlanError(path, "get: src_buff and dst_buff lengths differ")
            for s, d in zip(src, dst):
                same_len(s, d, name)
                write_plain(d, read_plain(s))
        elif name in ("re", "res", "rre", "rres"):
            for s in src[1:]:
                same_len(src[0], s, name)
            vals = reduce_lists([read_plain(s) for s in src])
            nlocal = 1
            write_plain(dst[0], vals)
            for d in dst[nlocal:]:
                same_len(src[0], d, name)
                write_plain(d, vals)
        elif name in ("repkt", "recpkt", "respkt", "recspkt"):
            if blocked_pkts(src[1:]):
                return False
            for s in src[1:]:
                same_len(src[0], s, name)
            vals = reduce_lists([read_plain(src[0])] + [read_pkt(s) for s in src[1:]])
            write_plain(dst[0], vals)
            rest = dst[1:]
            if name in ("recpkt", "recspkt"):
                if not rest:
                    raise PlanError(path, f"{name} needs a packet copy destination")
                write_pkt(rest[0], vals)
                rest = rest[1:]
            for d in rest:
                same_len(src[0], d, name)
                write_pkt(d, vals)
        elif name in ("glres", "glre"):
            owners, t, s, n = src[0]
            lists = [[self._read(blk, path, o, t, x) for x in range(s, s + n)] for o in owners]
            vals = reduce_lists(lists)
            same_len(src[0], dst[0], name)
            write_plain(dst[0], vals)
        elif name == "gstore":
            same_len(src[0], dst[0], name)
            write_plain(dst[0], read_plain(src[0]))
        elif name == "gstorepkt":
            if blocked_pkts(src[:1]):
                return False
            same_len(src[0], dst[0], name)
            write_pkt(dst[0], read_pkt(src[0]))
        else:
            raise PlanError(path + ".name", f"unknown operation {name!r}")
        return True

    def _check_end_of_launch(self):
        """When a rank's kernel ends its caller may read the output and reuse the input: every
        write into its output and every read of its input by another block must be ordered
        before the end of the rank's kernel."""
        ends = [[0] * self.NB for _ in range(self.N)]
        for b in self.blocks:
            e = ends[b.rank]
            for i, v in enumerate(b.pending):
                if v > e[i]:
                    e[i] = v
            e[b.gidx] = max(e[b.gidx], b.epoch + 1)
        found = 0
        for r in range(self.N):
            end = ends[r]
            checks = [("o", "written", self.wstamp[r], None)]
            checks.append(("i", "read", None, self.rstamps[r]))
            for t, verb, wst, rst in checks:
                if t not in self.plain[r]:
                    continue
                n = len(self.plain[r][t])
                for x in range(n):
                    stamps = [wst[t][x]] if wst is not None else rst[t].get(x, ())
                    for st in stamps:
                        if st is not None and end[st[0]] <= st[1]:
                            other = self.blocks[st[0]]
                            if found < 10:
                                self.res.races.append(
                                    f"end-of-launch race: rank {r}'s {_BUF[t]}[{x // self.R}] is "
                                    f"{verb} by rank {other.rank} block {other.id}, but rank {r} "
                                    "can finish before that is known to be complete (a signal "
                                    "after a block-wide sync and a matching wait are missing)")
                            found += 1
                            self.res.ok = False
                            break

    # ---- checking ---------------------------------------------------------------------------------
    def _leaf(self, j, c, u):
        return (None, 1 << (self.in_base[j] + c * self.R + u))

    def expected(self, r, x):
        """Expected value of output sub-unit x of rank r, or False if unknown."""
        N, R = self.N, self.R
        c, u = divmod(x, R)
        col = self.collective
        sizes = [g["sizes"] for g in self.gpus]
        if col == "allgather":
            cf = sizes[0]["i"]
            if cf == 0:
                return False
            return self._leaf(c // cf, c % cf, u)
        if col == "reduce" and r != self.plan.get("root", 0):
            return False   # only the root's output is defined
        if col in ("allreduce", "reduce"):
            if N == 1:
                return self._leaf(0, c, u)
            m = 0
            for j in range(N):
                m |= 1 << (self.in_base[j] + c * R + u)
            return (self.reduce_op, m)
        if col == "reducescatter":
            cf = sizes[r]["o"]
            if N == 1:
                return self._leaf(0, r * cf + c, u)
            m = 0
            for j in range(N):
                m |= 1 << (self.in_base[j] + (r * cf + c) * R + u)
            return (self.reduce_op, m)
        if col == "alltoall":
            cf = sizes[0]["i"] // N
            if cf == 0:
                return False
            return self._leaf(c // cf, r * cf + c % cf, u)
        if col == "sendrecv":
            return self._leaf((r - 1) % N, c, u)
        if col == "broadcast":
            return self._leaf(self.plan.get("root", 0), c, u)
        return False

    def _describe(self, v):
        if v is None:
            return "nothing (never written)"
        if v[0] == "!":
            return v[1]
        parts = []
        m = v[1]
        ids = []
        i = 0
        while m:
            if m & 1:
                ids.append(i)
            m >>= 1
            i += 1
        by_chunk = {}
        for b in ids:
            j = bisect_right(self.in_base, b) - 1
            off = b - self.in_base[j]
            c, u = divmod(off, self.R)
            key = (c, u) if self.R > 1 else (c,)
            by_chunk.setdefault(key, []).append(j)
        for key, ranks in sorted(by_chunk.items()):
            where = f"input chunk {key[0]}" + (f" (part {key[1]}/{self.R})" if self.R > 1
                                               else "")
            parts.append(f"{where} of rank{'s' if len(ranks) > 1 else ''} "
                         f"{ranks if len(ranks) > 1 else ranks[0]}")
        body = "; ".join(parts)
        return body if v[0] is None else f"{v[0]} of [{body}]"

    def check_results(self):
        res = self.res
        res.collective = self.collective
        known = self.collective in ("allgather", "allreduce", "reducescatter", "alltoall",
                                    "sendrecv", "broadcast", "reduce")
        # counters must be balanced
        for key, q in self.inbox.items():
            if q:
                r, ct, gid = key
                peer = self.gpus[r]["peers"][ct][gid]
                res.error(f"unbalanced: rank {r} has {len(q)} unconsumed signal(s) on its {ct} "
                          f"channel {gid} (from rank {peer})")
        for r, vals in enumerate(self.sem):
            for s, v in enumerate(vals):
                if v != self.gpus[r]["sems"][s]:
                    res.error(f"unbalanced: semaphore {s} of rank {r} ends at {v}, not at its "
                              f"initial value {self.gpus[r]['sems'][s]}")
        if self.race:
            self._check_end_of_launch()
        if self.race and res.races:
            res.errors.extend(res.races)
        if not known:
            return
        res.checked_semantics = True
        if self.collective == "allgather" and len({g["sizes"]["i"] for g in self.gpus}) != 1:
            res.error("ranks have different input_chunks")
            return
        for r in range(self.N):
            n = self.bufsize[r]["o"]
            for x in range(n):
                exp = self.expected(r, x)
                if exp is False:
                    continue
                t, y = self._phys(r, "o", x)
                got = self.plain[r][t][y]
                if got != exp:
                    res.wrong_chunks += 1
                    if res.first_wrong is None:
                        res.first_wrong = {"rank": r, "buffer": "output", "index": x // self.R,
                                           "expected": self._describe(exp),
                                           "got": self._describe(got)}
        if res.first_wrong is not None:
            fw = res.first_wrong
            res.error(f"wrong result: rank {fw['rank']} output chunk {fw['index']} holds "
                      f"{fw['got']}, expected {fw['expected']} ({res.wrong_chunks} wrong "
                      f"sub-chunk(s) in all)")
        if not self.inplace:
            for r in range(self.N):
                for x in range(self.bufsize[r]["i"]):
                    if self.plain[r]["i"][x] != (None, 1 << (self.in_base[r] + x)):
                        res.warnings.append(f"rank {r}'s input chunk {x // self.R} is modified "
                                            "by an out-of-place plan")
                        break


_BUF = {"i": "input", "o": "output", "s": "scratch"}


def simulate(plan, race_check=None, pipeline_iterations=2, max_resolution=64,
             strict_relaxed=False, source="<string>"):
    """Simulate ``plan`` (a dict) and check it. Returns a :class:`CheckResult`.

    race_check: True/False, or None to check races when the plan has at most 4096 blocks.
    pipeline_iterations: how many iterations each pipeline is run for.
    strict_relaxed: relaxed signals (``rlxsignal``) give no memory ordering in the GPU memory
    model, but MSCCL++ programs (NVLS ones included) use them after a block sync to publish
    data. By default such plans pass with a warning; with ``strict_relaxed=True`` it is an error.
    """
    try:
        plan = plan_check.check(plan, source)
    except PlanError as e:
        res = CheckResult()
        res.error(f"invalid plan: {e}")
        return res
    res = _simulate(plan, race_check, pipeline_iterations, max_resolution, not strict_relaxed)
    if res.ok and not strict_relaxed and res.stats.get("race_check"):
        strict = _simulate(plan, True, pipeline_iterations, max_resolution, False)
        if strict.races:
            res.warnings.append("data is ordered only by relaxed signals (rlxsignal), which do "
                                "not order memory in the GPU memory model; first instance: "
                                + strict.races[0])
    return res


def _simulate(plan, race_check, pipeline_iterations, max_resolution, relaxed_orders):
    res = CheckResult()
    try:
        if race_check is None:
            nblocks = sum(len(g.get("threadblocks", [])) for g in plan.get("gpus", []))
            race_check = nblocks <= 4096
        sim = _Sim(plan, res, pipeline_iterations, max_resolution, race_check, relaxed_orders)
        res.collective = sim.collective
        res.stats = {"ranks": sim.N, "blocks": sim.NB, "resolution": sim.R,
                     "race_check": bool(race_check)}
        sim.run()
        if not res.deadlock:
            sim.check_results()
        elif res.races:
            res.errors.extend(res.races)
    except PlanError as e:
        res.error(f"invalid plan: {e}")
    return res
