"""The rules a plan must meet to load, as the C loader (executor/plan_load.c) checks them.

``check(plan)`` raises :class:`PlanError` naming the JSON path and the rule for the first rule a
plan breaks, and returns the plan normalised for the simulator (integral reals read as integers,
optional keys given as null dropped, a null name replaced). ``parse(text, source)`` reads JSON as
jansson does (no NaN/Infinity, no NUL in strings, integers beyond 64-bit signed read as reals).

This is the loader's twin: `python3 -m mscclpp verify` and ``mscclpp_plan_verify()`` must give
one verdict on every plan (tests/python/test_verify_agree.py runs both over a shared corpus).
A rule changed in one must change in the other.
"""

import json
import math

# plan.h limits
MAX_OPS_PER_BLOCK = 65535
MAX_CHANNELS_PER_BLOCK = 16
MAX_RBUFS_PER_BLOCK = 16
MAX_CHANNELS_PER_OP = 8
MAX_DESCS = 72
MAX_SEMS_PER_OP = 16
MAX_BARRIERS = 16
MAX_BLOCKS = 1024
MAX_THREADS = 1024
MAX_SWITCH_MEMBERS = 64
# plan_load.c limits
MAX_RANKS = 1 << 20
MAX_GPU_CHANNELS = 65535
MAX_GPU_RBUFS = 65535
MAX_GPU_SEMS = 65535
MAX_ALIGNMENT = 1 << 30
MAX_SCRATCH_RATIO = 256
U32 = (1 << 32) - 1
U64 = (1 << 64) - 1
I32 = (1 << 31) - 1

KEYS = {
    "top": ("name", "collective", "protocol", "inplace", "reuse_resources",
            "use_double_scratch_buffer", "buffer_alignment", "min_message_size",
            "max_message_size", "num_threads_per_block", "gpus", "format", "root",
            "rank_subset"),
    "gpu": ("id", "input_chunks", "output_chunks", "scratch_chunks", "threadblocks", "channels",
            "remote_buffers", "semaphores"),
    "gpu_chan": ("channel_type", "connected_to", "buffer_type", "rank_groups", "buff"),
    "rank_group": ("size", "ranks"),
    "rbuf": ("rank", "type", "access_channel_types"),
    "sem": ("init_value",),
    "block": ("id", "ops", "channels", "remote_buffer_refs"),
    "block_chan": ("channel_type", "channel_ids", "buff"),
    "block_rbuf": ("access_channel_type", "remote_buffer_ids"),
    "op": ("name", "channel_type", "channel_ids", "src_buff", "dst_buff", "tbg_info", "barrier_id",
           "num_threadblocks", "semaphore_ids", "iter_context", "ops", "reduce_op",
           # MSCCL++'s unfused switch reduce writes these; its reader ignores them
           "buffer_type", "buffer_offset", "dst_chunk", "size"),
    "desc": ("type", "buffer_id", "switch_channel_id", "index", "size", "rank"),
    "iter": ("unit_size", "num_chunks"),
    "tbg": ("tb_id", "tbg_size"),
}
COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce",
               "sendrecv", "test", "custom")
REFERENCE_COLLECTIVES = frozenset(COLLECTIVES[:7])
OLD_KEYS = ("inputChunks", "outputChunks", "scratchChunks", "chunkGroups", "connectedTo",
            "threadBlocks")
CHANNELS = ("none", "memory", "port", "switch")
NONE, MEMORY, PORT, SWITCH = range(4)
BUFS = {"i": 0, "o": 1, "s": 2}
CHUNK_KEYS = ("input_chunks", "output_chunks", "scratch_chunks")
LOCAL, REMOTE, SWITCHD = range(3)
DESC_KEY = ("type", "buffer_id", "switch_channel_id")
DESC_WHAT = ('a local buffer ("type")', 'a remote buffer ("buffer_id")',
             'a switch channel ("switch_channel_id")')
REDOPS = ("sum", "prod", "min", "max")

_M, _P, _S = 1 << MEMORY, 1 << PORT, 1 << SWITCH
# name: (channel kinds, min src, min dst, needs channel ids, pairs src[i] with dst[i])
RULES = {
    "nop": (0, 0, 0, False, False), "barrier": (0, 0, 0, False, False),
    "put": (_M | _P, 1, 1, False, True), "ppkt": (_M | _P, 1, 1, False, True),
    "rppkt": (_M | _P, 1, 1, False, False), "pws": (_M | _P, 1, 1, False, True),
    "pwsf": (_M | _P, 1, 1, False, True), "get": (_M, 1, 1, False, True),
    "copy": (0, 1, 1, False, False), "cpkt": (0, 1, 1, False, False),
    "upkt": (0, 1, 1, False, False), "signal": (_M | _P, 0, 0, True, False),
    "wait": (_M | _P, 0, 0, True, False), "flush": (_P, 0, 0, True, False),
    "re": (0, 1, 1, False, False), "repkt": (0, 1, 1, False, False),
    "recpkt": (0, 1, 2, False, False), "res": (_M, 1, 1, False, False),
    "respkt": (_M, 1, 1, False, False), "recspkt": (_M, 1, 2, False, False),
    "rre": (_M, 1, 1, False, False), "rres": (_M, 1, 1, False, False),
    "glres": (_S, 1, 1, False, False), "rlxsignal": (_M | _P, 0, 0, True, False),
    "rlxwait": (_M | _P, 0, 0, True, False), "pipeline": (0, 0, 0, False, False),
    "sem_release": (0, 0, 0, False, False), "sem_acquire": (0, 0, 0, False, False),
    "gstore": (_S, 1, 1, False, False), "gstorepkt": (_S, 1, 1, False, False),
    "glre": (_S, 1, 1, False, False),
}


class PlanError(Exception):
    def __init__(self, path, msg):
        super().__init__(f"{path}: {msg}" if path else msg)
        self.path = path
        self.msg = msg


# ---- reading JSON as jansson does ---------------------------------------------------------------

