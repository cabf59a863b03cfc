#!/bin/sh
# Smoke tests of tools/mscclpp-bench (TAP): forked ranks, every dtype x op, every collective,
# a reference plan (in-place column only), JSON records, usage errors, and a run under mpiexec
# (skipped when MPIEXEC is empty). Each run is bounded by "timeout $BENCH_TEST_TIMEOUT".
. "$(dirname "$0")/../tap.sh" bench-test
bench=$top_build/tools/mscclpp-bench
limit=${BENCH_TEST_TIMEOUT:-300}
: "${MSCCLPP_PLAN_DIR:=$top_src/plans}"
export MSCCLPP_PLAN_DIR

echo "1..14"

# Data rows (they start with the size); $1 = the number expected.
rows() { grep -c '^ *[0-9]' "$tmp/out"; }

# check_rows EXPECTED_ROWS OOP IP: every row has a number in each timed column ("time" >= 0)
# and 0 in each checked #wrong column; OOP/IP = run|na says whether that column must be n/a.
check_rows() {
    awk -v want="$1" -v oop="$2" -v ip="$3" '
        /^ *[0-9]/ {
            rows++
            # columns: size count type redop root | t a b w | t a b w [| mpi ratio]
            if (oop == "run" && !($6 ~ /^[0-9.]+$/ && $9 == "0")) bad++
            if (oop == "na" && $6 != "n/a") bad++
            if (ip == "run" && !($10 ~ /^[0-9.]+$/ && $13 == "0")) bad++
            if (ip == "na" && $10 != "n/a") bad++
        }
        /^# Out of bounds values : 0 OK/ { okline = 1 }
        END { exit !(rows == want && bad == 0 && okline) }' "$tmp/out"
}

# 1: the default allreduce over 2 forked ranks, 1K..64K, checked, both placements
name="allreduce --np 2, 1K..64K, checked, JSON records"
run "$bench" --np 2 allreduce -b 1K -e 64K -f 2 -n 5 -w 2 --json "$tmp/rec.json"
if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
elif ! check_rows 7 run run; then fail "$name" "rows are not 7 checked rows with 0 wrong"
else pass "$name"; fi

# 2: the JSON file of test 1 holds one record per row, each checked clean
name="--json writes one record per row"
if [ "$(wc -l <"$tmp/rec.json" 2>/dev/null)" != 7 ]; then
    fail "$name" "expected 7 lines in $tmp/rec.json"
elif command -v python3 >/dev/null 2>&1 && ! python3 - "$tmp/rec.json" >"$tmp/out" 2>&1 <<'PY'
import json, sys
sizes = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    assert r["collective"] == "allreduce" and r["nranks"] == 2 and r["type"] == "float", r
    for col in ("out_of_place", "in_place"):
        c = r[col]
        assert c["error"] is None and c["wrong"] == 0 and c["time_us"] > 0, r
        assert abs(c["busbw"] - c["algbw"]) < 1e-3 * max(c["algbw"], 1e-9) + 1e-4, r  # 2(n-1)/n = 1
    sizes.append(r["size"])
assert sizes == [1024 << i for i in range(7)], sizes
PY
then fail "$name" "records do not parse or do not match the table"
else pass "$name"; fi

# 3: every dtype x op at one size (12 element types since int64/uint64, x 5 ops with avg)
name="allreduce --np 2, every dtype x op, 4K, checked"
run "$bench" --np 2 allreduce -d all -o all -b 4K -e 4K -n 2 -w 1
if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
elif ! check_rows 60 run run; then fail "$name" "expected 60 checked rows with 0 wrong"
else pass "$name"; fi

# 4-7: the other collectives, every dtype (12) x 3 sizes, 1K..4K (sizes change between calls on the same
# buffers), 2 ranks (broadcast from rank 1)
for coll in allgather reducescatter alltoall broadcast; do
    name="$coll --np 2, every dtype, 1K..4K, checked"
    run "$bench" --np 2 "$coll" -d all -b 1K -e 4K -n 2 -w 1 -r 1
    if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
    elif ! check_rows 36 run run; then fail "$name" "expected 36 checked rows with 0 wrong"
    else pass "$name"; fi
done

