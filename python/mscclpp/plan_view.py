"""Look at a plan: a text summary, or an SVG timeline (``python3 -m mscclpp show PLAN --svg F``).

The timeline has one row per thread block (grouped by rank) and one box per operation, in
program order. Boxes are placed on a logical clock, not measured time: an operation starts after
the previous one of its block and, for a ``wait``, after the ``signal`` it consumes. Arrows go
from each signal to the wait it releases. Signals and waits are paired the way the executor
connects channels (see docs/plan-format.md, "Channels"): the i-th channel from rank A to rank B
(memory channels, then port channels, in file order) is connected to the i-th channel from B to
A, and on each channel the n-th signal releases the n-th wait.
"""

import json
from xml.sax.saxutils import escape, quoteattr

SIGNALS = frozenset(["signal", "rlxsignal", "pws", "pwsf"])
WAITS = frozenset(["wait", "rlxwait"])

# Box colours by what an operation does.
_KIND_COLORS = {
    "sync": "#d9d9d9",      # signal, wait, flush, barrier, nop, semaphores
    "local": "#b3de69",     # copy, reduce on this rank's buffers
    "remote": "#fdb462",    # put, get, remote reads and writes
    "packet": "#bebada",    # LL packet ops
    "switch": "#80b1d3",    # NVLS multicast
    "other": "#ffffb3",
}
_SYNC = frozenset(["signal", "rlxsignal", "wait", "rlxwait", "flush", "barrier", "nop",
                   "sem_acquire", "sem_release"])

BOX_W, BOX_H, GAP_X, ROW_H = 70, 24, 40, 32
LEFT, TOP = 130, 60


_KINDS = {
    "sync": _SYNC | {"pipeline"},
    "local": frozenset(["copy", "re"]),
    "remote": frozenset(["put", "get", "pws", "pwsf", "res", "rre", "rres"]),
    "packet": frozenset(["ppkt", "rppkt", "cpkt", "upkt", "repkt", "recpkt", "respkt",
                         "recspkt"]),
    "switch": frozenset(["glres", "gstore", "gstorepkt"]),
}


def _kind(op):
    name = op.get("name", "")
    for kind, names in _KINDS.items():
        if name in names:
            return kind
    return "other"


def _load(plan):
    if isinstance(plan, dict):
        return plan
    if isinstance(plan, str) and plan.lstrip().startswith("{"):
        return json.loads(plan)
    with open(plan) as f:
        return json.load(f)


def _flat_ops(ops):
    """Operations in program order; a pipeline's body follows it, marked as nested."""
    out = []
    for op in ops:
        out.append((op, False))
        if op.get("name") == "pipeline":
            out.extend((o, True) for o, _ in _flat_ops(op.get("ops", [])))
    return out


