#!/usr/bin/env bash
# Every GPU check in one command (issue 11, item 7). Builds nothing: run it on a machine with a
# GPU, over a build made with --with-cuda (for instance by shared/tools/gpu-pack.sh).
#
#   scripts/gpu-check.sh [-o OUTDIR] [--variants DIR] [--quick] [--skip STEP,...] [--only STEP,...]
#                        [--deadline SECONDS] [--host]
# --deadline: no step starts after SECONDS from the start (each is said SKIP in the report); a
# step that started runs to its own bound. For a device call with a hard time limit: pick a
# deadline that leaves the longest step's bound before that limit.
# --host: a dry run of the steps that allow it (fit, auto, trace, ready) on the host backend (MSCCLPP_HAL=host,
# no GPU, no MPS; every other step is skipped), at 2..16 MiB (the direct plans start above 1 MiB)
# and 3 iterations: what a step runs, its checks, logs, summary line and tables, without the
# device (CI, or a session without one). Its times say nothing about a GPU. --quick leaves fit
# and auto as they are (their sizes are what they measure).
#
# Steps (each bounded by `timeout`, each logged in OUTDIR/<step>.log):
#   info         device, driver, toolkit, mscclpp-info
#   copy         the device's own device-to-device copy bandwidth (PyTorch, when installed)
#   nomps        2 ranks on one GPU WITHOUT MPS: the library must warn (and the time it takes)
#   floor        an empty kernel's launch cost, without and under MPS (tests/gpu/launch_floor.cu,
#                built with the device's nvcc): host time per launch and back-to-back time per
#                launch, the floor under the latency step's figures
#   hal          tests/gpu/test_gpu_hal, with cuMem and with legacy cudaIpc shareable memory
#   hipnv        the HIP backend on this NVIDIA GPU (libmscclpp-hal-hipnv.so, docs/gpu.md §8),
#                MSCCLPP_HAL=hip: test_gpu_hal, the conformance suite in its quick mode and a
#                2-rank bench (allreduce, allgather, every row checked), with the CUDA module's
#                allreduce in the same run for comparison, and one plan (plans/cuda's 2-rank
#                allreduce) under both modules; about 3 minutes, bounded
#   conformance  tests/conformance/test_conformance with MSCCLPP_HAL=cuda (every plan x dtype x
#                op x size of the host run)
#   bench        mscclpp-bench: the five collectives at 2/4/8 ranks, 8 B .. 256 MiB, checked
#   latency      allreduce 8 B at 2/4/8 ranks, 1000 iterations; tests/gpu/lat_probe at 1/2/8
#                ranks (host enqueue time per call vs GPU time per call), and at 2 ranks with
#                ITERS=100 on the GPU and on the host backend (the host path per call)
#   interp       the interpreter's resources and small-message costs (issue 19): registers,
#                stack and spills of kern_cuda_entry (cuobjdump -res-usage); ncu on an 8 B
#                1-rank call (GPU time, local-memory sectors, long-scoreboard stalls) when ncu
#                is installed; tests/gpu/lat_probe with 100 iterations (no launch-queue
#                back-pressure); the one-hop all-pairs LL plan against the two-hop one at
#                2 and 8 ranks, 8 B .. 256 KiB (where each wins)
#   graphs       graph capture through the C API: tests/gpu/graph_replay at 2 and 4 ranks (100
#                replays of captured collectives with new data, every element checked, direct
#                calls between), and mscclpp-bench -G (every row checked through a graph; time
#                per call over graph replays next to direct calls)
#   agree        ranks that disagree on a call (count, dtype, op, root, collective, plan,
#                in-place-ness) get an error naming both calls, then agree and are right; and
#                launches queued behind a lost peer fail at once (tests/unit/test_exec_agree,
#                cases "agree" and "queue", MSCCLPP_TEST_HAL=cuda: the fence records across
#                GPUs and the device-side fence decision)
#   torchnccl    PyTorch with libmscclpp_nccl.so preloaded (tests/gpu/torch_nccl.py, torchrun,
#                2 ranks): every collective and send/recv checked 8 B .. 256 MiB, each call
#                returning while the stream is busy (no host sync), dist.all_reduce per call
#                next to mscclpp-bench's in-place allreduce and their ratio (aim <= 1.3x)
#   torchgraphs  torch.cuda.graph around the Python runtime's allreduce (torch tensors, torch's
#                int stream) and around dist.all_reduce with libmscclpp_nccl.so preloaded
#                (tests/gpu/torch_graphs.py under torchrun, 2 ranks): 100 replays, checked
#   seed         seed 000's examples/torch-integration/dsl_with_nccl_api.py under torchrun with
#                the library preloaded (2 ranks): the DSL plan serves the 1 MiB+ allreduce
#   direct       the direct plans of CUDA (plans/direct/cuda/: peers' input read and output
#                written, the fewest bytes, at the CUDA plans' block counts and ranges) against
#                the scratch plans of plans/cuda/, which CUDA loads today,
#                allreduce, allgather, reducescatter, alltoall and broadcast at 2/4/8 ranks,
#                4 MiB .. 256 MiB, every row checked,
#                in one run each: time per call and the scratch/direct time ratio at the largest
#                size (issue 19 item 3); and the broadcast whose root runs the blocks its peers
#                leave (the shipped one) against its program replicated over the CUDA plans'
#                block count on every rank: the replicated/shipped time ratio
#   fit          where the time of large calls goes (issue 19): every direct plan of
#                plans/direct/cuda/ (the five collectives) and the scratch allreduce that a
#                64 MiB call runs with MSCCLPP_PLAN_DIRECT=off (plans/cuda/allreduce_simple_N),
#                2 and 8 ranks, 4, 16, 64, 256 MiB (and 1 GiB for the 2-rank allreduces and
#                allgather: can its loop reach issue 19's 80 %?), every row checked;
#                tests/gpu/bench_fit.py fits time = a + S / r per plan: a the fixed cost of a
#                call (us), r the data loop's rate (GB/s) against the ideal the bench
#                prints, what they predict for 64 MiB, and a and r over 64 MiB and up only
#                (past the L2 cache) (about 60 s)
#   trace        the interpreter's phase trace (MSCCLPP_KERN_TRACE, docs/gpu.md §5a): the direct
#                allreduce and broadcast (plans/direct/cuda) and the scratch allreduce
#                (plans/cuda/allreduce_simple_N) at 64 MiB, and the one-block small allreduce (plans/cuda/allreduce_allpairs_
#                small_N) at 8 B, 2 and 8 ranks, 20 calls (MPS): each rank's last launch stamped per
#                block (entry, prologue, launch fence, each op's end, exit) by globaltimer;
#                tests/gpu/kern_trace.py's tables in trace-<plan>.md, one line each in the
#                summary (the entry skew between ranks and the median of every phase)
#   ready        what the direct plans' opening handshake cost (dropped: the launch fence does
#                its work, plans/_common.py direct_ranks): the CUDA direct allreduce, allgather
#                and broadcast as shipped against the same plans with the handshake
#                (tests/gpu/direct_ready.py gen), 2 and 8 ranks, 4 and 64 MiB, alternating over
#                two rounds, every row checked; ready.md: per size both times and the
#                difference (GPU_CHECK_READY_RANKS, _COLLS, _ROUNDS) (about 90 s)
#   directnccl   tests/gpu/torch_nccl.py again (torchrun, 2 ranks, LD_PRELOAD) with CUDA's
#                direct plans chosen (MSCCLPP_PLAN_DIRECT=on: plans/direct/cuda/ before
#                plans/cuda/); PyTorch's caching allocator hands out the segments each rank keys
#                those contexts by: passes, or counts the "ranks disagree" failures (with step
#                direct, what decides executor/plan_dirs.c direct_default for CUDA)
#   auto         MSCCLPP_PLAN_DIRECT off / auto / on in one run (where CUDA's auto takes the
#                direct plans: docs/plan-selection.md): mscclpp-bench allreduce and allgather,
#                2 ranks, 4 MiB .. 256 MiB, every row checked, the time per call and the plan
#                each row ran; and tests/gpu/torch_nccl.py (torchrun, 2 ranks, LD_PRELOAD, its
#                quick check plus the timed sizes) timing dist.all_reduce at 8 .. 128 MiB under
#                each mode, off/auto/on in turn, twice (PyTorch's host time per call moves
#                between torchruns: each mode's best counts): per size the three times and the
#                fastest (about 3 minutes)
#   alltoallv    mscclpp_alltoallv count-exact on the GPU (tests/conformance/test_made with
#                MSCCLPP_HAL=cuda, its alltoallv cases beside the other collectives): 4 ranks on
#                the one GPU (memory channels; the per-call count table in pinned host memory,
#                the peers' offsets published at the launch fence) and 2 namespace nodes x 1
#                (port channels); every element and gap checked, the bytes the kernel moved
#                equal to the counts, the staged way for malloc memory and in place
#   multinode    2 namespace nodes x 1 rank on the one GPU: port channels over UCX, device
#                memory staged through pinned host memory (auto and always), checked
#   variants     with --variants DIR: every plan in DIR (tests/gpu/gen_variants.py DIR) at its
#                rank count, unchecked, for choosing plans/cuda/
# MPS is started for the steps after `nomps` (tests/gpu/mps.sh) and stopped at the end.
# OUTDIR/report.md gathers the results (tests/gpu/gpu_report.py makes the tables). Exit status:
# 0 when every step that ran passed, 77 without a CUDA device. About 6 minutes on one H100 (the
# variants step aside: about 5 more for the 76 plans of gen_variants.py).
#
# Environment: MSCCLPP_TOP_BUILDDIR (default ./build, or . when run inside a build tree),
# MSCCLPP_TOP_SRCDIR (default: this checkout), GPU_CHECK_TIMEOUT (seconds per bench run, 120),
# GPU_CHECK_COLLS / GPU_CHECK_RANKS / GPU_CHECK_SIZES (the bench sweep's collectives, rank counts
# and size flags, e.g. "-b 8 -e 256M -f 32"), GPU_CHECK_NCU_TIMEOUT (seconds for ncu, 300),
# GPU_CHECK_CONFORMANCE_TIMEOUT (seconds for the conformance suite, 480), GPU_CHECK_FIT_RANKS (step
# fit's rank counts, "2 8"), GPU_CHECK_AUTO_TORCH_SIZES (the sizes step auto times
# dist.all_reduce at, "8M,16M,32M,64M,128M"), GPU_CHECK_AUTO_TORCH_ROUNDS (its torchruns per
# mode, 2).
set -u
src=${MSCCLPP_TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
if [ -n "${MSCCLPP_TOP_BUILDDIR:-}" ]; then build=$MSCCLPP_TOP_BUILDDIR
elif [ -x ./tools/mscclpp-bench ]; then build=$(pwd)
else build=$src/build; fi
out=gpu-check-$(date -u +%Y%m%d-%H%M%S)
variants=""
deadline=""
late=","
quick=0
host=0
skip=","
while [ $# -gt 0 ]; do
    case $1 in
    -o) out=$2; shift ;;
    --variants) variants=$2; shift ;;
    --quick) quick=1 ;;
    --skip) skip=",$2,"; shift ;;
    --only) only=",$2,"; shift ;;
    --deadline) deadline=$2; shift ;;
    --host) host=1 ;;
    -h | --help) sed -n "2,/^set -u/{/^set -u/d;p}" "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
