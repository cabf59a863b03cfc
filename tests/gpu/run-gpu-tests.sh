#!/bin/sh
# Run the conformance binaries on the GPU backends that find a device (docs/gpu.md).
# Prints TAP. Without a GPU or driver: "1..0 # SKIP ..." and exit 77 (automake SKIP).
#
# Environment: MSCCLPP_TOP_BUILDDIR (set by make check; default: the current directory),
# GPU_BACKENDS (default "cuda hip"), GPU_TESTS_MPS=0 (do not start CUDA MPS; tests/gpu/mps.sh),
# MSCCLPP_TIMEOUT and the other MSCCLPP_* variables pass through to the binaries. Each
# conformance binary runs once per backend with MSCCLPP_HAL set; its ranks share the devices
# (several ranks per GPU when there are fewer GPUs than ranks).
top=${MSCCLPP_TOP_BUILDDIR:-.}
probe=$top/tests/gpu/test_gpu_hal
backends=${GPU_BACKENDS:-cuda hip}

if [ ! -x "$probe" ]; then
    echo "1..0 # SKIP $probe is not built"
    exit 77
fi

found=""
why=""
for b in $backends; do
    if out=$(MSCCLPP_HAL=$b "$probe" --probe 2>/dev/null); then
        found="$found $b"
        echo "# $out"
    else
        why="$why $(echo "$out" | head -n 1);"
    fi
done
if [ -z "$found" ]; then
    echo "1..0 # SKIP no GPU backend finds a device:$why"
    exit 77
fi

# Several processes on one GPU run concurrently only under MPS; without it they time-slice
# (correct, but each collective takes milliseconds). Start it for CUDA when we may, stop it after.
case " $found " in
*" cuda "*)
    . "$(dirname "$0")/mps.sh"
    mps_start
    trap 'mps_stop' EXIT
    trap 'exit 130' INT TERM
    ;;
esac

bins=""
for f in "$top"/tests/conformance/*; do
    [ -f "$f" ] && [ -x "$f" ] || continue
    case $f in *.sh | *.py | *.o | *.lo | *.log | *.trs) continue ;; esac
    bins="$bins $f"
done

n=0
for b in $found; do
    if [ -z "$bins" ]; then
        n=$((n + 1))
        echo "ok $n - conformance on $b # SKIP no conformance binaries in $top/tests/conformance"
        continue
    fi
    for f in $bins; do
        n=$((n + 1))
        name="$(basename "$f") on $b"
        log=$(mktemp)
        MSCCLPP_HAL=$b "$f" >"$log" 2>&1
        rc=$?
        case $rc in
        0) echo "ok $n - $name" ;;
        77) echo "ok $n - $name # SKIP $(grep -m1 -i skip "$log" | tr -d '#')" ;;
        *)
            echo "not ok $n - $name (exit $rc)"
            tail -n 20 "$log" | sed 's/^/# /'
            ;;
        esac
        rm -f "$log"
    done
done
echo "1..$n"
