#!/bin/sh
# tools/mscclpp-bench as nccl-tests users drive it (TAP): the nccl-tests flags (-g -t -G -a -z
# -N) accepted or refused with a sentence, the plan that ran named in --json, the summary of a
# sweep whose calls failed, --plot (a well-formed SVG with one line per plan and placement,
# MPI's line under --mpi), -a's default (1, the mean, as nccl-tests), the header naming every
# rank's device, --csv, --version, the one-line answer to a mistyped option, -o avg and -d
# int64 (issue 21 item 8). Each run is bounded by "timeout $BENCH_TEST_TIMEOUT".
. "$(dirname "$0")/../tap.sh" bench-cli-test
bench=${BENCH:-$top_build/tools/mscclpp-bench}
limit=${BENCH_TEST_TIMEOUT:-300}
: "${MSCCLPP_PLAN_DIR:=$top_src/plans}"
export MSCCLPP_PLAN_DIR

echo "1..17"
rows() { grep -c '^ *[0-9]' "$tmp/out"; }
have_py() { command -v python3 >/dev/null 2>&1; }

# 1: the neutral values of the nccl-tests flags run; -a 1 (mean) and -z 1 (blocking) too
name="-g 1 -t 1 -G 0 -a 1 -z 1 are accepted"
run "$bench" --np 2 allreduce -b 1K -e 4K -n 2 -w 1 -g 1 -t 1 -G 0 -a 1 -z 1
if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
elif [ "$(rows)" != 3 ]; then fail "$name" "expected 3 rows"
elif ! grep -q '^# Out of bounds values : 0 OK' "$tmp/out"; then fail "$name" "no 0 OK summary"
else pass "$name"; fi

# 2: other values are refused with exit 2 and a sentence naming what to use instead
name="-g 2, -t 4, -G -1 are refused with what to use instead"
why=""
run "$bench" allreduce -g 2
[ "$rc" -eq 2 ] && grep -q -- '--np 2' "$tmp/err" && grep -q 'mpiexec -n 2' "$tmp/err" ||
    why="$why -g 2 (rc $rc)"
run "$bench" allreduce -t 4
[ "$rc" -eq 2 ] && grep -q -- '--np 4' "$tmp/err" || why="$why -t 4 (rc $rc)"
run "$bench" allreduce -G -1
[ "$rc" -eq 2 ] && grep -q -- '-G' "$tmp/err" || why="$why -G -1 (rc $rc)"
run "$bench" allreduce -a 7
[ "$rc" -eq 2 ] || why="$why -a 7 (rc $rc)"
if [ -n "$why" ]; then fail "$name" "not refused as expected:$why"
else pass "$name"; fi

# 3: -G 3: every row checked through a replayed graph and timed over replays (the host backend
# records its stream tasks), in place and out of place, for two collectives
name="-G 3 checks and times replays of captured calls"
why=""
for coll in allreduce allgather; do
    run "$bench" --np 2 "$coll" -b 1K -e 256K -f 16 -n 3 -w 1 -G 3
    if [ "$rc" -ne 0 ]; then why="$why $coll: exit status $rc"
    elif [ "$(rows)" != 3 ]; then why="$why $coll: expected 3 rows, got $(rows)"
    elif ! grep -q '^# graphs: the 3 timed calls captured into one graph, replayed 3 times' \
        "$tmp/out"; then why="$why $coll: no graphs line"
    elif ! grep -q '^# Out of bounds values : 0 OK' "$tmp/out"; then why="$why $coll: wrong values"
    fi
done
if [ -n "$why" ]; then fail "$name" "$why"; else pass "$name"; fi

