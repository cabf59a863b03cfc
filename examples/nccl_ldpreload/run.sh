#!/bin/sh
# examples/nccl_ldpreload (TAP; also the example's how-to): compile the DSL program into
# MSCCLPP_NCCL_PLAN_DIR, run the NCCL program with libmscclpp_nccl.so preloaded, and check from
# the INFO log that ncclAllReduce ran the DSL plan, for 2 and 3 ranks; then without the plan
# directory, that the built-in plans serve the same program.
top_build=${MSCCLPP_TOP_BUILDDIR:-.}
top_src=${MSCCLPP_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
here=$top_src/examples/nccl_ldpreload
shim=$top_build/.libs/libmscclpp_nccl.so
prog=$top_build/examples/nccl_ldpreload/nccl_ldpreload
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nccl-example.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..3"
if [ ! -f "$shim" ] || [ ! -x "$prog" ]; then
    for c in 1 2 3; do
        echo "ok $c - nccl_ldpreload # SKIP libmscclpp_nccl not built (no nccl.h at configure)"
    done
    exit 0
fi
MSCCLPP_HAL=host
export MSCCLPP_HAL
unset MSCCLPP_NCCL_LIB_PATH
fails=0
n=0
for ranks in 2 3; do
    n=$((n + 1))
    mkdir -p "$tmp/plans"
    # 1. compile the DSL program into a plan (the package from the source tree)
    if ! PYTHONPATH="$top_src/python${PYTHONPATH:+:$PYTHONPATH}" python3 -m mscclpp compile \
        "$here/allpairs_allreduce.py" -o "$tmp/plans/allpairs_allreduce_$ranks.json" \
        -- --num_ranks "$ranks" >"$tmp/out" 2>&1; then
        sed 's/^/# /' "$tmp/out"
        echo "not ok $n - compile the DSL plan for $ranks ranks"
        fails=$((fails + 1))
        continue
    fi
    # 2. the NCCL program, our library preloaded, the plan directory named
    LD_PRELOAD=$shim MSCCLPP_NCCL_PLAN_DIR=$tmp/plans MSCCLPP_DEBUG=INFO \
        timeout -k 5 300 "$prog" "$ranks" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    used=$(grep -c "ran DSL plan 'example_allpairs_allreduce_$ranks'" "$tmp/err")
    ok=$(grep -c 'allreduces of .* floats correct' "$tmp/out")
    if [ $rc -eq 0 ] && [ "$used" = "$ranks" ] && [ "$ok" = "$ranks" ]; then
        echo "ok $n - $ranks ranks: ncclAllReduce ran the DSL plan, results correct"
    else
        tail -n 30 "$tmp/out" "$tmp/err" | sed 's/^/# /'
        echo "not ok $n - $ranks ranks: exit $rc, DSL plan used by $used ranks, $ok correct"
        fails=$((fails + 1))
    fi
done
n=$((n + 1))
LD_PRELOAD=$shim MSCCLPP_DEBUG=INFO timeout -k 5 300 "$prog" 2 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && ! grep -q "ran DSL plan" "$tmp/err"; then
    echo "ok $n - without MSCCLPP_NCCL_PLAN_DIR the built-in plans serve it"
else
    tail -n 30 "$tmp/out" "$tmp/err" | sed 's/^/# /'
    echo "not ok $n - without MSCCLPP_NCCL_PLAN_DIR: exit $rc"
    fails=$((fails + 1))
fi
[ $fails -eq 0 ]