case $deadline in *[!0-9]*) echo "gpu-check: --deadline takes whole seconds, not '$deadline'" >&2; exit 2 ;; esac
# --only STEP,...: every other step skipped
steps_all="copy nomps floor interp hal hipnv conformance bench direct alltoallv multinode latency"
steps_all="$steps_all fit trace ready graphs agree torchnccl directnccl auto torchgraphs seed variants"
if [ -n "${only:-}" ]; then
    skip=","
    for st in $steps_all; do case $only in *",$st,"*) ;; *) skip="$skip$st," ;; esac; done
fi
# sizes (bytes) and iterations of steps fit and auto: LO .. HI, times F per row (TOP: the 2-rank
# allreduces' largest); --host: the steps with a host dry run, at sizes the direct plans still
# serve (from 1 MiB + 1) but a CPU moves quickly, and fewer iterations
fit_lo=$((4 << 20)) fit_hi=$((256 << 20)) fit_top=$((1 << 30)) fit_f=4
auto_lo=$((4 << 20)) auto_hi=$((256 << 20))
trace_sz=$((64 << 20)) trace_ranks="2 8"
ready_lo=$((4 << 20)) ready_hi=$((64 << 20)) ready_f=16 ready_ranks="2 8"
iters="-n 20 -w 5"
if [ $host = 1 ]; then
    for st in $steps_all; do case $st in fit | auto | trace | ready) ;; *) skip="$skip$st," ;; esac; done
    fit_lo=$((2 << 20)) fit_hi=$((8 << 20)) fit_top=$((16 << 20)) fit_f=2
    auto_lo=$((2 << 20)) auto_hi=$((8 << 20))
    trace_sz=$((4 << 20)) trace_ranks=2
    ready_lo=$((2 << 20)) ready_hi=$((4 << 20)) ready_f=2 ready_ranks=2
    iters="-n 3 -w 1"
    export GPU_TESTS_MPS=0
fi
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
export MSCCLPP_TOP_SRCDIR=$src MSCCLPP_TOP_BUILDDIR=$build
export MSCCLPP_HAL_MODULE_DIR=${MSCCLPP_HAL_MODULE_DIR:-$build/.libs}
export MSCCLPP_PLAN_DIR=${MSCCLPP_PLAN_DIR:-$src/plans}
export MSCCLPP_HAL=cuda
[ $host = 1 ] && export MSCCLPP_HAL=host
export MSCCLPP_TIMEOUT=${MSCCLPP_TIMEOUT:-30} # seconds: a hung plan fails its step, not the run
bench=$build/tools/mscclpp-bench
limit=${GPU_CHECK_TIMEOUT:-120}
report=$out/report.md
status=0
t0=$(date +%s)

# want STEP: run it? Not when skipped, nor once the run is past --deadline (said once per step:
# the report still gets written, so a device call with a hard limit keeps what ran)
want() {
    case $skip in *",$1,"*) return 1 ;; esac
    if [ -n "$deadline" ] && [ $(($(date +%s) - t0)) -ge "$deadline" ]; then
        case $late in *",$1,"*) ;; *)
            late="$late$1,"
            result "$1" SKIP "the run passed --deadline $deadline s before this step" ;;
        esac
        return 1
    fi
    return 0
}
# result STEP OK|FAIL|SKIP TEXT: one line of the summary
result() {
    printf '| %s | %s | %s |\n' "$1" "$2" "$3" >>"$out/summary.md"
    echo "== $1: $2 $3"
    [ "$2" = FAIL ] && status=1
    return 0
}
elapsed() { echo "$(($(date +%s) - t0)) s"; }

