#!/bin/sh
# Several nodes on one machine (TAP): mscclpp-bench --np 4 --nodes 2 runs 2 nodes x 2 ranks,
# each node a network + UTS namespace of its own (tools/netns.c), memory channels inside a
# node and port channels over UCX/TCP across the veth links, every element checked (-c 1).
# Where namespaces cannot be made (not root, no `ip`) the launcher falls back to a forced node
# id per rank: the collectives are still checked, the namespace checks are skipped with the
# reason. Everything is skipped when the ucx transport is not usable.
. "$(dirname "$0")/../tap.sh" netns-test
bench=$top_build/tools/mscclpp-bench
info=$top_build/tools/mscclpp-info
limit=${BENCH_TEST_TIMEOUT:-300}
: "${MSCCLPP_PLAN_DIR:=$top_src/plans}"
export MSCCLPP_PLAN_DIR

echo "1..9"

want_plan="" # the plan the executor must pick (case_run), if any
why=""      # no namespaces: why
skip_all="" # no run at all: why
[ "$(id -u)" = 0 ] || why="network namespaces need root"
[ -z "$why" ] && ! command -v ip >/dev/null 2>&1 && why="the ip command (iproute2) is missing"
if [ -z "$why" ] && ! ip netns add mscclpp-probe-$$ 2>/dev/null; then
    why="ip netns add failed (no namespace support?)"
else
    ip netns del mscclpp-probe-$$ 2>/dev/null
fi
"$info" --backends 2>/dev/null | grep -q '^  ucx  usable' ||
    skip_all="the ucx transport is not usable in this build"

# case NAME ARGS...: bench across 2 namespace nodes; every row checked, the launcher used
# namespaces (not the fallback), and the plan's port channels went over ucx
case_run() {
    name=$1
    shift
    if [ -n "$skip_all" ]; then
        skip "$name" "$skip_all"
        return
    fi
    rm -f "$tmp/json"
    run env MSCCLPP_DEBUG=INFO MSCCLPP_DEBUG_SUBSYS=NET "$bench" --np 4 --nodes 2 -n 3 -w 1 \
        --json "$tmp/json" "$@"
    # the namespaces this launcher made (mscclpp-<pid>-nK), checked for leftovers at the end
    grep -o 'network namespaces mscclpp-[0-9]*-n' "$tmp/err" | sed 's/.* //' >>"$tmp/made"
    if [ "$rc" != 0 ]; then
        fail "$name" "exit status $rc"
    elif [ -z "$why" ] && ! grep -q "network namespaces" "$tmp/err"; then
        fail "$name" "the launcher did not make namespaces"
    elif [ -n "$why" ] && ! grep -q "forced node id" "$tmp/err"; then
        fail "$name" "the launcher did not fall back to forced node ids"
    elif ! grep -q "port channels to rank .* over ucx" "$tmp/err"; then
        fail "$name" "no port channel went over ucx"
    elif ! grep -q '^# Out of bounds values : 0 OK' "$tmp/out"; then
        fail "$name" "wrong values"
    elif [ -n "$want_plan" ] && ! grep -q "\"plan\":\"$want_plan\"" "$tmp/json"; then
        fail "$name" "the executor did not pick $want_plan: $(grep -o '"plan":"[^"]*"' \
            "$tmp/json" | sort -u | tr '\n' ' ')"
    else
        pass "$name${why:+ (forced node ids: $why)}"
    fi
}

# plans/multinode/ has no 2x2 plans any more (retired, docs/performance.md): the executor makes
# the plans for the job, hierarchical (memory channels inside a node, port channels across)
want_plan=made_allgather_hier_2x2
case_run "allgather 2 nodes x 2 ranks, made plan" allgather -b 8 -e 1M -f 32
want_plan=made_allreduce_hier_2x2
case_run "allreduce 2 nodes x 2 ranks, made plan" allreduce -b 8 -e 1M -f 32
# small messages: the made packet plans, 40 calls per size (LL flags advance, scratch halves
# alternate), sizes changing across the crossover to the Simple plan
want_plan=made_allreduce_pkt_2x2
case_run "allreduce 2 nodes x 2 ranks, packet plan and crossover" allreduce -b 8 -e 64K -f 8 -n 40
want_plan=made_allgather_pkt_2x2
case_run "allgather 2 nodes x 2 ranks, packet plan and crossover" allgather -b 16 -e 128K -f 8 \
    -n 40
want_plan=
case_run "allreduce 2 nodes x 2 ranks, every dtype" allreduce -b 4K -e 4K -d all
want_plan=made_reducescatter_hier_2x2
case_run "reducescatter 2 nodes x 2 ranks, made plan" reducescatter -b 64 -e 256K -f 64
want_plan=
case_run "alltoall 2 nodes x 2 ranks" alltoall -b 64 -e 256K -f 64
case_run "broadcast 2 nodes x 2 ranks" broadcast -b 64 -e 256K -f 64
# no namespace of ours may be left behind (only ours: other tests may run launchers meanwhile)
left=""
if [ -s "$tmp/made" ]; then
    for prefix in $(cat "$tmp/made"); do
        left="$left$(ip netns list 2>/dev/null | grep "^$prefix" | tr '\n' ' ')"
    done
fi
if [ -n "$why" ]; then
    skip "namespaces removed" "$why"
elif [ -n "$skip_all" ]; then
    skip "namespaces removed" "$skip_all"
elif [ ! -s "$tmp/made" ]; then
    fail "namespaces removed" "no launcher said which namespaces it made"
elif [ -n "$left" ]; then
    echo "# left: $left"
    fail "namespaces removed" "namespaces left behind"
else
    pass "namespaces removed"
fi