class _BigInts(Exception):
    pass


def _no_constant(name):
    raise ValueError(f"invalid token {name!r}")


def _scan(v):
    """Refuse what jansson refuses and Python's json accepts: NUL and lone surrogates."""
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, float) and not math.isfinite(x):
            raise ValueError("real number overflow")
        if isinstance(x, str):
            if "\0" in x:
                raise ValueError("\\u0000 is not allowed")
            if any(0xD800 <= ord(c) <= 0xDFFF for c in x):
                raise ValueError("invalid Unicode escape")
        elif isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)


def parse(text, source="<string>"):
    """JSON text (str or bytes) -> value; PlanError "JSON syntax error ..." when jansson would
    refuse it. A document holding an integer beyond 64-bit signed has every integer read as a
    real, as plan_load.c does."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise PlanError("", f"{source}: JSON syntax error: the file is not UTF-8 ({e})")

    def big(s):
        i = int(s)
        if not -(1 << 63) <= i < (1 << 63):
            raise _BigInts
        return i

    try:
        try:
            v = json.loads(text, parse_constant=_no_constant, parse_int=big)
        except _BigInts:
            v = json.loads(text, parse_constant=_no_constant, parse_int=lambda s: float(int(s)))
        _scan(v)
    except OverflowError:
        raise PlanError("", f"{source}: JSON syntax error: real number overflow")
    except RecursionError:
        raise PlanError("", f"{source}: JSON syntax error: nested too deeply")
    except ValueError as e:
        line = getattr(e, "lineno", None)
        col = getattr(e, "colno", None)
        where = f" at line {line}, column {col}" if line else ""
        msg = getattr(e, "msg", str(e))
        raise PlanError("", f"{source}: JSON syntax error{where}: {msg}")
    if not isinstance(v, (dict, list)):
        raise PlanError("", f"{source}: JSON syntax error: '[' or '{{' expected")
    return v


def _jtype(v):
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if v is None:
        return "null"
    return "a value"


def _near_dist(a, b):
    n, m = len(a), len(b)
    if n > 63 or m > 63 or abs(n - m) > 2:
        return 3
    d = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        d[i][0] = i
    for j in range(m + 1):
        d[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            best = min(d[i - 1][j - 1] + (a[i - 1] != b[j - 1]), d[i - 1][j] + 1, d[i][j - 1] + 1)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                best = min(best, d[i - 2][j - 2] + 1)
            d[i][j] = best
    return min(d[n][m], 3)


def nearest(s, names):
    """The name nearest to ``s`` (at most 2 edits away), or None."""
    best, bd = None, 3
    for n in names:
        d = _near_dist(s, n)
        if d < bd:
            best, bd = n, d
    return best


def _join(path, key):
    return f"{path}.{key}" if path else key


# ---- the loader ---------------------------------------------------------------------------------

class _Loader:
    def __init__(self, source):
        self.source = source

    # typed readers (plan_load.c: u64_val, get_member, get_u64, get_bool, get_typed ...)
    def u64(self, v, path, lo=0, hi=U64):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise PlanError(path, f"expected a non-negative integer, got {_jtype(v)}")
        if isinstance(v, float):
            if not math.isfinite(v) or v != math.floor(v):
                raise PlanError(path, f"{v:g} is not an integer")
            if v < 0:
                raise PlanError(path, f"{v:.0f} is negative (expected {lo}..{hi})")
            if v > 18446744073709551616.0:
                raise PlanError(path, f"{v:.0f} does not fit in 64 bits")
            x = U64 if v == 18446744073709551616.0 else int(v)
        else:
            if v < 0:
                raise PlanError(path, f"{v} is negative (expected {lo}..{hi})")
            x = v
        if x < lo or x > hi:
            raise PlanError(path, f"{x} is out of range (expected {lo}..{hi})")
        return x

    def member(self, obj, key, path, required):
        v = obj.get(key)
        if v is None and not required:
            return None
        if key not in obj and required:
            raise PlanError(_join(path, key), "required key is missing")
        return v

    def get_u64(self, obj, key, path, required, lo=0, hi=U64, default=0):
        v = self.member(obj, key, path, required)
        if v is None and (not required or key not in obj):
            return default
        return self.u64(v, _join(path, key), lo, hi)

    def get_bool(self, obj, key, path, required, default=False):
        v = self.member(obj, key, path, required)
        if v is None and not required:
            return default
        if not isinstance(v, bool):
            raise PlanError(_join(path, key), f"expected true or false, got {_jtype(v)}")
        return v

    def get_typed(self, obj, key, path, required, typ, what):
        v = self.member(obj, key, path, required)
        if v is None and not required:
            return None
        if not isinstance(v, typ) or isinstance(v, bool):
            raise PlanError(_join(path, key), f"expected {what}, got {_jtype(v)}")
        return v

    def get_str(self, obj, key, path, required):
        return self.get_typed(obj, key, path, required, str, "a string")

    def get_array(self, obj, key, path, required):
        return self.get_typed(obj, key, path, required, list, "an array")

    def get_object(self, obj, key, path, required):
        return self.get_typed(obj, key, path, required, dict, "an object")

    @staticmethod
    def expect_object(v, path):
        if not isinstance(v, dict):
            raise PlanError(path, f"expected an object, got {_jtype(v)}")

    @staticmethod
    def check_keys(obj, path, kind):
        known = KEYS[kind]
        for key in obj:
            if key in known:
                continue
            near = nearest(key, known)
            if near:
                raise PlanError(_join(path, key), f'unknown key (did you mean "{near}"?)')
            raise PlanError(_join(path, key), f"unknown key (expected {', '.join(known)})")

    @staticmethod
    def check_old_format(obj, path):
        if not isinstance(obj, dict):
            return
        for k in OLD_KEYS:
            if k in obj:
                raise PlanError(_join(path, k),
                                "the old MSCCL++ plan format (camelCase keys) is not supported; "
                                "regenerate the plan with the MSCCL++ 0.9 DSL or newer")

    @staticmethod
    def chan_val(v, path, allow_none, allow_switch):
        if not isinstance(v, str):
            raise PlanError(path, f"expected a string, got {_jtype(v)}")
        if v not in CHANNELS:
            raise PlanError(path, f'unknown channel type "{v}" (expected memory, port, switch'
                                  f'{" or none" if allow_none else ""})')
        t = CHANNELS.index(v)
        if t == NONE and not allow_none:
            raise PlanError(path, 'channel type "none" is not allowed here')
        if t == SWITCH and not allow_switch:
            raise PlanError(path, 'channel type "switch" is not allowed here (expected memory or '
                                  'port)')
        return t

    @staticmethod
    def buf_val(v, path):
        if not isinstance(v, str):
            raise PlanError(path, f'expected "i", "o" or "s", got {_jtype(v)}')
        if v not in BUFS:
            raise PlanError(path, f'unknown buffer type "{v}" (expected "i", "o" or "s")')
        return v

    def get_buf(self, obj, key, path):
        self.member(obj, key, path, True)
        return self.buf_val(obj[key], _join(path, key))

    # ---- gpus[r] (pass 1) -----------------------------------------------------------------------
    def gpu(self, r, g, path, N):
        self.expect_object(g, path)
        self.check_old_format(g, path)
        self.check_keys(g, path, "gpu")
        gid = self.get_u64(g, "id", path, True)
        if gid != r:
            raise PlanError(f"{path}.id", f"{gid} does not match its position {r} in gpus")
        out = {"id": r}
        for k in CHUNK_KEYS:
            out[k] = self.get_u64(g, k, path, True, 0, U32)
        chans = self.get_array(g, "channels", path, True)
        cp = f"{path}.channels"
        count = [0, 0, 0, 0]
        for i, e in enumerate(chans):
            p = f"{cp}[{i}]"
            self.expect_object(e, p)
            self.check_old_format(e, p)
            self.check_keys(e, p, "gpu_chan")
            self.member(e, "channel_type", p, True)
            t = self.chan_val(e["channel_type"], f"{p}.channel_type", False, True)
            lst = self.get_array(e, "rank_groups" if t == SWITCH else "connected_to", p, True)
            count[t] += len(lst)
        for t in (MEMORY, PORT, SWITCH):
            if count[t] > MAX_GPU_CHANNELS:
                raise PlanError(cp, f"{count[t]} {CHANNELS[t]} channels exceed the limit of "
                                    f"{MAX_GPU_CHANNELS} per rank")
        peers = {MEMORY: [], PORT: []}
        switches = []
        norm = []
        for i, e in enumerate(chans):
            p = f"{cp}[{i}]"
            t = CHANNELS.index(e["channel_type"])
            if t == SWITCH:
                groups_out = []
                bt = self.get_buf(e, "buffer_type", p)
                groups = self.get_array(e, "rank_groups", p, True)
                for gi, grp in enumerate(groups):
                    gp = f"{p}.rank_groups[{gi}]"
                    self.expect_object(grp, gp)
                    self.check_keys(grp, gp, "rank_group")
                    ranks = self.get_array(grp, "ranks", gp, True)
                    rp = f"{gp}.ranks"
                    if not ranks:
                        raise PlanError(rp, "a switch channel needs at least one rank")
                    if len(ranks) > MAX_SWITCH_MEMBERS:
                        raise PlanError(rp, f"{len(ranks)} ranks exceed the limit of "
                                            f"{MAX_SWITCH_MEMBERS} per switch channel")
                    members = []
                    for j, v in enumerate(ranks):
                        x = self.u64(v, f"{rp}[{j}]")
                        if x >= N:
                            raise PlanError(f"{rp}[{j}]", f"rank {x} is out of range (the plan "
                                                          f"has {N} ranks)")
                        if x in members:
                            raise PlanError(f"{rp}[{j}]", f"rank {x} is listed twice")
                        members.append(x)
                    if r not in members:
                        raise PlanError(rp, f"rank {r} is not a member of its own switch channel")
                    switches.append((bt, members))
                    groups_out.append({"size": len(members), "ranks": members})
                norm.append({"channel_type": "switch", "buffer_type": bt,
                             "rank_groups": groups_out})
            else:
                lp = f"{p}.connected_to"
                norm.append({"channel_type": CHANNELS[t], "connected_to": []})
                for j, v in enumerate(e["connected_to"]):
                    x = self.u64(v, f"{lp}[{j}]")
                    if x >= N:
                        raise PlanError(f"{lp}[{j}]", f"peer rank {x} is out of range (the plan "
                                                      f"has {N} ranks)")
                    if x == r:
                        raise PlanError(f"{lp}[{j}]", f"a channel to the rank itself ({r})")
                    peers[t].append(x)
                    norm[-1]["connected_to"].append(x)
        out["channels"] = norm
        rbufs_in = self.get_array(g, "remote_buffers", path, True)
        rp = f"{path}.remote_buffers"
        if len(rbufs_in) > MAX_GPU_RBUFS:
            raise PlanError(rp, f"{len(rbufs_in)} remote buffers exceed the limit of "
                                f"{MAX_GPU_RBUFS} per rank")
        rbufs = []
        for i, e in enumerate(rbufs_in):
            p = f"{rp}[{i}]"
            self.expect_object(e, p)
            self.check_keys(e, p, "rbuf")
            owner = self.get_u64(e, "rank", p, True)
            if owner >= N:
                raise PlanError(f"{p}.rank", f"owner rank {owner} is out of range (the plan has "
                                             f"{N} ranks)")
            if owner == r:
                raise PlanError(f"{p}.rank", f"a remote buffer of the rank itself ({r})")
            bt = self.get_buf(e, "type", p)
            acc = self.get_array(e, "access_channel_types", p, True)
            access = 0
            for j, v in enumerate(acc):
                access |= 1 << self.chan_val(v, f"{p}.access_channel_types[{j}]", False, False)
            rbufs.append((owner, bt, access))
        sems_in = self.get_array(g, "semaphores", path, False)
        sems = []
        if sems_in is not None:
            sp = f"{path}.semaphores"
            if len(sems_in) > MAX_GPU_SEMS:
                raise PlanError(sp, f"{len(sems_in)} semaphores exceed the limit of "
                                    f"{MAX_GPU_SEMS} per rank")
            for i, e in enumerate(sems_in):
                p = f"{sp}[{i}]"
                self.expect_object(e, p)
                self.check_keys(e, p, "sem")
                sems.append(self.get_u64(e, "init_value", p, True, 0, I32))
        self.get_array(g, "threadblocks", path, True)
        return {"out": out, "peers": peers, "switches": switches, "rbufs": rbufs, "sems": sems,
                "n_blocks": 0}

    # ---- threadblocks and ops (pass 2) --------------------------------------------------------
    def block(self, r, b, jb, path, G):
        g = G[r]
        self.expect_object(jb, path)
        self.check_keys(jb, path, "block")
        bid = self.get_u64(jb, "id", path, True)
        if bid != b:
            raise PlanError(f"{path}.id", f"{bid} does not match its position {b} in "
                                          "threadblocks (ids must be 0..n-1 in order)")
        chan = {MEMORY: [], PORT: [], SWITCH: []}
        rbuf = {MEMORY: [], PORT: []}
        norm_chans, norm_refs = [], []
        chans = self.get_array(jb, "channels", path, True)
        for i, e in enumerate(chans):
            p = f"{path}.channels[{i}]"
            self.expect_object(e, p)
            self.check_keys(e, p, "block_chan")
            self.member(e, "channel_type", p, True)
            t = self.chan_val(e["channel_type"], f"{p}.channel_type", False, True)
            ids = self.get_array(e, "channel_ids", p, True)
            norm_chans.append({"channel_type": CHANNELS[t], "channel_ids": []})
            n_chan = len(g["switches"]) if t == SWITCH else len(g["peers"][t])
            for j, v in enumerate(ids):
                q = f"{p}.channel_ids[{j}]"
                c = self.u64(v, q)
                if c >= n_chan:
                    what = "channels (rank groups)" if t == SWITCH else "channels"
                    raise PlanError(q, f"{CHANNELS[t]} channel {c} is out of range (gpus[{r}] "
                                       f"has {n_chan} {CHANNELS[t]} {what})")
                if len(chan[t]) >= MAX_CHANNELS_PER_BLOCK:
                    raise PlanError(q, f"more than {MAX_CHANNELS_PER_BLOCK} {CHANNELS[t]} "
                                       "channels in one thread block")
                chan[t].append(c)
                norm_chans[-1]["channel_ids"].append(c)
        refs = self.get_array(jb, "remote_buffer_refs", path, False)
        for i, e in enumerate(refs or []):
            p = f"{path}.remote_buffer_refs[{i}]"
            self.expect_object(e, p)
            self.check_keys(e, p, "block_rbuf")
            self.member(e, "access_channel_type", p, True)
            t = self.chan_val(e["access_channel_type"], f"{p}.access_channel_type", False, False)
            ids = self.get_array(e, "remote_buffer_ids", p, True)
            norm_refs.append({"access_channel_type": CHANNELS[t], "remote_buffer_ids": []})
            for j, v in enumerate(ids):
                q = f"{p}.remote_buffer_ids[{j}]"
                x = self.u64(v, q)
                if x >= len(g["rbufs"]):
                    raise PlanError(q, f"remote buffer {x} is out of range (gpus[{r}] has "
                                       f"{len(g['rbufs'])} remote buffers)")
                if not g["rbufs"][x][2] & (1 << t):
                    raise PlanError(q, f"remote buffer {x} is not accessible through "
                                       f"{CHANNELS[t]} channels")
                if len(rbuf[t]) >= MAX_RBUFS_PER_BLOCK:
                    raise PlanError(q, f"more than {MAX_RBUFS_PER_BLOCK} {CHANNELS[t]}-access "
                                       "remote buffers in one thread block")
                rbuf[t].append(x)
                norm_refs[-1]["remote_buffer_ids"].append(x)
        ops = self.get_array(jb, "ops", path, True)
        n = 0
        for op in ops:
            n += 1
            if isinstance(op, dict) and op.get("name") == "pipeline" and \
                    isinstance(op.get("ops"), list):
                n += len(op["ops"])
        if n > MAX_OPS_PER_BLOCK:
            raise PlanError(f"{path}.ops", f"{n} ops (pipeline bodies included) exceed the "
                                           f"limit of {MAX_OPS_PER_BLOCK} per thread block")
        blk = {"chan": chan, "rbuf": rbuf}
        out_ops = [self.op(r, blk, op, f"{path}.ops[{i}]", G, False) for i, op in enumerate(ops)]
        out = {"id": b, "channels": norm_chans, "ops": out_ops}
        if refs is not None:
            out["remote_buffer_refs"] = norm_refs
        return out, blk

    @staticmethod
    def desc_expect(name, dst, pos):
        if name in ("copy", "cpkt", "upkt"):
            return LOCAL if pos == 0 else None
        if name in ("put", "pws", "pwsf", "ppkt"):
            return REMOTE if dst else LOCAL
        if name == "rppkt":
            return REMOTE if dst else (LOCAL if pos == 0 else None)
        if name == "get":
            return LOCAL if dst else REMOTE
        if name in ("re", "repkt"):
            return LOCAL if not dst else (LOCAL if pos == 0 else None)
        if name == "recpkt":
            return LOCAL if not dst else (LOCAL if pos <= 1 else None)
        if name in ("res", "respkt"):
            return LOCAL if not dst else (LOCAL if pos == 0 else REMOTE)
        if name == "recspkt":
            return LOCAL if not dst else (LOCAL if pos <= 1 else REMOTE)
        if name == "rre":
            return (LOCAL if pos == 0 else None) if dst else (LOCAL if pos == 0 else REMOTE)
        if name == "rres":
            return LOCAL if pos == 0 else REMOTE
        if name == "glres":
            return SWITCHD if pos == 0 else None
        if name == "glre":
            return None if pos != 0 else (LOCAL if dst else SWITCHD)
        if name in ("gstore", "gstorepkt"):
            return None if pos != 0 else (SWITCHD if dst else LOCAL)
        return None

    @staticmethod
    def local_put_dst(name, t, d):
        """A memory put's destination may be this rank's own buffer (a "type" key): one load
        feeds the peers' stores and the local one (plan-format §2.4; plan_load.c)."""
        return name == "put" and t == MEMORY and isinstance(d, dict) \
            and d.get("type") is not None

    def max_descs(self, name, dst):
        n = 0
        while n < MAX_DESCS and self.desc_expect(name, dst, n) is not None:
            n += 1
        return n

    @staticmethod
    def check_range(index, size, count, buf, whose, path):
        if index + size <= count:
            return
        if index > count or (index == count and size > 0):
            raise PlanError(f"{path}.index", f"{index} is out of range for {CHUNK_KEYS[buf]}="
                                             f"{count}{whose}")
        raise PlanError(f"{path}.size", f"{size} chunks from index {index} end past "
                                        f"{CHUNK_KEYS[buf]}={count}{whose}")

    def desc(self, r, blk, jd, name, t, kind, path, G):
        g = G[r]
        self.expect_object(jd, path)
        self.check_keys(jd, path, "desc")
        kv = jd.get(DESC_KEY[kind])
        if kv is None:
            for other in range(3):
                if other != kind and jd.get(DESC_KEY[other]) is not None:
                    raise PlanError(f"{path}.{DESC_KEY[other]}", f"{name} needs {DESC_WHAT[kind]} "
                                                               f"here, not {DESC_WHAT[other]}")
            raise PlanError(path, f'{name} needs {DESC_WHAT[kind]} here: required key '
                                  f'"{DESC_KEY[kind]}" is missing')
        index = self.get_u64(jd, "index", path, True, 0, U32)
        size = self.get_u64(jd, "size", path, True, 0, U32)
        out = {"index": index, "size": size}
        if kind == LOCAL:
            bt = self.buf_val(kv, f"{path}.type")
            self.check_range(index, size, g["out"][CHUNK_KEYS[BUFS[bt]]], BUFS[bt], "", path)
            out["type"] = bt
            return out
        k = self.u64(kv, f"{path}.{DESC_KEY[kind]}")
        if kind == REMOTE:
            if k >= len(blk["rbuf"][t]):
                raise PlanError(f"{path}.buffer_id",
                                f"{k} is out of range (the thread block has {len(blk['rbuf'][t])} "
                                f"{CHANNELS[t]}-access remote buffers in remote_buffer_refs)")
            q = blk["rbuf"][t][k]
            owner, bt, _ = g["rbufs"][q]
            self.check_range(index, size, G[owner]["out"][CHUNK_KEYS[BUFS[bt]]], BUFS[bt],
                             f" of rank {owner} (remote buffer {q})", path)
            out["buffer_id"] = k
            return out
        if k >= len(blk["chan"][SWITCH]):
            raise PlanError(f"{path}.switch_channel_id",
                            f"{k} is out of range (the thread block has "
                            f"{len(blk['chan'][SWITCH])} switch channels)")
        s = blk["chan"][SWITCH][k]
        bt, members = g["switches"][s]
        for m in members:
            self.check_range(index, size, G[m]["out"][CHUNK_KEYS[BUFS[bt]]], BUFS[bt],
                             f" of rank {m} (switch channel {s})", path)
        out["switch_channel_id"] = k
        return out

    def op(self, r, blk, jop, path, G, in_pipeline):
        g = G[r]
        self.expect_object(jop, path)
        self.check_keys(jop, path, "op")
        name = self.get_str(jop, "name", path, True)
        if name not in RULES:
            raise PlanError(f"{path}.name", f'unknown operation "{name}"')
        chans, min_src, min_dst, needs_ids, pairs = RULES[name]
        t = NONE
        tv = jop.get("channel_type")
        if tv is not None:
            t = self.chan_val(tv, f"{path}.channel_type", True, True)
            if chans and not chans & (1 << t):
                raise PlanError(f"{path}.channel_type",
                                f"{name} cannot use {CHANNELS[t]} channels")
        if chans and t == NONE:
            if chans == _M:
                t = MEMORY
            elif chans == _S:
                t = SWITCH
            elif chans == _P:
                t = PORT
            else:
                raise PlanError(path, f'{name} needs channel_type "memory" or "port"')
        if not chans:
            t = NONE
        out = {"name": name}
        if t != NONE:
            out["channel_type"] = CHANNELS[t]
        ids = self.get_array(jop, "channel_ids", path, False)
        cids = []
        if ids:
            p = f"{path}.channel_ids"
            if not chans:
                raise PlanError(p, f"{name} uses no channels")
            if len(ids) > MAX_CHANNELS_PER_OP:
                raise PlanError(p, f"{len(ids)} channels exceed the limit of "
                                   f"{MAX_CHANNELS_PER_OP} per op")
            for i, v in enumerate(ids):
                c = self.u64(v, f"{p}[{i}]")
                if c >= len(blk["chan"][t]):
                    raise PlanError(f"{p}[{i}]", f"{CHANNELS[t]} channel {c} is out of range (the "
                                                 f"thread block has {len(blk['chan'][t])} "
                                                 f"{CHANNELS[t]} channels)")
                cids.append(c)
            out["channel_ids"] = cids
        descs = {}
        for key, dst in (("src_buff", False), ("dst_buff", True)):
            lst = self.get_array(jop, key, path, False) or []
            p = f"{path}.{key}"
            mx = self.max_descs(name, dst)
            if len(lst) > MAX_DESCS:
                raise PlanError(p, f"{len(lst)} descriptors exceed the limit of {MAX_DESCS} per "
                                   "op")
            if len(lst) > mx:
                if mx == 0:
                    raise PlanError(p, f"{name} takes no {key}")
                raise PlanError(p, f"{name} takes at most {mx} {key} entries, got {len(lst)}")
            descs[key] = [self.desc(r, blk, d, name, t,
                                    LOCAL if dst and self.local_put_dst(name, t, d)
                                    else self.desc_expect(name, dst, i),
                                    f"{p}[{i}]", G) for i, d in enumerate(lst)]
            if descs[key]:
                out[key] = descs[key]
        red = self.get_str(jop, "reduce_op", path, False)
        if red is not None:
            if red not in REDOPS:
                raise PlanError(f"{path}.reduce_op", f'unknown reduction "{red}" (expected sum, '
                                                     'prod, min or max)')
            out["reduce_op"] = red
        tbg = self.get_object(jop, "tbg_info", path, False)
        if tbg is not None:
            p = f"{path}.tbg_info"
            self.check_keys(tbg, p, "tbg")
            size = self.get_u64(tbg, "tbg_size", p, True, 1, 0xFFFF)
            tid = self.get_u64(tbg, "tb_id", p, True, 0, 0xFFFF)
            if tid >= size:
                raise PlanError(f"{p}.tb_id", f"{tid} is out of range for tbg_size={size}")
            out["tbg_info"] = {"tb_id": tid, "tbg_size": size}
        src, dst = descs["src_buff"], descs["dst_buff"]
        if len(src) < min_src:
            raise PlanError(f"{path}.src_buff", f"{name} needs at least {min_src} source "
                                                f"descriptor{'s' if min_src > 1 else ''}, got "
                                                f"{len(src)}")
        if len(dst) < min_dst:
            raise PlanError(f"{path}.dst_buff", f"{name} needs at least {min_dst} destination "
                                                f"descriptor{'s' if min_dst > 1 else ''}, got "
                                                f"{len(dst)}")
        if pairs and len(src) != len(dst):
            raise PlanError(f"{path}.src_buff", f"{name} pairs src_buff[i] with dst_buff[i]: "
                                                f"{len(src)} sources for {len(dst)} destinations")
        every = [("src_buff", i, d) for i, d in enumerate(src)] + \
                [("dst_buff", i, d) for i, d in enumerate(dst)]
        for key, i, d in every[1:]:
            if d["size"] != src[0]["size"]:
                raise PlanError(f"{path}.{key}[{i}].size",
                                f"{d['size']} chunks where src_buff[0] has {src[0]['size']} "
                                f"(every descriptor of {name} covers the same number of chunks)")
        if needs_ids and not cids:
            raise PlanError(f"{path}.channel_ids", f"{name} needs at least one channel id")
        if t == PORT and min_dst > 0 and len(cids) != len(dst):
            raise PlanError(f"{path}.channel_ids",
                            f"{name} on port channels needs one channel id per destination: "
                            f"{len(cids)} channel ids for {len(dst)} destinations")
        if name == "barrier":
            bid = self.get_u64(jop, "barrier_id", path, True, 0, U32)
            if bid >= MAX_BARRIERS:
                raise PlanError(f"{path}.barrier_id", f"{bid} is out of range (at most "
                                                      f"{MAX_BARRIERS} barriers, ids 0..15)")
            nb = self.get_u64(jop, "num_threadblocks", path, True, 0, U32)
            if nb < 1 or nb > g["n_blocks"]:
                raise PlanError(f"{path}.num_threadblocks",
                                f"{nb} is out of range (expected 1..{g['n_blocks']}, the rank's "
                                "thread blocks)")
            first = g["barriers"].setdefault(bid, (nb, path))
            if first[0] != nb:
                raise PlanError(f"{path}.num_threadblocks",
                                f"{nb}, but {first[1]} uses barrier {bid} with {first[0]}: the "
                                "blocks of one barrier must agree on how many meet there")
            out["barrier_id"] = bid
            out["num_threadblocks"] = nb
        elif name in ("sem_acquire", "sem_release"):
            ids = self.get_array(jop, "semaphore_ids", path, True)
            p = f"{path}.semaphore_ids"
            if not ids:
                raise PlanError(p, f"{name} needs at least one semaphore id")
            if len(ids) > MAX_SEMS_PER_OP:
                raise PlanError(p, f"{len(ids)} semaphore ids exceed the limit of "
                                   f"{MAX_SEMS_PER_OP} per op")
            sids = []
            for i, v in enumerate(ids):
                s = self.u64(v, f"{p}[{i}]")
                if s >= len(g["sems"]):
                    raise PlanError(f"{p}[{i}]", f"semaphore {s} is out of range (gpus[{r}] has "
                                                 f"{len(g['sems'])} semaphores)")
                if s > 255:
                    raise PlanError(f"{p}[{i}]", f"semaphore {s} is beyond the 256 an op can "
                                                 "name")
                sids.append(s)
            out["semaphore_ids"] = sids
        elif name == "pipeline":
            if in_pipeline:
                raise PlanError(f"{path}.name", "nested pipelines are not supported")
            ctx = self.get_object(jop, "iter_context", path, True)
            p = f"{path}.iter_context"
            self.check_keys(ctx, p, "iter")
            unit = self.get_u64(ctx, "unit_size", p, True, 1, U64)
            nc = self.get_u64(ctx, "num_chunks", p, True, 1, U32)
            body = self.get_array(jop, "ops", path, True)
            out["iter_context"] = {"unit_size": unit, "num_chunks": nc}
            out["ops"] = [self.op(r, blk, o, f"{path}.ops[{i}]", G, True)
                          for i, o in enumerate(body)]
        return out

    # ---- whole-plan checks (pass 3) -----------------------------------------------------------
    def collective_chunks(self, plan, G, r):
        c = plan["collective"]
        N = len(G)
        g, g0 = G[r]["out"], G[0]["out"]
        i, o = g["input_chunks"], g["output_chunks"]
        if c in REFERENCE_COLLECTIVES and (i != g0["input_chunks"] or o != g0["output_chunks"]):
            k = "input_chunks" if i != g0["input_chunks"] else "output_chunks"
            art = "n" if c[0] == "a" else ""
            raise PlanError(f"gpus[{r}].{k}", f"{g[k]} differs from gpus[0].{k}={g0[k]}: every "
                                              f"rank of a{art} {c} has buffers of one size")
        if c == "alltoall" and i % N:
            raise PlanError(f"gpus[{r}].input_chunks",
                            f"{i} chunks do not split into {N} equal blocks: an alltoall sends "
                            "input_chunks/nranks chunks to each rank")
        if i == 0 or o == 0:
            return
        if c == "reducescatter":
            if i != N * o:
                raise PlanError(f"gpus[{r}].input_chunks",
                                f"{i} chunks do not fit a reducescatter of {N} ranks with "
                                f"output_chunks={o}: the input is nranks times the output, so "
                                f"chunks would differ in size (expected {N * o})")
            return
        if c == "allgather":
            want, why = N * i, "the output is nranks times the input"
        elif c in ("allreduce", "alltoall", "broadcast", "reduce"):
            want, why = i, "input and output have the same size"
        else:
            return
        if o != want:
            raise PlanError(f"gpus[{r}].output_chunks",
                            f"{o} chunks do not fit an {c} of {N} ranks with input_chunks={i}: "
                            f"{why}, so chunks would differ in size (expected {want})")

    @staticmethod
    def scratch(G, r):
        g = G[r]["out"]
        ref = max(g["input_chunks"], g["output_chunks"]) or 1
        if g["scratch_chunks"] > ref * MAX_SCRATCH_RATIO:
            raise PlanError(f"gpus[{r}].scratch_chunks",
                            f"{g['scratch_chunks']} scratch chunks for {ref} chunks of "
                            f"input/output would make the scratch buffer "
                            f"{g['scratch_chunks'] // ref}x the message on every rank (limit "
                            f"{MAX_SCRATCH_RATIO}x): refused as a malformed plan")

    @staticmethod
    def balance(G, blocks):
        """Signal/wait counts per channel pair and semaphore balance (plan_load.c check_balance)."""
        N = len(G)

        def new():
            return {"sig": 0, "wait": 0, "psig": 0, "pwait": 0, "key": None, "keys": 0}

        def add(b, wait, pipe):
            if pipe is None:
                b["wait" if wait else "sig"] += 1
                return
            b["pwait" if wait else "psig"] += 1
            key = (pipe["iter_context"]["unit_size"], pipe["iter_context"]["num_chunks"])
            if b["keys"] == 0:
                b["keys"], b["key"] = 1, key
            elif b["key"] != key:
                b["keys"] = 2

        def comparable(a, b, same):
            if a["keys"] == 0 and b["keys"] == 0:
                return True
            return a["keys"] == 1 and b["keys"] == 1 and same and a["key"] == b["key"]

        bal = []
        keys = []
        for r in range(N):
            g = G[r]
            bl = {MEMORY: [new() for _ in g["peers"][MEMORY]],
                  PORT: [new() for _ in g["peers"][PORT]]}
            sem = [new() for _ in g["sems"]]
            for blk, ops in blocks[r]:
                def walk(ops, pipe):
                    for op in ops:
                        name = op["name"]
                        if name == "pipeline":
                            walk(op["ops"], op)
                            continue
                        if name in ("sem_acquire", "sem_release"):
                            for s in op["semaphore_ids"]:
                                add(sem[s], name == "sem_acquire", pipe)
                            continue
                        t = CHANNELS.index(op.get("channel_type", "none"))
                        if name in ("wait", "rlxwait", "signal", "rlxsignal") or \
                                (name in ("pws", "pwsf") and t == PORT):
                            wait = name in ("wait", "rlxwait")
                            for k in op.get("channel_ids", []):
                                add(bl[t][blk["chan"][t][k]], wait, pipe)
                walk(ops, None)
            for s, x in enumerate(sem):
                if not comparable(x, x, True):
                    continue
                if x["sig"] == x["wait"] and x["psig"] == x["pwait"]:
                    continue
                rel, acq = x["sig"] + x["psig"], x["wait"] + x["pwait"]
                raise PlanError(f"gpus[{r}].semaphores[{s}]",
                                f"rank {r} releases semaphore {s} {rel} "
                                f"{'time' if rel == 1 else 'times'} and acquires it {acq} "
                                f"{'time' if acq == 1 else 'times'} per launch: semaphores "
                                "persist across launches, so a plan must leave each at its "
                                "initial value (later launches deadlock or race)")
            bal.append(bl)
            seen = [0] * N
            kk = {}
            for t in (MEMORY, PORT):
                for c, p in enumerate(g["peers"][t]):
                    kk[(p, seen[p])] = (t, c)
                    seen[p] += 1
            keys.append(kk)
        none = new()
        for a in range(N):
            for (b, ord_), (ta, ca) in sorted(keys[a].items()):
                kb = keys[b].get((a, ord_))
                x = bal[a][ta][ca]
                y = bal[b][kb[0]][kb[1]] if kb else none
                ga, gb = G[a]["out"], G[b]["out"]
                same = ga["input_chunks"] == gb["input_chunks"] and \
                    ga["output_chunks"] == gb["output_chunks"]
                if not comparable(x, y, same):
                    continue
                s, w = x["sig"] + x["psig"], y["wait"] + y["pwait"]
                mine = f"{CHANNELS[ta]} channel {ca}"
                theirs = f"paired with rank {b}'s {CHANNELS[kb[0]]} channel {kb[1]}" if kb else \
                    f"paired with no channel: rank {b} lists fewer channels to rank {a}"
                if x["sig"] != y["wait"] or x["psig"] != y["pwait"]:
                    raise PlanError(f"gpus[{a}].channels",
                                    f"rank {a} signals rank {b} {s} {'time' if s == 1 else 'times'}"
                                    f" per launch on {mine} ({theirs}) but rank {b} waits {w} "
                                    f"{'time' if w == 1 else 'times'} on it: "
                                    + ("the extra waits deadlock" if s < w else
                                       "the extra signals race with the next launch's waits"))
                if not kb and (x["wait"] or x["pwait"]):
                    xw = x["wait"] + x["pwait"]
                    raise PlanError(f"gpus[{a}].channels",
                                    f"rank {a} waits for rank {b} {xw} "
                                    f"{'time' if xw == 1 else 'times'} per launch on {mine}, "
                                    f"which has no channel paired on rank {b}: the waits "
                                    "deadlock")

    # ---- top level ------------------------------------------------------------------------------
    def load(self, root):
        if not isinstance(root, dict):
            raise PlanError("", f"the plan must be a JSON object, got {_jtype(root)}")
        self.check_old_format(root, "")
        gpus = root.get("gpus")
        if isinstance(gpus, list) and gpus:
            self.check_old_format(gpus[0], "gpus[0]")
        self.check_keys(root, "", "top")
        out = {}
        fmt = root.get("format")
        if fmt is not None:
            if not isinstance(fmt, str):
                raise PlanError("format", f"expected a string, got {_jtype(fmt)}")
            if fmt != "mscclpp-plan/1":
                raise PlanError("format", f'unknown format version "{fmt}" (this library reads '
                                          '"mscclpp-plan/1" and the unversioned MSCCL++ 0.9 '
                                          'format)')
            out["format"] = fmt
        if root.get("rank_subset") is not None:
            raise PlanError("rank_subset", "partial plans are not supported: gpus must list "
                                           "every rank")
        self.member(root, "name", "", True)
        name = root["name"]
        if name is None:
            base = self.source.rsplit("/", 1)[-1]
            if base.endswith(".json") and len(base) > 5:
                base = base[:-5]
            name = "unnamed" if self.source.startswith("<") or not base else base
        elif isinstance(name, str):
            if not name:
                raise PlanError("name", "must not be empty")
        else:
            raise PlanError("name", f"expected a string, got {_jtype(name)}")
        out["name"] = name
        col = self.get_str(root, "collective", "", True)
        if not col:
            raise PlanError("collective", "must not be empty")
        if col not in COLLECTIVES:
            near = nearest(col, COLLECTIVES)
            hint = f'did you mean "{near}"? ' if near else ""
            raise PlanError("collective", f'unknown collective "{col}" ({hint}expected '
                                          f"{', '.join(COLLECTIVES)})")
        out["collective"] = col
        proto = self.get_str(root, "protocol", "", True)
        if proto not in ("LL", "Simple"):
            raise PlanError("protocol", f'unknown protocol "{proto}" (expected "Simple" or "LL")')
        out["protocol"] = proto
        out["inplace"] = self.get_bool(root, "inplace", "", True)
        out["reuse_resources"] = self.get_bool(root, "reuse_resources", "", False)
        out["use_double_scratch_buffer"] = self.get_bool(root, "use_double_scratch_buffer", "",
                                                         False)
        al = self.get_u64(root, "buffer_alignment", "", False, 1, MAX_ALIGNMENT, 16)
        if al & (al - 1):
            raise PlanError("buffer_alignment", f"{al} is not a power of two")
        out["buffer_alignment"] = al
        lo = self.get_u64(root, "min_message_size", "", False, 0, U64, 0)
        hi = self.get_u64(root, "max_message_size", "", False, 0, U64, U64)
        if lo > hi:
            raise PlanError("min_message_size", f"{lo} is larger than max_message_size={hi}")
        out["min_message_size"], out["max_message_size"] = lo, hi
        out["num_threads_per_block"] = self.get_u64(root, "num_threads_per_block", "", False, 1,
                                                    MAX_THREADS, 1024)
        gpus = self.get_array(root, "gpus", "", True)
        N = len(gpus)
        if N == 0:
            raise PlanError("gpus", "a plan needs at least one rank")
        if N > MAX_RANKS:
            raise PlanError("gpus", f"{N} ranks exceed the limit of {MAX_RANKS}")
        rt = self.get_u64(root, "root", "", False, 0, U64, 0)
        if rt >= N:
            raise PlanError("root", f"{rt} is out of range (the plan has {N} ranks)")
        # any root of the plan: a call with another root runs it with ranks rotated so that the
        # call's root plays the plan's (executor/select.c)
        if "root" in root and root["root"] is not None:
            out["root"] = rt
        G = [self.gpu(r, g, f"gpus[{r}]", N) for r, g in enumerate(gpus)]
        blocks = []
        for r, g in enumerate(gpus):
            tbs = g["threadblocks"]
            p = f"gpus[{r}].threadblocks"
            if len(tbs) > MAX_BLOCKS:
                raise PlanError(p, f"{len(tbs)} thread blocks exceed the limit of {MAX_BLOCKS}")
            G[r]["n_blocks"] = len(tbs)
            G[r]["barriers"] = {}
            parsed = [self.block(r, b, tb, f"{p}[{b}]", G) for b, tb in enumerate(tbs)]
            G[r]["out"]["threadblocks"] = [x[0] for x in parsed]
            blocks.append([(x[1], x[0]["ops"]) for x in parsed])
        for r in range(N):
            self.collective_chunks(out, G, r)
            self.scratch(G, r)
        self.balance(G, blocks)
        out["gpus"] = []
        for r, g in enumerate(G):
            o = g["out"]
            o["remote_buffers"] = [{"rank": ow, "type": bt,
                                    "access_channel_types": [CHANNELS[t] for t in (MEMORY, PORT)
                                                             if acc & (1 << t)]}
                                   for ow, bt, acc in g["rbufs"]]
            o["semaphores"] = [{"init_value": v} for v in g["sems"]]
            out["gpus"].append(o)
        return out


def check(plan, source="<string>"):
    """Check ``plan`` (a dict from :func:`parse` or ``json``) against the loader's rules. Returns
    the plan normalised for the simulator; raises :class:`PlanError` for the first broken rule."""
    return _Loader(source).load(plan)