: >"$out/summary.md"
rm -f "$out/fit.md" "$out/auto.md" "$out/ready.md" # the tables of this run's steps only
needed=("$bench" "$build/tests/gpu/test_gpu_hal" "$build/tests/conformance/test_conformance"
    "$build/tests/gpu/graph_replay")
[ $host = 1 ] && needed=("$bench")
for f in "${needed[@]}"; do
    if [ ! -x "$f" ]; then
        echo "gpu-check: $f is not built (configure --with-cuda; make check TESTS=)"
        exit 2
    fi
done

if [ $host = 0 ] && ! probe=$("$build/tests/gpu/test_gpu_hal" --probe 2>&1); then
    echo "gpu-check: no usable CUDA device here ($(echo "$probe" | head -n 1)); nothing to check"
    exit 77
fi

# ---- info ----
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "host: $(uname -n) $(uname -r)"
    if [ $host = 0 ]; then
        nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode --format=csv,noheader 2>&1
        nvidia-smi 2>/dev/null | grep -m1 -o 'CUDA Version: [0-9.]*'
    fi
    "$build/tools/mscclpp-info" 2>&1 | head -40
} >"$out/info.log" 2>&1
device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
[ $host = 1 ] && device="the host backend (--host: a dry run, no GPU)"
echo "gpu-check: $device; output in $out"

# ---- copy: the bound's denominator ----
copy=""
if want copy; then
    timeout 120 python3 - >"$out/copy.log" 2>&1 <<'PY'
import torch
n = 1 << 30
a = torch.empty(n, dtype=torch.uint8, device="cuda")
b = torch.empty_like(a)
a.random_(0, 255)
for _ in range(3):
    b.copy_(a)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
times = []
for _ in range(20):
    s.record(); b.copy_(a); e.record(); e.synchronize()
    times.append(s.elapsed_time(e) / 1e3)
