#!/usr/bin/env bash
# The direct plans (plans/*_direct.py: the peers' input read and output written, no scratch)
# against the scratch plans that serve the same calls today (plans/<backend>/ where it has the
# plan, else plans/), on the backend MSCCLPP_HAL names (default host): issue 19 item 3, the
# measurement that decides whether a backend picks the direct plans by default. The direct plan
# is generated with the scratch plan's block count, so only the bytes moved differ.
#
#   scripts/bench-direct.sh [-r ROUNDS] [-n ITERS] [-p "2 4"] [-c "allreduce ..."]
#                           [-s "MIN MAX FACTOR"] [-b BUILD_DIR]
#
# For every rank count, collective and round, two mscclpp-bench --plan runs back to back
# (out of place, mscclpp_malloc buffers, every row checked): the direct plan and the scratch
# plan, their order alternating from round to round; the load average is recorded at the start
# of each run. A shared machine is noisy, so each row is judged by the PAIRED ratio direct /
# scratch of the same round (below 1: direct faster): printed per rank count, collective and
# size as min / median / max over the rounds, with the median times. Sizes as mscclpp-bench's
# -b -e -f (default "1M 64M 8"; the direct allreduce starts above 256 KiB). A run that fails or
# passes BENCH_RUN_LIMIT seconds (default 300) loses its sample only.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
rounds=3
iters=10
ranks="2 4"
colls="allreduce allgather reducescatter alltoall broadcast"
sizes="1M 64M 8"
build=$top/build
while [ $# -gt 0 ]; do
    case $1 in
    -r) rounds=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -p) ranks=$2; shift 2 ;;
    -c) colls=$2; shift 2 ;;
    -s) sizes=$2; shift 2 ;;
    -b) build=$(cd "$2" && pwd); shift 2 ;;
    -h | --help) sed -n '2,18s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "bench-direct: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
read -r smin smax sfac <<<"$sizes"
bench=$build/tools/mscclpp-bench
hal=${MSCCLPP_HAL:-host}
[ -x "$bench" ] || { echo "bench-direct: $bench not built (scripts/build.sh)" >&2; exit 1; }
export MSCCLPP_PLAN_DIR=${MSCCLPP_PLAN_DIR:-$top/plans}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-direct.XXXXXX")
mkdir "$tmp/plans"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

echo "# bench-direct: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs," \
    "load $(cut -d' ' -f1-3 /proc/loadavg), $(git -C "$top" rev-parse --short HEAD 2>/dev/null ||
        echo '?'), $rounds rounds x $iters iters"
for r in $(seq 1 "$rounds"); do
    for n in $ranks; do
        for c in $colls; do
            name=${c}_$n.json
            [ "$c" = allreduce ] && name=allreduce_simple_$n.json
            scratch=$top/plans/$hal/$name # the backend's own variant where it has one
            [ -f "$scratch" ] || scratch=$top/plans/$name
            direct=$tmp/plans/${c}_direct_$n.json
            if [ ! -f "$direct" ]; then # the scratch plan's block count: only the bytes differ
                blocks=$(python3 -c "import json, sys; \
print(len(json.load(open(sys.argv[1]))['gpus'][0]['threadblocks']))" "$scratch")
                PYTHONPATH="$top/python${PYTHONPATH:+:$PYTHONPATH}" python3 \
                    "$top/plans/${c}_direct.py" --num_ranks "$n" --instances "$blocks" >"$direct"
            fi
            pair="direct scratch"
            [ $((r % 2)) = 0 ] && pair="scratch direct"
            for kind in $pair; do
                plan=$direct
                [ "$kind" = scratch ] && plan=$scratch
                out=$tmp/$n.$c.$kind.$r.json
                cut -d' ' -f1 /proc/loadavg >"$tmp/$n.$c.$kind.$r.load"
                if ! timeout "${BENCH_RUN_LIMIT:-300}" "$bench" --plan "$plan" --np "$n" \
                    -b "$smin" -e "$smax" -f "$sfac" -n "$iters" -w 2 --json "$out" \
                    >"$out.log" 2>&1; then
                    echo "bench-direct: $n ranks $c ($kind, round $r) failed; sample left out:" \
                        "$(grep -m1 -i 'error\|fail\|wrong' "$out.log" || tail -1 "$out.log")" >&2
                    rm -f "$out"
                fi
            done
        done
    done
done
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp" <<'EOF'
import glob, json, os, statistics, sys
t = {}  # (ranks, coll, size, kind) -> {round: time}
loads = [float(open(f).read().split()[0]) for f in glob.glob(os.path.join(sys.argv[1], "*.load"))]
for f in glob.glob(os.path.join(sys.argv[1], "*.json")):
    n, coll, kind, rnd = os.path.basename(f).split(".")[:4]
    for line in filter(None, (l.strip() for l in open(f))):
        rec = json.loads(line)
        col = rec.get("out_of_place")
        if col and not col.get("error") and col.get("time_us") is not None and not col.get("wrong"):
            t.setdefault((int(n), coll, rec["size"], kind), {})[int(rnd)] = col["time_us"]
if loads:
    print(f"# load average at the start of the {len(loads)} runs: min {min(loads):.1f}, "
          f"median {statistics.median(loads):.1f}, max {max(loads):.1f}")
print("| ranks | collective | size (B) | scratch (us) | direct (us) | direct / scratch min / median / max |")
print("|---:|---|---:|---:|---:|---|")
for key in sorted({k[:3] for k in t}):
    d, s = t.get(key + ("direct",), {}), t.get(key + ("scratch",), {})
    both = sorted(set(d) & set(s))
    if not both:
        continue
    q = sorted(d[r] / s[r] for r in both)
    print(f"| {key[0]} | {key[1]} | {key[2]} | {statistics.median(s.values()):.0f} "
          f"| {statistics.median(d.values()):.0f} | {q[0]:.2f} / {statistics.median(q):.2f} / "
          f"{q[-1]:.2f} ({len(q)}) |")
EOF
