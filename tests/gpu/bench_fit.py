#!/usr/bin/env python3
"""Where the time of large calls goes, and which plan mode is fastest (issue 19), from the
mscclpp-bench --json records of scripts/gpu-check.sh steps `fit` and `auto`.

usage: bench_fit.py fit [--brief] FILE.json...
       bench_fit.py modes [--brief] [--torch MODE=FILE.json ...] [MODE=FILE.json ...]

fit: each FILE holds one plan's rows (mscclpp-bench --plan F --json FILE) at several sizes S.
The time per call is fitted as t = a + S / r by least squares over those sizes: a is what a call
costs whatever its size (launch, handshakes, the block syncs around each step), r the rate of
the data loop, on the scale of algbw (message bytes per second, GB/s = 1e9 B/s). Beside them:
the ideal rate the bench prints (`ideal_algbw`: the collective's fewest bytes at the row's
measured copy bandwidth) at the largest size, r's share of it, and what a and r predict for a
64 MiB call: its time, a's part of that time and its share of the ideal (with the measured one
when 64 MiB ran), and a and r again over the sizes from 64 MiB up (past a GPU's L2 cache).
Without a copy bandwidth in the records (no bounds) the ideal columns are "-".

modes: the same collective and rank count timed under several MSCCLPP_PLAN_DIRECT modes in one
run (MODE=FILE, a bench --json file per mode; --torch MODE=FILE, tests/gpu/torch_nccl.py's
{bytes: us} per mode, a mode given again for another torchrun keeping each size's best): per size the time of each mode, the plan each bench row ran, and the
fastest; the bench's out-of-place and in-place columns each on their own. --brief prints one
line per input set (gpu-check.sh's summary) instead of tables.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_report import col, human, load, plan_name  # noqa: E402

MIB = 1 << 20


def fit_line(points):
    """Least squares of t = a + b S over (S, t) points: (a, b), or None with < 2 distinct S."""
    n = len(points)
    if n < 2:
        return None
    ms = sum(s for s, _ in points) / n
    mt = sum(t for _, t in points) / n
    sxx = sum((s - ms) ** 2 for s, _ in points)
    if sxx == 0:
        return None
    b = sum((s - ms) * (t - mt) for s, t in points) / sxx
    return mt - b * ms, b


def rate_gbps(b):
    """GB/s of a slope b in microseconds per byte (1 B/us = 1e6 B/s = 1e-3 GB/s)."""
    return 1e-3 / b if b > 0 else None


def fit_rows(rows, at=64 * MIB, large=64 * MIB):
    """The fit of one plan's rows: a dict with the figures the tables print. a_large, r_large:
    the same fit over the sizes from `large` up only (None with fewer than 2): a GPU's L2 cache
    (50 MiB on an H100 or H200) holds the smaller rows' buffers, whose loop may then run faster
    than one line through every size allows."""
    pts, ideal, wrong, errors = [], {}, 0, 0
    for r in rows:
        c = col(r)
        if not c:
            errors += 1
            continue
        if c.get("wrong"):
            wrong += c["wrong"]
        pts.append((r["size"], c["time_us"]))
        if c.get("ideal_algbw"):
            ideal[r["size"]] = (c["ideal_algbw"], c["time_us"])
    pts.sort()
    f = {"sizes": [s for s, _ in pts], "wrong": wrong, "errors": errors, "a": None, "r": None,
         "ideal": None, "r_share": None, "t_at": None, "a_part": None, "share_at": None,
         "measured_at": None, "resid": None, "a_large": None, "r_large": None}
    big = fit_line([(s, t) for s, t in pts if s >= large])
    if big:
        f["a_large"], f["r_large"] = big[0], rate_gbps(big[1])
    line = fit_line(pts)
    if line:
        a, b = line
        f["a"], f["r"] = a, rate_gbps(b)
        f["resid"] = max(abs(a + b * s - t) / t for s, t in pts)
        f["t_at"] = a + b * at
        f["a_part"] = a / f["t_at"] if f["t_at"] > 0 else None
    if ideal:
        top = max(ideal)
        f["ideal"] = ideal[top][0]
        if f["r"]:
            f["r_share"] = f["r"] / f["ideal"]
        # the 64 MiB row's own ideal where it ran (the copy bandwidth is measured per size)
        ideal_at = ideal[at][0] if at in ideal else f["ideal"]
        if f["t_at"] and f["t_at"] > 0:
            f["share_at"] = at / f["t_at"] * 1e-3 / ideal_at
        if at in ideal:
            f["measured_at"] = at / ideal[at][1] * 1e-3 / ideal_at
    return f


def pct(x):
    return f"{100 * x:.0f}%" if x is not None else "-"


def num(x, fmt):
    return format(x, fmt) if x is not None else "-"


def group(paths):
    """Rows per plan: the file's rows keyed by (plan name, ranks), in file order."""
    out = {}
    for p in paths:
        for r in load(p):
            out.setdefault((plan_name(r), r["nranks"]), []).append(r)
    return out


