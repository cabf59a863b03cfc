"""Post-processing passes: fusion (plan-format §7.5), data-sync and dependency nops (7.4, 7.6),
instance replication (7.7). Every pass is linear in the number of ops of a block (the
dependency pass is linear in ops times the ranges touched since the last sync)."""

from .ops import (
    Op, SYNC_BEFORE, SYNC_AFTER, SYNC_CARRYING, PUT_LIKE, PACKET_REDUCES,
)
from .types import DSLError

MAX_CHANNELS_PER_OP = 8
MAX_DESCS = 10
MAX_SEMS_PER_OP = 16

_SIGNAL_WAIT = frozenset(["signal", "rlxsignal", "wait", "rlxwait"])


def _same_size(descs):
    s = descs[0][4]
    return all(d[4] == s for d in descs)


def _n_remote(descs):
    return sum(1 for d in descs if d[0] == "R")


def _overlap_local(a, b):
    """Do local descriptors a and b touch a common chunk of one buffer?"""
    return a[0] == "L" and b[0] == "L" and a[1] == b[1] and a[3] < b[3] + b[4] \
        and b[3] < a[3] + a[4]


def _put_with_copy(put, cp, next_to):
    """A memory put and a copy of the same block (either order) as one put whose extra,
    local, destination is the copy's (plan-format §2.4), when the copy reads the put's source
    next_to (its entry goes beside that one): one load of the source then feeds the stores into
    the peers' buffers and this rank's own, and the copy's second read of it is gone. None
    otherwise (a copy of another source gains nothing by joining), or when one op's local write
    meets a local read or write of the other (the fused op orders loads before stores only
    within a thread)."""
    if put.ctype != "memory" or len(put.dst) + 1 > MAX_DESCS or cp.src[0] != next_to:
        return None
    if any(_overlap_local(cp.dst[0], d) for d in put.src + put.dst + cp.src) \
            or any(_overlap_local(cp.src[0], d) for d in put.dst):
        return None
    return Op("put", "memory", list(put.chans), put.src + cp.src, put.dst + cp.dst, put.tbg)


