"""Look at a plan: a text summary, an SVG timeline (``python3 -m mscclpp show PLAN --svg F``) or a
Chrome-trace / Perfetto file (``--trace F.json``: open it in https://ui.perfetto.dev or
chrome://tracing), for all ranks or some (``--ranks 0,2-3``).

The timeline has one row per thread block (grouped by rank) and one box per operation, in
program order. Boxes are placed on a logical clock, not measured time: an operation starts after
the previous one of its block, after the ``signal`` a ``wait`` consumes, and after the ops that
wrote the packets a packet op reads. Arrows show both dependencies: signal -> wait (red), and
packet writer -> packet reader (blue, dashed: LL plans synchronise through the packets' flags,
not through signals). Signals and waits are paired the way the executor connects channels (see
docs/plan-format.md, "Channels"): the i-th channel from rank A to rank B (memory channels, then
port channels, in file order) is connected to the i-th channel from B to A, and on each channel
the n-th signal releases the n-th wait. A packet read depends on every op that writes packets
into an overlapping chunk range of the same rank's buffer.
"""

import json
from xml.sax.saxutils import escape, quoteattr

SIGNALS = frozenset(["signal", "rlxsignal", "pws", "pwsf"])
WAITS = frozenset(["wait", "rlxwait"])
# Which descriptors of an op are packets: (source indices, destination indices) as slices.
PACKET_READS = {"upkt": slice(0, 1), "rppkt": slice(0, 1), "gstorepkt": slice(0, 1),
                "repkt": slice(1, None), "recpkt": slice(1, None), "respkt": slice(1, None),
                "recspkt": slice(1, None)}
PACKET_WRITES = {"cpkt": slice(0, 1), "rppkt": slice(0, None), "gstorepkt": slice(0, 1),
                 "repkt": slice(1, None), "recpkt": slice(1, None), "respkt": slice(1, None),
                 "recspkt": slice(1, None)}
# ppkt: packets out; through a port channel the proxy relays packets (reads them too)
TRACE_STEP_US = 10   # a logical step on the trace's clock

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


def parse_ranks(text):
    """"0,2-3" -> [0, 2, 3]. Raises ValueError with a sentence."""
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if lo > hi:
                    raise ValueError
                out.extend(range(lo, hi + 1))
            else:
                out.append(int(part))
        except ValueError:
            raise ValueError(f"--ranks {text!r}: expected ranks such as 0,2-3") from None
    return sorted(set(out))


