#!/usr/bin/env bash
# Plans made for the job (executor/made.c) against the shipped plans of plans/multinode/, in one
# run on the host backend (issue 20): which shipped multi-node plans may retire.
#
#   scripts/bench-made.sh [-r ROUNDS] [-n ITERS] [-l "2x1 2x2 ..."] [-c "allreduce ..."]
#                         [-s "MIN MAX FACTOR"] [-b BUILD_DIR] [--json FILE]
#
# For every layout KxL (K namespace nodes of L ranks: mscclpp-bench --np K*L --nodes K, root
# needed), collective and round, two runs back to back, the same binary and plan folder:
#   shipped  MSCCLPP_PLAN_MAKE=last (registered plans first: plans/multinode/KxL/ where it
#            exists, made plans for what it lacks)
#   made     MSCCLPP_PLAN_MAKE=first (the made plans serve every call)
# The order of the pair alternates from round to round (drift of the load hits both sides), and
# the load average is recorded at the start of every run. A machine shared with others is noisy,
# so each row is judged by PAIRED ratios: made / shipped of the same round (below 1: made
# faster). Printed per layout, collective, size and placement: the median time of each, the
# ratios' min / median / max over the rounds, and a verdict:
#   same    median ratio within 10 % (0.91..1.10) and the two sides' times overlap
#   faster  median ratio below 0.91          slower  median ratio above 1.10
#   apart   median within 10 % but the times do not overlap (a steady difference)
#   ?       fewer than 3 paired rounds
# then per layout and collective: the rows' verdicts and the geometric mean of the medians.
# A layout whose shipped folder is missing compares made with made (ratio ~1: the noise
# floor). Sizes: -s "MIN MAX FACTOR" as mscclpp-bench's -b -e -f (default "8 8M 32": 8 B, 256
# B, 8 KiB, 256 KiB, 8 MiB). A run that fails or passes BENCH_RUN_LIMIT seconds (default 300)
# loses its sample only.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
rounds=3
iters=10
layouts="2x1 2x2 2x3 2x4 4x2"
colls="allreduce allgather reducescatter alltoall broadcast"
sizes="8 8M 32"
build=$top/build
json=""
while [ $# -gt 0 ]; do
    case $1 in
    -r) rounds=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -l) layouts=$2; shift 2 ;;
    -c) colls=$2; shift 2 ;;
    -s) sizes=$2; shift 2 ;;
    -b) build=$(cd "$2" && pwd); shift 2 ;;
    --json) json=$2; shift 2 ;;
    -h | --help) sed -n '2,28s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "bench-made: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