times.sort()
t = times[len(times) // 2]
print(f"copy_gbps {2 * n / t / 1e9:.1f}  (1 GiB device-to-device, median of 20, read + write)")
PY
    copy=$(awk '/^copy_gbps/ {print $2}' "$out/copy.log")
    if [ -n "$copy" ]; then result copy OK "$copy GB/s device-to-device (read + write)"
    else result copy SKIP "no PyTorch copy ($(tail -n 1 "$out/copy.log"))"; fi
fi

# ---- nomps: ranks sharing the GPU without MPS must be told ----
. "$src/tests/gpu/mps.sh"
if want nomps; then
    if mps_running; then
        result nomps SKIP "an MPS daemon already runs"
    else
        timeout 120 "$bench" allreduce --np 2 -b 8 -e 8 -n 20 -w 2 >"$out/nomps.log" 2>&1
        rc=$?
        t=$(awk '/^ *8 / {print $6; exit}' "$out/nomps.log")
        if [ $rc -ne 0 ]; then result nomps FAIL "bench exit $rc"
        elif grep -q "CUDA MPS is" "$out/nomps.log"; then
            w=$(grep -c 'CUDA MPS is' "$out/nomps.log")
            result nomps OK "warned ($w rank(s)); 8 B allreduce $t us"
        else result nomps FAIL "no MPS warning; 8 B allreduce $t us"; fi
    fi
fi
# ---- interp, its ncu part: before MPS (Nsight Compute does not profile MPS clients) ----
ncures="no ncu"
if want interp && command -v ncu >/dev/null; then
    # the last of 20 kernels of 1-rank 8 B calls: GPU time, local-memory (stack, spill) load
    # sectors, and the share of warp stalls waiting on a memory load
    timeout "${GPU_CHECK_NCU_TIMEOUT:-300}" ncu --clock-control none -c 20 --metrics \
        gpu__time_duration.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio \
        "$build/tests/gpu/lat_probe" 1 8 20 >"$out/interp-ncu.log" 2>&1
    ncures=$(awk '/gpu__time_duration.sum/ {t = $NF " " $(NF-1)}
        /l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum/ {l = $NF}
        /stalled_long_scoreboard/ {s = $NF}
        END {printf "GPU time %s, local-load sectors %s, long-scoreboard stalls/issue %s",
            t, l, s}' \
        "$out/interp-ncu.log")
fi
# ---- floor, its first half: an empty kernel's launch cost without MPS (tests/gpu/launch_floor.cu,
# built here with the device's nvcc); the second half runs under MPS below ----
floorbin=""
if want floor; then
    nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    if [ -x "$nvcc_bin" ] && "$nvcc_bin" -O3 -arch=native -o "$out/launch_floor" \
        "$src/tests/gpu/launch_floor.cu" >"$out/floor-build.log" 2>&1; then
        floorbin=$out/launch_floor
        timeout 60 "$floorbin" 2000 >"$out/floor-nomps.log" 2>&1
    fi
fi
mps_start >"$out/mps.log" 2>&1
cat "$out/mps.log"
trap 'mps_stop >/dev/null 2>&1' EXIT
if want floor; then
    if [ -z "$floorbin" ]; then
        result floor SKIP "no nvcc here to build tests/gpu/launch_floor.cu ($(tail -n 1 \
            "$out/floor-build.log" 2>/dev/null))"
    else
        timeout 60 "$floorbin" 2000 >"$out/floor-mps.log" 2>&1
        fl() { awk -v k="$2" '$2 == k && $3 == "4x1024:" {print $5 "/" $8; exit}' "$1"; }
        result floor OK "empty kernel 4x1024, host/total us per launch: $(fl "$out/floor-nomps.log" \
empty) without MPS, $(fl "$out/floor-mps.log" empty) under MPS; one global round trip added: \
$(fl "$out/floor-mps.log" one-trip) under MPS"
    fi
fi

# ---- hal ----
if want hal; then
    ok=1
    for mode in auto legacy; do
        MSCCLPP_CUDA_SHAREABLE=$mode timeout 120 "$build/tests/gpu/test_gpu_hal" \
            >"$out/hal-$mode.log" 2>&1 || ok=0
    done
    sum=$(for m in auto legacy; do
        printf '%s: %s ok, %s not ok; ' $m "$(grep -c '^ok' "$out/hal-$m.log")" \
            "$(grep -c '^not ok' "$out/hal-$m.log")"; done)
    [ $ok = 1 ] && result hal OK "$sum" || result hal FAIL "$sum"
fi

# ---- hipnv: the HIP module's code on this NVIDIA GPU (HIP's NVIDIA platform, hal/hipnv) ----
# What it shows and what only AMD hardware can: docs/gpu.md §8. Each run is bounded, so the step
# takes at most about 6 minutes (the conformance bound, GPU_CHECK_HIPNV_CONF_TIMEOUT, is 240 s).
if want hipnv; then
    if [ ! -f "$build/.libs/libmscclpp-hal-hipnv.so" ]; then
        result hipnv SKIP "libmscclpp-hal-hipnv.so is not built (configure --without-hipnv?)"
    elif ! hp=$(MSCCLPP_HAL=hip timeout 30 "$build/tests/gpu/test_gpu_hal" --probe 2>&1) ||
        ! echo "$hp" | grep -q 'built for HIP on NVIDIA'; then
        echo "$hp" >"$out/hipnv-probe.log"
        result hipnv FAIL "MSCCLPP_HAL=hip did not take the NVIDIA build: $(echo "$hp" | head -n 1)"
    else
        echo "$hp" >"$out/hipnv-probe.log"
        fails=""
        MSCCLPP_HAL=hip timeout 30 "$build/tests/gpu/test_gpu_hal" >"$out/hipnv-hal.log" 2>&1 ||
            fails="$fails test_gpu_hal;"
        hal="$(grep -c '^ok' "$out/hipnv-hal.log") ok, $(grep -c '^not ok' "$out/hipnv-hal.log") not"
        # its quick mode needed more than 80 s on an H200 (78 plan files passed by then)
        MSCCLPP_HAL=hip CONFORMANCE_QUICK=1 timeout "${GPU_CHECK_HIPNV_CONF_TIMEOUT:-240}" \
            "$build/tests/conformance/test_conformance" >"$out/hipnv-conformance.log" 2>&1
        rc=$?
        conf=$(grep -E '^[0-9]+%: Checks' "$out/hipnv-conformance.log" | tail -n 1 |
            sed 's/^[0-9]*%: //')
        [ -n "$conf" ] || conf="cut at its bound: $(grep -c 'runs on' \
            "$out/hipnv-conformance.log") plan files reached, $(grep 'runs on' \
            "$out/hipnv-conformance.log" | grep -vc ' 0 failed') with failures"
        [ $rc -eq 0 ] || fails="$fails conformance exit $rc;"
        # every row checked (the bench's default); the CUDA module's allreduce beside it
        for run in hip:allreduce hip:allgather cuda:allreduce; do
            be=${run%%:*} c=${run#*:}
            MSCCLPP_HAL=$be timeout 25 "$bench" "$c" --np 2 -b 8 -e 16M -f 8 -n 10 -w 2 \
                >"$out/hipnv-bench-$be-$c.log" 2>&1 || fails="$fails bench $be $c;"
            grep -q "^# Out of bounds values : 0 OK" "$out/hipnv-bench-$be-$c.log" ||
                fails="$fails bench $be $c rows;"
        done
        # like for like: the HIP table loads the generic plans/ and CUDA plans/cuda/, so the
        # same plan under both modules tells the modules apart
        for be in hip cuda; do
            MSCCLPP_HAL=$be timeout 25 "$bench" --plan "$src/plans/cuda/allreduce_simple_2.json" \
                --np 2 -b 16M -e 16M -n 20 -w 5 >"$out/hipnv-same-$be.log" 2>&1 ||
                fails="$fails same-plan bench $be;"
        done
        s16=$(awk '/^ *16777216 / {print $7; exit}' "$out/hipnv-same-hip.log")
        sc16=$(awk '/^ *16777216 / {print $7; exit}' "$out/hipnv-same-cuda.log")
        t8=$(awk '/^ *8 / {print $6; exit}' "$out/hipnv-bench-hip-allreduce.log")
        b16=$(awk '/^ *16777216 / {print $7; exit}' "$out/hipnv-bench-hip-allreduce.log")
        c8=$(awk '/^ *8 / {print $6; exit}' "$out/hipnv-bench-cuda-allreduce.log")
        c16=$(awk '/^ *16777216 / {print $7; exit}' "$out/hipnv-bench-cuda-allreduce.log")
        line="test_gpu_hal $hal; conformance (quick) ${conf:-no summary}; 2-rank allreduce 8 B \
${t8:-?} us (cuda ${c8:-?}), 16 MiB ${b16:-?} GB/s (cuda ${c16:-?}; each its default plans), \
same plan (plans/cuda/allreduce_simple_2) 16 MiB ${s16:-?} GB/s (cuda ${sc16:-?}), allgather \
checked ($(elapsed))"
        [ -z "$fails" ] && result hipnv OK "$line" || result hipnv FAIL "$fails $line"
    fi
fi

# ---- conformance ----
if want conformance; then
    cq=""
    [ $quick = 1 ] && cq=1
    CONFORMANCE_QUICK=$cq timeout "${GPU_CHECK_CONFORMANCE_TIMEOUT:-480}" "$build/tests/conformance/test_conformance" \
        >"$out/conformance.log" 2>&1
    rc=$?
    line=$(grep -E '^[0-9]+%: Checks' "$out/conformance.log" | tail -n 1)
    skips=$(grep -c 'skipped' "$out/conformance.log")
    [ $rc -eq 0 ] && result conformance OK "$line; $skips skip lines" ||
        result conformance FAIL "exit $rc: $line"
fi

# ---- bench sweep of the default plans ----
if want bench; then
    fails=0
    colls=${GPU_CHECK_COLLS:-allreduce allgather reducescatter alltoall broadcast}
    ranks=${GPU_CHECK_RANKS:-2 4 8}
    nruns=$(($(echo $colls | wc -w) * $(echo $ranks | wc -w)))
    for n in $ranks; do
        for c in $colls; do
            if [ $quick = 1 ]; then sizes="-b 8 -e 64M -f 64"; else sizes="-b 8 -e 256M -f 4"; fi
            [ -n "${GPU_CHECK_SIZES:-}" ] && sizes=$GPU_CHECK_SIZES
            timeout "$limit" "$bench" "$c" --np "$n" $sizes -n 20 -w 5 \
                --json "$out/bench-$n-$c.json" >"$out/bench-$n-$c.log" 2>&1 || {
                fails=$((fails + 1))
                why=$(grep -m1 -i 'fail\|error' "$out/bench-$n-$c.log")
                echo "   bench $c --np $n failed: $why"
            }
        done
    done
    [ $fails = 0 ] && result bench OK "$nruns runs, every row checked ($(elapsed))" ||
        result bench FAIL "$fails of $nruns runs failed"
fi

# ---- direct plans vs scratch plans (issue 19 item 3) ----
# The direct plans read the peers' inputs and write their outputs (2 S per rank for an allreduce
# of S bytes where the scratch plan moves 4 S at 2 ranks); plans/direct/cuda/ holds them at the
# CUDA plans' block count (plans/_common.py cuda_instances), so only the bytes differ. Where
# they win, executor/plan_dirs.c direct_default can take "cuda" (docs/plan-selection.md).
# time_ratio A.json B.json: the largest size's out-of-place time of two bench --json runs, and
# B's over A's ("64 MiB 106/171 us (1.62x)")
time_ratio() {
    python3 - "$1" "$2" <<'PY' 2>&1
import json, sys
try:
    d, s = ([json.loads(l) for l in open(p)][-1] for p in sys.argv[1:3])
    td, ts = d["out_of_place"]["time_us"], s["out_of_place"]["time_us"]
    print(f"{d['size'] >> 20} MiB {td:.0f}/{ts:.0f} us ({ts / td:.2f}x)")
except Exception as e:
    print(f"no times ({e})")
PY
}

if want direct; then
    fails=0
    lines=""
    dq=256M
    [ $quick = 1 ] && dq=64M
    mkdir -p "$out/direct-plans"
    for n in 2 4 8; do
        inst=$(python3 -c "import sys; sys.path.insert(0, '$src/plans'); import _common; \
print(_common.cuda_instances($n))" 2>/dev/null)
        for c in allreduce allgather reducescatter alltoall broadcast; do
            dp=$src/plans/direct/cuda/${c}_direct_$n.json # shipped; else generated alike
            if [ ! -f "$dp" ]; then
                dp=$out/direct-plans/${c}_direct_$n.json
                env PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}" python3 \
                    "$src/plans/${c}_direct.py" --num_ranks "$n" --instances "${inst:-16}" \
                    >"$dp" 2>"$out/direct-gen-$c-$n.log" || { fails=$((fails + 1)); continue; }
            fi
            sp=$src/plans/cuda/${c}_$n.json
            [ $c = allreduce ] && sp=$src/plans/cuda/allreduce_simple_$n.json
            for kind in direct scratch; do
                plan=$dp
                [ $kind = scratch ] && plan=$sp
                timeout "$limit" "$bench" --plan "$plan" --np "$n" -b 4M -e $dq -f 4 -n 20 -w 5 \
                    --json "$out/direct-$kind-$c-$n.json" >"$out/direct-$kind-$c-$n.log" 2>&1 &&
                    grep -q "^# Out of bounds values : 0 OK" "$out/direct-$kind-$c-$n.log" ||
                    fails=$((fails + 1))
            done
            r=$(time_ratio "$out/direct-direct-$c-$n.json" "$out/direct-scratch-$c-$n.json")
            lines="$lines $c $n ranks $r;"
        done
        # The CUDA broadcast's root runs the blocks its peers leave (_common.cuda_root_blocks,
        # the others one each): against the same program replicated over inst blocks per rank
        rp=$out/direct-plans/broadcast_direct_repl_$n.json
        env PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}" python3 \
            "$src/plans/broadcast_direct.py" --num_ranks "$n" --instances "${inst:-16}" \
            >"$rp" 2>"$out/direct-gen-repl-$n.log" || { fails=$((fails + 1)); continue; }
        timeout "$limit" "$bench" --plan "$rp" --np "$n" -b 4M -e $dq -f 4 -n 20 -w 5 \
            --json "$out/direct-repl-broadcast-$n.json" >"$out/direct-repl-broadcast-$n.log" 2>&1 &&
            grep -q "^# Out of bounds values : 0 OK" "$out/direct-repl-broadcast-$n.log" ||
            fails=$((fails + 1))
        r=$(time_ratio "$out/direct-direct-broadcast-$n.json" "$out/direct-repl-broadcast-$n.json")
        lines="$lines broadcast $n ranks root blocks/replicated $r;"
    done
    [ $fails = 0 ] && result direct OK "direct/scratch:$lines ($(elapsed))" ||
        result direct FAIL "$fails runs failed:$lines"
fi

# PyTorch through the preloaded NCCL-API library (steps auto, torchnccl, directnccl, torchgraphs,
# seed)
nccl_so=$build/.libs/libmscclpp_nccl.so
torchrun_ok() { command -v torchrun >/dev/null 2>&1 && python3 -c 'import torch' 2>/dev/null; }
pyenv() { env PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}" \
    MSCCLPP_LIBRARY="$build/.libs/libmscclpp.so" "$@"; }

# ---- fit: where the time of large calls goes (issue 19) ----
# At 2 ranks on an H200 the direct allreduce took 102.7 us at 64 MiB and 327.5 at 256 MiB: some
# 28 us of every call is not the data loop. Each plan at 4 sizes (5 for the 2-rank allreduces)
# gives tests/gpu/bench_fit.py what it needs to split a call into a fixed cost a and a loop
# rate r (t = a + S / r), per collective and rank count. The scratch allreduce is the one CUDA
# runs at 64 MiB with MSCCLPP_PLAN_DIRECT=off: the file mscclpp-bench --which names
# (fit-which-N.log; plans/cuda/allreduce_simple_N.json where it names none).
# why LOG: the first line of LOG that names a failure (an error code, "fail", "error"), else its
# last line
why() { grep -m1 -i 'fail\|error\|_ERR_\|timed out' "$1" || tail -n 1 "$1"; }
# bench_ok LOG JSON LO HI F: the bench ran a row per size (LO, LO*F, .. HI: a plan whose size
# range leaves some out would run none of them and still say "0 OK") and every element was right
bench_ok() {
    local want=0 sz=$3
    while [ "$sz" -le "$4" ]; do want=$((want + 1)) sz=$((sz * $5)); done
    grep -q "^# Out of bounds values : 0 OK" "$1" && [ "$(grep -c . "$2" 2>/dev/null)" = $want ]
}
# step_tables STEP TOOL SUBCOMMAND FAILS PREFIX FILE...: the tool's tables over the step's
# bench records into OUTDIR/STEP.md, its --brief line (after PREFIX) into the summary
step_tables() {
    local st=$1 tool=$2 sub=$3 nf=$4 pre=$5 line
    shift 5
    python3 "$tool" "$sub" "$@" >"$out/$st.md" 2>&1
    line=$(python3 "$tool" "$sub" --brief "$@" 2>&1)
    [ "$nf" = 0 ] && result "$st" OK "$pre$line ($(elapsed))" ||
        result "$st" FAIL "$nf of $# runs failed: $line"
}
if want fit; then
    fails=0
    files=()
    for n in ${GPU_CHECK_FIT_RANKS:-2 8}; do
        MSCCLPP_PLAN_DIRECT=off timeout "$limit" "$bench" allreduce --np "$n" -b 64M -e 64M \
            --which >"$out/fit-which-$n.log" 2>&1
        sp=$(awk '$2 == "out-of-place" && $NF ~ /[.]json$/ {print $NF; exit}' \
            "$out/fit-which-$n.log")
        [ -f "$sp" ] || sp=$src/plans/cuda/allreduce_simple_$n.json
        for c in allreduce allgather reducescatter alltoall broadcast scratch; do
            name=${c}_direct_$n
            plan=$src/plans/direct/cuda/$name.json
            if [ $c = scratch ]; then
                name=$(basename "$sp" .json)
                plan=$sp
            fi
            top=$fit_hi
            case $c in allreduce | allgather | scratch) [ "$n" = 2 ] && top=$fit_top ;; esac
            # shellcheck disable=SC2086 # $iters: two flags
            timeout "$limit" "$bench" --plan "$plan" --np "$n" -b $fit_lo -e $top -f $fit_f \
                $iters --json "$out/fit-$name.json" >"$out/fit-$name.log" 2>&1 &&
                bench_ok "$out/fit-$name.log" "$out/fit-$name.json" $fit_lo $top $fit_f || {
                fails=$((fails + 1))
                echo "   fit $name failed: $(why "$out/fit-$name.log")"
            }
            files+=("$out/fit-$name.json")
        done
    done
    step_tables fit "$src/tests/gpu/bench_fit.py" fit $fails "t = a + S/r, " "${files[@]}"