def fit_main(paths, brief):
    res = [(name, n, fit_rows(rows)) for (name, n), rows in group(paths).items()]
    if brief:
        parts = [f"{name}: a {num(f['a'], '.1f')} us, r {num(f['r'], '.0f')} GB/s "
                 f"({pct(f['r_share'])} of ideal), 64M {pct(f['share_at'])}"
                 + (f", from 64M a {f['a_large']:.1f} r {num(f['r_large'], '.0f')}"
                    if f["a_large"] is not None else "")
                 + (f", {f['wrong']} wrong" if f["wrong"] else "")
                 + (f", {f['errors']} failed rows" if f["errors"] else "")
                 for name, n, f in res]
        print("; ".join(parts) if parts else "no rows")
        return
    print("## Fixed cost and loop rate per plan: t = a + S / r (tests/gpu/bench_fit.py)\n")
    print("a: microseconds a call costs whatever its size; r: the rate of the data loop (algbw "
          "scale); ideal: the bench's ideal algbw at the largest size; 64M: the time a and r "
          "predict at 64 MiB, a's part of it, its share of the ideal (measured share beside); "
          "a, r from 64M: the fit over 64 MiB and up only (past the L2 cache).\n")
    print("| plan | ranks | sizes | a (us) | r (GB/s) | ideal (GB/s) | r/ideal | 64M time (us) "
          "| a part | 64M/ideal | measured | worst fit error | a from 64M | r from 64M | wrong |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, n, f in res:
        sizes = ",".join(human(s) for s in f["sizes"])
        print(f"| {name} | {n} | {sizes} | {num(f['a'], '.1f')} | {num(f['r'], '.0f')} | "
              f"{num(f['ideal'], '.0f')} | {pct(f['r_share'])} | {num(f['t_at'], '.1f')} | "
              f"{pct(f['a_part'])} | {pct(f['share_at'])} | {pct(f['measured_at'])} | "
              f"{pct(f['resid'])} | {num(f['a_large'], '.1f')} | {num(f['r_large'], '.0f')} | "
              f"{f['wrong'] + f['errors']} |")
    print()


def load_modes(specs):
    """MODE=FILE pairs in order: [(mode, path)]."""
    out = []
    for s in specs:
        mode, sep, path = s.partition("=")
        if not sep or not mode:
            raise SystemExit(f"bench_fit.py: '{s}' is not MODE=FILE")
        out.append((mode, path))
    return out


def bench_modes(pairs, placement):
    """One placement's column ("out_of_place", "in_place") of bench rows under several modes:
    {size: {mode: (time_us or None, plan ran)}}, the collective/ranks, wrong elements."""
    table, what, wrong = {}, set(), 0
    for mode, path in pairs:
        for r in load(path):
            c = r.get(placement)
            if not c:
                continue  # the column did not run (a plan of the other placement)
            what.add((r["collective"], r["nranks"]))
            ran = (r.get("selected_plan") or {}).get(placement) or c.get("plan") or "?"
            wrong += c.get("wrong") or 0
            table.setdefault(r["size"], {})[mode] = (c.get("time_us"), ran)
    return table, what, wrong


def torch_modes(pairs):
    """{size: {mode: (best us, None)}}: a mode given several files (torchruns) keeps each size's
    fastest, as PyTorch's host time per call moves between torchruns (docs/performance.md,
    session 12): the modes are compared at their best, each run in several processes."""
    table = {}
    for mode, path in pairs:
        try:
            with open(path) as f:
                times = json.load(f)
        except (OSError, ValueError):
            continue
        for b, us in times.items():
            per = table.setdefault(int(b), {})
            if us is not None and (per.get(mode, (None,))[0] is None or us < per[mode][0]):
                per[mode] = (us, None)
            else:
                per.setdefault(mode, (us, None))
    return table


def unique(modes):
    """The modes in their first order, each once."""
    return list(dict.fromkeys(modes))


def fastest(per):
    timed = [(t, m) for m, (t, _) in per.items() if t is not None]
    return min(timed)[1] if timed else "-"


def modes_main(bench_specs, torch_specs, brief):
    sets = []
    pairs = load_modes(bench_specs)
    for placement, where in (("out_of_place", ""), ("in_place", ", in place")):
        table, what, wrong = bench_modes(pairs, placement)
        if table:
            label = ", ".join(f"{c} {n} ranks" for c, n in sorted(what)) + where
            sets.append((label, [m for m, _ in pairs], table, wrong, True))
    if pairs and not sets:  # every run failed before its first row
        sets.append(("bench", [m for m, _ in pairs], {}, 0, False))
    tpairs = load_modes(torch_specs)
    if tpairs:
        modes = unique(m for m, _ in tpairs)
        runs = [sum(1 for m, _ in tpairs if m == mode) for mode in modes]
        label = "dist.all_reduce" + (
            ", best of each mode's torchruns (" + ", ".join(
                f"{m} {k}" for m, k in zip(modes, runs)) + ")" if max(runs) > 1 else "")
        sets.append((label, unique(m for m, _ in tpairs), torch_modes(tpairs), 0, False))
    briefs = []
    for label, modes, table, wrong, plans in sets:
        if brief:
            parts = []
            for size in sorted(table):
                per = table[size]
                times = "/".join(num(per.get(m, (None,))[0], ".1f") for m in modes)
                parts.append(f"{human(size)} {times} {fastest(per)}")
            direct = [human(size) for size in sorted(table)
                      if "direct" in str(table[size].get("auto", (None, None))[1] or "")]
            ran = ""
            if "auto" in modes and plans:
                ran = f"; auto ran a direct plan at {','.join(direct) or 'no size'}"
            briefs.append(f"{label} ({'/'.join(modes)} us, fastest): "
                          + (", ".join(parts) or "no times") + ran
                          + (f"; {wrong} wrong" if wrong else ""))
            continue
        print(f"## {label}: time per call (us) by MSCCLPP_PLAN_DIRECT mode\n")
        ran_head = " plan ran (" + "/".join(modes) + ") |" if plans else ""
        print("| size | " + " | ".join(modes) + " | fastest |" + ran_head)
        print("|---|" + "---|" * len(modes) + "---|" + ("---|" if plans else ""))
        for size in sorted(table):
            per = table[size]
            ran = "/".join(str(per.get(m, (None, "-"))[1] or "-") for m in modes)
            print(f"| {human(size)} | " + " | ".join(num(per.get(m, (None,))[0], ".1f")
                                                  for m in modes)
                  + f" | {fastest(per)} |" + (f" {ran} |" if plans else ""))
        if wrong:
            print(f"\n{wrong} wrong elements in these rows.")
        print()
    if brief:
        print("; ".join(briefs))  # one line: a row of gpu-check's summary


def main(argv):
    if len(argv) < 2 or argv[1] not in ("fit", "modes"):
        raise SystemExit(__doc__)
    args = argv[2:]
    brief = "--brief" in args
    args = [a for a in args if a != "--brief"]
    if argv[1] == "fit":
        fit_main(args, brief)
        return
    bench, torch = [], []
    while args:
        a = args.pop(0)
        if a == "--torch":
            if not args:
                raise SystemExit("bench_fit.py: --torch needs MODE=FILE")
            torch.append(args.pop(0))
        else:
            bench.append(a)
    modes_main(bench, torch, brief)


if __name__ == "__main__":
    main(sys.argv)
