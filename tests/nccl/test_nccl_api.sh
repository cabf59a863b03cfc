#!/bin/sh
# The NCCL API library (TAP). tests/nccl/nccl_api_test.c is written against nccl.h alone:
#   - linked with -lmscclpp_nccl, and linked with the real libnccl.so.2 then run with
#     LD_PRELOAD=libmscclpp_nccl.so, on 2-4 forked ranks (host backend, host memory);
#   - ncclCommInitAll in one process; requests our plans do not serve, with and without a
#     fallback library (tests/nccl/fake_nccl.c), and the one INFO line that says so;
#   - the exported symbols: every nccl* entry point of nccl.h that the real library exports,
#     unversioned like the real one, and nothing else but the mscclpp_nccl_* hook;
#   - ranks that disagree on a call's count or dtype: an error on every rank, then agreement.
. "$(dirname "$0")/../tap.sh" nccl-test
limit=${NCCL_TEST_TIMEOUT:-300}
shim=$top_build/.libs/libmscclpp_nccl.so
t_shim=$top_build/tests/nccl/nccl_api_test_shim
t_real=$top_build/tests/nccl/nccl_api_test_real
fake=$top_build/tests/nccl/.libs/libfakenccl.so
: "${MSCCLPP_PLAN_DIR:=$top_src/plans}"
export MSCCLPP_PLAN_DIR
# the host backend: this suite checks host memory; a GPU machine runs it the same way
MSCCLPP_HAL=host
export MSCCLPP_HAL
unset MSCCLPP_NCCL_LIB_PATH MSCCLPP_NCCL_PLAN_DIR

echo "1..27"
# case NAME CMD...: pass when the command exits 0
case_ok() {
    name=$1
    shift
    run "$@"
    if [ $rc -eq 0 ]; then pass "$name"; else fail "$name" "exit $rc"; fi
}

if [ ! -f "$shim" ] || [ ! -x "$t_shim" ]; then
    for c in $(seq 1 27); do
        skip "case $c" "libmscclpp_nccl not built (configure found no nccl.h; see docs/nccl.md)"
    done
    exit 0
fi
have_real=yes
[ -x "$t_real" ] || have_real=no
preload="env LD_PRELOAD=$shim"

# 1-3: linked with libmscclpp_nccl
case_ok "linked: every collective, 2 ranks" "$t_shim" ranks 2
case_ok "linked: every collective, 3 ranks" "$t_shim" ranks 3
case_ok "linked: ncclCommInitAll, 3 communicators in one process" "$t_shim" initall 3

# 4-6: the program built against the real libnccl.so.2, under LD_PRELOAD
if [ $have_real = no ]; then
    skip "LD_PRELOAD: every collective, 2 ranks" "no real libnccl.so.2 at configure time"
    skip "LD_PRELOAD: every collective, 4 ranks" "no real libnccl.so.2 at configure time"
    skip "LD_PRELOAD: the program does need libnccl.so.2" "no real libnccl.so.2"
    skip "without LD_PRELOAD the program runs NVIDIA's library" "no real libnccl.so.2"
else
    case_ok "LD_PRELOAD: every collective, 2 ranks" $preload "$t_real" ranks 2
    case_ok "LD_PRELOAD: every collective, 4 ranks" $preload "$t_real" ranks 4
    # the preloaded run proves something only if the program really is linked to libnccl.so.2
    if ldd "$t_real" | grep -q 'libnccl\.so\.2 => /' && ! ldd "$t_real" | grep -q mscclpp; then
        pass "LD_PRELOAD: the program is linked to the real libnccl.so.2, not to ours"
    else
        ldd "$t_real" >"$tmp/out" 2>&1
        fail "LD_PRELOAD: the program is linked to the real libnccl.so.2" "see ldd"
    fi
    # and without the preload our library plays no part (NVIDIA's needs a GPU: here it fails)
    run env MSCCLPP_DEBUG=INFO "$t_real" nofallback 1
    if grep -q 'MSCCLPP [A-Z]* NCCL' "$tmp/err" "$tmp/out"; then
        fail "without LD_PRELOAD the program runs NVIDIA's library" "our log lines appeared"
    else
        pass "without LD_PRELOAD the program runs NVIDIA's library (exit $rc), not ours"
    fi
fi
prog=$t_real
[ $have_real = yes ] || prog=$t_shim
runp=""
[ $have_real = yes ] && runp=$preload

