#!/usr/bin/env bash
# The bootstrap parser fuzz target (fuzz_boot.c) under clang's libFuzzer with ASan and UBSan,
# for FUZZ_BOOT_SECONDS (default 15) from a copy of tests/fuzz/boot-corpus. Skips (exit 77)
# where clang or its libFuzzer runtime is missing (scripts/install-deps.sh installs both).
# Prints TAP; a crash or hang leaves its input under build/tests/fuzz/.
set -uo pipefail
top=${MSCCLPP_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${MSCCLPP_TOP_BUILDDIR:-$top/build}
secs=${FUZZ_BOOT_SECONDS:-15}
echo "1..1"
cc=${CLANG:-clang}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! command -v "$cc" >/dev/null ||
    ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' |
        "$cc" -x c -fsanitize=fuzzer - -o "$work/probe" 2>/dev/null; then
    echo "ok 1 - # SKIP clang with libFuzzer is not installed (apt-get install clang libclang-rt-14-dev)"
    exit 77
fi
bin=$build/tests/fuzz/fuzz_boot_libfuzzer
mkdir -p "$build/tests/fuzz"
srcs=(core/bootstrap_tcp.c core/bootstrap.c core/socket.c base/config.c base/names.c base/log.c base/status.c)
if ! (cd "$top" && "$cc" -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined \
        -fno-sanitize-recover=undefined -I. -Iinclude -I"$build" -DMSCCLPP_BUILDING_LIBRARY \
        "${srcs[@]}" tests/fuzz/fuzz_boot.c -o "$bin" -lpthread) >"$work/cc.log" 2>&1; then
    sed 's/^/# /' "$work/cc.log" | head -40
    echo "not ok 1 - fuzz_boot (libFuzzer): the target does not build with $cc"
    exit 1
fi
mkdir -p "$work/corpus" "$work/artifacts"
cp "$top"/tests/fuzz/boot-corpus/* "$work/corpus/"
MSCCLPP_DEBUG=NONE ASAN_OPTIONS=detect_leaks=1 "$bin" -max_total_time="$secs" -timeout=5 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
    "$work/corpus" >"$work/run.log" 2>&1
rc=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/run.log")
cov=$(grep -o 'cov: [0-9]*' "$work/run.log" | tail -1)
if [ $rc -ne 0 ] || ls "$work/artifacts"/* >/dev/null 2>&1; then
    cp "$work"/artifacts/* "$build/tests/fuzz/" 2>/dev/null
    grep -E 'ERROR|SUMMARY|ALARM|#[0-9]+ 0x' "$work/run.log" | head -30 | sed 's/^/# /'
    echo "not ok 1 - fuzz_boot (libFuzzer): failed after ${runs:-?} runs; input in $build/tests/fuzz/"
    exit 1
fi
echo "# fuzz_boot (libFuzzer, ASan+UBSan): ${runs:-?} runs in ${secs} s, $cov, 0 crashes, 0 hangs"
echo "ok 1 - fuzz_boot (libFuzzer): ${runs:-?} runs, no crash, no hang, no leak"
