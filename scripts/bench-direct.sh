#!/usr/bin/env bash
# The direct plans (plans/*_direct.py: the peers' input read and output written, no scratch)
# against the scratch plans that serve the same calls today (plans/<backend>/ where it has the
# plan, else plans/), on the backend MSCCLPP_HAL names (default host): issue 19 item 3, the
# measurement that decides whether a backend picks the direct plans by default. The direct plan
# is generated with the scratch plan's block count, so only the bytes moved differ.
#
#   scripts/bench-direct.sh [-r ROUNDS] [-n ITERS] [-p "2 4"] [-c "allreduce ..."]
#                           [-s "MIN MAX FACTOR"] [-m "shared malloc"] [-b BUILD_DIR] [-d]
#
# -d: the DEFAULTS instead of the two plan sets: the executor's own choice from plans/ (made
# plans as usual) with MSCCLPP_PLAN_DIRECT=auto (the default: on the host backend the direct
# plans where every rank's buffers are shareable, agreed at every call) against off (the
# scratch plans); the table's columns are then "off" and "auto" and the plan auto ran.
#
# For every rank count, collective, buffer kind and round, two mscclpp-bench runs of the
# collective back to back (every row checked), each with MSCCLPP_PLAN_DIR naming a folder that
# holds only the direct plans (out of place and, where there is one, in place) or only the
# scratch plans, so that the executor's own choice runs them as a default would; their order
# alternates from round to round; the load average is recorded at the start of each run.
# Buffer kinds (-m, default "shared"): shared = mscclpp_malloc (the peers map it), malloc =
# mscclpp-bench --malloc (host backend: a direct plan then runs on staged stand-ins, two local
# copies more). A shared machine is noisy, so each row is judged by the PAIRED ratio direct /
# scratch of the same round (below 1: direct faster): printed per rank count, collective, size,
# kind and placement (oop, ip) as min / median / max over the rounds, with the median times. A
# row whose plan is not the expected one is left out (and said). Sizes as mscclpp-bench's
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
modes=shared
defaults=0
while [ $# -gt 0 ]; do
    case $1 in
    -d) defaults=1; shift ;;
    -r) rounds=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -p) ranks=$2; shift 2 ;;
    -c) colls=$2; shift 2 ;;
    -s) sizes=$2; shift 2 ;;
    -m) modes=$2; shift 2 ;;
    -b) build=$(cd "$2" && pwd); shift 2 ;;
    -h | --help) sed -n '2,29s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "bench-direct: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
read -r smin smax sfac <<<"$sizes"
bench=$build/tools/mscclpp-bench
hal=${MSCCLPP_HAL:-host}
[ -x "$bench" ] || { echo "bench-direct: $bench not built (scripts/build.sh)" >&2; exit 1; }
export MSCCLPP_PLAN_MAKE=off # only the folder's plans: none made for the job
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-direct.XXXXXX")
mkdir "$tmp/plans"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

echo "# bench-direct: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs," \
    "load $(cut -d' ' -f1-3 /proc/loadavg), $(git -C "$top" rev-parse --short HEAD 2>/dev/null ||
        echo '?'), $rounds rounds x $iters iters, buffers: $modes"