fi

# ---- trace: where one launch's fixed cost goes, block by block (MSCCLPP_KERN_TRACE) ----
# Each rank's executor writes its last launch's stamps at destroy (PREFIX.rank<R>.txt); the
# direct allreduce against the scratch one, at one size past the L2 cache, the direct broadcast
# (its loop ran at 52-55 % of the ideal where allgather's same fused put reached 82 %: are its
# root's 127 blocks slow alike, or some late?), and the one-block
# small-message allreduce at 8 B (the 8 B and graph aims: where a whole call's kernel time goes).
if want trace; then
    fails=0
    lines=""
    for n in ${GPU_CHECK_TRACE_RANKS:-$trace_ranks}; do
        for ps in "$src/plans/direct/cuda/allreduce_direct_$n.json:$trace_sz" \
            "$src/plans/direct/cuda/broadcast_direct_$n.json:$trace_sz" \
            "$src/plans/cuda/allreduce_simple_$n.json:$trace_sz" \
            "$src/plans/cuda/allreduce_allpairs_small_$n.json:8"; do
            plan=${ps%:*} sz=${ps##*:}
            name=$(basename "$plan" .json)
            t=$out/trace-$name
            rm -f "$t".rank*.txt
            # shellcheck disable=SC2086 # $iters: two flags
            MSCCLPP_KERN_TRACE=$t timeout "$limit" "$bench" --plan "$plan" --np "$n" \
                -b $sz -e $sz $iters --json "$t.json" >"$t.log" 2>&1 &&
                bench_ok "$t.log" "$t.json" $sz $sz 2 &&
                [ "$(ls "$t".rank*.txt 2>/dev/null | wc -l)" = "$n" ] &&
                python3 "$src/tests/gpu/kern_trace.py" "$t" >"$t.md" 2>&1 || {
                fails=$((fails + 1))
                echo "   trace $name failed: $(why "$t.log")"
            }
            lines="$lines$(python3 "$src/tests/gpu/kern_trace.py" --brief "$t" 2>&1); "
        done
    done
    [ $fails = 0 ] && result trace OK "$lines($(elapsed))" ||
        result trace FAIL "$fails runs failed: $lines"
fi

# ---- ready: what the direct plans' opening handshake cost (issue 19) ----
# The direct plans open with no handshake: the launch fence every launch of theirs runs already
# says that every peer is in the call (plans/_common.py, direct_ranks). tests/gpu/direct_ready.py
# writes them as they were (each block signalling every peer and waiting for theirs first);
# each pair at READY sizes, the two alternating over GPU_CHECK_READY_ROUNDS rounds, each
# variant's best per size: the difference is that round trip's share of the fixed cost a
# (step fit).
if want ready; then
    fails=0
    files=()
    rdir=$out/ready-plans
    if ! python3 "$src/tests/gpu/direct_ready.py" gen "$src" "$rdir" >"$out/ready-gen.log" 2>&1; then
        fails=1
        echo "   ready: the plans with the handshake were not written: $(why "$out/ready-gen.log")"
    fi
    for n in ${GPU_CHECK_READY_RANKS:-$ready_ranks}; do
        for c in ${GPU_CHECK_READY_COLLS:-allreduce allgather broadcast}; do
            for round in $(seq 1 "${GPU_CHECK_READY_ROUNDS:-2}"); do
                for v in ready none; do
                    plan=$src/plans/direct/cuda/${c}_direct_$n.json
                    [ $v = ready ] && plan=$rdir/direct/cuda/${c}_direct_$n.json
                    r=$out/ready-$v-$c-$n-$round
                    [ -f "$plan" ] || continue
                    # shellcheck disable=SC2086 # $iters: two flags
                    timeout "$limit" "$bench" --plan "$plan" --np "$n" -b $ready_lo -e $ready_hi \
                        -f $ready_f $iters --json "$r.json" >"$r.log" 2>&1 &&
                        bench_ok "$r.log" "$r.json" $ready_lo $ready_hi $ready_f || {
                        fails=$((fails + 1))
                        echo "   ready $v $c $n failed: $(why "$r.log")"
                    }
                    files+=("$r.json")
                done
            done
        done
    done
    step_tables ready "$src/tests/gpu/direct_ready.py" compare $fails "" "${files[@]}"
fi

# ---- auto: MSCCLPP_PLAN_DIRECT off / auto / on in one run (issue 19) ----
# CUDA's auto takes the direct plans from a size up (executor/plan_dirs.c, docs/plan-selection.md)
# where every rank's buffers are shareable: the bench (mscclpp_malloc'd buffers) and PyTorch's
# caching allocator under each mode, so that size is set from times taken side by side.
if want auto; then
    fails=0
    lines=""
    : >"$out/auto.md"
    for c in allreduce allgather; do
        mfiles=()
        for mode in off auto on; do
            f=$out/auto-$mode-$c
            # shellcheck disable=SC2086 # $iters: two flags
            MSCCLPP_PLAN_DIRECT=$mode timeout "$limit" "$bench" "$c" --np 2 -b $auto_lo \
                -e $auto_hi -f 2 $iters --json "$f.json" >"$f.log" 2>&1 &&
                bench_ok "$f.log" "$f.json" $auto_lo $auto_hi 2 || {
                fails=$((fails + 1))
                echo "   auto $c ($mode) failed: $(why "$f.log")"
            }
            mfiles+=("$mode=$f.json")
        done
        python3 "$src/tests/gpu/bench_fit.py" modes "${mfiles[@]}" >>"$out/auto.md" 2>&1
        lines="$lines$(python3 "$src/tests/gpu/bench_fit.py" modes --brief "${mfiles[@]}" 2>&1); "
    done
    if [ $host = 1 ]; then
        lines="${lines}dist.all_reduce: not on the host backend (--host)"
    elif ! torchrun_ok; then
        lines="${lines}dist.all_reduce: no torchrun / PyTorch here"
    else
        tfiles=()
        nd=0
        for round in $(seq 1 "${GPU_CHECK_AUTO_TORCH_ROUNDS:-2}"); do
            for mode in off auto on; do
                f=$out/auto-torch-$mode-$round
                pyenv MSCCLPP_PLAN_DIRECT=$mode LD_PRELOAD="$nccl_so" timeout $((limit * 2)) \
                    torchrun --standalone --nproc_per_node=2 "$src/tests/gpu/torch_nccl.py" \
                    --quick --time-sizes "${GPU_CHECK_AUTO_TORCH_SIZES:-8M,16M,32M,64M,128M}" \
                    --json "$f.json" >"$f.log" 2>&1 || {
                    fails=$((fails + 1))
                    echo "   auto torch_nccl ($mode, round $round) failed: $(why "$f.log")"
                }
                nd=$((nd + $(grep -c -i 'ranks disagree' "$f.log")))
                tfiles+=(--torch "$mode=$f.json")
            done
        done
        python3 "$src/tests/gpu/bench_fit.py" modes "${tfiles[@]}" >>"$out/auto.md" 2>&1
        lines="$lines$(python3 "$src/tests/gpu/bench_fit.py" modes --brief "${tfiles[@]}" 2>&1)"
        lines="$lines; $nd 'ranks disagree'"
        [ "$nd" = 0 ] || fails=$((fails + 1))
    fi
    [ $fails = 0 ] && result auto OK "$lines ($(elapsed))" || result auto FAIL "$fails failed: $lines"
fi

# ---- multinode: 2 namespace "nodes" on this one GPU, port channels through the proxy ----
# Issue 10 item 7: UCX without CUDA support cannot touch device memory, so the ucx transport
# stages it through pinned host bounces (MSCCLPP_UCX_STAGING=auto); mscclpp-info says whether it
# will. Without network namespaces (no `ip`), mscclpp-bench falls back to a forced node id per
# rank (still two "nodes": port channels over UCX on the loopback).
# ---- alltoallv: count-exact on the GPU (issue 20 item 4) ----
if want alltoallv; then
    fails=0
    line=""
    for shape in 1x4 2x1; do
        MSCCLPP_HAL=cuda MADE_FILTER=$shape timeout $((limit * 2)) "$build/tests/conformance/test_made" \
            >"$out/alltoallv-$shape.log" 2>&1 || fails=$((fails + 1))
        line="$line $(grep -m1 '^# .*calls on' "$out/alltoallv-$shape.log" | sed 's/^# //');"
    done
    [ $fails = 0 ] && result alltoallv OK "$line ($(elapsed))" || result alltoallv FAIL "$line"
fi

if want multinode; then
    fails=0
    "$build/tools/mscclpp-info" 2>&1 | grep -A3 -i '^ *ucx' >"$out/multinode-info.log"
    for c in allreduce allgather reducescatter; do
        for mode in auto always; do
            MSCCLPP_UCX_STAGING=$mode timeout "$limit" "$bench" "$c" --np 2 --nodes 2 \
                -b 8 -e 64M -f 8 -n 10 -w 2 >"$out/multinode-$c-$mode.log" 2>&1 || {
                fails=$((fails + 1))
                echo "   multinode $c (staging $mode) failed: $(grep -m1 -i 'fail\|error' \
                    "$out/multinode-$c-$mode.log")"
            }
        done
    done
    staging=$(grep -m1 -i 'staging' "$out/multinode-info.log")
    [ $fails = 0 ] && result multinode OK "2x1 over ucx, 3 collectives x staging auto/always, \
every row checked; ${staging:-no staging line} ($(elapsed))" ||
        result multinode FAIL "$fails of 6 runs failed"
fi

# ---- latency: small allreduce, many iterations ----
if want latency; then
    lat=""
    for n in 2 4 8; do
        timeout "$limit" "$bench" allreduce --np "$n" -b 8 -e 8 -n 1000 -w 100 \
            >"$out/latency-$n.log" 2>&1
        lat="$lat $n ranks: $(awk '/^ *8 / {print $6; exit}' "$out/latency-$n.log") us;"
    done
    # host enqueue vs GPU time per call (tests/gpu/lat_probe.c), 1 rank (no waits) to 8
    for n in 1 2 8; do
        timeout "$limit" "$build/tests/gpu/lat_probe" "$n" 8 2000 >>"$out/latency-probe.log" 2>&1
    done
    # the host path per call (issue 19 item 5): ITERS=100, so the first calls count, on this
    # GPU and on the host backend in the same run (the `host` column: library + launch call)
    timeout "$limit" "$build/tests/gpu/lat_probe" 2 8 100 >"$out/latency-host.log" 2>&1
    MSCCLPP_HAL=host timeout "$limit" "$build/tests/gpu/lat_probe" 2 8 100 \
        >>"$out/latency-host.log" 2>&1
    hostpath=$(grep 'rank 0/' "$out/latency-host.log" | sed -n 's/.* host \([0-9.]*\) us.*/\1/p' |
        tr '\n' ' ')
    result latency OK "8 B allreduce (bench, n=1000):$lat probe: $(grep 'rank 0/' \
        "$out/latency-probe.log" | sed 's/lat_probe rank 0//; s/ us\/call//g' | tr '\n' ';') \
host path per call (2 ranks, 100 calls, gpu then host backend): ${hostpath:-none} us"
fi

# ---- interp: the interpreter's resources and small-message costs (issue 19) ----
if want interp; then
    mod=$build/.libs/libmscclpp-hal-cuda.so
    cuobj=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
    res="-"
    if [ -x "$cuobj" ] && [ -f "$mod" ]; then
        "$cuobj" -res-usage "$mod" >"$out/interp-res.log" 2>&1
        res=$(grep -A1 'kern_cuda_entry' "$out/interp-res.log" | grep -o 'REG:[0-9]* STACK:[0-9]*' |
            head -n 1)
    fi
    for n in 1 2 8; do
        timeout "$limit" "$build/tests/gpu/lat_probe" "$n" 8 100 >>"$out/interp-probe100.log" 2>&1
    done
    # the shipped allreduce_pkt starts above allpairs' 32 KiB (the bench skips sizes outside a
    # plan's range), so the two-hop plan is generated here over 0..256 KiB (its script's default)
    small=""
    mkdir -p "$out/interp-plans"
    for n in 2 8; do
        env PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}" python3 \
            "$src/plans/allreduce_pkt.py" --num_ranks "$n" \
            >"$out/interp-plans/allreduce_pkt_$n.json" 2>"$out/interp-gen-$n.log"
        for pl in allreduce_allpairs allreduce_pkt; do
            plan=$src/plans/${pl}_$n.json
            [ $pl = allreduce_pkt ] && plan=$out/interp-plans/allreduce_pkt_$n.json
            timeout "$limit" "$bench" --plan "$plan" --np "$n" -b 8 -e 32K \
                -f 8 -n 200 -w 20 >"$out/interp-$pl-$n.log" 2>&1
            small="$small $pl/$n: $(awk '/^ *8 / {print $6; exit}' "$out/interp-$pl-$n.log") us@8B,\
 $(awk '/^ *32768 / {print $6; exit}' "$out/interp-$pl-$n.log") us@32K;"
        done
    done
    result interp OK "kern_cuda_entry ${res:-?}; ncu 8 B 1 rank: $ncures; probe n=100: $(grep \
        'rank 0/' "$out/interp-probe100.log" | sed 's/lat_probe rank 0//; s/ us\/call//g' |
        tr '\n' ';');$small"