# 8: a reference plan (in-place): only the in-place column runs, with send == recv
name="--plan tests/plans-reference/allreduce_4.json --np 4: in-place column only"
run "$bench" --np 4 --plan "$top_src/tests/plans-reference/allreduce_4.json" -b 1K -e 64K \
    -n 2 -w 1
if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
elif ! check_rows 7 na run; then fail "$name" "expected 7 rows, out-of-place n/a, 0 wrong"
else pass "$name"; fi

# 9: a bad option or value is a usage error: one line saying what is accepted (issue 21 item 8:
# it was the 45-line usage)
name="a bad option or value exits 2 with one line saying what is accepted"
run "$bench" allreduce --no-such-option
if [ "$rc" -ne 2 ]; then fail "$name" "exit status $rc, expected 2"
elif [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -q -- "unknown option '--no-such-option'.*--help" "$tmp/err"
then fail "$name" "not one line naming the option and --help"
else
    run "$bench" allreduce -d quad
    if [ "$rc" -ne 2 ]; then fail "$name" "-d quad: exit status $rc, expected 2"
    elif [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -q "bad value 'quad' for -d: expected float, half, bfloat16" "$tmp/err"
    then fail "$name" "-d quad: not one line listing the types"
    else pass "$name"; fi
fi

# 10: an unknown collective is refused
name="an unknown collective is refused"
run "$bench" --np 2 allfoo
if [ "$rc" -ne 2 ]; then fail "$name" "exit status $rc, expected 2"
elif ! grep -q "unknown collective 'allfoo'" "$tmp/err"; then fail "$name" "no message naming it"
elif [ -s "$tmp/out" ]; then fail "$name" "it printed a table"
else pass "$name"; fi

# 11: --mpi outside mpiexec is refused
name="--mpi without mpiexec is refused"
run env -u PMI_RANK -u PMI_SIZE "$bench" --np 2 allreduce --mpi
if [ "$rc" -ne 2 ]; then fail "$name" "exit status $rc, expected 2"
else pass "$name"; fi

# 12-13: under mpiexec with the MPI comparison columns, over the MPI and the TCP bootstrap
for boot in mpi tcp; do
    name="mpiexec -n 2 allreduce 1K..16K --mpi --bootstrap $boot"
    if [ -z "$MPIEXEC" ]; then
        skip "$name" "MPIEXEC is empty (configured without MPI)"
        continue
    fi
    run $MPIEXEC -n 2 "$bench" allreduce -b 1K -e 16K -n 5 -w 2 --mpi --bootstrap "$boot"
    if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
    elif ! check_rows 5 run run; then fail "$name" "expected 5 checked rows with 0 wrong"
    elif ! awk '/^ *[0-9]/ && !($14 ~ /^[0-9.]+$/ && $15 ~ /^[0-9.]+$/) { bad++ }
                END { exit bad > 0 }' "$tmp/out"; then
        fail "$name" "MPI time and ratio columns missing"
    else pass "$name"; fi
done

# 14: a plan whose collective the tool cannot check ("test", as MSCCL++'s DSL writes): refused
# when checked, timed unchecked with -c 0 (the buffer shape follows its chunk counts)
name="--plan with collective \"test\": refused checked, runs with -c 0"
sed 's/"collective":"allgather"/"collective":"test"/' \
    "$top_src/tests/fuzz/plan-corpus/allgather_2.json" >"$tmp/test_plan.json"
run "$bench" --np 2 --plan "$tmp/test_plan.json" -b 1K -e 4K -n 3 -w 1
if [ "$rc" -ne 1 ] || ! grep -q "collective 'test' is not one the tool can check" "$tmp/err"; then
    fail "$name" "checked run: exit status $rc, expected 1 and the reason"
else
    run "$bench" --np 2 --plan "$tmp/test_plan.json" -b 1K -e 4K -n 3 -w 1 -c 0
    if [ "$rc" -ne 0 ]; then fail "$name" "unchecked run: exit status $rc"
    elif ! awk '/^ *[0-9]/ { rows++; if (!($6 ~ /^[0-9.]+$/)) bad++ }
                END { exit !(rows == 3 && bad == 0) }' "$tmp/out"; then
        fail "$name" "expected 3 timed rows"
    else pass "$name"; fi
fi

[ "$fails" -eq 0 ]