# The two plan folders of a rank count and collective: the scratch plans serving the call
# today (plans/<backend>/ where it has them, else plans/), and the direct plans generated at
# the scratch plan's block count (only the bytes moved differ).
folders() { # n c -> $tmp/plans/{direct,scratch}.$n.$c/
    local n=$1 c=$2 sd=$tmp/plans/scratch.$1.$2 dd=$tmp/plans/direct.$1.$2 name ip f blocks
    [ -d "$sd" ] && return 0
    mkdir -p "$sd" "$dd"
    name=${c}_$n.json
    [ "$c" = allreduce ] && name=allreduce_simple_$n.json
    for f in "$top/plans/$hal/$name" "$top/plans/$name"; do
        [ -f "$f" ] && { cp "$f" "$sd/"; break; }
    done
    for f in "$top/plans/$hal/${name%_$n.json}_ip_$n.json" "$top/plans/${name%_$n.json}_ip_$n.json"; do
        [ -f "$f" ] && { cp "$f" "$sd/"; break; }
    done
    blocks=$(python3 -c "import json, sys; \
print(len(json.load(open(sys.argv[1]))['gpus'][0]['threadblocks']))" "$sd/$name")
    for ip in "" --inplace; do
        [ "$c" = alltoall ] && [ -n "$ip" ] && continue # no in-place direct alltoall
        PYTHONPATH="$top/python${PYTHONPATH:+:$PYTHONPATH}" python3 "$top/plans/${c}_direct.py" \
            --num_ranks "$n" --instances "$blocks" $ip >"$dd/${c}_direct${ip:+_ip}_$n.json"
    done
}
for r in $(seq 1 "$rounds"); do
    for n in $ranks; do
        for c in $colls; do
            [ $defaults = 1 ] || folders "$n" "$c"
            for m in $modes; do
                pair="direct scratch"
                [ $defaults = 1 ] && pair="auto off"
                [ $((r % 2)) = 0 ] && pair=$(echo "$pair" | awk '{print $2, $1}')
                for kind in $pair; do
                    out=$tmp/$n.$c.$kind.$r.$m.json
                    cut -d' ' -f1 /proc/loadavg >"$tmp/$n.$c.$kind.$r.$m.load"
                    flag=
                    [ "$m" = malloc ] && flag=--malloc
                    env=(MSCCLPP_PLAN_DIR="$tmp/plans/$kind.$n.$c")
                    [ $defaults = 1 ] && env=(MSCCLPP_PLAN_DIR="$top/plans" MSCCLPP_PLAN_MAKE=last
                        MSCCLPP_PLAN_DIRECT=$kind)
                    if ! env "${env[@]}" timeout "${BENCH_RUN_LIMIT:-300}" \
                        "$bench" "$c" $flag --np "$n" -b "$smin" -e "$smax" -f "$sfac" \
                        -n "$iters" -w 2 --json "$out" >"$out.log" 2>&1; then
                        echo "bench-direct: $n ranks $c $m ($kind, round $r) failed; sample" \
                            "left out: $(grep -m1 -i 'error\|fail\|wrong' "$out.log" ||
                                tail -1 "$out.log")" >&2
                        rm -f "$out"
                    fi
                done
            done
        done
    done
done
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp" "$defaults" <<'EOF'
import glob, json, os, statistics, sys
defaults = sys.argv[2] == "1"
new, old = ("auto", "off") if defaults else ("direct", "scratch")
t = {}  # (ranks, coll, size, mode, placement, kind) -> {round: time}
ran = {}  # (ranks, coll, size, mode, placement) -> plans the new default ran (-d)
loads = [float(open(f).read().split()[0]) for f in glob.glob(os.path.join(sys.argv[1], "*.load"))]
for f in glob.glob(os.path.join(sys.argv[1], "*.json")):
    n, coll, kind, rnd, mode = os.path.basename(f).split(".")[:5]
    for line in filter(None, (l.strip() for l in open(f))):
        rec = json.loads(line)
        for place, key in (("oop", "out_of_place"), ("ip", "in_place")):
            col = rec.get(key)
            if not col or col.get("error") or col.get("time_us") is None or col.get("wrong"):
                continue
            if defaults and kind == "auto":
                ran.setdefault((int(n), coll, rec["size"], mode, place), set()).add(col.get("plan"))
            if not defaults and ("direct_" in (col.get("plan") or "")) != (kind == "direct"):
                print(f"# left out: {n} ranks {coll} {rec['size']} B {mode} {place}: "
                      f"ran {col.get('plan')}, not a {kind} plan")
                continue
            t.setdefault((int(n), coll, rec["size"], mode, place, kind), {})[int(rnd)] = col["time_us"]
if loads:
    print(f"# load average at the start of the {len(loads)} runs: min {min(loads):.1f}, "
          f"median {statistics.median(loads):.1f}, max {max(loads):.1f}")
extra = " auto ran |" if defaults else ""
print(f"| ranks | collective | size (B) | buffers | placement | {old} (us) | {new} (us) | "
      f"{new} / {old} min / median / max |{extra}")
print("|---:|---|---:|---|---|---:|---:|---|" + ("---|" if defaults else ""))
for key in sorted({k[:5] for k in t}):
    d, s = t.get(key + (new,), {}), t.get(key + (old,), {})
    both = sorted(set(d) & set(s))
    if not both:
        continue
    q = sorted(d[r] / s[r] for r in both)
    cell = f" {' '.join(sorted(p or '?' for p in ran.get(key, ())))} |" if defaults else ""
    print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {key[4]} | {statistics.median(s.values()):.0f} "
          f"| {statistics.median(d.values()):.0f} | {q[0]:.2f} / {statistics.median(q):.2f} / "
          f"{q[-1]:.2f} ({len(q)}) |{cell}")
EOF
