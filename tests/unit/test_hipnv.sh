#!/bin/sh
# The HIP module built for NVIDIA GPUs (libmscclpp-hal-hipnv.so, hal/hipnv, docs/gpu.md §8), on
# any machine: what it exports and links, that its kernel is the interpreter's HIP path, and that
# the kernel source compiles warning-free through nvcc as HIP. Its table (size, ABI, name "hip",
# every slot) and its refusals without a device are checked by tests/unit/test_hal_modules.
# Prints TAP; skips everything when configure built no hipnv module (no CUDA toolkit).
top=${MSCCLPP_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bld=${MSCCLPP_TOP_BUILDDIR:-$top}
so=$bld/.libs/libmscclpp-hal-hipnv.so
if ! grep -q '^#define MSCCLPP_HAVE_HIPNV 1' "$bld/config.h" 2>/dev/null; then
    echo "1..0 # SKIP the hipnv module is not built (configure found no CUDA toolkit, or --without-hipnv)"
    exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..5"

# 1: built, and its dynamic symbols are the module interface and nothing else
if [ ! -f "$so" ]; then
    echo "not ok 1 - $so is not built"
else
    nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRV]$/ {print $3}' | sort >"$tmp/exports"
    printf 'mscclpp_hal_module\nmscclpp_hal_module_bind\nmscclpp_hal_module_build\n' >"$tmp/want"
    if cmp -s "$tmp/exports" "$tmp/want"; then
        echo "ok 1 - exports mscclpp_hal_module, _bind and _build only"
    else
        sed 's/^/# exported: /' "$tmp/exports"
        echo "not ok 1 - exports other symbols than the module interface"
    fi
fi

# 2: HIP on NVIDIA links the CUDA runtime, never AMD's HIP runtime nor libcuda (the module must
# load on a machine without a driver, as the CUDA module does)
needed=$(readelf -d "$so" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
case " $needed " in
*amdhip* | *libhsa* | *" libcuda.so"*) echo "not ok 2 - links $needed" ;;
*libcudart*) echo "ok 2 - links the CUDA runtime only ($needed)" ;;
*) echo "not ok 2 - no libcudart among $needed" ;;
esac

# 3: every hip* call was mapped (vendor/hipnv/hip/hip_runtime_api.h): none is left undefined
undef=$(nm -D --undefined-only "$so" | awk '{print $2}' | grep -i '^hip' | tr '\n' ' ')
if [ -z "$undef" ]; then echo "ok 3 - no hip* symbol left to a HIP runtime"
else echo "not ok 3 - undefined: $undef"; fi

# 4: the kernel inside is kernels/hip's (kern_hip_entry), not the CUDA module's
syms=$(nm "$so" 2>/dev/null)
if echo "$syms" | grep -q 'kern_hip_entry' && ! echo "$syms" | grep -q 'kern_cuda_entry'; then
    echo "ok 4 - the HIP interpreter kernel (kern_hip_entry) is linked in"
else
    echo "not ok 4 - kern_hip_entry missing or kern_cuda_entry present"
fi

# 5: kernels/hip/kern_hip.hip through nvcc as HIP, warnings as errors (to PTX: the build already
# ran ptxas); kern_hipnv.cu itself stops with #error when kernels/common takes its CUDA path. The
# PTX shows the HIP builtins mapped: system-scope acquire loads (__hip_atomic_load), the clock
# (__builtin_amdgcn_s_memrealtime) and the back-off (__builtin_amdgcn_s_sleep).
nvcc=$(sed -n 's/^NVCC = //p' "$bld/Makefile")
cuinc=$(sed -n 's/^CUDA_CPPFLAGS = //p' "$bld/Makefile")
if [ -n "$MSCCLPP_SKIP_KERN_COMPILE" ]; then
    echo "ok 5 # SKIP MSCCLPP_SKIP_KERN_COMPILE is set"
elif ! "$nvcc" -O3 -std=c++17 -Werror all-warnings -arch=compute_90 -ptx \
        -I"$top/vendor/hipnv" -I"$top" -I"$top/include" -I"$bld" $cuinc \
        "$top/kernels/hipnv/kern_hipnv.cu" -o "$tmp/k.ptx" >"$tmp/log" 2>&1; then
    sed 's/^/# /' "$tmp/log"
    echo "not ok 5 - kern_hip.hip does not compile as HIP through nvcc"
else
    miss=""
    for w in 'ld.acquire.sys' '%globaltimer' 'nanosleep'; do
        grep -q -- "$w" "$tmp/k.ptx" || miss="$miss $w"
    done
    if [ -z "$miss" ]; then
        echo "ok 5 - kern_hip.hip compiles as HIP through nvcc (compute_90, -Werror); PTX has the mapped builtins"
    else
        echo "not ok 5 - the PTX lacks:$miss"
    fi
fi
