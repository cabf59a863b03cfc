#!/usr/bin/env python3
"""Summarise the mscclpp-bench JSON records of scripts/gpu-check.sh into Markdown tables.

usage: gpu_report.py OUTDIR [COPY_GBPS]

Reads OUTDIR/bench-*.json (the sweep of the default plans) and OUTDIR/variant-*.json (candidate
plans, tests/gpu/gen_variants.py), one JSON record per row. COPY_GBPS is the device's own
device-to-device copy bandwidth (bytes read + written per second / 1e9) measured in the same
run; with it, allreduce rows get a "bound" column: on ONE GPU every rank's traffic goes through
the same memory, so the fastest an algorithm can finish is (bytes it moves through memory, all
ranks) / copy bandwidth. For the Simple allreduce of plans/ (reduce-scatter + all-gather
through scratch) each rank reads and writes 2(3N-2)/N bytes per message byte (put N-1 chunks,
reduce N chunks and send N-1 copies, copy N-1 chunks out), so all N ranks move 2(3N-2) message
sizes and the algbw bound is COPY / (2(3N-2)). On N separate GPUs each rank has its own memory
and the links bound it instead: this column is for ranks sharing one GPU only.
"""
import glob
import json
import os
import sys


def load(pattern):
    rows = []
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        pass
    return rows


def col(r):
    """The timed column of a row: out-of-place when it ran, else in-place."""
    for k in ("out_of_place", "in_place"):
        c = r.get(k)
        if c and "time_us" in c:
            return c
    return None


def plan_name(r):
    """A candidate's name: its file's name without .json (mscclpp-bench --json `plan_file`), else
    the plan's own name (`plan`, the name inside the file: variants of one script share it)."""
    f = r.get("plan_file")
    if f:
        b = os.path.basename(f)
        return b[:-5] if b.endswith(".json") else b
    return r.get("plan") or "?"


def human(n):
    for unit, s in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{s}"
    return str(n)


def allreduce_bound(copy, n):
    return copy / (2 * (3 * n - 2)) if copy and n > 1 else None


def main():
    out = sys.argv[1]
    copy = float(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] else None
    lines = []
    bench = load(os.path.join(out, "bench-*.json"))
    if bench:
        lines.append("## Default plans (mscclpp-bench, MSCCLPP_HAL=cuda, ranks on one GPU)\n")
        if copy:
            lines.append(f"Device-to-device copy: {copy:.0f} GB/s (read + write). Allreduce bound "
                         "= copy / (2(3N-2)) algbw (tests/gpu/gpu_report.py).\n")
        lines.append("| collective | ranks | size | time (us) | algbw (GB/s) | busbw (GB/s) "
                     "| wrong | % of bound |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for r in bench:
            c = col(r)
            if not c:
                err = (r.get("out_of_place") or r.get("in_place") or {}).get("error", "?")
                lines.append(f"| {r['collective']} | {r['nranks']} | {human(r['size'])} | "
                             f"error: {err} | | | | |")
                continue
            b = allreduce_bound(copy, r["nranks"]) if r["collective"] == "allreduce" else None
            pct = f"{100 * c['algbw'] / b:.0f}%" if b else ""
            lines.append(f"| {r['collective']} | {r['nranks']} | {human(r['size'])} | "
                         f"{c['time_us']:.2f} | {c['algbw']:.2f} | {c['busbw']:.2f} | "
                         f"{c['wrong'] if c['wrong'] is not None else '-'} | {pct} |")
        lines.append("")
    var = load(os.path.join(out, "variant-*.json"))
    if var:
        lines.append("## Candidate plans (tests/gpu/gen_variants.py): time (us) per size\n")
        sizes = sorted({r["size"] for r in var})
        by = {}
        for r in var:
            name = plan_name(r)
            c = col(r)
            by.setdefault((r["collective"], r["nranks"], name), {})[r["size"]] = (
                f"{c['time_us']:.1f}" if c else "err")
        lines.append("| plan | ranks | " + " | ".join(human(s) for s in sizes) + " |")
        lines.append("|---|---|" + "---|" * len(sizes))
        for (coll, n, name), t in sorted(by.items()):
            lines.append(f"| {name} | {n} | " + " | ".join(t.get(s, "") for s in sizes) + " |")
        lines.append("")
        # best candidate per collective, rank count and size
        lines.append("## Best candidate per size\n")
        lines.append("| collective | ranks | size | best plan | time (us) | busbw (GB/s) |")
        lines.append("|---|---|---|---|---|---|")
        best = {}
        for r in var:
            c = col(r)
            if not c:
                continue
            key = (r["collective"], r["nranks"], r["size"])
            if key not in best or c["time_us"] < best[key][1]["time_us"]:
                best[key] = (plan_name(r), c)
        for (coll, n, size), (name, c) in sorted(best.items()):
            lines.append(f"| {coll} | {n} | {human(size)} | {name} | {c['time_us']:.2f} | "
                         f"{c['busbw']:.2f} |")
        lines.append("")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
