#!/usr/bin/env python3
"""Where the time of one launch goes, block by block: the interpreter's phase trace
(MSCCLPP_KERN_TRACE=PREFIX; kernels/common/kern_args.h "Phase trace", docs/gpu.md).

usage: kern_trace.py [--brief] PREFIX

Reads PREFIX.rank<R>.txt of every rank of one run (written at mscclpp_executor_destroy: the
last launch of each rank) and prints, per rank, in microseconds, min / median / max over the
launch's blocks of:
  entry      the block's entry after the rank's first block entered (dispatch spread)
  prologue   entry -> prologue done (arguments, plan header, ops staged, block sync)
  fence      prologue -> launch fence passed (or skipped)
  opK NAME   the end of the op before (or the fence) -> the end of op K
  epilogue   the end of the last op stamped -> exit (flag, last_sig, the fenced launch's
             counter)
  total      entry -> exit
and, first, the entry skew between ranks: each rank's first entry after the earliest rank's.
Where the launch fenced with several blocks, also the fence's hand-off: block 0 waits for the
peers' records and then tells the rank's other blocks (kern_launch_fence), so the others pass
it later by that hop; printed as when block 0 passed it and when the others did (min / median
/ max, from the rank's first entry), and the hop (the others' median less block 0's).
--brief: one line instead (scripts/gpu-check.sh step trace's summary): the plan, the largest
skew, the medians over the blocks of every rank together, and the hop's median over the ranks.
The stamps are the device clock (CUDA: globaltimer, one clock per GPU; host backend: the host's
monotonic clock), so ranks on one GPU (or the host backend) compare directly; ranks on several
GPUs only within a rank.
"""
import glob
import re
import statistics
import sys

POINT = re.compile(r"^([A-Za-z0-9_]+(?::[A-Za-z0-9_?]+)?)=(-|[0-9.]+)$")


def parse(path):
    """One rank's file: its header lines (rank, plan, blocks, base_ns, ...) and 'rows': per block
    [(point, us or None), ...]."""
    info = {"rows": [], "block_ids": []}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            words = line.split()
            if words[0] == "block":
                if len(words) < 2 or not re.fullmatch(r"[0-9]+", words[1]):
                    raise ValueError(f"{path}: a block line without its number: {line}")
                info["block_ids"].append(int(words[1]))
                points = []
                for tok in words[2:]:
                    m = POINT.match(tok)
                    if not m:
                        raise ValueError(f"{path}: bad point '{tok}' in: {line}")
                    points.append((m.group(1), None if m.group(2) == "-" else float(m.group(2))))
                info["rows"].append(points)
            elif len(words) == 2:
                key, val = words
                info[key] = int(val) if re.fullmatch(r"-?[0-9]+", val) else val
    if "rank" not in info or "base_ns" not in info:
        raise ValueError(f"{path}: not a phase trace (no rank or base_ns line)")
    return info


LABEL = {"staged": "prologue", "fenced": "fence", "exit": "epilogue"}


def phases(points):
    """(phase name, microseconds) of one block: its entry (from the rank's first), then each
    span from the last point it reached to the next, then the total (entry -> exit)."""
    at = dict(points)
    entry = at.get("entry")
    if entry is None:
        return []
    out = [("entry", entry)]
    prev = entry
    for name, us in points:
        if name == "entry" or us is None:
            continue
        out.append((LABEL.get(name, name), us - prev))
        prev = us
    if at.get("exit") is not None:
        out.append(("total", at["exit"] - entry))
    return out


def fence_handoff(r):
    """(block 0's fence pass, [the other blocks' passes]) in us from the rank's first entry, or
    None where block 0 or every other block did not stamp it (no fence, one block)."""
    at0, others = None, []
    for b, points in zip(r["block_ids"], r["rows"]):
        us = dict(points).get("fenced")
        if us is None:
            continue
        if b == 0:
            at0 = us
        else:
            others.append(us)
    if at0 is None or not others:
        return None
    return at0, others


