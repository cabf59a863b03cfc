"""Recorded operations.

An operation is kept in a compact internal form until serialisation:

* buffer descriptors are tuples ``(kind, a, b, index, size)``:
  ``("L", btype, None, index, size)`` a buffer of the op's own rank,
  ``("R", owner, btype, index, size)`` a peer's buffer reached through the op's channel type,
  ``("S", switch_gid, None, index, size)`` the buffer bound to a switch channel;
* channels are per-rank *global* indices of the op's channel type (plan-format §1.3); block-local
  tables are built when the plan is written.
"""

SYNC_BEFORE = 1
SYNC_AFTER = 2

# Ops that carry a data_sync setting (plan-format §7.4).
SYNC_CARRYING = frozenset(
    ["signal", "rlxsignal", "wait", "rlxwait", "flush", "sem_acquire", "sem_release"]
)
PUT_LIKE = frozenset(["put", "ppkt", "pws", "pwsf"])
REDUCE_NAMES = frozenset(["re", "repkt", "recpkt", "res", "respkt", "recspkt", "rre", "rres", "glre", "glres"])
PACKET_REDUCES = frozenset(["repkt", "recpkt", "respkt", "recspkt"])


def local(btype, index, size):
    return ("L", btype, None, index, size)


def remote(owner, btype, index, size):
    return ("R", owner, btype, index, size)


def switch(gid, index, size):
    return ("S", gid, None, index, size)


class Op:
    __slots__ = (
        "name", "ctype", "chans", "src", "dst", "tbg", "reduce_op", "sync", "sems",
        "barrier_id", "nblocks", "body", "unit", "num_chunks",
    )

    def __init__(self, name, ctype="none", chans=None, src=None, dst=None, tbg=None,
                 reduce_op=None, sync=0, sems=None, barrier_id=None, nblocks=None,
                 body=None, unit=None, num_chunks=None):
        self.name = name
        self.ctype = ctype
        self.chans = chans if chans is not None else []
        self.src = src if src is not None else []
        self.dst = dst if dst is not None else []
        self.tbg = tbg
        self.reduce_op = reduce_op
        self.sync = sync
        self.sems = sems if sems is not None else []
        self.barrier_id = barrier_id
        self.nblocks = nblocks
        self.body = body
        self.unit = unit
        self.num_chunks = num_chunks

    def copy(self):
        op = Op(self.name, self.ctype, list(self.chans), list(self.src), list(self.dst), self.tbg,
                self.reduce_op, self.sync, list(self.sems), self.barrier_id, self.nblocks,
                None if self.body is None else [o.copy() for o in self.body], self.unit,
                self.num_chunks)
        return op

    def __repr__(self):
        parts = [self.name]
        if self.ctype != "none":
            parts.append(self.ctype)
        if self.chans:
            parts.append(f"ch={self.chans}")
        if self.src:
            parts.append(f"src={self.src}")
        if self.dst:
            parts.append(f"dst={self.dst}")
        if self.tbg:
            parts.append(f"tbg={self.tbg}")
        if self.sync:
            parts.append(f"sync={self.sync}")
        if self.sems:
            parts.append(f"sems={self.sems}")
        if self.body is not None:
            parts.append(f"body={self.body}")
        return "Op(" + ", ".join(parts) + ")"

    # ---- properties used by the passes -------------------------------------------------------
    def starts_with_sync(self):
        if self.name == "nop" or self.name == "barrier":
            return True
        if self.name == "pipeline" and self.body:
            return self.body[0].starts_with_sync()
        return False

    def ends_with_sync(self):
        if self.name == "nop" or self.name == "barrier":
            return True
        if self.name == "pipeline" and self.body:
            return self.body[-1].ends_with_sync()
        return False

    def local_accesses(self, sw_types=None):
        """(reads, writes): (btype, start, end) chunk ranges of this rank (plan-format §7.6).

        Packet data synchronises itself, so packet reads (``upkt``, ``rppkt``, packet sources of
        reduces) and packet writes (``cpkt`` destination, packet copies) are not tracked.
        Unlike the reference, the plain source of a packet reduce is tracked (P24).
        """
        reads, writes = [], []
        n = self.name
        if n == "pipeline":
            for op in self.body or ():
                r, w = op.local_accesses(sw_types)
                reads.extend(r)
                writes.extend(w)
            return reads, writes

        def add(lst, d):
            if d[0] == "L":
                lst.append((d[1], d[3], d[3] + d[4]))
            elif d[0] == "S" and sw_types is not None:
                lst.append((sw_types[d[1]], d[3], d[3] + d[4]))

        if n == "copy":
            add(reads, self.src[0])
            add(writes, self.dst[0])
        elif n == "cpkt":
            add(reads, self.src[0])
        elif n == "upkt":
            add(writes, self.dst[0])
        elif n in PUT_LIKE:
            if not (n == "ppkt" and self.ctype == "port"):
                for d in self.src:
                    add(reads, d)
            for d in self.dst:  # a memory put's own-rank destinations (plan-format §2.4)
                add(writes, d)
        elif n == "get":
            for d in self.dst:
                add(writes, d)
        elif n in ("re", "res"):
            for d in self.src:
                add(reads, d)
            add(writes, self.dst[0])
        elif n in PACKET_REDUCES:
            add(reads, self.src[0])
            add(writes, self.dst[0])
        elif n in ("rre", "rres"):
            add(reads, self.src[0])
            add(writes, self.dst[0])
        elif n in ("glre", "glres", "gstore"):
            # switch descriptors touch this rank's bound buffer; the caller resolves them
            for d in self.src:
                add(reads, d)
            for d in self.dst:
                add(writes, d)
        return reads, writes
