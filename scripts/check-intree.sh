#!/usr/bin/env bash
# The classic Autotools way, checked: copy the tree's files to a temporary folder, then there
#   autoreconf -fi && ./configure && make && make check TESTS='<a quick subset>'
# all in place (no build folder), as a user who unpacked a tarball would, and run the README's
# first command from that tree with nothing set (./tools/mscclpp-bench finds the source plans).
# The GPU backends are left out (their compilers take minutes; scripts/build.sh covers them),
# the rest is detected as usual. The default subset needs no Check program, so none is built
# (make check would otherwise build all of them, many times the rest); the whole cost about 2
# CPU-minutes (user+sys), half of them test_install's own build. Prints "intree: N passed, N failed, N skipped" last;
# exits non-zero on a failure.
#   scripts/check-intree.sh [SUITE...]     (default: the subset below; named suites build the
#                                          Check programs too)
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
suites=${*:-tests/install/test_install.sh tests/unit/test_house.sh}
programs=()
[ $# -eq 0 ] && programs=(check_PROGRAMS=)
limit=${MSCCLPP_INTREE_TIMEOUT:-1800}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mscclpp-intree.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
src=$tmp/libmscclpp

step() { echo "intree: $*"; }
die() {
    echo "intree: $1 failed; the last lines of $2:"
    tail -n 30 "$2" | sed 's/^/    /'
    echo "intree: 0 passed, 1 failed, 0 skipped"
    exit 1
}

# the tree's own files: git's list in a checkout (uncommitted edits included), else every file
# but build output
mkdir -p "$src"
if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$top" && git ls-files -z --cached --others --exclude-standard |
        xargs -0 tar cf - --ignore-failed-read 2>/dev/null) | tar xf - -C "$src"
else
    (cd "$top" && tar cf - --exclude='./build*' --exclude=autom4te.cache --exclude='*.o' \
        --exclude='*.lo' --exclude=.libs --exclude=.deps .) | tar xf - -C "$src"
fi
step "copied the tree to $src"
cd "$src" || exit 1
export MAKEFLAGS=
run() { timeout -k 10 "$limit" "$@"; }
step "autoreconf -fi"
run autoreconf -fi >"$tmp/autoreconf.out" 2>&1 || die "autoreconf" "$tmp/autoreconf.out"
step "./configure --without-cuda --without-rocm"
run ./configure --without-cuda --without-rocm >"$tmp/configure.out" 2>&1 ||
    die "configure" "$tmp/configure.out"
step "make -j2"
run make -j2 >"$tmp/make.out" 2>&1 || die "make" "$tmp/make.out"
# the README's first command, from this tree, nothing set: plans made for the job are off, so
# only the source tree's plan files can serve
step "./tools/mscclpp-bench allreduce --np 2 with nothing set"
bench_ok=1
if ! run env -u MSCCLPP_PLAN_DIR -u MSCCLPP_HAL_MODULE_DIR -u MSCCLPP_CACHE_DIR \
    MSCCLPP_PLAN_MAKE=off MSCCLPP_DEBUG=INFO ./tools/mscclpp-bench allreduce --np 2 -b 64 -e 64 -n 1 -w 0 \
    >"$tmp/bench.out" 2>&1 || ! grep -q "loaded [1-9][0-9]* default plans from $src/plans" \
    "$tmp/bench.out"; then
    echo "intree: FAIL: the in-tree mscclpp-bench found no plans or failed:"
    tail -n 15 "$tmp/bench.out" | sed 's/^/    /'
    bench_ok=0
fi
step "make check TESTS='$suites'"
run make -j2 check TESTS="$suites" "${programs[@]}" >"$tmp/check.out" 2>&1
check_rc=$?
grep -E '^(FAIL|ERROR|XPASS):' "$tmp/check.out" | head -n 40 | sed 's/^/    /'
if [ $check_rc -ne 0 ]; then
    for log in $(grep -lE '^(FAIL|ERROR)' $(find tests -name '*.log') 2>/dev/null | head -n 3); do
        echo "intree: $log"
        grep -E '^(not ok|# )' "$log" | tail -n 20 | sed 's/^/    /'
    done
fi
awk '/^# PASS:/{p=$3} /^# SKIP:/{s=$3} /^# XFAIL:/{xf=$3} /^# FAIL:/{f=$3} /^# XPASS:/{xp=$3}
     /^# ERROR:/{e=$3}
     END{printf "intree: %d passed, %d failed, %d skipped\n", p+xf+b, f+xp+e+1-b, s}' \
    b=$bench_ok "$tmp/check.out" |
    tee "$tmp/summary"
failed=$(sed -E 's/.* ([0-9]+) failed.*/\1/' "$tmp/summary")
[ $check_rc -eq 0 ] && [ "$failed" -eq 0 ] && [ $bench_ok -eq 1 ]