def by_phase(ranks):
    """{phase: [us of every block of these ranks]} and the phases in the order they happen,
    total last."""
    rows, order = {}, []
    for r in ranks:
        for points in r["rows"]:
            for name, us in phases(points):
                if name not in rows:
                    rows[name] = []
                    order.append(name)
                rows[name].append(us)
    return rows, [n for n in order if n != "total"] + (["total"] if "total" in rows else [])


def stats(values):
    return min(values), statistics.median(values), max(values)


def report(prefix, out=sys.stdout):
    files = sorted(glob.glob(f"{glob.escape(prefix)}.rank*.txt"),
                   key=lambda p: int(re.search(r"\.rank([0-9]+)\.txt$", p).group(1)))
    if not files:
        print(f"kern_trace: no {prefix}.rank<R>.txt (was MSCCLPP_KERN_TRACE={prefix} set, and "
              "the executor destroyed?)", file=sys.stderr)
        return 1
    ranks = [parse(p) for p in files]
    first = ranks[0]
    print(f"kern_trace {prefix}: {len(ranks)} ranks, plan {first.get('plan')} "
          f"({first.get('collective')}, {first.get('in_bytes')} B in, {first.get('out_bytes')} B "
          f"out), {first.get('blocks')} blocks x {first.get('threads')} threads, "
          f"launch {first.get('launches')} of each rank", file=out)
    t0 = min(r["base_ns"] for r in ranks)
    skew = ", ".join(f"rank {r['rank']} +{(r['base_ns'] - t0) / 1e3:.3f}" for r in ranks)
    print(f"entry skew between ranks (first block's entry after the earliest rank's, us): {skew}",
          file=out)
    # the clock's resolution shows as the smallest gap between two different stamps
    # (within a rank: each rank's stamps count from its own base)
    gaps = []
    for r in ranks:
        stamps = sorted({us for points in r["rows"] for _, us in points if us is not None})
        gaps += [b - a for a, b in zip(stamps, stamps[1:]) if b - a > 0]
    if gaps:
        print(f"smallest gap between two stamps: {min(gaps):.3f} us (the clock's step when "
              "several gaps are that size or multiples of it)", file=out)
    for r in ranks:
        rows, order = by_phase([r])
        exits = [dict(points).get("exit") for points in r["rows"]]
        exits = [e for e in exits if e is not None]
        last = f"{max(exits):.3f}" if exits else "-"
        print(f"rank {r['rank']} ({len(r['rows'])} blocks, the last out at {last} us; us, "
              "min / median / max over blocks):", file=out)
        for name in order:
            lo, med, hi = stats(rows[name])
            label = name.replace(":", " ")
            print(f"  {label:<16} {lo:10.3f} {med:10.3f} {hi:10.3f}   ({len(rows[name])} blocks)",
                  file=out)
        hand = fence_handoff(r)
        if hand:
            at0, others = hand
            lo, med, hi = stats(others)
            print(f"  fence passed: block 0 at {at0:.3f} us, the other {len(others)} blocks at "
                  f"{lo:.3f} / {med:.3f} / {hi:.3f} (hop {med - at0:+.3f} us)", file=out)
    return 0


def brief(prefix, out=sys.stdout):
    """One line: the plan, the largest entry skew, each phase's median over every rank's
    blocks."""
    files = glob.glob(f"{glob.escape(prefix)}.rank*.txt")
    if not files:
        print(f"{prefix}: no trace files", file=out)
        return 1
    ranks = [parse(p) for p in files]
    t0 = min(r["base_ns"] for r in ranks)
    skew = max(r["base_ns"] - t0 for r in ranks) / 1e3
    rows, order = by_phase(ranks)
    meds = ", ".join(f"{n.replace(':', ' ')} {statistics.median(rows[n]):.1f}"
                     for n in order if n != "entry")
    hops = [statistics.median(h[1]) - h[0] for h in map(fence_handoff, ranks) if h]
    hop = f", fence hop {statistics.median(hops):+.1f}" if hops else ""
    print(f"{ranks[0].get('plan')} x{len(ranks)}: skew {skew:.1f} us, medians (us) {meds}{hop}",
          file=out)
    return 0


def main(argv):
    args = argv[1:]
    short = bool(args) and args[0] == "--brief"
    if short:
        args = args[1:]
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    return brief(args[0]) if short else report(args[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
