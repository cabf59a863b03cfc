#!/bin/sh
# The bound column of mscclpp-bench (issue 11), on the host backend (TAP): the bench times a
# copy of each row's size in the same run and prints, per size, the algbw bound implied by the
# plan's bytes moved and the share reached; --json has the same fields. The copy is timed per size
# (issue 21 item 8: one copy timed out of cache at the largest size made in-cache rows reach
# 189 % of their "bound"). The bytes moved by the Simple allreduce of
# plans/ must be 2(3N-2) message sizes over all N ranks (the model of tests/gpu/gpu_report.py:
# per rank, put N-1 chunks, reduce N chunks and send N-1 copies, copy N-1 chunks out). The ideal
# columns after the bounds: the fewest bytes the allreduce itself needs, 2N message sizes (every
# rank reads its input and writes its output once; mscclpp_collective_min_traffic), at the same
# copy bandwidth: a plan that moves more has a bound below it.
. "$(dirname "$0")/../tap.sh" bench-bound
bench=$top_build/tools/mscclpp-bench
MSCCLPP_PLAN_DIR=$top_src/plans MSCCLPP_TUNING_FILE=none MSCCLPP_HAL=host
export MSCCLPP_PLAN_DIR MSCCLPP_TUNING_FILE MSCCLPP_HAL

if ! command -v python3 >/dev/null; then
    echo "1..0 # SKIP python3 is needed to read the --json records"
    exit 0
fi
echo "1..4"

# check NRANKS: the Simple plan at 1 MiB; the JSON fields agree with each other and the model
check() {
    timeout -k 5 120 "$bench" --np "$1" --plan "$top_src/plans/allreduce_simple_$1.json" \
        -b 1M -e 1M -n 3 -w 1 --json "$tmp/b.json" >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
    [ "$rc" -eq 0 ] || { why="exit status $rc"; return 1; }
    grep -q "^# bound = the algbw if the plan's bytes moved ran at the copy bandwidth of the row's size" \
        "$tmp/out" || { why="no line saying what the bound is"; return 1; }
    # the row: 13 columns of the table, then bound and % of the out-of-place column, then "-"
    # "-" (no in-place run), then the ideal of the out-of-place column and "-"
    awk '/^ *[0-9]/ { rows++; if (!($14 ~ /^[0-9.]+$/ && $15 ~ /^[0-9.]+$/ &&
                                   $18 ~ /^[0-9.]+$/ && $19 == "-")) bad++ }
         END { exit !(rows == 1 && !bad) }' "$tmp/out" || { why="no bound in the row"; return 1; }
    why=$(python3 - "$tmp/b.json" "$1" <<'PY'
import json, sys
rec = [json.loads(l) for l in open(sys.argv[1])][0]
n, c = int(sys.argv[2]), rec["out_of_place"]
size, copy = rec["size"], rec["copy_gbps"]
if rec["copy_bytes"] != size:
    print(f"copy_bytes {rec['copy_bytes']}: the copy is not of the row's size {size}")
elif c["bytes_moved"] != 2 * (3 * n - 2) * size:
    print(f"bytes_moved {c['bytes_moved']}, model {2 * (3 * n - 2) * size}")
elif not copy or abs(c["bound_algbw"] - size * copy / c["bytes_moved"]) > 1e-3 * c["bound_algbw"]:
    print(f"bound {c['bound_algbw']} is not size * copy / bytes_moved")
elif abs(c["bound_pct"] - 100 * c["algbw"] / c["bound_algbw"]) > 0.01 * c["bound_pct"] + 0.01:
    print(f"bound_pct {c['bound_pct']} is not algbw / bound")
elif c["min_bytes"] != 2 * n * size:
    print(f"min_bytes {c['min_bytes']}, an allreduce needs {2 * n * size}")
elif abs(c["ideal_algbw"] - size * copy / c["min_bytes"]) > 1e-3 * c["ideal_algbw"]:
    print(f"ideal {c['ideal_algbw']} is not size * copy / min_bytes")
elif abs(c["ideal_pct"] - 100 * c["algbw"] / c["ideal_algbw"]) > 0.01 * c["ideal_pct"] + 0.01:
    print(f"ideal_pct {c['ideal_pct']} is not algbw / ideal")
elif not c["ideal_algbw"] > c["bound_algbw"]:
    print(f"ideal {c['ideal_algbw']} not above the Simple plan's bound {c['bound_algbw']}")
PY
)
    [ -z "$why" ]
}

name="2 ranks: the Simple allreduce moves 8 message sizes; bound and % from the copy"
if check 2; then pass "$name"; else fail "$name" "$why"; fi
name="4 ranks: 20 message sizes"
if check 4; then pass "$name"; else fail "$name" "$why"; fi

name="the default plans get a bound and an ideal per column too (both placements)"
timeout -k 5 120 "$bench" --np 2 allreduce -b 64K -e 256K -f 4 -n 2 -w 1 >"$tmp/out" \
    2>"$tmp/err" </dev/null
rc=$?
if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
elif ! awk '/^ *[0-9]/ { rows++; if (NF != 19 || $14 !~ /^[0-9.]+$/ || $16 !~ /^[0-9.]+$/ ||
                                    $18 !~ /^[0-9.]+$/ || $19 !~ /^[0-9.]+$/) bad++ }
            END { exit !(rows == 2 && !bad) }' "$tmp/out"; then fail "$name" "rows without bounds"
else pass "$name"; fi

# a sweep from in-cache to out-of-cache sizes: no row beats its bound by more than noise (with
# one copy timed at the largest size, 256 KiB reached 224 % on this machine). That bug puts rows
# above the bound on every sweep; a row that beats it once is the machine's load (a copy timed
# while descheduled: 124 % and 142 % were seen at load 30-160), so a sweep with such a row is
# run again, up to 3 sweeps, and the case fails only when every sweep has one.
name="a 4 KiB..16 MiB sweep: every row's % of its bound is at most 120"
sweep() {
    timeout -k 5 300 "$bench" --np 2 allreduce -b 4K -e 16M -f 8 -n 5 -w 2 --json "$tmp/s.json" \
        >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
    [ "$rc" -eq 0 ] || { why="exit status $rc"; return 1; }
    why=$(python3 - "$tmp/s.json" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
bad = [(r["size"], k, r[k]["bound_pct"]) for r in recs for k in ("out_of_place", "in_place")
       if r[k] and r[k]["bound_pct"] is not None and r[k]["bound_pct"] > 120]
if len(recs) != 5:
    print(f"{len(recs)} rows, expected 5")
elif any(r["copy_bytes"] != r["size"] for r in recs):
    print("a copy not of its row's size")
elif bad:
    print(f"rows above 120 % of their bound: {bad}")
PY
)
    [ -z "$why" ]
}
whys=""
for try in 1 2 3; do
    if sweep; then whys=""; break; fi
    whys="$whys${whys:+; }sweep $try: $why"
    case $why in "rows above"*) ;; *) break ;; esac # only the timing check is retried
done
if [ -n "$whys" ]; then fail "$name" "$whys"; else pass "$name"; fi
