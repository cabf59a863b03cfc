#!/bin/sh
# End-to-end test of auto-tuning on the host backend (TAP): mscclpp-bench --tune sweeps a tiny
# allreduce (2 forked ranks, 2 sizes) and writes a table; the bench run with that table selects
# the table's plans (its --json records the plan each call runs); a hand-made table moves the
# choice off the default; bad tables (other version, other rank count) are refused with a message
# naming the file and the reason; a bad table at the default path only warns.
. "$(dirname "$0")/../tap.sh" tune-test
bench=$top_build/tools/mscclpp-bench
limit=${BENCH_TEST_TIMEOUT:-120}
: "${MSCCLPP_PLAN_DIR:=$top_src/plans}"
export MSCCLPP_PLAN_DIR
unset MSCCLPP_TUNING_FILE
# keep a real ~/.cache table out of the test
XDG_CACHE_HOME=$tmp/cache
export XDG_CACHE_HOME

if [ -n "${MSCCLPP_HAL:-}" ] && [ "$MSCCLPP_HAL" != host ]; then
    echo "1..0 # SKIP the CI test runs on the host backend (MSCCLPP_HAL=$MSCCLPP_HAL)"
    exit 0
fi
MSCCLPP_HAL=host
export MSCCLPP_HAL

echo "1..6"
# field NAME FILE: every value of "NAME": "..." in FILE, one a line
field() { grep -o "\"$1\": *\"[^\"]*\"" "$2" | sed 's/.*: *"\(.*\)"/\1/'; }

# 1: the tuner writes a table for 2 ranks, 8 B and 1 MiB, trying two thread counts
name="--tune writes a table (allreduce, 2 ranks, 2 sizes)"
run "$bench" --np 2 allreduce -b 8 -e 1M -f 131072 -n 3 -w 1 --tune-threads 0,1 \
    --tune "$tmp/t.json"
if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
elif ! grep -q '"format": "mscclpp-tuning"' "$tmp/t.json" ||
     ! grep -q '"backend": "host"' "$tmp/t.json" || ! grep -q '"nranks": 2' "$tmp/t.json"
then fail "$name" "the table lacks its header"
elif [ "$(field plan "$tmp/t.json" | wc -l)" -lt 2 ]; then fail "$name" "fewer than 2 entries"
else pass "$name"; fi

# 2: the bench with the table runs, checked, and every call runs a plan the table names
name="the executor applies the tuned table"
run env MSCCLPP_TUNING_FILE="$tmp/t.json" "$bench" --np 2 allreduce -b 8 -e 1M -f 131072 \
    -n 3 -w 1 --json "$tmp/with.json"
if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
elif ! grep -q "# tuning table $tmp/t.json" "$tmp/out"; then fail "$name" "no tuning table line"
else
    bad=0
    for p in $(grep -o '"out_of_place":"[^"]*"' "$tmp/with.json" | sed 's/.*:"\(.*\)"/\1/'); do
        field plan "$tmp/t.json" | grep -qx "$p" || bad=1
    done
    if [ "$bad" = 1 ]; then fail "$name" "a call ran a plan the table does not name"
    else pass "$name"; fi
fi

# 3: a hand-made table moves 8-byte allreduces from the default plan to another candidate
name="a table entry changes the selected plan"
run "$bench" --np 2 allreduce -b 8 -e 8 -n 2 -w 1 --json "$tmp/def.json"
def=$(grep -o '"out_of_place":"[^"]*"' "$tmp/def.json" | sed 's/.*:"\(.*\)"/\1/')
dev=$(field device "$tmp/t.json")
other=default_allreduce_allpairs_2 nb=4 # its block count (the entry must name the plan's)
[ "$def" = "$other" ] && other=default_allreduce_pkt_host_2 nb=1
cat >"$tmp/hand.json" <<JSON
{"format": "mscclpp-tuning", "version": 1, "backend": "host", "device": "$dev", "nranks": 2,
 "ranks_per_node": 2, "entries": [
  {"collective": "allreduce", "inplace": false, "min_bytes": 0, "max_bytes": 1024,
   "plan": "$other", "nblocks": $nb, "nthreads": 0}]}
JSON
run env MSCCLPP_TUNING_FILE="$tmp/hand.json" "$bench" --np 2 allreduce -b 8 -e 8 -n 2 -w 1 \
    --json "$tmp/hand-run.json"
got=$(grep -o '"out_of_place":"[^"]*"' "$tmp/hand-run.json" 2>/dev/null | sed 's/.*:"\(.*\)"/\1/')
if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
elif [ -z "$def" ] || [ "$got" != "$other" ]; then
    fail "$name" "default '$def', with the table '$got', expected '$other'"
else pass "$name"; fi

# 4: a table of another format version is refused, naming the file and the version
name="a table of another version is refused"
sed 's/"version": 1/"version": 7/' "$tmp/hand.json" >"$tmp/v7.json"
run env MSCCLPP_TUNING_FILE="$tmp/v7.json" "$bench" --np 2 allreduce -b 8 -e 8 -n 1 -w 0
if [ "$rc" -eq 0 ]; then fail "$name" "the bench ran with it"
elif ! grep -q "tuning table $tmp/v7.json: version 7" "$tmp/err"; then
    fail "$name" "no message naming the file and the version"
else pass "$name"; fi

# 5: a table for another rank count is refused
name="a table for 4 ranks is refused on 2"
sed 's/"nranks": 2/"nranks": 4/' "$tmp/hand.json" >"$tmp/r4.json"
run env MSCCLPP_TUNING_FILE="$tmp/r4.json" "$bench" --np 2 allreduce -b 8 -e 8 -n 1 -w 0
if [ "$rc" -eq 0 ]; then fail "$name" "the bench ran with it"
elif ! grep -q "tuning table $tmp/r4.json: written for 4 ranks, the communicator has 2" \
     "$tmp/err"; then fail "$name" "no message naming the file and the rank counts"
else pass "$name"; fi

# 6: a broken table at the default path warns and is not used; the run succeeds
name="a bad table at the default path only warns"
safe=$(printf '%s' "$dev" | sed 's/[^A-Za-z0-9._-]/_/g')
mkdir -p "$tmp/cache/mscclpp/tuning"
printf '{"format": "mscclpp-tuning", "version": 1,' >"$tmp/cache/mscclpp/tuning/host-$safe-2.json"
run "$bench" --np 2 allreduce -b 8 -e 8 -n 1 -w 0 --json "$tmp/warn.json"
if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
elif ! grep -q "host-$safe-2.json: not valid JSON.*not using it" "$tmp/err"; then
    fail "$name" "no warning naming the file"
elif ! grep -q '"tuning_file":null' "$tmp/warn.json"; then fail "$name" "the table was used"
else pass "$name"; fi
