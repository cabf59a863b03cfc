#!/usr/bin/env bash
# Build and run every suite: Check unit tests, multi-process and MPI tests, conformance
# (through make check), and the Python DSL tests (pytest). Ends with one line
# "N passed, N failed, N skipped" summing all suites; exits non-zero if anything failed.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
logdir=$top/build/test-logs
"$top/scripts/build.sh" || { echo "0 passed, 1 failed"; exit 1; }
mkdir -p "$logdir"

# C suites (TAP through automake's driver: one line per test case).
# Progress: one line per suite as it finishes (its .trs file is complete), while make runs.
echo "check: building the test programs and running the C suites (log: $logdir/check.out)"
start_mark=$logdir/.check-start
: >"$start_mark"
make -C build -j2 check >"$logdir/check.out" 2>&1 &
make_pid=$!
declare -A trs_size=() trs_done=()
while :; do
    running=1
    kill -0 "$make_pid" 2>/dev/null || running=0
    while IFS= read -r trs; do
        [ -n "${trs_done[$trs]:-}" ] && continue
        grep -q '^:global-test-result:' "$trs" 2>/dev/null || continue
        size=$(stat -c %s "$trs")
        # the driver writes the file at exit; wait until its size holds still for a poll
        if [ $running -eq 1 ] && [ "${trs_size[$trs]:-}" != "$size" ]; then
            trs_size[$trs]=$size
            continue
        fi
        trs_done[$trs]=1
        awk -v name="${trs#build/}" -v t="$SECONDS" '
            /^:global-test-result:/ { g = $2 }
            /^:test-result: (PASS|XFAIL)/ { p++ }
            /^:test-result: (FAIL|XPASS|ERROR)/ { f++ }
            /^:test-result: SKIP/ { s++ }
            END { sub(/\.trs$/, "", name)
                  printf "  [%4ds] %-5s %s: %d passed, %d failed, %d skipped\n", t, g, name,
                         p, f, s }' "$trs"
    done < <(find build -name '*.trs' -newer "$start_mark" 2>/dev/null | sort)
    [ $running -eq 0 ] && break
    sleep 2
done
wait "$make_pid"
check_rc=$?
grep -E '^(PASS|FAIL|ERROR|SKIP|XFAIL|XPASS):' "$logdir/check.out" | sed 's/^/  /' | grep -v '^  PASS' || true
awk '/^# TOTAL:/{t=$3} /^# PASS:/{p=$3} /^# SKIP:/{s=$3} /^# XFAIL:/{xf=$3} /^# FAIL:/{f=$3}
     /^# XPASS:/{xp=$3} /^# ERROR:/{e=$3}
     END{printf "check: %d passed, %d failed, %d skipped\n", p+xf, f+xp+e, s}' \
    "$logdir/check.out" | tee "$logdir/check.summary"
if [ $check_rc -ne 0 ]; then
    echo "make check failed (rc $check_rc); logs under build/, summary in $logdir/check.out"
    grep -A3 -E '^(FAIL|ERROR)' "$logdir/check.out" | head -60
fi

# Python DSL suite.
py_pass=0 py_fail=0 py_skip=0
if [ -d tests/python ]; then
    echo "pytest: running tests/python (log: $logdir/pytest.out)"
    MSCCLPP_LIBRARY="$top/build/.libs/libmscclpp.so" \
        python3 -m pytest tests/python -q -rs -p no:cacheprovider >"$logdir/pytest.out" 2>&1
    py_rc=$?
    tail -n 15 "$logdir/pytest.out"
    line=$(grep -E '(passed|failed|error|skipped|no tests ran)' "$logdir/pytest.out" | tail -n 1)
    py_pass=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
    py_fail=$(echo "$line" | grep -oE '[0-9]+ (failed|errors?)' | awk '{s+=$1} END{print s+0}')
    py_skip=$(echo "$line" | grep -oE '[0-9]+ skipped' | grep -oE '[0-9]+' || echo 0)
    py_pass=${py_pass:-0} py_fail=${py_fail:-0} py_skip=${py_skip:-0}
    # exit 5 = no tests collected: count as a failure, never as a silent pass
    if [ $py_rc -ne 0 ] && [ "$py_fail" -eq 0 ]; then py_fail=1; fi
