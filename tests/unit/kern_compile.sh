#!/bin/sh
# Portability check of the plan interpreter: compile kernels/common through nvcc (sm_80, sm_90)
# and hipcc (gfx90a), as the CUDA and HIP HAL modules do. Prints TAP; skips a compiler that is
# not installed, and everything when MSCCLPP_SKIP_KERN_COMPILE is set (takes a minute or two).
top=${MSCCLPP_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bld=${MSCCLPP_TOP_BUILDDIR:-$top}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
hipcc=${HIPCC:-$(command -v hipcc || echo /opt/rocm/bin/hipcc)}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
inc="-I$top -I$top/include -I$bld"
echo "1..3"
if [ -n "$MSCCLPP_SKIP_KERN_COMPILE" ]; then
    for i in 1 2 3; do echo "ok $i # SKIP MSCCLPP_SKIP_KERN_COMPILE is set"; done
    exit 0
fi
n=0
for arch in 80 90; do
    n=$((n + 1))
    if [ ! -x "$nvcc" ]; then
        echo "ok $n - nvcc sm_$arch # SKIP nvcc not found"
    elif "$nvcc" -O3 -std=c++17 -Werror all-warnings -gencode "arch=compute_$arch,code=sm_$arch" \
            $inc -c "$top/kernels/cuda/kern_cuda.cu" -o "$tmp/k$arch.o" >"$tmp/log" 2>&1; then
        echo "ok $n - nvcc sm_$arch"
    else
        sed 's/^/# /' "$tmp/log"
        echo "not ok $n - nvcc sm_$arch"
    fi
done
n=$((n + 1))
if [ ! -x "$hipcc" ]; then
    echo "ok $n - hipcc gfx90a # SKIP hipcc not found"
elif HCC_AMDGPU_TARGET=gfx90a "$hipcc" -O3 -std=c++17 -Werror --offload-arch=gfx90a \
        -D__HIP_PLATFORM_AMD__ $inc -c "$top/kernels/hip/kern_hip.hip" -o "$tmp/kh.o" \
        >"$tmp/log" 2>&1; then
    echo "ok $n - hipcc gfx90a"
else
    sed 's/^/# /' "$tmp/log"
    echo "not ok $n - hipcc gfx90a"
fi