# 7: requests a selector sends to the fallback, without one: ncclInvalidUsage naming the variable
case_ok "no fallback: int64 sums a selector sends to it fail with ncclInvalidUsage and say why" $runp "$prog" nofallback 2

# 8-10: with a fallback library: dispatched, results from it, one INFO line per process
log=$tmp/fake.log
pre=""
[ $have_real = yes ] && pre="LD_PRELOAD=$shim"
run env MSCCLPP_NCCL_LIB_PATH="$fake" FAKE_NCCL_LOG="$log" MSCCLPP_DEBUG=INFO $pre \
    "$prog" fallback 2
if [ $rc -eq 0 ]; then pass "fallback: results come from MSCCLPP_NCCL_LIB_PATH"; else
    fail "fallback: results come from MSCCLPP_NCCL_LIB_PATH" "exit $rc"; fi
cp "$tmp/err" "$tmp/fallback.err"
ar=$(grep -c ' ncclAllReduce count=100 dtype=4 op=0' "$log" 2>/dev/null)
rs=$(grep -c ' ncclReduceScatter count=50 dtype=5 op=2' "$log" 2>/dev/null)
ar32=$(grep -c ' ncclAllReduce count=100 dtype=2 ' "$log" 2>/dev/null)
init=$(grep -c ' ncclCommInitRank ' "$log" 2>/dev/null)
if [ "$ar" = 2 ] && [ "$rs" = 2 ] && [ "$ar32" = 0 ] && [ "$init" = 2 ]; then
    pass "fallback: each rank dispatched the int64/uint64 calls, and only those"
else
    cp "$log" "$tmp/out" 2>/dev/null
    fail "fallback: dispatch log" "allreduce $ar, reducescatter $rs, int32 $ar32, init $init"
fi
notes=$(grep -c 'MSCCLPP INFO NCCL falling back to' "$tmp/fallback.err")
if [ "$notes" = 2 ]; then
    pass "fallback: said once per process at INFO"
else
    cp "$tmp/fallback.err" "$tmp/err"
    fail "fallback: said once per process at INFO" "$notes lines for 2 processes"
fi

# 11-12: the exported symbols
nm -D --defined-only "$shim" | awk '{print $3}' | sort >"$tmp/ours"
# besides the NCCL API: the extension hook of include/mscclpp/nccl_ext.h (mscclpp_nccl_*)
others=$(grep -v -E '^p?nccl|^mscclpp_nccl_' "$tmp/ours" | tr '\n' ' ')
versioned=$(objdump -T "$shim" | grep -E ' p?nccl' | grep -v -c ' Base ')
if [ -z "$others" ] && [ "$versioned" = 0 ]; then
    pass "exports: only nccl*/pnccl* (and the mscclpp_nccl_* hook), unversioned like libnccl.so.2"
else
    echo "others: $others; versioned: $versioned" >"$tmp/out"
    fail "exports: only nccl*/pnccl*, unversioned" "see above"
fi
real_lib=$(ldd "$t_real" 2>/dev/null | awk '/libnccl\.so\.2 =>/ {print $3}')
hdr=$(echo '#include <nccl.h>' | ${CC:-cc} -E -P $NCCL_CPPFLAGS -I/usr/local/cuda/include - \
      2>/dev/null | grep -oE '\bnccl[A-Za-z]+\(' | tr -d '(' | sort -u)
if [ -z "$real_lib" ] || [ -z "$hdr" ]; then
    skip "exports: every entry point of nccl.h the real library exports" "no real library/header"
else
    nm -D --defined-only "$real_lib" | awk '{print $3}' | sort >"$tmp/real"
    missing=""
    for f in $hdr; do
        grep -qx "$f" "$tmp/real" || continue
        grep -qx "$f" "$tmp/ours" || missing="$missing $f"
        grep -qx "p$f" "$tmp/real" && ! grep -qx "p$f" "$tmp/ours" && missing="$missing p$f"
    done
    if [ -z "$missing" ]; then
        pass "exports: every entry point of nccl.h the real library exports (both spellings)"
    else
        echo "missing:$missing" >"$tmp/out"
        : >"$tmp/err"
        fail "exports: every entry point of nccl.h the real library exports" "$missing"
    fi
fi
# 14-16: back-to-back collectives of changing sizes and kinds on the same buffers, nothing
# between the calls (no barrier in the library either), malloc'd then ncclMemAlloc'd buffers
for r in 2 3 4; do
    case_ok "back to back: changing sizes and kinds, no barrier, $r ranks" "$t_shim" backtoback $r
done