fi

# ---- graphs: capture and replay (docs/graphs.md) ----
if want graphs; then
    fails=0
    for n in 2 4; do
        timeout "$limit" "$build/tests/gpu/graph_replay" "$n" 100 >"$out/graphs-c-$n.log" 2>&1 ||
            fails=$((fails + 1))
    done
    cline=$(grep -h '^graph_replay' "$out"/graphs-c-*.log | sed 's/^graph_replay: //' | tr '\n' ';')
    # the same rows direct and through graphs (-G 10: the 20 timed calls replayed 10 times)
    for g in 0 10; do
        timeout "$limit" "$bench" allreduce --np 2 -b 8 -e 64M -f 32 -n 20 -w 5 -G $g \
            >"$out/graphs-bench-G$g.log" 2>&1 || fails=$((fails + 1))
    done
    t8=$(awk '/^ *8 / {print $6; exit}' "$out/graphs-bench-G0.log")
    g8=$(awk '/^ *8 / {print $6; exit}' "$out/graphs-bench-G10.log")
    grep -q '^# Out of bounds values : 0 OK' "$out/graphs-bench-G10.log" || fails=$((fails + 1))
    [ $fails = 0 ] && result graphs OK "C API: $cline bench 8 B allreduce: $t8 us direct, $g8 us \
per call in graphs ($(elapsed))" || result graphs FAIL "$fails failures: $cline"
fi

