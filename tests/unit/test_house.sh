#!/bin/sh
# The house checks (TAP): scripts/check-house.py holds the tree to ARCHITECTURE.md §2 and to the
# map in docs/architecture.md. Run by hand: scripts/check-house.py [--build DIR] [CHECK...].
top_src=${MSCCLPP_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
top_build=${MSCCLPP_TOP_BUILDDIR:-$top_src/build}
if ! command -v python3 >/dev/null 2>&1; then
    echo "1..0 # SKIP python3 is not installed"
    exit 77
fi
exec python3 "$top_src/scripts/check-house.py" --tap --src "$top_src" --build "$top_build" \
    layers calls config map