# 3b: -G over sizes whose scratch grows (past the 256 KiB a first context holds): a capture cannot
# drop the smaller context, so the check warms each size up with one direct call before capturing
# (failed before: "a larger call than before needs a larger scratch ... while a stream is captured",
# seen on an H200 with gpu-check's graphs step, and alike on the host backend's recording)
name="-G checks rows whose scratch grows between sizes"
run "$bench" --np 2 allreduce -b 64K -e 4M -f 64 -n 2 -w 1 -G 2
if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc: $(grep -m1 -i 'failed\|error' "$tmp/out")"
elif [ "$(rows)" != 2 ]; then fail "$name" "expected 2 rows, got $(rows)"
elif ! grep -q '^# Out of bounds values : 0 OK' "$tmp/out"; then fail "$name" "wrong values"
else pass "$name"; fi

# 4: -N 2 runs the sweep twice; -N 0 (forever in nccl-tests) is refused
name="-N 2 runs the sweep twice, -N 0 is refused"
run "$bench" --np 2 allgather -b 1K -e 4K -n 2 -w 1 -N 2
if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
elif [ "$(rows)" != 6 ]; then fail "$name" "expected 6 rows, got $(rows)"
else
    run "$bench" allgather -N 0
    if [ "$rc" -ne 2 ]; then fail "$name" "-N 0: exit status $rc, expected 2"
    else pass "$name"; fi
fi

# 5: --json names the plan that ran for the default collectives (it was null)
name="--json names the selected default plan of each column"
run "$bench" --np 2 allreduce -b 256 -e 64K -n 2 -w 1 --json "$tmp/rec.json" --plot "$tmp/p.svg"
cp "$tmp/out" "$tmp/table"
if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
elif ! have_py; then skip "$name" "python3 is not installed"
elif ! python3 - "$tmp/rec.json" "$MSCCLPP_PLAN_DIR" >"$tmp/out" 2>&1 <<'PY'
import glob, json, os, sys
names = set()
for path in glob.glob(os.path.join(sys.argv[2], "**", "*.json"), recursive=True):
    with open(path) as f:
        names.add(json.load(f)["name"])
recs = [json.loads(line) for line in open(sys.argv[1])]
assert len(recs) == 9, len(recs)
for r in recs:
    assert r["plan_file"] is None, r
    for col in ("out_of_place", "in_place"):
        assert r[col]["plan"] in names, (r[col]["plan"], sorted(names))
    assert r["plan"] == r["out_of_place"]["plan"], r
PY
then fail "$name" "records do not name a default plan"
else pass "$name"; fi

# 6: --plot of test 5: well-formed SVG, two panels, one line per plan and placement whose
# points are the rows that plan ran
name="--plot writes an SVG with one series per plan and placement"
if [ ! -s "$tmp/p.svg" ]; then fail "$name" "no SVG written"
elif ! have_py; then skip "$name" "python3 is not installed"
elif ! python3 - "$tmp/p.svg" "$tmp/rec.json" >"$tmp/out" 2>&1 <<'PY'
import collections, json, sys
import xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()           # raises on malformed XML
assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
want = collections.Counter()
for line in open(sys.argv[2]):
    r = json.loads(line)
    want[r["out_of_place"]["plan"] + " (out-of-place)"] += 1
    want[r["in_place"]["plan"] + " (in-place)"] += 1
for panel in ("busbw", "time"):
    g = root.find(".//s:g[@id='%s']" % panel, ns)
    assert g is not None, panel
    got = {s.get("data-series"): len(s.findall("s:circle", ns))
           for s in g.findall("s:g[@class='series']", ns)}
    assert got == dict(want), (panel, got, dict(want))
    for s in g.findall("s:g[@class='series']", ns):
        pts = s.find("s:polyline", ns).get("points").split()
        assert len(pts) == got[s.get("data-series")], pts
legend = [t.text for t in root.findall(".//s:g[@id='legend']/s:text", ns)]
assert sorted(legend) == sorted(want), legend
PY
then fail "$name" "the SVG does not hold the expected series"
else pass "$name"; fi