class Timeline:
    """Blocks, placed operations, signal->wait pairs and packet dependencies of one plan."""

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
        self.packet_arrows = self._match_packets()
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

    def _regions(self, rank, tb, op, key, which):
        """(owner rank, buffer type, first chunk, end chunk) of the descriptors op[key][which]."""
        gpus = self.plan.get("gpus", [])
        g = gpus[rank] if 0 <= rank < len(gpus) else {}
        out = []
        for d in op.get(key, [])[which]:
            if not isinstance(d, dict):
                continue
            i, n = d.get("index", 0), d.get("size", 0)
            if not isinstance(i, int) or not isinstance(n, int):
                continue
            if "type" in d:
                out.append((rank, d["type"], i, i + n))
            elif "buffer_id" in d:
                ct = op.get("channel_type", "none")
                refs = [q for e in tb.get("remote_buffer_refs", []) or []
                        if e.get("access_channel_type") == ct
                        for q in e.get("remote_buffer_ids", [])]
                k = d["buffer_id"]
                rbufs = g.get("remote_buffers", [])
                if isinstance(k, int) and 0 <= k < len(refs) and 0 <= refs[k] < len(rbufs):
                    rb = rbufs[refs[k]]
                    out.append((rb.get("rank"), rb.get("type"), i, i + n))
            elif "switch_channel_id" in d:
                table = [c for e in tb.get("channels", []) if e.get("channel_type") == "switch"
                         for c in e.get("channel_ids", [])]
                groups = [(e.get("buffer_type"), grp.get("ranks", [])) for e in
                          g.get("channels", []) if e.get("channel_type") == "switch"
                          for grp in e.get("rank_groups", [])]
                k = d["switch_channel_id"]
                if isinstance(k, int) and 0 <= k < len(table) and 0 <= table[k] < len(groups):
                    bt, ranks = groups[table[k]]
                    out.extend((r, bt, i, i + n) for r in ranks)
        return out

    def _match_packets(self):
        """[(writer (row, i), reader (row, j))]: every op that writes packets into a chunk range
        another op reads packets from (same rank's buffer, overlapping chunks)."""
        writes, reads = [], []
        for row, (rank, tb, ops) in enumerate(self.rows):
            for i, (op, _) in enumerate(ops):
                name = op.get("name")
                port = op.get("channel_type") == "port"
                w = PACKET_WRITES.get(name, slice(0, None) if name == "ppkt" else None)
                r = PACKET_READS.get(name, slice(0, None) if name == "ppkt" and port else None)
                if w is not None:
                    writes += [((row, i), reg) for reg in self._regions(rank, tb, op, "dst_buff", w)]
                if r is not None:
                    reads += [((row, i), reg) for reg in self._regions(rank, tb, op, "src_buff", r)]
        by_buf = {}
        for key, (owner, bt, lo, hi) in writes:
            by_buf.setdefault((owner, bt), []).append((lo, hi, key))
        arrows = set()
        for key, (owner, bt, lo, hi) in reads:
            for wlo, whi, wkey in by_buf.get((owner, bt), []):
                if wkey != key and wlo < hi and lo < whi:
                    arrows.add((wkey, key))
        return sorted(arrows)

    def _schedule(self):
        """Logical start column of every op: after its predecessor, after the signal it waits
        for and after the writers of the packets it reads. A plan whose dependencies form a
        cycle (it would deadlock) falls back to program order."""
        start = {(row, i): i for row, (_, _, ops) in enumerate(self.rows) for i in range(len(ops))}
        deps = {}
        for s, w in self.arrows + self.packet_arrows:
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
        lines.append(f"  {len(self.arrows)} signal->wait pair(s), {len(self.packet_arrows)} "
                     "packet writer->reader pair(s)"
                     + ("; the dependencies form a cycle (the plan would deadlock)"
                        if self.cyclic else ""))
        return "\n".join(lines)

    def _visible(self, ranks):
        """Rows drawn (all, or those of `ranks`), as {row: position}."""
        rows = [row for row, (rank, _, _) in enumerate(self.rows)
                if ranks is None or rank in ranks]
        return {row: k for k, row in enumerate(rows)}

    def to_svg(self, ranks=None):
        """The timeline picture; `ranks` (a list) draws only those ranks' blocks and the arrows
        between them."""
        vis = self._visible(ranks)
        keys = [k for k in self.start if k[0] in vis]
        ncols = max((self.start[k] for k in keys), default=-1) + 1
        width = LEFT + max(ncols, 1) * (BOX_W + GAP_X) + 40
        legend_y = TOP + len(vis) * ROW_H + 30
        height = legend_y + 40
        p = self.plan
        title = (f"{self.label or 'plan'}: {p.get('collective')}, "
                 f"{len(p.get('gpus', []))} ranks, {p.get('protocol')}"
                 + (f" (ranks {', '.join(map(str, ranks))})" if ranks is not None else ""))
        out = ['<?xml version="1.0" encoding="UTF-8"?>',
               f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
               f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
               '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
               'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
               'fill="#c0392b"/></marker><marker id="parrow" viewBox="0 0 10 10" refX="10" '
               'refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path '
               'd="M0,0 L10,5 L0,10 z" fill="#2e6da4"/></marker></defs>',
               f'<rect width="{width}" height="{height}" fill="#fafafa"/>',
               f'<text x="{width // 2}" y="28" font-size="15" text-anchor="middle">'
               f'{escape(title)}</text>']
        if self.cyclic:
            out.append(f'<text x="{width // 2}" y="46" text-anchor="middle" fill="#c0392b">'
                       'dependencies form a cycle: boxes in program order (the plan would '
                       'deadlock)</text>')

        def box_xy(key):
            row, _ = key
            return (LEFT + self.start[key] * (BOX_W + GAP_X), TOP + vis[row] * ROW_H)

        # arrows first, so that the boxes stay readable where lines cross them
        for cls, color, dash, marker, arrows in (
                ("arrow", "#c0392b", "", "arrow", self.arrows),
                ("packet-arrow", "#2e6da4", ' stroke-dasharray="5 3"', "parrow",
                 self.packet_arrows)):
            for s, w in arrows:
                if s[0] not in vis or w[0] not in vis:
                    continue
                (x1, y1), (x2, y2) = box_xy(s), box_xy(w)
                sx, sy = x1 + BOX_W, y1 + BOX_H // 2
                wx, wy = x2, y2 + BOX_H // 2
                fr = f"{self.rows[s[0]][0]}/{self.rows[s[0]][1].get('id')}/{s[1]}"
                to = f"{self.rows[w[0]][0]}/{self.rows[w[0]][1].get('id')}/{w[1]}"
                out.append(f'<path class="{cls}" data-from="{fr}" data-to="{to}" '
                           f'd="M{sx},{sy} C{sx + 30},{sy} {wx - 30},{wy} {wx},{wy}" fill="none" '
                           f'stroke="{color}" stroke-width="1.3" stroke-opacity="0.8"{dash} '
                           f'marker-end="url(#{marker})"/>')
        prev_rank = None
        for row, (rank, tb, ops) in enumerate(self.rows):
            if row not in vis:
                continue
            y = TOP + vis[row] * ROW_H
            if rank != prev_rank and vis[row]:
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
        out.append(f'<text x="{x + 190}" y="{legend_y + 11}" fill="#2e6da4">dashed: packets '
                   'written -> read</text>')
        out.append('</svg>')
        return "\n".join(out) + "\n"

    def to_trace(self, ranks=None):
        """Chrome-trace / Perfetto JSON (a dict): a process per rank, a thread per thread block,
        a slice per op on the logical clock (TRACE_STEP_US per step; not measured time), and a
        flow per dependency (signal -> wait, packet writer -> reader)."""
        vis = self._visible(ranks)
        step = TRACE_STEP_US
        ev = []
        seen = set()
        for row, (rank, tb, ops) in enumerate(self.rows):
            if row not in vis:
                continue
            tid = tb.get("id", 0)
            if rank not in seen:
                seen.add(rank)
                ev.append({"ph": "M", "name": "process_name", "pid": rank, "tid": 0,
                           "args": {"name": f"rank {rank}"}})
                ev.append({"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0,
                           "args": {"sort_index": rank}})
            ev.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": tid,
                       "args": {"name": f"tb {tid}"}})
            for i, (op, nested) in enumerate(ops):
                ev.append({"ph": "X", "name": op.get("name", "?"), "cat": _kind(op),
                           "pid": rank, "tid": tid, "ts": self.start[(row, i)] * step,
                           "dur": step * 0.8,
                           "args": {"index": i, "in_pipeline": nested,
                                    "op": {k: v for k, v in op.items() if k != "ops"}}})
        flow = 0
        for cat, arrows in (("signal", self.arrows), ("packet", self.packet_arrows)):
            for s, w in arrows:
                if s[0] not in vis or w[0] not in vis:
                    continue
                flow += 1
                for key, ph, ts in ((s, "s", self.start[s] * step + step * 0.4),
                                    (w, "f", self.start[w] * step)):
                    rank, tb, _ = self.rows[key[0]]
                    e = {"ph": ph, "id": flow, "name": cat, "cat": cat, "pid": rank,
                         "tid": tb.get("id", 0), "ts": ts}
                    if ph == "f":
                        e["bp"] = "e"
                    ev.append(e)
        p = self.plan
        return {"traceEvents": ev, "displayTimeUnit": "ns",
                "otherData": {"plan": self.label, "collective": p.get("collective"),
                              "ranks": len(p.get("gpus", [])),
                              "clock": f"logical: one step = {step} us, not measured time"}}


def show(plan, svg=None, trace=None, ranks=None):
    """Summary text of `plan` (a dict, JSON text or path); with `svg`, also write the timeline
    there, with `trace` a Chrome-trace/Perfetto JSON file; `ranks` (a list) limits both to
    those ranks. Returns the Timeline."""
    tl = Timeline(plan)
    n = len(tl.plan.get("gpus", []))
    if ranks is not None and any(not 0 <= r < n for r in ranks):
        raise ValueError(f"--ranks: the plan has ranks 0..{n - 1}")
    if svg:
        with open(svg, "w") as f:
            f.write(tl.to_svg(ranks))
    if trace:
        with open(trace, "w") as f:
            json.dump(tl.to_trace(ranks), f)
            f.write("\n")
    return tl
