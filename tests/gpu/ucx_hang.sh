#!/usr/bin/env bash
# Where the UCX 2x1 put waits on a GPU (issue 19; docs/multinode.md, "What the proxy may call
# while a kernel waits for it"): one bounded run of each case below, its log and a thread dump
# (tests/gpu/thread_dump.sh, AFTER seconds in) under OUT, then one verdict line per case.
#   usage: tests/gpu/ucx_hang.sh BUILD OUT [AFTER]      (about 2 minutes; needs a CUDA device)
# Cases: test_made 2x1 (the synchronous API: kernels on the legacy stream) under MPS with
# staging auto and always; mscclpp-bench allreduce 2x1 (launches on a stream of its own); and
# test_made 2x1 again without MPS, where gdb may attach (stacks). What the dumps tell apart:
#   - test_made passing: the CUDA module's memcpy_sync, which now polls before its copy, no
#     longer leaves the main thread inside the driver behind the kernel;
#   - a proxy in a futex wait whose mutex owner is its rank's main thread (tid == pid): a
#     driver lock the main thread holds while it waits for the kernel (exec_check_launch's
#     device -> pageable copy returns only when the kernel is done);
#   - a warning "has waited ... for the transport's lock, held by thread N (...)": the ucx
#     context's lock, held by the thread it names, doing what it says;
#   - a proxy polling (hrtimer_nanosleep / sched_yield) in a staging copy's stream_sync: a copy
#     on the non-blocking stream that waits for the kernel (not allowed by CUDA's rules).
# The bench passing where test_made hangs points at the synchronous API's main thread.
set -u
[ $# -ge 2 ] || { echo "usage: $0 BUILD OUT [AFTER]" >&2; exit 2; }
build=$(cd "$1" && pwd) out=$2 after=${3:-6}
top=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
export MSCCLPP_HAL=${MSCCLPP_HAL:-cuda} MSCCLPP_TIMEOUT=10 MADE_FILTER=2x1 # host: a dry run
. "$top/tests/gpu/mps.sh"

# verdict CASE DUMP LOG: what the proxies of each rank wait for
verdict() {
    local name=$1 dump=$2 log=$3 line
    line=$(awk '
        /^== pid / { pid = $3; sub(":", "", pid) }
        /^  tid / { tid = $2; comm = $3; next_is = (comm == "mscclpp-proxy") }
        /^    futex / && next_is {
            owner = $0; sub(/.*mutex owner tid /, "", owner); sub(/ .*/, "", owner)
            printf "proxy %s of pid %s waits for tid %s%s; ", tid, pid, owner,
                   owner == pid ? " (its main thread)" : ""
        }' "$dump" 2>/dev/null)
    grep -q "for the transport's lock" "$log" 2>/dev/null &&
        line="$line ucx lock: $(grep -m1 -o "held by thread.*" "$log")"
    echo "# $name: $(grep -m1 -o '[0-9]* calls on [0-9]* ranks, [0-9]* failed' "$log" 2>/dev/null ||
        echo 'no summary'); ${line:-no proxy in a futex wait}"
}

mps_start || true
for mode in auto always; do
    MSCCLPP_UCX_STAGING=$mode timeout 90 "$top/tests/gpu/thread_dump.sh" "$after" \
        "$out/dump-made-$mode.txt" "$build/tests/conformance/test_made" \
        >"$out/made-$mode.log" 2>&1
    verdict "test_made 2x1, staging $mode, MPS" "$out/dump-made-$mode.txt" "$out/made-$mode.log"
done
timeout 90 "$top/tests/gpu/thread_dump.sh" "$after" "$out/dump-bench.txt" \
    "$build/tools/mscclpp-bench" allreduce --np 2 --nodes 2 -b 8 -e 64K -f 8 -n 5 -w 1 \
    >"$out/bench.log" 2>&1
echo "# mscclpp-bench allreduce 2x1 on a stream, MPS: exit $?," \
    "$(grep -ci 'fail\|error' "$out/bench.log") error line(s)"
mps_stop || true
GPU_TESTS_MPS=0 timeout 120 "$top/tests/gpu/thread_dump.sh" "$after" "$out/dump-made-nomps.txt" \
    "$build/tests/conformance/test_made" >"$out/made-nomps.log" 2>&1
verdict "test_made 2x1, staging auto, no MPS (stacks)" "$out/dump-made-nomps.txt" \
    "$out/made-nomps.log"
grep -h -A12 '"mscclpp-proxy"' "$out"/dump-made-nomps.txt 2>/dev/null | grep -m8 '^#' |
    sed 's/^/#   proxy: /'
