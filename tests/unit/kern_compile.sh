#!/bin/sh
# Portability and resource check of the plan interpreter: compile kernels/common through nvcc
# (sm_80, sm_90) and hipcc (gfx90a), as the CUDA and HIP HAL modules do; for sm_90, read what
# ptxas reports (-Xptxas -v) per function and fail when the kernel's per-thread stack, any
# hot-path function's spills or all functions' spills grow past their limits below (512 threads
# per block, the kernel's launch bound, leave it 128 registers; 1024 left 64 and it spilled; the
# interpreter keeps its state in shared memory, docs/gpu.md "Interpreter"); the log lists every
# function with spills. Prints TAP; skips a compiler that is not installed, and everything when
# MSCCLPP_SKIP_KERN_COMPILE is set (takes a few minutes).
top=${MSCCLPP_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bld=${MSCCLPP_TOP_BUILDDIR:-$top}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
hipcc=${HIPCC:-$(command -v hipcc || echo /opt/rocm/bin/hipcc)}
# Limits of the sm_90 build (nvcc 13.0, -Xptxas -v), each a ratchet: it keeps its number from
# growing; lower it when a change lowers it (history and per-function numbers: docs/gpu.md
# "Interpreter"). Stack: kern_cuda_entry's cumulative stack per thread (its frame and the
# deepest chain of its out-of-line callees' frames); 6080 bytes before the shared-memory block
# state, 1224 with the launch fence inlined into every wait, 432 with the waits' slow checks out
# of line, 424 with the reduces' addresses in shared memory, 416 with the packet ops' too, 400
# with the data ops taking (c, op, x, n) and kern_spin_check six arguments, 392 with
# kern_port_op inline and kern_port_put taking (c, op, k, x, n), 376 with the packet
# reductions' first look at a packet inline and integers' running result packed, 360 with the
# launch's executor words loaded at once, 128 (the kernel's own frame, no spills) with
# __launch_bounds__(512) instead of 1024 (124 registers instead of 64). Hot:
# the spill-store bytes a function of the hot path (one op's dispatch, copies, reductions,
# packets, puts, signals and waits: $hot below) may have, each its own ratchet: 0, or its number
# in hot_allow (mostly arguments stored at a call site, docs/gpu.md "Interpreter").
# Stores and loads: the static spill-store and spill-load bytes of all functions together,
# 5596 / 6440 before the reduces' address table, 1600 / 3624 with it, 1148 / 1300 with the
# packet ops', 916 / 1028 with fewer arguments per call (the slow paths keep theirs:
# kern_spin_check 452, kern_fail_sig 96), 892 / 1024 with kern_port_op inline, 772 / 896 with
# the packet reductions' change, 764 / 896 with the launch's executor words loaded at once,
# 712 / 836 with the launch fence's kern_rec_read returning 0 or 1 (a record read while it
# changes is polled again), 0 / 0 with the launch bound 512.
stack_limit=${KERN_STACK_LIMIT:-128}
hot_limit=${KERN_HOT_SPILL_LIMIT:-0}
# hot functions allowed more than hot_limit, "name=bytes ..." (each its own ratchet)
hot_allow=${KERN_HOT_SPILL_ALLOW-""}
spill_limit=${KERN_SPILL_LIMIT:-0}
load_limit=${KERN_SPILL_LOAD_LIMIT:-0}
# gfx90a: kern_hip_entry's ScratchSize (its frame and its callees' deepest chain): 528 with the
# interpreter of session 3, 416 with the reduces' address table, 400 with the packet ops' too,
# 368 with the launch arguments copied to shared memory word by word by all threads (thread 0's
# struct copy kept every field live: its frame 240 bytes, 256 once alltoallv's vtab was added),
# 352 with kern_port_put taking (c, op, k, x, n), 176 with __launch_bounds__(512) (NumVgprs 64 +
# 64 AGPRs of spill room -> 124 + 12, no VGPR spills)
hip_scratch_limit=${KERN_HIP_SCRATCH_LIMIT:-176}
hot='kern_(exec_op|copy_io|io_tab|red_|reduce|pkt_|pred_|preduce|wait_chan|sem_acquire|port_op|port_put|port_ctl|port_wait|mc_op|putv)'
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
inc="-I$top -I$top/include -I$bld"
echo "1..4"
if [ -n "$MSCCLPP_SKIP_KERN_COMPILE" ]; then
    for i in 1 2 3 4; do echo "ok $i # SKIP MSCCLPP_SKIP_KERN_COMPILE is set"; done
    exit 0
fi
n=0
for arch in 80 90; do
    n=$((n + 1))
    v=
    [ "$arch" = 90 ] && v="-Xptxas -v"
    if [ ! -x "$nvcc" ]; then
        echo "ok $n - nvcc sm_$arch # SKIP nvcc not found"
    elif "$nvcc" -O3 -std=c++17 -Werror all-warnings -gencode "arch=compute_$arch,code=sm_$arch" \
            $v $inc -c "$top/kernels/cuda/kern_cuda.cu" -o "$tmp/k$arch.o" >"$tmp/log$arch" 2>&1; then
        echo "ok $n - nvcc sm_$arch"
    else
        sed 's/^/# /' "$tmp/log$arch"
        echo "not ok $n - nvcc sm_$arch"
    fi
done
n=$((n + 1))
if [ ! -s "$tmp/k90.o" ]; then
    echo "ok $n - kern_cuda_entry stack and spills # SKIP no sm_90 build"
else
    stack=$(sed -n 's/.*Used [0-9]* registers.* \([0-9]*\) bytes cumulative stack size.*/\1/p' \
        "$tmp/log90" | head -n 1)
    regs=$(sed -n 's/.*Used \([0-9]*\) registers.*cumulative stack.*/\1/p' "$tmp/log90" | head -n 1)
    # one line per function: name (mangled), frame, spill stores, spill loads
    # (names demangled to the bare function name where c++filt is installed)
    awk '/Function properties for/ { f = $NF }
        /bytes stack frame/ { print f, $1, $5, $9 }' "$tmp/log90" |
        { c++filt 2>/dev/null || cat; } | sed 's/^[^ ]*::\([A-Za-z0-9_]*\)([^)]*)/\1/' >"$tmp/fn90"
    spills=$(awk '{ s += $3 } END { print s + 0 }' "$tmp/fn90")
    loads=$(awk '{ s += $4 } END { print s + 0 }' "$tmp/fn90")
    hotmax=$(grep -E "$hot" "$tmp/fn90" | awk '$3 > m { m = $3 } END { print m + 0 }')
    # the hot functions over their limit (hot_limit, or their own in hot_allow)
    grep -E "$hot" "$tmp/fn90" | awk -v l="$hot_limit" -v allow="$hot_allow" '
        BEGIN { n = split(allow, a, " "); for (i = 1; i <= n; i++) { split(a[i], kv, "="); lim[kv[1]] = kv[2] } }
        { m = ($1 in lim) ? lim[$1] : l; if ($3 > m) print $0, "(limit " m ")" }' >"$tmp/over"
    echo "# kern_cuda_entry sm_90: $regs registers, $stack bytes of stack per thread; spill" \
        "stores $spills bytes, spill loads $loads bytes; the hot path's most per function" \
        "$hotmax (limits: stack $stack_limit, hot $hot_limit${hot_allow:+ except $hot_allow}," \
        "stores $spill_limit, loads $load_limit)"
    echo "# functions with a frame or spills (frame / spill stores / spill loads, bytes):"
    awk '$2 + $3 + $4 > 0' "$tmp/fn90" | sort -k3,3nr -k2,2nr | sed 's/^/#   /'
    if [ -z "$stack" ]; then
        sed 's/^/# /' "$tmp/log90" | head -n 20
        echo "not ok $n - kern_cuda_entry stack and spills: no ptxas report"
    elif [ "$stack" -gt "$stack_limit" ] || [ -s "$tmp/over" ] ||
            [ "$spills" -gt "$spill_limit" ] || [ "$loads" -gt "$load_limit" ]; then
        sed 's/^/# over: /' "$tmp/over"
        echo "not ok $n - kern_cuda_entry stack and spills: over the limit"
    else
        echo "ok $n - kern_cuda_entry stack and spills"
    fi
fi
n=$((n + 1))
if [ ! -x "$hipcc" ]; then
    echo "ok $n - hipcc gfx90a # SKIP hipcc not found"
elif (cd "$tmp" && HCC_AMDGPU_TARGET=gfx90a "$hipcc" -O3 -std=c++17 -Werror \
        --offload-arch=gfx90a -D__HIP_PLATFORM_AMD__ $inc -save-temps \
        -c "$top/kernels/hip/kern_hip.hip" -o "$tmp/kh.o") >"$tmp/log" 2>&1; then
    # hipcc inlines every function not marked noinline: the large ones (one op, each reduce
    # loop) must stay functions of their own, or the kernel's code generation takes tens of
    # minutes (kern_port.h, KERN_BIG_FN)
    s=$(ls "$tmp"/*gfx90a*.s 2>/dev/null | head -n 1)
    if [ -z "$s" ]; then
        echo "ok $n - hipcc gfx90a # SKIP no device assembly kept (-save-temps)"
    elif grep -q '^_Z[A-Za-z0-9_]*kern_exec_op[A-Za-z0-9_]*:' "$s" &&
            grep -q '^_Z[A-Za-z0-9_]*kern_red_F32_SUM[A-Za-z0-9_]*:' "$s"; then
        echo "# kern_hip_entry gfx90a: $(grep -m 2 -E '; (NumVgprs|ScratchSize):' "$s" | tr -d ';' | tr '\n' ' ')(limit: scratch $hip_scratch_limit)"
        scratch=$(sed -n 's/^; ScratchSize: \([0-9]*\).*/\1/p' "$s" | head -n 1)
        if [ "${scratch:-0}" -gt "$hip_scratch_limit" ]; then
            echo "not ok $n - hipcc gfx90a: kern_hip_entry's ScratchSize $scratch > $hip_scratch_limit"
        else
            echo "ok $n - hipcc gfx90a"
        fi
    else
        echo "# kern_exec_op / kern_red_F32_SUM are not functions of their own in $s"
        echo "not ok $n - hipcc gfx90a: the interpreter's large functions were inlined"
    fi
else
    sed 's/^/# /' "$tmp/log"
    echo "not ok $n - hipcc gfx90a"
fi