# 7: a sweep whose calls all fail: exit 1, the summary says FAILED and never "0 OK"
name="failed calls: the summary says FAILED, not 0 OK"
mkdir -p "$tmp/noplans"
MSCCLPP_PLAN_DIR=$tmp/noplans MSCCLPP_PLAN_MAKE=off run "$bench" --np 2 allreduce -b 1K -e 2K -n 2 -w 1
if [ "$rc" -ne 1 ]; then fail "$name" "exit status $rc, expected 1"
elif grep -q 'OK' "$tmp/out"; then fail "$name" "the summary says OK"
elif ! grep -q '^# Failed calls *: 4 FAILED' "$tmp/out"; then fail "$name" "no failed-calls line"
elif ! grep -q '^# Out of bounds values : 0 FAILED' "$tmp/out"; then
    fail "$name" "no FAILED out-of-bounds line"
else pass "$name"; fi

# 8: --plan: "plan" is the plan's name, "plan_file" its path
name="--plan: --json names the plan and its file"
ref=$top_src/tests/plans-reference/allreduce_4.json
run "$bench" --np 4 --plan "$ref" -b 4K -e 4K -n 2 -w 1 --json "$tmp/plan.json"
if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
elif ! have_py; then skip "$name" "python3 is not installed"
elif ! python3 - "$tmp/plan.json" "$ref" >"$tmp/out" 2>&1 <<'PY'
import json, os, sys
# the plan's name, or (a plan without one) its file name without .json, as the loader names it
name = json.load(open(sys.argv[2])).get("name") or os.path.basename(sys.argv[2])[:-5]
recs = [json.loads(line) for line in open(sys.argv[1])]
assert len(recs) == 1, recs
r = recs[0]
assert r["plan"] == name and r["plan_file"] == sys.argv[2], r
assert r["in_place"]["plan"] == name and r["out_of_place"] is None, r
PY
then fail "$name" "records do not name the plan"
else pass "$name"; fi

# 9: --plot into a folder that does not exist: exit 1 with a message naming the file
name="--plot to an unwritable path fails with a message"
run "$bench" --np 2 allreduce -b 1K -e 1K -n 1 -w 0 --plot "$tmp/no/such/dir/p.svg"
if [ "$rc" -ne 1 ]; then fail "$name" "exit status $rc, expected 1"
elif ! grep -q "cannot write $tmp/no/such/dir/p.svg" "$tmp/err"; then fail "$name" "no message"
else pass "$name"; fi

# 10: under mpiexec with --mpi, MPI's line is in the picture
name="--plot under mpiexec --mpi draws MPI's line"
if [ -z "$MPIEXEC" ]; then
    skip "$name" "MPIEXEC is empty (configured without MPI)"
else
    run $MPIEXEC -n 2 "$bench" allreduce -b 1K -e 8K -n 2 -w 1 --mpi --plot "$tmp/mpi.svg"
    if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
    elif ! have_py; then skip "$name" "python3 is not installed"
    elif ! python3 - "$tmp/mpi.svg" >"$tmp/out" 2>&1 <<'PY'
import sys
import xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
for panel in ("busbw", "time"):
    series = {s.get("data-series"): len(s.findall("s:circle", ns))
              for s in root.findall(".//s:g[@id='%s']/s:g[@class='series']" % panel, ns)}
    assert series.get("MPI allreduce") == 4, series
PY
    then fail "$name" "no MPI allreduce series with 4 points"
    else pass "$name"; fi
fi

# 11: -a defaults to 1 (the mean over ranks), as in nccl-tests; the header and --json say so
name="-a defaults to 1 (mean over ranks) and the header says it"
run "$bench" --np 2 allgather -b 1K -e 1K -n 2 -w 1 --json "$tmp/avg.json"
if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
elif ! grep -q '^# minBytes .* average: 1 (time is the mean over ranks)' "$tmp/out"; then
    fail "$name" "the header does not say average: 1"
elif ! grep -q '"average":1' "$tmp/avg.json"; then fail "$name" "--json lacks average 1"
else pass "$name"; fi

