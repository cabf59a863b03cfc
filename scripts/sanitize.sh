#!/usr/bin/env bash
# The C test suites under AddressSanitizer + UndefinedBehaviorSanitizer (issue 8), in a build
# directory of their own (build-asan; the GPU modules are left out: sanitizers are for the
# host code). Every suite runs under `timeout` so that nothing can hang CI. Ends with one line
# "sanitize: N passed, N failed, N skipped" (test cases, as the suites' TAP counts them).
#
# Usage: scripts/sanitize.sh [--tsan] [SUITE...]   (default: every suite of the mode below)
#   --tsan: ThreadSanitizer instead (build-tsan, -fsanitize=thread), over the suites that run
#           the host streams, the host backend's block threads, the proxy and port channels
#           ($tsan_suites); ends with "sanitize-tsan: N passed, N failed, N skipped".
# Env:   SANITIZE_TIMEOUT (per suite, seconds, default 300), SANITIZE_BUILD (default build-asan,
#        build-tsan with --tsan), SANITIZE_FLAGS (default -fsanitize=address,undefined, or
#        -fsanitize=thread with --tsan).
# A sanitizer report fails the suite it happens in (halt_on_error / exit code); the report is
# kept in $SANITIZE_BUILD/test-logs/<suite>.log and its first lines are printed.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
mode=asan
if [ "${1:-}" = "--tsan" ]; then
    mode=tsan
    shift
fi
tag=sanitize
if [ $mode = tsan ]; then
    tag=sanitize-tsan
    bld=$top/${SANITIZE_BUILD:-build-tsan}
    flags=${SANITIZE_FLAGS:--fsanitize=thread}
else
    bld=$top/${SANITIZE_BUILD:-build-asan}
    flags=${SANITIZE_FLAGS:--fsanitize=address,undefined}
fi
limit=${SANITIZE_TIMEOUT:-300}
# Suites that need more than the default limit, with the reason: test_exec_agree runs 44
# multi-process cases; under TSan each takes ~6-7 s at load 25 (~300 s in all: it was killed
# after case 42 of 44 at 300 s in a full run, 2026-11-26), ~2-3 s on an idle machine.
declare -A long_limit=([tests/unit/test_exec_agree]=900)
logdir=$bld/test-logs

# TSan: the suites whose code runs on several threads of one process: host streams and their
# worker (test_host_queue, test_hal_host), the interpreter's block threads and the stream error
# paths (test_exec_fail, test_executor), the proxy thread and the transports under port
# channels (test_multinode, test_port_fault, test_kill_threads), the bootstrap's root and
# listener threads (test_bootstrap), memory and port channels together with queued launches
# and a failing proxy (test_mixed), an abort from one thread while another is inside a call
# (test_comm_abort, test_nccl_abort), survivors of a killed rank telling each other whom to blame
# (test_culprit), ranks that disagree (fence records written by the host and the interpreter,
# answers from a stream sync) and launches queued behind a lost peer (test_exec_agree), a peer
# killed while UCX connects (test_ucx_death: UCX's async thread beside the worker's progress).
tsan_suites=(tests/unit/test_host_queue tests/unit/test_hal_host tests/unit/test_exec_fail
             tests/unit/test_channels tests/unit/test_executor tests/multinode/test_multinode
             tests/unit/test_port_fault tests/multinode/test_kill_threads tests/unit/test_bootstrap
             tests/multinode/test_mixed tests/unit/test_comm_abort tests/nccl/test_nccl_abort
             tests/multinode/test_culprit tests/unit/test_exec_agree
             tests/multinode/test_ucx_death)

suites=(tests/unit/test_plan tests/unit/test_registry tests/unit/test_kernels
        tests/unit/test_plan_exec tests/unit/test_hal_api tests/unit/test_hal_host
        tests/unit/test_hal_modules tests/unit/test_bootstrap tests/unit/test_channels
        tests/unit/test_executor tests/unit/test_port_fault tests/bench/test_bench_data
        tests/multinode/test_mixed tests/native/test_native tests/multinode/test_staging
        tests/unit/test_comm_abort tests/nccl/test_nccl_abort tests/multinode/test_culprit
        tests/unit/test_exec_agree tests/unit/test_percall tests/nccl/test_nccl_percall
        tests/unit/test_kern_trace)
# Suites not run here, each with its reason (remove an entry once its reason is gone):
declare -A skip=(
    # test_conformance: every plan x dtype x op x size; about 3x slower under ASan than the
    # plain run, too long for the CI budget. The plain `make check` still runs it.
    [tests/conformance/test_conformance]="too long under ASan for the CI budget"
    # MPI suites run under mpiexec (tests/mpi/run-mpi-tests.sh), not as plain programs
    [tests/mpi/test_mpi_bootstrap]="needs mpiexec"
    [tests/mpi/test_mpi_channels]="needs mpiexec"
    # no GPU here: the GPU suite skips itself in the plain run; nothing for host sanitizers
    [tests/gpu/test_gpu_hal]="GPU backend code, not built with the sanitizers"
)
if [ $mode = tsan ]; then
    suites=("${tsan_suites[@]}")
    # the TSan job runs only its own list; the ASan job's skips say why others are left out
    skip=()
