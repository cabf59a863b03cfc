#!/bin/sh
# tests/gpu/lat_probe on the host backend (issue 19 item 5): the tool that scripts/gpu-check.sh
# runs on a GPU also runs here, so it cannot rot between GPU sessions. Checks that 2 ranks
# complete 20 calls of each kind and print their per-call numbers; the numbers themselves are
# measurements (docs/performance.md), not asserted. Prints TAP.
top=${MSCCLPP_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bld=${MSCCLPP_TOP_BUILDDIR:-$top}
probe=$bld/tests/gpu/lat_probe
echo "1..2"
if [ ! -x "$probe" ]; then
    echo "not ok 1 - $probe is not built"
    echo "not ok 2 - nothing ran"
    exit 0
fi
out=$(MSCCLPP_HAL=host timeout 300 "$probe" 2 8 20 2>&1)
rc=$?
[ $rc = 0 ] && echo "ok 1 - lat_probe 2 8 20 on the host backend exits 0" ||
    { printf '%s\n' "$out" | sed 's/^/# /'; echo "not ok 1 - lat_probe exited $rc"; }
pat='^lat_probe rank [01]/2 8 B: host [0-9.]* us/call (best batch [0-9.]*, cpu [0-9.]*), enqueue [0-9.]* us/call, total [0-9.]* us/call, call+sync [0-9.]* us/call (20 calls)$'
n=$(printf '%s\n' "$out" | grep -c "$pat")
if [ "$n" = 2 ]; then
    echo "ok 2 - both ranks print their numbers"
    printf '%s\n' "$out" | grep "$pat" | sed 's/^/# /'
else
    printf '%s\n' "$out" | sed 's/^/# /'
    echo "not ok 2 - $n of 2 ranks printed a well-formed line"
fi