# ---- agree: disagreements and queued launches on the GPU (issue 22 items 1, 3) ----
if want agree; then
    fails=0
    line=""
    for case in agree queue; do
        MSCCLPP_TEST_HAL=cuda CK_RUN_CASE=$case timeout $((limit * 3)) "$build/tests/unit/test_exec_agree" \
            >"$out/agree-$case.log" 2>&1 || fails=$((fails + 1))
        line="$line $case: $(grep -m1 '^[0-9]*%: Checks' "$out/agree-$case.log");"
    done
    [ $fails = 0 ] && result agree OK "$line ($(elapsed))" || result agree FAIL "$line"
fi

# ---- PyTorch: torch.cuda.graph through the Python runtime and the NCCL API; seed 000 ----
# torchnccl: PyTorch through the preloaded NCCL-API library: every collective and send/recv
# checked (8 B .. 256 MiB), each call returning while the stream is busy (no host sync), and
# dist.all_reduce per call next to mscclpp-bench's in-place allreduce (the direct
# mscclpp_allreduce) of the same sizes on the same GPU, with their ratio (aim: <= 1.3x)
if want torchnccl; then
    if ! torchrun_ok; then
        result torchnccl SKIP "no torchrun / PyTorch here"
    else
        tq=""
        [ $quick = 1 ] && tq=--quick
        pyenv LD_PRELOAD="$nccl_so" timeout $((limit * 4)) torchrun --standalone \
            --nproc_per_node=2 "$src/tests/gpu/torch_nccl.py" $tq --json "$out/torchnccl.json" \
            >"$out/torchnccl.log" 2>&1
        rc=$?
        tmax=256M
        [ $quick = 1 ] && tmax=16M
        timeout "$limit" "$bench" allreduce --np 2 -b 8 -e $tmax -f 8 -n 20 -w 5 \
            >"$out/torchnccl-bench.log" 2>&1
        ratios=$(python3 - "$out/torchnccl.json" "$out/torchnccl-bench.log" <<'PY' 2>&1
import json, sys
try:
    torch_us = {int(k): v for k, v in json.load(open(sys.argv[1])).items()}
except Exception as e:
    print(f"no torch times ({e})"); sys.exit(0)
direct = {}
for line in open(sys.argv[2]):
    f = line.split()
    if len(f) > 10 and f[0].isdigit():
        direct[int(f[0])] = float(f[9])  # the in-place time, as torch calls it
worst, parts = 0.0, []
for b in sorted(torch_us):
    d = direct.get(b)
    if d:
        worst = max(worst, torch_us[b] / d)
        parts.append(f"{b} B {torch_us[b]:.1f}/{d:.1f} us {torch_us[b] / d:.2f}x")
print(f"torch/direct (in place): {'; '.join(parts)}; worst {worst:.2f}x "
      f"({'within' if worst <= 1.3 else 'above'} the 1.3x aim)")
PY
)
        echo "$ratios" >>"$out/torchnccl.log"
        lines=$(grep '^torch_nccl' "$out/torchnccl.log" | sed 's/^torch_nccl //' | tr '\n' ';')
        [ $rc -eq 0 ] && [ -n "$lines" ] && result torchnccl OK "$lines $ratios" ||
            result torchnccl FAIL "exit $rc: ${lines:-$(grep -m1 -i 'error\|torch_nccl:' \
                "$out/torchnccl.log")}"
    fi
