#!/bin/sh
# The house checks (TAP): scripts/check-house.py holds the tree to ARCHITECTURE.md §2 and to the
# map in docs/architecture.md. Run by hand: scripts/check-house.py [--build DIR] [CHECK...].
# The last cases show that the vendor check fails on a new exception and on a stale row.
. "$(dirname "$0")/../tap.sh" mscclpp-house
[ -n "${MSCCLPP_TOP_BUILDDIR:-}" ] || top_build=$top_src/build
command -v python3 >/dev/null 2>&1 || skip_all "python3 is not installed"
check="$top_src/scripts/check-house.py"
echo "1..7"
for c in layers calls config vendor map; do
    run python3 "$check" --src "$top_src" --build "$top_build" "$c"
    if [ "$rc" -ne 0 ]; then
        fail "$c"
    elif grep -q "^$c: skipped: " "$tmp/out"; then
        skip "$c" "$(sed -n "s/^$c: skipped: //p" "$tmp/out")"
    else
        pass "$c"
    fi
done

# a copy of the map and one file: an include of <cuda_runtime.h> in executor/ is refused
mkdir -p "$tmp/tree/docs" "$tmp/tree/executor"
cp "$top_src/docs/architecture.md" "$tmp/tree/docs/"
printf '#include <cuda_runtime.h>\n' >"$tmp/tree/executor/new.c"
run python3 "$check" --src "$tmp/tree" vendor
if [ "$rc" -eq 1 ] && grep -q "^executor/new.c includes <cuda_runtime.h>" "$tmp/out"; then
    pass "vendor: a vendor include outside the table fails"
else
    fail "vendor: a vendor include outside the table fails" "exit $rc, or no line for executor/new.c"
fi
# the same run: every row of the table is unused in that tree, so each is named as stale
if grep -q "^docs/architecture.md, Vendor headers: the row for hal/cuda/ allows cuda.h," "$tmp/out"; then
    pass "vendor: a row no file uses fails"
else
    fail "vendor: a row no file uses fails" "no line for hal/cuda/'s cuda.h"
fi
[ "$fails" -eq 0 ]
