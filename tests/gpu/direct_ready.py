#!/usr/bin/env python3
"""What the direct plans' opening handshake cost (issue 19): scripts/gpu-check.sh step `ready`.

The direct plans (plans/direct/) open with no handshake: the executor fences every launch of a
plan that reaches the peers' buffers, and once that fence is through every peer is in the call
(plans/_common.py, direct_ranks). Before, each block of each rank first signalled every peer
and waited for theirs, a round trip the fence had already made. This tool writes the plans as
they were (the programs with ready=True) and compares the two from mscclpp-bench records.

usage: direct_ready.py gen SRC OUTDIR
       direct_ready.py compare [--brief] FILE.json...

gen: every direct plan the programs under SRC/plans make (plans/direct/, direct/host/,
direct/cuda/), with the opening handshake, written under OUTDIR at the same relative paths.

compare: FILEs are mscclpp-bench --json records named ready-<VARIANT>-<COLL>-<N>[-<ROUND>].json,
VARIANT `ready` (the handshake) or `none` (the shipped plans). Per collective, rank count and
size: each variant's best time over its rounds, the difference (ready - none, us) and the
ratio. --brief: one line (the summary of gpu-check.sh), the median difference per rank count.
"""
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_report import col, human, load  # noqa: E402

NAME = re.compile(r"ready-(ready|none)-([a-z]+)-(\d+)(?:-\d+)?\.json$")


def gen(src, outdir):
    """Write every direct plan with its opening handshake under outdir; returns the count."""
    sys.path.insert(0, os.path.join(src, "python"))
    from mscclpp.default_plans import generate
    written = 0
    for rel, text in generate(os.path.join(src, "plans"), suffix="_direct.py", ready=True):
        dest = os.path.join(outdir, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "w") as f:
            f.write(text)
        written += 1
    return written


def collect(files):
    """{(coll, n, size): {variant: best us}} from the records of the named files."""
    best = {}
    for path in files:
        m = NAME.search(os.path.basename(path))
        if not m:
            raise ValueError(f"{path}: not named ready-<ready|none>-<coll>-<ranks>[-<round>].json")
        variant, coll, n = m.group(1), m.group(2), int(m.group(3))
        for r in load(path):
            c = col(r)
            if c is None or "size" not in r:
                continue
            d = best.setdefault((coll, n, r["size"]), {})
            d[variant] = min(d.get(variant, float("inf")), c["time_us"])
    return best


def compare(files, brief=False):
    best = collect(files)
    rows = []
    for (coll, n, size), d in sorted(best.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2])):
        if "ready" in d and "none" in d:
            rows.append((coll, n, size, d["ready"], d["none"]))
    if not rows:
        return "no pair of variants to compare"
    if brief:
        parts = []
        for n in sorted({r[1] for r in rows}):
            diffs = [r[3] - r[4] for r in rows if r[1] == n]
            parts.append(f"{n} ranks: handshake costs {statistics.median(diffs):+.1f} us "
                         f"(median of {len(diffs)}, {min(diffs):+.1f} .. {max(diffs):+.1f})")
        return "; ".join(parts)
    out = ["| collective | ranks | size | with the handshake (us) | without (us) | "
           "difference (us) | with / without |", "|---|---|---|---|---|---|---|"]
    for coll, n, size, t_ready, t_none in rows:
        out.append(f"| {coll} | {n} | {human(size)} | {t_ready:.1f} | {t_none:.1f} | "
                   f"{t_ready - t_none:+.1f} | {t_ready / t_none:.3f} |")
    return "\n".join(out)


def main(argv):
    if len(argv) >= 3 and argv[0] == "gen":
        print(f"{gen(argv[1], argv[2])} plans written under {argv[2]}")
        return 0
    if argv and argv[0] == "compare":
        brief = "--brief" in argv[1:]
        files = [a for a in argv[1:] if a != "--brief"]
        if not files:
            print("direct_ready.py compare: no files", file=sys.stderr)
            return 2
        print(compare(files, brief))
        return 0
    print(__doc__.split("\n\n")[2], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
