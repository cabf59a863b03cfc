#!/usr/bin/env bash
# HAL operations per steady-state call on the GPU (issue 19 item 5; docs/performance.md "HAL
# operations per call"): each backend operation is a CUDA runtime or driver call (about
# 0.1-1 us under MPS), so their count per call is what the host path costs beyond the launch.
# With MSCCLPP_HAL_COUNT=1 the library prints its counts at every mscclpp_comm_destroy; each
# case runs twice, with LO and HI calls, and rank 0's difference over HI - LO is printed per op.
#   mscclpp_allreduce: mscclpp-bench, 2 ranks, one iteration = an out-of-place and an in-place
#                      call (the bench's own memcpy_sync per iteration refills the in-place input)
#   torch off/auto/on: dist.all_reduce in place through libmscclpp_nccl.so (LD_PRELOAD),
#                      MSCCLPP_PLAN_DIRECT=off, auto and on, MSCCLPP_DEBUG=WARN
# Each case also prints the CUDA calls of the allocation lookups (the CUDA module's own counts,
# the "driver calls" line: mem_info_cuda_calls per call and by kind). First, test_cuda_lookup
# checks those calls per lookup on each kind of memory (cudaMalloc: 3, cuMem: 4, ours: 0).
# usage: tests/gpu/hal_count.sh [BUILD_DIR [SIZES]]   (default build, "8 1048576")
set -u
build=${1:-build}
sizes=${2:-"8 1048576"}
src=$(cd "$(dirname "$0")/../.." && pwd)
bench=$build/tools/mscclpp-bench
nccl_so=$(cd "$build" && pwd)/.libs/libmscclpp_nccl.so
lo=200
hi=1200
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# per_call NAME LOG_LO LOG_HI [WHAT]: rank 0's counts at its last comm destroy (the line of WHAT:
# "HAL operations", or the module's "driver calls"), difference / (hi - lo)
per_call() {
    python3 - "$1" "$2" "$3" $((hi - lo)) "${4:-HAL operations}" <<'PY'
import re, sys
name, a, b, n, what = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
def counts(path):
    last = None
    for line in open(path, errors="replace"):
        if what in line and "rank 0" in line:
            last = line
    if last is None:
        return None
    return {k: int(v) for k, v in re.findall(r" (\w+)=(\d+)", last.split(":", 1)[1])}
x, y = counts(a), counts(b)
if x is None or y is None:
    print(f"{name}: no counts (see {a}, {b})")
    sys.exit(0)
d = {k: (y.get(k, 0) - x.get(k, 0)) / n for k in set(x) | set(y)}
parts = [f"{k}={v:.2f}" for k, v in sorted(d.items()) if abs(v) >= 0.005]
# the module's line: mem_info_cuda_calls is already the total of its kinds
total = "" if what != "HAL operations" else f" (total {sum(d.values()):.2f} per call)"
print(f"{name}: {' '.join(parts)}{total}")
PY
}

echo "test_cuda_lookup (CUDA calls per lookup, by kind of memory):"
[ -x "$build/tests/gpu/test_cuda_lookup" ] || make -C "$build" tests/gpu/test_cuda_lookup >/dev/null
"$build/tests/gpu/test_cuda_lookup" | sed 's/^/  /'

for b in $sizes; do
    for n in $lo $hi; do
        MSCCLPP_HAL_COUNT=1 timeout 300 "$bench" allreduce --np 2 -b "$b" -e "$b" -n "$n" -w 5 \
            -c 0 >"$tmp/bench-$b-$n.log" 2>&1
    done
    per_call "mscclpp_allreduce $b B (per iteration: out of place + in place)" \
        "$tmp/bench-$b-$lo.log" "$tmp/bench-$b-$hi.log"
    per_call "  its lookups' CUDA calls" "$tmp/bench-$b-$lo.log" "$tmp/bench-$b-$hi.log" \
        "driver calls"
done

if command -v torchrun >/dev/null 2>&1 && python3 -c 'import torch' 2>/dev/null; then
    for mode in off auto on; do
        for b in $sizes; do
            for n in $lo $hi; do
                env PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}" MSCCLPP_HAL_COUNT=1 \
                    MSCCLPP_PLAN_DIRECT=$mode MSCCLPP_DEBUG=WARN LD_PRELOAD="$nccl_so" \
                    timeout 300 torchrun --standalone --nproc_per_node=2 \
                    "$src/tests/gpu/torch_percall.py" "$n" "$b" >"$tmp/torch-$mode-$b-$n.log" 2>&1
            done
            per_call "torch all_reduce in place $b B, MSCCLPP_PLAN_DIRECT=$mode" \
                "$tmp/torch-$mode-$b-$lo.log" "$tmp/torch-$mode-$b-$hi.log"
            per_call "  its lookups' CUDA calls" "$tmp/torch-$mode-$b-$lo.log" \
                "$tmp/torch-$mode-$b-$hi.log" "driver calls"
        done
    done
else
    echo "torch: SKIP (no torchrun / PyTorch here)"
fi