fi
[ $# -gt 0 ] && suites=("$@")

mkdir -p "$bld"
cd "$bld"
[ -x "$top/configure" ] || (cd "$top" && autoreconf -fi >/dev/null)
san="$flags -fno-omit-frame-pointer"
[ $mode = asan ] && san="$san -fno-sanitize-recover=undefined"
if [ ! -f config.status ]; then
    "$top/configure" -q --without-cuda --without-rocm CFLAGS="-O1 -g $san" \
        LDFLAGS="$san" >"$bld/configure.log" 2>&1 ||
        { tail -n 20 "$bld/configure.log"; echo "$tag: 0 passed, 1 failed, 0 skipped"; exit 1; }
fi
# Build the library and the suites' programs only (check_PROGRAMS), not run them.
if ! make -j"$(nproc)" >"$bld/build.log" 2>&1 ||
        ! make -j"$(nproc)" check TESTS= >>"$bld/build.log" 2>&1; then
    tail -n 30 "$bld/build.log"
    echo "$tag: 0 passed, 1 failed, 0 skipped"
    exit 1
fi
mkdir -p "$logdir"

# What `make check` exports (Makefile.am AM_TESTS_ENVIRONMENT), plus the sanitizers' options.
export MSCCLPP_TIMEOUT=${MSCCLPP_TIMEOUT:-20} MSCCLPP_PLAN_DIR=$top/plans \
    MSCCLPP_HAL_MODULE_DIR=$bld/.libs MSCCLPP_TOP_SRCDIR=$top MSCCLPP_TOP_BUILDDIR=$bld \
    CK_DEFAULT_TIMEOUT=120 CK_VERBOSITY=normal CK_TAP_LOG_FILE_NAME=-
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# TSan: the first report fails the suite (exit code 66 of the process that saw it: a forked
# rank's failure reaches the test through its exit status); suppressions only for reports
# that are not races, each with its reason, in scripts/tsan.supp.
# UCX's libucm patches madvise() into its memory hooks; glibc calls madvise on a thread's stack
# as the thread exits, after TSan has torn its state down, and the hook's intercepted rwlock
# then crashes TSan (SIGSEGV in __tsan::MutexPreReadLock from ucm_madvise, seen in
# test_host_queue). Not a race in our code: the hooks are turned off for the TSan job only.
[ $mode = tsan ] && export UCX_MEM_MMAP_HOOK_MODE=${UCX_MEM_MMAP_HOOK_MODE:-none}
# die_after_fork=0: a few tests fork on purpose after the fd broker's thread exists, and the
# child starts its own broker (test_hal_host's test_export_again_after_fork); TSan refuses any
# thread started in such a child by default. The broker's thread is idle in poll() by the time
# hal_fdb_serve returns (hal/fd_broker.c), so the child inherits no lock held.
# ignore_noninstrumented_modules=1: memory accesses made by libraries built without TSan (UCX)
# are not recorded. UCX over tcp/posix emulates one-sided puts: the target's worker, progressed
# by our proxy thread, memcpy's the incoming data and signal counters into our buffers, as an
# RDMA NIC would write them; the order (data, then counter) is UCX's fence, inside UCX, so TSan
# reported those writes racing with the interpreter's acquire load of the counter and its reads
# of the data (8 reports in test_multinode, 2x1 and 2x2 over tcp and posix, some with stacks
# TSan could not restore, which no suppression can match). Our code stays fully checked.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:exitcode=66:second_deadlock_stack=1:die_after_fork=0:ignore_noninstrumented_modules=1:suppressions=$top/scripts/tsan.supp}
pass=0 fail=0 skipped=0
for s in "${!skip[@]}"; do
    echo "SKIP: $s (${skip[$s]})"
    skipped=$((skipped + 1))
done
for s in "${suites[@]}"; do
    [ -n "${skip[$s]:-}" ] && continue
    name=$(basename "$s")
    log=$logdir/$name.log
    if [ ! -x "$bld/$s" ]; then
        echo "SKIP: $s (not built here)"
        skipped=$((skipped + 1))
        continue
    fi
    t0=$(date +%s)
    lim=$limit
    [ -z "${SANITIZE_TIMEOUT:-}" ] && [ -n "${long_limit[$s]:-}" ] && lim=${long_limit[$s]}
    timeout -k 10 "$lim" "$bld/$s" >"$log" 2>&1
    rc=$?
    t=$(($(date +%s) - t0))
    p=$(grep -cE '^ok ' "$log" || true)
    sk=$(grep -cE '^ok .*# SKIP' "$log" || true)
    f=$(grep -cE '^not ok ' "$log" || true)
    p=$((p - sk))
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        echo "FAIL: $s timed out after ${lim} s ($p passed before)"
        f=$((f + 1))
    elif [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
        # a sanitizer report or a crash outside any test case
        echo "FAIL: $s exited with $rc"
        f=1
    fi
    if grep -qE 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error:' "$log"; then
        echo "  sanitizer report in $log:"
        grep -m1 -A12 -E 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error:' "$log" |
            sed 's/^/    /'
    fi
    [ "$f" -gt 0 ] && grep -E '^not ok ' "$log" | head -n 10 | sed 's/^/  /'
    echo "$s: $p passed, $f failed, $sk skipped (${t} s)"
    pass=$((pass + p)) fail=$((fail + f)) skipped=$((skipped + sk))
done
echo "$tag: $pass passed, $fail failed, $skipped skipped"
[ "$fail" -eq 0 ]