# 12: the header names every rank's host, pid and device, as nccl-tests does
name="the header has one '#  Rank N Pid P on HOST device D [...]' line per rank"
if [ "$(grep -c '^#  Rank  *[01] Pid  *[0-9][0-9]* on .* device  *[0-9]* \[.*\]$' "$tmp/out")" != 2 ]; then
    fail "$name" "expected 2 rank lines"
else pass "$name"; fi

# 13: --csv: a header line, then one line per row with the --json record's values
name="--csv writes the --json records as CSV"
run "$bench" --np 2 allreduce -b 1K -e 16K -f 4 -n 2 -w 1 --json "$tmp/c.json" --csv "$tmp/c.csv"
if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
elif ! have_py; then skip "$name" "python3 is not installed"
elif ! python3 - "$tmp/c.json" "$tmp/c.csv" >"$tmp/out" 2>&1 <<'PY'
import csv, json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
rows = list(csv.DictReader(open(sys.argv[2])))
assert len(recs) == 3 and len(rows) == 3, (len(recs), len(rows))
for r, c in zip(recs, rows):
    assert int(c["size"]) == r["size"] and c["type"] == r["type"], (r, c)
    for k in ("out_of_place", "in_place"):
        assert float(c[k + ".time_us"]) == r[k]["time_us"], (k, r, c)
        assert c[k + ".plan"] == r[k]["plan"] and int(c[k + ".wrong"]) == r[k]["wrong"], (r, c)
        assert c[k + ".error"] == "", c
    assert float(c["copy_gbps"]) == r["copy_gbps"], (r, c)
PY
then fail "$name" "CSV and JSON differ"
else pass "$name"; fi

# 14: --version; a mistyped long option gets the nearest one, on one line
name="--version, and '--nP 2' answered with 'did you mean --np?' on one line"
why=""
run "$bench" --version
[ "$rc" -eq 0 ] && grep -q '^mscclpp-bench [0-9.]* (libmscclpp [0-9.]*)$' "$tmp/out" ||
    why="$why --version (rc $rc)"
