#!/usr/bin/env bash
# The plan verifier against execution (issue 22 item 2): make_verify_sound.py writes mutants of
# small plans that the verifier accepts and mutants it calls wrong (fixed seed), and
# verify_sound_run runs each on the host interpreter with every element checked (TAP). A verdict
# that execution contradicts fails: an accepted plan that computes garbage, or a "wrong" one
# that computes the right result.
set -u
top=${MSCCLPP_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bld=${MSCCLPP_TOP_BUILDDIR:-$top/build}
if ! command -v python3 >/dev/null 2>&1; then
    echo "1..0 # SKIP python3 makes the mutants"
    exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/verify-sound.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
if ! python3 "$top/tests/fuzz/make_verify_sound.py" "$tmp" --seed "${VERIFY_SOUND_SEED:-11}" \
        >"$tmp/make.log" 2>&1; then
    echo "1..1"
    sed 's/^/# /' "$tmp/make.log"
    echo "not ok 1 - make_verify_sound.py failed"
    exit 1
fi
MSCCLPP_DEBUG=${MSCCLPP_DEBUG:-NONE} MSCCLPP_TIMEOUT=${MSCCLPP_TIMEOUT:-10} \
    timeout -k 10 600 "$bld/tests/fuzz/verify_sound_run" "$tmp"/*.json