class Timeline:
    """Blocks, placed operations and signal->wait pairs of one plan."""

    def __init__(self, plan):
        self.plan = _load(plan)
        self.label = self.plan.get("name")
        if not self.label and isinstance(plan, str) and not plan.lstrip().startswith("{"):
            self.label = plan.rsplit("/", 1)[-1]
        gpus = self.plan.get("gpus", [])
        # peers[rank][ctype] = list of peer ranks, indexed by global channel id
        self.peers = []
        for g in gpus:
            peers = {"memory": [], "port": []}
            for ch in g.get("channels", []):
                if ch.get("channel_type") in peers:
                    peers[ch["channel_type"]].extend(ch.get("connected_to", []))
            self.peers.append(peers)
        self.partner = self._pair_channels()
        # rows: (rank, tb id, [(op, nested)]); ops keyed (row index, op index)
        self.rows = []
        for g in gpus:
            for tb in g.get("threadblocks", []):
                self.rows.append((g.get("id", len(self.rows)), tb, _flat_ops(tb.get("ops", []))))
        self.arrows = self._match_signals()
        self.start, self.cyclic = self._schedule()

    def _pair_channels(self):
        """(rank, ctype, gid) -> (peer, ctype, gid) of the connected channel."""
        by_peer = []
        for peers in self.peers:
            d = {}
            for ct in ("memory", "port"):
                for gid, peer in enumerate(peers[ct]):
                    d.setdefault(peer, []).append((ct, gid))
            by_peer.append(d)
        partner = {}
        for a, d in enumerate(by_peer):
            for b, chans in d.items():
                if not 0 <= b < len(by_peer):
                    continue
                back = by_peer[b].get(a, [])
                for i, (ct, gid) in enumerate(chans):
                    if i < len(back):
                        partner[(a, ct, gid)] = (b,) + back[i]
        return partner

    def _global_channels(self, tb, op):
        ct = op.get("channel_type", "none")
        table = []
        for entry in tb.get("channels", []):
            if entry.get("channel_type") == ct:
                table.extend(entry.get("channel_ids", []))
        return [(ct, table[k]) for k in op.get("channel_ids", [])
                if isinstance(k, int) and 0 <= k < len(table)]

    def _match_signals(self):
        """[(signal (row, i), wait (row, j))]: the n-th signal on a channel with the n-th wait
        on its partner (blocks in file order, operations in program order)."""
        sent, waited = {}, {}
        for row, (rank, tb, ops) in enumerate(self.rows):
            for i, (op, _) in enumerate(ops):
                name = op.get("name")
                if name in SIGNALS or name in WAITS:
                    for ct, gid in self._global_channels(tb, op):
                        book = sent if name in SIGNALS else waited
                        book.setdefault((rank, ct, gid), []).append((row, i))
        arrows = []
        for key, sigs in sent.items():
            dst = self.partner.get(key)
            waits = waited.get(dst, []) if dst else []
            arrows.extend(zip(sigs, waits))
        return sorted(arrows)

    def _schedule(self):
        """Logical start column of every op: after its predecessor and after the signal it waits
        for. A plan whose waits form a cycle (it would deadlock) falls back to program order."""
        start = {(row, i): i for row, (_, _, ops) in enumerate(self.rows) for i in range(len(ops))}
        deps = {}
        for s, w in self.arrows:
            deps.setdefault(w, []).append(s)
        for _ in range(len(start) + 1):
            changed = False
            for row, (_, _, ops) in enumerate(self.rows):
                for i in range(len(ops)):
                    t = start[(row, i - 1)] + 1 if i else 0
                    for s in deps.get((row, i), []):
                        t = max(t, start[s] + 1)
                    if t != start[(row, i)]:
                        start[(row, i)] = t
                        changed = True
            if not changed:
                return start, False
        return {k: k[1] for k in start}, True

    def summary(self):
        p = self.plan
        lines = [f"plan {p.get('name')!r}: {p.get('collective')}, {len(p.get('gpus', []))} ranks, "
                 f"protocol {p.get('protocol')}, {'in-place' if p.get('inplace') else 'out-of-place'}"]
        for rank in sorted({r for r, _, _ in self.rows}):
            blocks = [(tb, ops) for r, tb, ops in self.rows if r == rank]
            counts = {}
            for _, ops in blocks:
                for op, _ in ops:
                    counts[op.get("name")] = counts.get(op.get("name"), 0) + 1
            ops_text = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
            lines.append(f"  rank {rank}: {len(blocks)} thread block(s): {ops_text}")
        lines.append(f"  {len(self.arrows)} signal->wait pair(s)"
                     + ("; the waits form a cycle (the plan would deadlock)" if self.cyclic else ""))
        return "\n".join(lines)

    def to_svg(self):
        ncols = max(self.start.values(), default=-1) + 1
        width = LEFT + max(ncols, 1) * (BOX_W + GAP_X) + 40
        legend_y = TOP + len(self.rows) * ROW_H + 30
        height = legend_y + 40
        p = self.plan
        title = (f"{self.label or 'plan'}: {p.get('collective')}, "
                 f"{len(p.get('gpus', []))} ranks, {p.get('protocol')}")
        out = ['<?xml version="1.0" encoding="UTF-8"?>',
               f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
               f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
               '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
               'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
               'fill="#c0392b"/></marker></defs>',
               f'<rect width="{width}" height="{height}" fill="#fafafa"/>',
               f'<text x="{width // 2}" y="28" font-size="15" text-anchor="middle">'
               f'{escape(title)}</text>']
        if self.cyclic:
            out.append(f'<text x="{width // 2}" y="46" text-anchor="middle" fill="#c0392b">'
                       'waits form a cycle: boxes in program order (the plan would deadlock)'
                       '</text>')

        def box_xy(key):
            row, _ = key
            return (LEFT + self.start[key] * (BOX_W + GAP_X), TOP + row * ROW_H)

        # arrows first, so that the boxes stay readable where lines cross them
        for s, w in self.arrows:
            (x1, y1), (x2, y2) = box_xy(s), box_xy(w)
            sx, sy = x1 + BOX_W, y1 + BOX_H // 2
            wx, wy = x2, y2 + BOX_H // 2
            fr = f"{self.rows[s[0]][0]}/{self.rows[s[0]][1].get('id')}/{s[1]}"
            to = f"{self.rows[w[0]][0]}/{self.rows[w[0]][1].get('id')}/{w[1]}"
            out.append(f'<path class="arrow" data-from="{fr}" data-to="{to}" '
                       f'd="M{sx},{sy} C{sx + 30},{sy} {wx - 30},{wy} {wx},{wy}" fill="none" '
                       'stroke="#c0392b" stroke-width="1.3" stroke-opacity="0.8" marker-end="url(#arrow)"/>')
        prev_rank = None
        for row, (rank, tb, ops) in enumerate(self.rows):
            y = TOP + row * ROW_H
            if rank != prev_rank and row:
                out.append(f'<line x1="10" y1="{y - 4}" x2="{width - 10}" y2="{y - 4}" '
                           'stroke="#888" stroke-dasharray="4 3"/>')
            prev_rank = rank
            out.append(f'<g class="block" data-rank="{rank}" data-tb="{tb.get("id")}">')
            out.append(f'<text x="10" y="{y + BOX_H // 2 + 4}">rank {rank}, tb {tb.get("id")}'
                       '</text>')
            for i, (op, nested) in enumerate(ops):
                x, _ = box_xy((row, i))
                name = op.get("name", "?")
                color = _KIND_COLORS[_kind(op)]
                dash = ' stroke-dasharray="3 2"' if nested else ""
                detail = json.dumps({k: v for k, v in op.items() if k != "ops"})
                out.append(f'<g class="op" data-rank="{rank}" data-tb="{tb.get("id")}" '
                           f'data-index="{i}" data-name={quoteattr(name)}>'
                           f'<title>{escape(detail)}</title>'
                           f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="3" '
                           f'fill="{color}" stroke="#333"{dash}/>'
                           f'<text x="{x + BOX_W // 2}" y="{y + BOX_H // 2 + 4}" '
                           f'text-anchor="middle">{escape(name[:12])}</text></g>')
            out.append('</g>')
        x = LEFT
        for kind, color in _KIND_COLORS.items():
            out.append(f'<rect x="{x}" y="{legend_y}" width="14" height="14" fill="{color}" '
                       f'stroke="#333"/><text x="{x + 20}" y="{legend_y + 11}">{kind}</text>')
            x += 90
        out.append(f'<text x="{x + 10}" y="{legend_y + 11}" fill="#c0392b">arrow: signal '
                   'releases wait</text>')
        out.append('</svg>')
        return "\n".join(out) + "\n"


def show(plan, svg=None):
    """Summary text of `plan` (a dict, JSON text or path); with `svg`, also write the timeline
    there. Returns the Timeline."""
    tl = Timeline(plan)
    if svg:
        with open(svg, "w") as f:
            f.write(tl.to_svg())
    return tl