read -r smin smax sfac <<<"$sizes"
die() { echo "bench-made: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "network namespaces need root"
[ -x "$build/tools/mscclpp-bench" ] || die "$build/tools/mscclpp-bench not built (scripts/build.sh)"
export MSCCLPP_PLAN_DIR=${MSCCLPP_PLAN_DIR:-$top/plans}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-made.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

echo "# bench-made: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)," \
    "$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?'), $rounds rounds x $iters iters"
for r in $(seq 1 "$rounds"); do
    for lay in $layouts; do
        k=${lay%x*}
        l=${lay#*x}
        for c in $colls; do
            pair="last first"
            [ $((r % 2)) = 0 ] && pair="first last"
            for mode in $pair; do
                out=$tmp/$lay.$c.$mode.$r.json
                cut -d' ' -f1 /proc/loadavg >"$tmp/$lay.$c.$mode.$r.load"
                if ! MSCCLPP_PLAN_MAKE=$mode timeout "${BENCH_RUN_LIMIT:-300}" \
                    "$build/tools/mscclpp-bench" "$c" --np $((k * l)) --nodes "$k" -b "$smin" \
                    -e "$smax" -f "$sfac" -n "$iters" -w 2 --json "$out" >"$out.log" 2>&1; then
                    echo "bench-made: $lay $c ($mode, round $r) failed; sample left out:" \
                        "$(grep -m1 -i 'error\|fail' "$out.log" || tail -1 "$out.log")" >&2
                    rm -f "$out"
                fi
            done
        done
    done
done
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp" "$json" <<'EOF'
import glob, json, math, os, statistics, sys
tmp, out = sys.argv[1], sys.argv[2]
t = {}       # (layout, coll, size, placement, mode) -> {round: time}
plans = {}
loads = []
for f in glob.glob(os.path.join(tmp, "*.load")):
    loads.append(float(open(f).read().split()[0]))
for f in glob.glob(os.path.join(tmp, "*.json")):
    lay, coll, mode, rnd = os.path.basename(f).split(".")[:4]
    for line in open(f):
        line = line.strip()
        if not line:
            continue
        rec = json.loads(line)
        for pl in ("out_of_place", "in_place"):
            col = rec.get(pl)
            if not col or col.get("error") or col.get("time_us") is None or col.get("wrong"):
                continue
            key = (lay, coll, rec["size"], pl, mode)
            t.setdefault(key, {})[int(rnd)] = col["time_us"]
            plans.setdefault(key, set()).add(col.get("plan") or "?")
if loads:
    loads.sort()
    print(f"# load average at the start of the {len(loads)} runs: min {loads[0]:.1f}, median "
          f"{statistics.median(loads):.1f}, max {loads[-1]:.1f}")


def verdict(ratios, a, b):
    if len(ratios) < 3:
        return "?"
    med = statistics.median(ratios)
    overlap = min(b) <= max(a) and min(a) <= max(b)
    if med < 0.91:
        return "faster"
    if med > 1.10:
        return "slower"
    return "same" if overlap else "apart"


rows = []
print("| layout | collective | size (B) | placement | shipped (us) | made (us) "
      "| made / shipped min / median / max | verdict | shipped plan | made plan |")
print("|---|---|---:|---|---:|---:|---|---|---|---|")
for key in sorted({k[:4] for k in t}, key=lambda k: (k[0], k[1], k[2], k[3])):
    a, b = t.get(key + ("last",), {}), t.get(key + ("first",), {})
    both = sorted(set(a) & set(b))
    if not both:
        continue
    ratios = sorted(b[r] / a[r] for r in both)
    ma, mb = statistics.median(a.values()), statistics.median(b.values())
    v = verdict(ratios, list(a.values()), list(b.values()))
    pa = ",".join(sorted(plans[key + ("last",)]))
    pb = ",".join(sorted(plans[key + ("first",)]))
    med = statistics.median(ratios)
    print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {ma:.1f} | {mb:.1f} "
          f"| {ratios[0]:.2f} / {med:.2f} / {ratios[-1]:.2f} | {v} | {pa} | {pb} |")
    rows.append({"layout": key[0], "collective": key[1], "size": key[2], "placement": key[3],
                 "shipped_us": ma, "made_us": mb, "ratio_min": ratios[0], "ratio": med,
                 "ratio_max": ratios[-1], "verdict": v, "shipped_plan": pa, "made_plan": pb,
                 "shipped_samples": a, "made_samples": b})
print()
print("| layout | collective | rows | same | faster | slower | apart | ? | geomean of medians |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
groups = {}
for r in rows:
    groups.setdefault((r["layout"], r["collective"]), []).append(r)
for (lay, coll), rs in sorted(groups.items()):
    n = {v: sum(1 for r in rs if r["verdict"] == v)
         for v in ("same", "faster", "slower", "apart", "?")}
    gm = math.exp(sum(math.log(r["ratio"]) for r in rs) / len(rs))
    print(f"| {lay} | {coll} | {len(rs)} | {n['same']} | {n['faster']} | {n['slower']} "
          f"| {n['apart']} | {n['?']} | {gm:.2f} |")
if out:
    with open(out, "w") as fh:
        json.dump({"loads": loads, "rows": rows}, fh, indent=1)
EOF