fi

# ---- directnccl: the NCCL path with the direct plans as CUDA's defaults (issue 19 item 3) ----
if want directnccl; then
    if ! torchrun_ok; then
        result directnccl SKIP "no torchrun / PyTorch here"
    else
        tq=""
        [ $quick = 1 ] && tq=--quick
        # INFO for the plan loads only (the direct plans named), so the times compare with
        # torchnccl's (session 9 logged every subsystem here)
        pyenv MSCCLPP_PLAN_DIRECT=on MSCCLPP_DEBUG=INFO MSCCLPP_DEBUG_SUBSYS=PLAN LD_PRELOAD="$nccl_so" \
            timeout $((limit * 4)) torchrun --standalone --nproc_per_node=2 \
            "$src/tests/gpu/torch_nccl.py" $tq --json "$out/directnccl.json" \
            >"$out/directnccl.log" 2>&1
        rc=$?
        nd=$(grep -c -i 'ranks disagree' "$out/directnccl.log")
        nplans=$(grep -o "direct_[a-z_]*cuda_[0-9]*" "$out/directnccl.log" | sort -u | wc -l)
        lines=$(grep '^torch_nccl' "$out/directnccl.log" | sed 's/^torch_nccl //' | tr '\n' ';')
        [ $rc -eq 0 ] && [ "$nd" = 0 ] && result directnccl OK \
            "$nplans direct plans named in the log, 0 'ranks disagree'; $lines" ||
            result directnccl FAIL "exit $rc, $nd 'ranks disagree' lines: ${lines:-$(grep -m1 \
                -i 'error\|torch_nccl:' "$out/directnccl.log")}"
    fi
fi

if want torchgraphs; then
    if ! torchrun_ok; then
        result torchgraphs SKIP "no torchrun / PyTorch here"
    else
        fails=0
        lines=""
        for mode in runtime nccl; do
            pre=""
            if [ $mode = nccl ]; then pre=$nccl_so; fi
            pyenv LD_PRELOAD="$pre" timeout "$limit" torchrun --standalone --nproc_per_node=2 \
                "$src/tests/gpu/torch_graphs.py" $mode >"$out/torchgraphs-$mode.log" 2>&1 ||
                fails=$((fails + 1))
            l=$(grep -m1 '^torch_graphs' "$out/torchgraphs-$mode.log")
            lines="$lines ${l:-$mode: $(grep -m1 -i 'error\|fail' "$out/torchgraphs-$mode.log")};"
        done
        [ $fails = 0 ] && result torchgraphs OK "$lines" || result torchgraphs FAIL "$lines"
    fi
fi
if want seed; then
    if ! torchrun_ok; then
        result seed SKIP "no torchrun / PyTorch here"
    else
        pyenv LD_PRELOAD="$nccl_so" timeout "$limit" torchrun --standalone --nproc_per_node=2 \
            "$src/examples/torch-integration/dsl_with_nccl_api.py" >"$out/seed.log" 2>&1
        rc=$?
        ok=$(grep -c 'allreduce completed successfully (DSL plan allreduce_nvls served 1' \
            "$out/seed.log")
        [ $rc -eq 0 ] && [ "$ok" = 2 ] && result seed OK "dsl_with_nccl_api.py: 2 ranks, the DSL \
plan served the 24 MiB allreduce" || result seed FAIL "exit $rc, $ok of 2 ranks ok: \
$(grep -m1 -i 'error\|assert' "$out/seed.log")"
    fi
fi

# ---- candidate plans ----
if [ -n "$variants" ] && want variants; then
    nv=0
    nf=0
    for f in "$variants"/*.json; do
        [ -f "$f" ] || continue
        name=$(basename "$f" .json)
        n=${name##*_}
        case $name in
        allreduce_pkt*) sizes="-b 8 -e 4M -f 8" ;;
        *) sizes="-b 1K -e 256M -f 8" ;;
        esac
        MSCCLPP_TIMEOUT=10 timeout 60 "$bench" --plan "$f" --np "$n" $sizes -n 10 -w 3 -c 0 \
            --json "$out/variant-$name.json" >"$out/variant-$name.log" 2>&1 || nf=$((nf + 1))
        nv=$((nv + 1))
    done
    [ $nf = 0 ] && result variants OK "$nv plans ($(elapsed))" ||
        result variants FAIL "$nf of $nv plans failed ($(elapsed))"
fi

mps_stop >/dev/null 2>&1
trap - EXIT

# ---- report ----
{
    echo "# GPU check: $device"
    echo
    echo "$(head -n 1 "$out/info.log"); \`scripts/gpu-check.sh\`, total $(elapsed)."
    echo
    echo '```'
    sed -n '2,6p' "$out/info.log"
    echo '```'
    echo
    echo "| step | result | details |"
    echo "|---|---|---|"
    cat "$out/summary.md"
    echo
    python3 "$src/tests/gpu/gpu_report.py" "$out" "$copy" 2>&1
    for t in fit auto; do [ -f "$out/$t.md" ] && cat "$out/$t.md"; done
} >"$report"
echo "gpu-check: report in $report ($(elapsed)); status $status"
exit $status