def try_fuse(cur, nxt, sw_types, local_put=True):
    """Return the fusion of two adjacent ops of one block, or None. With local_put (the native
    target), a copy next to a memory put becomes one more destination of the put."""
    a, b = cur.name, nxt.name
    # ---- synchronisation ------------------------------------------------------------------
    if a == "nop":
        if b == "nop" or b == "barrier":
            return nxt
        if b == "pipeline" and nxt.starts_with_sync():
            return nxt
        return None
    if b == "nop":
        if a == "barrier" or (a == "pipeline" and cur.ends_with_sync()):
            return cur
        return None
    if a in _SIGNAL_WAIT and a == b:
        if cur.ctype == nxt.ctype and not set(cur.chans) & set(nxt.chans) \
                and len(cur.chans) + len(nxt.chans) <= MAX_CHANNELS_PER_OP:
            return Op(a, cur.ctype, cur.chans + nxt.chans, sync=cur.sync | nxt.sync)
        return None
    if a == "flush" and b == "flush":
        if cur.ctype == nxt.ctype:
            chans = cur.chans + [c for c in nxt.chans if c not in cur.chans]
            if len(chans) <= MAX_CHANNELS_PER_OP:
                return Op(a, cur.ctype, chans, sync=cur.sync | nxt.sync)
        return None
    if a in ("sem_acquire", "sem_release") and a == b:
        if len(cur.sems) + len(nxt.sems) <= MAX_SEMS_PER_OP:
            return Op(a, sems=cur.sems + nxt.sems, sync=cur.sync | nxt.sync)
        return None
    if a in SYNC_CARRYING or b in SYNC_CARRYING or a in ("barrier", "pipeline") \
            or b in ("barrier", "pipeline"):
        return None
    if cur.tbg != nxt.tbg:
        return None
    # ---- transfers ------------------------------------------------------------------------
    if a == b and (a in PUT_LIKE or a == "get"):
        if cur.ctype != nxt.ctype or len(cur.dst) + len(nxt.dst) > MAX_CHANNELS_PER_OP:
            return None
        srcs = cur.src + nxt.src
        if not _same_size(srcs):
            return None
        # P10: an executor may use the first source's buffer type for every entry
        if a != "get" and len({(d[0], d[1]) for d in srcs}) != 1:
            return None
        if a == "get" and len({(d[0], d[1]) for d in cur.dst + nxt.dst}) != 1:
            return None
        return Op(a, cur.ctype, cur.chans + nxt.chans, srcs, cur.dst + nxt.dst, cur.tbg)
    if local_put and a == "put" and b == "copy":
        return _put_with_copy(cur, nxt, cur.src[-1])
    if local_put and a == "copy" and b == "put":
        op = _put_with_copy(nxt, cur, nxt.src[0])
        if op is not None:  # the copy's entry first, as recorded
            op.src, op.dst = op.src[-1:] + op.src[:-1], op.dst[-1:] + op.dst[:-1]
        return op
    if a == "rppkt" and b == "rppkt":
        if cur.ctype == nxt.ctype and cur.src == nxt.src \
                and len(cur.dst) + len(nxt.dst) <= MAX_CHANNELS_PER_OP:
            return Op(a, cur.ctype, cur.chans + nxt.chans, list(cur.src), cur.dst + nxt.dst,
                      cur.tbg)
        return None
    # ---- reductions -----------------------------------------------------------------------
    if a in ("re", "repkt", "rre") and a == b:
        if (cur.ctype == nxt.ctype and cur.reduce_op == nxt.reduce_op
                and nxt.dst[0] == cur.dst[0] and nxt.src[0] == cur.dst[0]
                and len(cur.src) + len(nxt.src) - 1 <= MAX_DESCS
                and _n_remote(cur.src) + _n_remote(nxt.src) <= MAX_CHANNELS_PER_OP):
            return Op(a, cur.ctype, cur.chans + nxt.chans, cur.src + nxt.src[1:],
                      list(cur.dst), cur.tbg, cur.reduce_op)
        return None
    if a in ("re", "res", "rre", "rres") and b == "put" and nxt.ctype == "memory":
        if all(d == cur.dst[0] for d in nxt.src) and cur.ctype in ("none", "memory") \
                and len(cur.dst) + len(nxt.dst) <= MAX_DESCS \
                and _n_remote(cur.dst) + len(nxt.dst) <= MAX_CHANNELS_PER_OP:
            name = {"re": "res", "res": "res", "rre": "rres", "rres": "rres"}[a]
            return Op(name, "memory", cur.chans + nxt.chans, list(cur.src), cur.dst + nxt.dst,
                      cur.tbg, cur.reduce_op)
        return None
    if a in ("repkt", "respkt") and b == "ppkt" and nxt.ctype == "memory":
        if all(d == cur.dst[0] for d in nxt.src) and len(cur.dst) + len(nxt.dst) <= MAX_DESCS \
                and _n_remote(cur.dst) + len(nxt.dst) <= MAX_CHANNELS_PER_OP:
            return Op("respkt", "memory", cur.chans + nxt.chans, list(cur.src),
                      cur.dst + nxt.dst, cur.tbg, cur.reduce_op)
        return None
    if a == "repkt" and b == "cpkt":
        if nxt.src[0] == cur.dst[0]:
            return Op("recpkt", cur.ctype, list(cur.chans), list(cur.src),
                      [cur.dst[0], nxt.dst[0]], cur.tbg, cur.reduce_op)
        return None
    if a in ("recpkt", "recspkt") and nxt.ctype == "memory" and (
            (b == "ppkt" and all(d == cur.dst[0] for d in nxt.src))
            or (b == "rppkt" and nxt.src[0] == cur.dst[1])):
        if len(cur.dst) + len(nxt.dst) <= MAX_DESCS \
                and _n_remote(cur.dst) + len(nxt.dst) <= MAX_CHANNELS_PER_OP:
            return Op("recspkt", "memory", cur.chans + nxt.chans, list(cur.src),
                      cur.dst + nxt.dst, cur.tbg, cur.reduce_op)
        return None
    if a == "glre" and b == "gstore":
        s = cur.src[0]
        if nxt.dst[0] == s and nxt.src[0] == cur.dst[0] and cur.chans == nxt.chans:
            d = cur.dst[0]
            # the reduced chunk must be this rank's own slice of the switch buffer, since the
            # fused op writes the result only through the switch
            if d[0] == "L" and d[1] == sw_types.get(s[1]) and d[3] == s[3] and d[4] == s[4]:
                return Op("glres", "switch", list(cur.chans), [s], [nxt.dst[0]], cur.tbg,
                          cur.reduce_op)
        return None
    return None


def fuse(ops, sw_types, local_put=True):
    out = []
    cur = None
    for op in ops:
        if op.name == "pipeline":
            op = Op("pipeline", body=fuse(op.body, sw_types, local_put), unit=op.unit,
                    num_chunks=op.num_chunks)
        if cur is None:
            cur = op
            continue
        fused = try_fuse(cur, op, sw_types, local_put)
        if fused is not None:
            cur = fused
        else:
            out.append(cur)
            cur = op
    if cur is not None:
        out.append(cur)
    return out


def insert_data_sync(ops):
    out = []
    for op in ops:
        if op.name == "pipeline":
            op = Op("pipeline", body=insert_data_sync(op.body), unit=op.unit,
                    num_chunks=op.num_chunks)
            out.append(op)
            continue
        if op.name in SYNC_CARRYING and op.sync:
            if op.sync & SYNC_BEFORE:
                out.append(Op("nop"))
            out.append(op)
            if op.sync & SYNC_AFTER:
                out.append(Op("nop"))
        else:
            out.append(op)
    return out


