#!/bin/sh
# Scale (TAP, opt-in): 64 ranks as 8 nodes of 8, each node a network + UTS namespace
# (mscclpp-bench --np 64 --nodes 8), running the default 8x8 multi-node plans (hierarchical:
# memory channels inside a node, port channels over UCX/TCP between the 8 nodes) with every
# element checked. 64 processes with a proxy thread each take minutes on a small machine, so it
# runs only with MSCCLPP_TEST_SCALE=1 (else skipped with that reason); each run is bounded by
# SCALE_TEST_TIMEOUT seconds (default 900). docs/multinode.md says what ran and how long it took.
. "$(dirname "$0")/../tap.sh" scale-test
bench=$top_build/tools/mscclpp-bench
info=$top_build/tools/mscclpp-info
limit=${SCALE_TEST_TIMEOUT:-900}
: "${MSCCLPP_PLAN_DIR:=$top_src/plans}"
export MSCCLPP_PLAN_DIR

echo "1..2"
why=""
[ "${MSCCLPP_TEST_SCALE:-0}" = 1 ] ||
    why="64 ranks take minutes here: set MSCCLPP_TEST_SCALE=1 to run"
[ -z "$why" ] && [ "$(id -u)" != 0 ] && why="8 network namespaces need root"
[ -z "$why" ] && ! command -v ip >/dev/null 2>&1 && why="the ip command (iproute2) is missing"
[ -z "$why" ] && ! "$info" --backends 2>/dev/null | grep -q '^  ucx  usable' &&
    why="the ucx transport is not usable in this build"

case_run() {
    name=$1
    shift
    n=$((n + 1))
    if [ -n "$why" ]; then
        echo "ok $n - $name # SKIP $why"
        return
    fi
    start=$(date +%s)
    timeout -k 10 "$limit" "$bench" --np 64 --nodes 8 -n 2 -w 1 --time-limit "$limit" "$@" \
        >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
    took=$(($(date +%s) - start))
    if [ "$rc" != 0 ]; then
        sed 's/^/# /' "$tmp/out" "$tmp/err" | tail -n 30
        echo "not ok $n - $name: exit status $rc after $took s"
    elif ! grep -q "64 ranks as 8 nodes: network namespaces" "$tmp/err"; then
        echo "not ok $n - $name: the launcher did not make 8 namespaces"
    elif ! grep -q '^# Out of bounds values : 0 OK' "$tmp/out"; then
        sed 's/^/# /' "$tmp/out" | tail -n 10
        echo "not ok $n - $name: wrong values"
    else
        grep -E '^ +[0-9]' "$tmp/out" | sed 's/^/# /'
        echo "ok $n - $name ($took s)"
    fi
}

# odd element counts per rank block (tails): 4095 and 63 floats
case_run "allreduce, 64 ranks as 8 nodes x 8, default 8x8 plan" allreduce -b 1048320 \
    -e 1048320
case_run "allgather, 64 ranks as 8 nodes x 8, default 8x8 plan" allgather -b 16128 -e 16128
