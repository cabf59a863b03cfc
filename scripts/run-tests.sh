#!/usr/bin/env bash
# Build and run every suite: Check unit tests, multi-process and MPI tests, conformance
# (through make check), the Python DSL tests (pytest), a quick subset again from an in-tree
# build (scripts/check-intree.sh), and the C suites under ASan+UBSan and TSan. Ends with one line
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

# ---- Stages that build the tree again: each prints "NAME: N passed, N failed, N skipped" last,
# and its counts join the total; STAGE_SKIP (a variable that is set) leaves it out, counted as
# one skipped suite, never silently.
#   stage NAME "SKIP_VAR ..." "what it does" COMMAND...
stage_pass=0 stage_fail=0 stage_skip=0
stage() {
    local name=$1 skips=$2 what=$3 v set="" line p=0 f=0 s=0 rc
    shift 3
    for v in $skips; do [ -n "${!v:-}" ] && set="$set $v"; done
    if [ -n "$set" ]; then
        echo "$name: skipped (set:$set)"
        stage_skip=$((stage_skip + 1))
        return
    fi
    echo "$name: $what (log: $logdir/$name.out)"
    "$@" >"$logdir/$name.out" 2>&1
    rc=$?
    grep -E '^(FAIL|SKIP):|sanitizer report|^    |^  not ok |^[^ ].*: [0-9]+ passed, [1-9][0-9]* failed' "$logdir/$name.out" | head -n 60
    line=$(grep -E "^$name: [0-9]+ passed" "$logdir/$name.out" | tail -n 1)
    [ -n "$line" ] && read -r p f s < <(echo "$line" |
        sed -E "s/$name: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped/\1 \2 \3/")
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    echo "$name: $p passed, $f failed, $s skipped"
    stage_pass=$((stage_pass + p)) stage_fail=$((stage_fail + f)) stage_skip=$((stage_skip + s))
}

# In-tree build (issue 21): ./configure && make check in a copy of the tree, a quick subset.
stage intree MSCCLPP_SKIP_INTREE "./configure && make check in a copy of the tree" \
    "$top/scripts/check-intree.sh"
# Sanitizers (issue 8): the C suites again under ASan+UBSan (build-asan), then TSan over the
# suites that run host streams, the proxy and port channels (build-tsan).
stage sanitize MSCCLPP_SKIP_SANITIZE "the C suites under ASan+UBSan" "$top/scripts/sanitize.sh"
stage sanitize-tsan "MSCCLPP_SKIP_TSAN MSCCLPP_SKIP_SANITIZE" "the C suites under TSan" \
    "$top/scripts/sanitize.sh" --tsan
# ---------------------------------------------------------------------------------------------

read -r c_pass c_fail c_skip < <(sed -E 's/check: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped/\1 \2 \3/' "$logdir/check.summary")
if [ $check_rc -ne 0 ] && [ "$c_fail" -eq 0 ]; then c_fail=1; fi
total_pass=$((c_pass + py_pass + stage_pass))
total_fail=$((c_fail + py_fail + stage_fail))
total_skip=$((c_skip + py_skip + stage_skip))
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