run "$bench" allreduce --nP 2
[ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q 'did you mean --np?' "$tmp/err" ||
    why="$why --nP (rc $rc)"
run "$bench" allreduce -b 12Q
[ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
    grep -q "bad value '12Q' for -b: expected a size in bytes" "$tmp/err" || why="$why -b 12Q (rc $rc)"
run "$bench"
[ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q 'give a COLLECTIVE' "$tmp/err" ||
    why="$why no collective (rc $rc)"
if [ -n "$why" ]; then fail "$name" "$why"; else pass "$name"; fi

# 15: --which (and mscclpp-info --plan, which runs it): the plan each call runs and its file
name="--which and mscclpp-info --plan name the plan a call runs and where it comes from"
why=""
run "$bench" --np 2 allgather -b 1K -e 4K -f 4 --which
if [ "$rc" -ne 0 ]; then why="$why --which: exit status $rc"
elif [ "$(grep -c '^ *[0-9]* *out-of-place *default_allgather.*\.json$' "$tmp/out")" != 2 ]; then
    why="$why --which: expected 2 out-of-place rows naming a plan file"
elif grep -q '^# Out of bounds' "$tmp/out"; then why="$why --which ran the sweep"
fi
run "$top_build/tools/mscclpp-info" --plan allreduce 2 64K
if [ "$rc" -ne 0 ]; then why="$why info --plan: exit status $rc"
elif ! grep -q '^ *65536 *out-of-place *default_allreduce[a-z_]*_2 .*\.json$' "$tmp/out"; then
    why="$why info --plan: no row for 64K"
fi
# MSCCLPP_PLAN_DIRECT=on: above 1 MiB the backend's direct plan (plans/direct/<backend>/)
run env MSCCLPP_PLAN_DIRECT=on "$top_build/tools/mscclpp-info" --plan allreduce 2 4M
if [ "$rc" -ne 0 ]; then why="$why info --plan 4M: exit status $rc"
elif [ "${MSCCLPP_HAL:-host}" = host ] &&
    ! grep -q '^ *4194304 *out-of-place *direct_allreduce_host_2 .*direct/host/.*\.json$' "$tmp/out"; then
    why="$why info --plan: 4M with MSCCLPP_PLAN_DIRECT=on is not the host's direct plan"
fi
# MSCCLPP_PLAN_DIRECT=auto (host): the direct plan runs where every rank's buffers are
# shareable (the bench's mscclpp_malloc), the scratch plan on malloc'd ones (--malloc); the
# record says which, and --which says when the direct plan serves
if [ "${MSCCLPP_HAL:-host}" = host ]; then
    run env -u MSCCLPP_PLAN_DIRECT "$top_build/tools/mscclpp-info" --plan allreduce 2 4M
    grep -q '^ *4194304 *out-of-place *direct_allreduce_host_2 ' "$tmp/out" &&
        grep -q "MSCCLPP_PLAN_DIRECT=auto: when every rank's buffers are shareable" "$tmp/out" ||
        why="$why info --plan 4M (auto): not the direct plan with its condition"
    for m in shared malloc; do
        flag=""; want=direct_allreduce_host_2
        [ $m = malloc ] && flag=--malloc && want=default_allreduce_simple_host_2
        run env -u MSCCLPP_PLAN_DIRECT "$bench" --np 2 allreduce -b 4M -e 4M -n 2 -w 1 $flag \
            --json "$tmp/auto.json"
        [ "$rc" -eq 0 ] && grep -q '^# Out of bounds values : 0 OK' "$tmp/out" &&
            grep -q "\"out_of_place\":{\"plan\":\"$want\"" "$tmp/auto.json" &&
            grep -q "\"selected_plan\":{\"out_of_place\":\"$want\"" "$tmp/auto.json" ||
            why="$why auto $m 4M: not $want (rc $rc)"
    done
fi
run env MSCCLPP_PLAN_DIRECT=maybe "$bench" --np 2 allreduce -b 1K -e 1K
[ "$rc" -ne 0 ] && grep -q 'MSCCLPP_PLAN_DIRECT="maybe": auto, on or off' "$tmp/err" ||
    why="$why MSCCLPP_PLAN_DIRECT=maybe: not refused (rc $rc)"
run "$top_build/tools/mscclpp-info" --plan allreduce
[ "$rc" -eq 2 ] && grep -q 'needs COLLECTIVE NRANKS SIZE' "$tmp/err" || why="$why info --plan alone (rc $rc)"
if [ -n "$why" ]; then fail "$name" "$why"; else pass "$name"; fi

# 16: -o avg (a sum divided by the ranks on the stream; integers truncate) and -d int64, checked
name="-o avg and -d int64/uint64 compute and check right"
why=""
for args in "allreduce -d int32 -o avg" "reducescatter -d float -o avg" \
    "allreduce -d int64 -o avg" "allreduce -d uint64 -o max" "reducescatter -d int64 -o all"; do
    # shellcheck disable=SC2086
    run "$bench" --np 3 $args -b 96 -e 3K -f 32 -n 2 -w 1
    op=${args##* }
    [ "$op" = all ] && want=10 || want=2
    if [ "$rc" -ne 0 ]; then why="$why [$args: exit status $rc]"
    elif [ "$(rows)" != "$want" ]; then why="$why [$args: $(rows) rows, expected $want]"
    elif ! grep -q '^# Out of bounds values : 0 OK' "$tmp/out"; then why="$why [$args: wrong values]"
    elif [ "$op" = avg ] && ! grep -q '^ *96 .* avg ' "$tmp/out"; then why="$why [$args: no avg row]"
    fi
done
if [ -n "$why" ]; then fail "$name" "$why"; else pass "$name"; fi

[ "$fails" -eq 0 ]
