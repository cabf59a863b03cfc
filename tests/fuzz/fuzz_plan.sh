#!/usr/bin/env bash
# Bounded fuzz run over the plan loader (issue 8): tests/fuzz/fuzz_plan.c built with libFuzzer
# and ASan+UBSan when clang has them (Debian: clang + libclang-rt-14-dev), else its seeded
# mutation runner built with gcc (with ASan+UBSan when they link). Seeds: tests/fuzz/plan-corpus.
# FUZZ_PLAN_SECONDS (default 20) bounds the run; FUZZ_PLAN_SEED fixes the standalone runner's
# seed (default: the time, printed so a failure can be replayed). Prints TAP.
set -u
top=${MSCCLPP_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bld=${MSCCLPP_TOP_BUILDDIR:-$top/build}
secs=${FUZZ_PLAN_SECONDS:-20}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..1"
# The loader, its verifier and what they call for errors and logging: small enough to build
# with the fuzzer's instrumentation here instead of instrumenting the whole library.
srcs="tests/fuzz/fuzz_plan.c executor/plan_load.c executor/plan_api.c executor/plan_verify.c
      base/status.c base/log.c base/config.c base/names.c"
src_paths=$(for s in $srcs; do printf '%s ' "$top/$s"; done)
inc="-I$top -I$top/include -I$bld"
export MSCCLPP_DEBUG=${MSCCLPP_DEBUG:-NONE}
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
mode=""
if command -v clang >/dev/null 2>&1 &&
        clang -g -O1 -fsanitize=fuzzer $san $inc -o "$tmp/fuzz_plan" $src_paths -ljansson -lm \
            -lpthread >"$tmp/build.log" 2>&1; then
    mode=libfuzzer
    mkdir -p "$tmp/found"
    # New inputs go to the first directory ($tmp/found): the corpus in the repo stays as is.
    timeout -k 10 $((secs + 60)) "$tmp/fuzz_plan" -max_total_time="$secs" -rss_limit_mb=2048 \
        -timeout=10 -artifact_prefix="$tmp/" "$tmp/found" "$top/tests/fuzz/plan-corpus" \
        >"$tmp/run.log" 2>&1
    rc=$?
    summary=$(grep -E '^Done [0-9]+ runs' "$tmp/run.log" | tail -n 1)
else
    seed=${FUZZ_PLAN_SEED:-$(date +%s)}
    cflags="-g -O1 -DFUZZ_PLAN_STANDALONE"
    if ! cc $cflags $san $inc -o "$tmp/fuzz_plan" $src_paths -ljansson -lm -lpthread \
            >"$tmp/build.log" 2>&1; then
        cc $cflags $inc -o "$tmp/fuzz_plan" $src_paths -ljansson -lm -lpthread >"$tmp/build.log" 2>&1 ||
            { sed 's/^/# /' "$tmp/build.log"; echo "not ok 1 - fuzz_plan: build failed"; exit 0; }
    fi
    mode="standalone seed $seed"
    timeout -k 10 $((secs + 60)) "$tmp/fuzz_plan" "$seed" "$secs" \
        "$top/tests/fuzz/plan-corpus" >"$tmp/run.log" 2>&1
    rc=$?
    summary=$(grep -E '^fuzz_plan:' "$tmp/run.log" | tail -n 1)
fi
if [ "$rc" -eq 0 ]; then
    echo "# $summary"
    echo "ok 1 - fuzz_plan ($mode, ${secs} s)"
else
    grep -v 'MSCCLPP WARN' "$tmp/run.log" | tail -n 60 | sed 's/^/# /'
    for f in "$tmp"/crash-* "$tmp"/leak-* "$tmp"/timeout-*; do
        [ -f "$f" ] && { echo "# reproducer $f:"; head -c 2000 "$f" | sed 's/^/#   /'; echo; }
    done
    echo "not ok 1 - fuzz_plan ($mode): exit $rc"
fi