def _overlaps(ranges, t, s, e):
    for (t2, s2, e2) in ranges:
        if t2 == t and s < e2 and s2 < e:
            return True
    return False


def insert_dependency_sync(ops, sw_types):
    """Insert a nop before an op whose local accesses conflict with an access since the last
    block-wide sync (read-after-write, write-after-read, write-after-write)."""
    out = []
    reads, writes = [], []
    for op in ops:
        if op.name == "pipeline":
            op = Op("pipeline", body=insert_dependency_sync(op.body, sw_types), unit=op.unit,
                    num_chunks=op.num_chunks)
        if op.name in ("nop", "barrier"):
            reads, writes = [], []
            out.append(op)
            continue
        r, w = op.local_accesses(sw_types)
        conflict = False
        for (t, s, e) in w:
            if _overlaps(writes, t, s, e) or _overlaps(reads, t, s, e):
                conflict = True
                break
        if not conflict:
            for (t, s, e) in r:
                if _overlaps(writes, t, s, e):
                    conflict = True
                    break
        if conflict:
            out.append(Op("nop"))
            reads, writes = [], []
        reads.extend(r)
        writes.extend(w)
        if op.name == "pipeline" and op.ends_with_sync():
            reads, writes = [], []
        out.append(op)
    return out


def collapse_syncs(ops, top_level=True):
    """Merge adjacent nops (and nops next to barriers / syncing pipeline edges); drop nops at
    the very start and end of a block, where the kernel boundary already synchronises."""
    out = []
    for op in ops:
        if op.name == "pipeline":
            op = Op("pipeline", body=collapse_syncs(op.body, False), unit=op.unit,
                    num_chunks=op.num_chunks)
        if out:
            prev = out[-1]
            if op.name == "nop" and (prev.name in ("nop", "barrier")
                                     or (prev.name == "pipeline" and prev.ends_with_sync())):
                continue
            if prev.name == "nop" and (op.name == "barrier"
                                       or (op.name == "pipeline" and op.starts_with_sync())):
                out[-1] = op
                continue
        out.append(op)
    if top_level:
        while out and out[0].name == "nop":
            out.pop(0)
        while out and out[-1].name == "nop":
            out.pop()
    return out


def process_block(ops, fusion, auto_sync, sw_types, local_put=True):
    if fusion:
        ops = fuse(ops, sw_types, local_put)
    ops = insert_data_sync(ops)
    if auto_sync:
        ops = insert_dependency_sync(ops, sw_types)
    return collapse_syncs(ops)


# ---- replication -------------------------------------------------------------------------------

def _map_desc(d, n, i, interleaved):
    if not interleaved:
        return d
    return (d[0], d[1], d[2], d[3] * n + i * d[4], d[4])


def _map_desc_sw(d, n, i, interleaved):
    if d[0] == "S":
        d = (d[0], d[1] * n + i, d[2], d[3], d[4])
    return _map_desc(d, n, i, interleaved)


def replicate_op(op, n, i, interleaved):
    new = Op(op.name, op.ctype)
    new.chans = [c * n + i for c in op.chans]
    new.src = [_map_desc_sw(d, n, i, interleaved) for d in op.src]
    new.dst = [_map_desc_sw(d, n, i, interleaved) for d in op.dst]
    new.tbg = op.tbg
    new.reduce_op = op.reduce_op
    new.sync = op.sync
    new.sems = [s * n + i for s in op.sems]
    new.barrier_id = None if op.barrier_id is None else op.barrier_id * n + i
    new.nblocks = op.nblocks
    new.unit = op.unit
    new.num_chunks = op.num_chunks
    if op.body is not None:
        new.body = [replicate_op(o, n, i, interleaved) for o in op.body]
    return new


def check_op_limits(op, where, limits=None):
    """Raise when ``op`` exceeds the per-op limits of the target executor (program.TARGETS)."""
    descs = MAX_DESCS if limits is None else limits["descs_per_op"]
    target = "mscclpp" if limits is None else limits["name"]
    if op.ctype in ("memory", "port") and op.name in _SIGNAL_WAIT | {"flush"}:
        if len(op.chans) > MAX_CHANNELS_PER_OP:
            raise DSLError(f"{where}: {op.name} uses {len(op.chans)} channels (limit "
                           f"{MAX_CHANNELS_PER_OP})")
    if len(op.src) > descs or len(op.dst) > descs:
        raise DSLError(f"{where}: {op.name} has more than {descs} buffer descriptors (limit of "
                       f"target {target})")
    if len(op.sems) > MAX_SEMS_PER_OP:
        raise DSLError(f"{where}: {op.name} uses more than {MAX_SEMS_PER_OP} semaphores")
    if op.name == "glre" and target == "mscclpp":
        raise DSLError(f"{where}: SwitchChannel.reduce was not fused with a broadcast of the "
                       "same chunk; MSCCL++ cannot execute an unfused switch reduce (glre; "
                       "broadcast the reduced chunk right after reducing it, in the same thread "
                       "block, or compile for this library's executor)")