# 17: ncclMemAlloc'd buffers run the plan in place (zero-copy), said at INFO; and not with
# MSCCLPP_NCCL_ZERO_COPY=0
run env MSCCLPP_DEBUG=INFO "$t_shim" backtoback 2
zc=$(grep -c "runs on the caller's buffers (zero-copy)" "$tmp/err")
run env MSCCLPP_DEBUG=INFO MSCCLPP_NCCL_ZERO_COPY=0 "$t_shim" backtoback 2
zc0=$(grep -c "zero-copy" "$tmp/err")
if [ "$zc" = 2 ] && [ "$zc0" = 0 ] && [ $rc -eq 0 ]; then
    pass "zero-copy on ncclMemAlloc'd buffers (said once per rank), staged with ZERO_COPY=0"
else
    fail "zero-copy on ncclMemAlloc'd buffers" \
        "INFO lines $zc (want 2), with ZERO_COPY=0: $zc0, exit $rc"
fi

# 18-19: ncclMemFree then ncclMemAlloc at the same address: the executor forgets the old
# contexts. The allgather is a DSL plan that writes the peers' output buffers (the built-in
# plans touch only scratch), so a stale context would write a peer's freed memory.
for r in 2 3; do
    name="zero-copy across ncclMemFree/ncclMemAlloc at the same address, $r ranks"
    mkdir -p "$tmp/agplans"
    if ! PYTHONPATH="$top_src/python${PYTHONPATH:+:$PYTHONPATH}" python3 -m mscclpp compile \
        "$top_src/tests/nccl/allgather_put_output.py" -o "$tmp/agplans/ag_put_$r.json" \
        -- --num_ranks "$r" >"$tmp/out" 2>"$tmp/err"; then
        fail "$name" "the DSL plan did not compile"
        continue
    fi
    run env MSCCLPP_NCCL_PLAN_DIR="$tmp/agplans" MSCCLPP_DEBUG=INFO "$t_shim" realloc $r
    used=$(grep -c "ran DSL plan 'test_allgather_put_output_$r'" "$tmp/err")
    again=$(sed -n 's/^realloc: \([0-9]*\) of 8 .*/\1/p' "$tmp/out")
    if [ $rc -eq 0 ] && [ "$used" = "$r" ] && [ "${again:-0}" -gt 0 ]; then
        pass "$name ($again of 8 reallocations reused the address)"
    else
        fail "$name" "exit $rc, DSL plan used by $used ranks, addresses reused: ${again:-?}"
    fi
done
# 20-21: stream order. Every call on a stream held back by a host function returns before the
# stream runs it (nothing of its output written), and is right once the stream runs
for r in 2 3; do
    case_ok "stream order: calls on a held stream return at once, right once it runs, $r ranks" \
        "$t_shim" gate $r
done
# 22-23: point-to-point across two "nodes" (MSCCLPP_NODE_ID per rank): a ring, all pairs and
# gather/scatter over port channels (UCX), every element checked; the INFO log shows the
# two-rank plans' contexts with their port channels
for r in 2 4; do
    name="send/recv, gather, scatter across two nodes over port channels, $r ranks"
    run env MSCCLPP_DEBUG=INFO "$t_shim" p2pnodes $r
    ctx=$(grep -c "context [0-9]* for plan 'nccl_p2p_" "$tmp/err")
    port=$(grep -c "port channels to rank" "$tmp/err")
    if [ $rc -eq 0 ] && [ "$ctx" -gt 0 ] && [ "$port" -gt 0 ]; then
        pass "$name ($ctx contexts)"
    else
        fail "$name" "exit $rc, $ctx point-to-point contexts, $port port channel lines"
    fi
done
# 24-25: ranks that disagree on a call (count, dtype): an error on every rank, then the next
# agreeing call is right (issue 22)
for r in 2 3; do
    case_ok "ranks that disagree on count or dtype get an error, then agree again, $r ranks" \
        env MSCCLPP_TIMEOUT=5 "$t_shim" mismatch $r
done

# 26-27: send/recv of growing sizes on buffers that move inside their allocations, each rank
# its own way (malloc'd, then ncclMemAlloc'd): the shim's point-to-point plans lacked the block
# syncs around their signal and wait (a GPU receiver copied stale scratch; p2p_plan now verifies
# each plan it makes, which fails these cases on the old plans)
for r in 2 3; do
    case_ok "send/recv of growing sizes, moving buffers, $r ranks" "$t_shim" p2psizes $r
done
[ $fails -eq 0 ]