fi
echo "pytest: $py_pass passed, $py_fail failed, $py_skip skipped"

# ---- Sanitizers (issue 8): the C suites again under ASan+UBSan (build-asan), then TSan -----
# scripts/sanitize.sh prints "sanitize: N passed, N failed, N skipped" last; its counts join the
# total. MSCCLPP_SKIP_SANITIZE=1 leaves it out (counted as one skipped suite, never silently).
san_pass=0 san_fail=0 san_skip=0
if [ -n "${MSCCLPP_SKIP_SANITIZE:-}" ]; then
    echo "sanitize: skipped (MSCCLPP_SKIP_SANITIZE is set)"
    san_skip=1
else
    "$top/scripts/sanitize.sh" >"$logdir/sanitize.out" 2>&1
    san_rc=$?
    grep -E '^(FAIL|SKIP):|sanitizer report|^    ' "$logdir/sanitize.out" | head -n 60
    line=$(grep -E '^sanitize: [0-9]+ passed' "$logdir/sanitize.out" | tail -n 1)
    if [ -n "$line" ]; then
        read -r san_pass san_fail san_skip < <(echo "$line" |
            sed -E 's/sanitize: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped/\1 \2 \3/')
    fi
    if [ $san_rc -ne 0 ] && [ "$san_fail" -eq 0 ]; then san_fail=1; fi
    echo "sanitize: $san_pass passed, $san_fail failed, $san_skip skipped"
fi

# ThreadSanitizer over the suites that run host streams, the proxy and port channels
# (scripts/sanitize.sh --tsan, in build-tsan); its counts join the total too.
# MSCCLPP_SKIP_TSAN=1 leaves it out (counted as one skipped suite).
tsan_pass=0 tsan_fail=0 tsan_skip=0
if [ -n "${MSCCLPP_SKIP_TSAN:-}" ] || [ -n "${MSCCLPP_SKIP_SANITIZE:-}" ]; then
    echo "sanitize-tsan: skipped (MSCCLPP_SKIP_TSAN or MSCCLPP_SKIP_SANITIZE is set)"
    tsan_skip=1
else
    "$top/scripts/sanitize.sh" --tsan >"$logdir/sanitize-tsan.out" 2>&1
    tsan_rc=$?
    grep -E '^(FAIL|SKIP):|sanitizer report|^    ' "$logdir/sanitize-tsan.out" | head -n 60
    line=$(grep -E '^sanitize-tsan: [0-9]+ passed' "$logdir/sanitize-tsan.out" | tail -n 1)
    if [ -n "$line" ]; then
        read -r tsan_pass tsan_fail tsan_skip < <(echo "$line" |
            sed -E 's/sanitize-tsan: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped/\1 \2 \3/')
    fi
    if [ $tsan_rc -ne 0 ] && [ "$tsan_fail" -eq 0 ]; then tsan_fail=1; fi
    echo "sanitize-tsan: $tsan_pass passed, $tsan_fail failed, $tsan_skip skipped"
fi
# ---------------------------------------------------------------------------------------------

read -r c_pass c_fail c_skip < <(sed -E 's/check: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped/\1 \2 \3/' "$logdir/check.summary")
if [ $check_rc -ne 0 ] && [ "$c_fail" -eq 0 ]; then c_fail=1; fi
total_pass=$((c_pass + py_pass + san_pass + tsan_pass))
total_fail=$((c_fail + py_fail + san_fail + tsan_fail))
total_skip=$((c_skip + py_skip + san_skip + tsan_skip))
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
