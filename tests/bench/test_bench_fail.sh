#!/bin/sh
# mscclpp-bench must report a collective that failed on its stream (issue 8): a plan whose
# ranks both wait before they signal makes rank 0's wait time out inside a launch on the bench's
# stream; the bench must print the library's error (plan, rank, op, peer) and exit 1, never
# "0 OK". (A plan with a signal deleted is refused at load now, so the deadlock keeps the
# signal/wait counts balanced and only reorders them.)
. "$(dirname "$0")/../tap.sh" bench-fail
bench=$top_build/tools/mscclpp-bench
echo "1..1"
name="a plan that deadlocks fails the bench with the timeout"
if ! command -v python3 >/dev/null 2>&1; then
    echo "ok 1 - $name # SKIP python3 is needed to edit the plan"
    exit 0
fi
python3 - "$top_src/plans/allreduce_simple_2.json" "$tmp/broken.json" <<'PY' || exit 1
import json, sys
plan = json.load(open(sys.argv[1]))
for rank in (0, 1):
    ops = plan["gpus"][rank]["threadblocks"][0]["ops"]
    names = [o["name"] for o in ops]
    s = names.index("signal")
    w = names.index("wait", s)
    ops.insert(w, ops.pop(s))  # the signal now follows the wait: both ranks wait first
plan["name"] = "broken_signal_2"
json.dump(plan, open(sys.argv[2], "w"))
PY
MSCCLPP_TIMEOUT=5 timeout -k 5 120 "$bench" --np 2 --plan "$tmp/broken.json" -b 1M -e 1M -n 3 \
    -w 1 >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?
if [ "$rc" -ne 1 ]; then why="exit status $rc, expected 1"
elif ! grep -q "MSCCLPP_ERR_TIMEOUT: plan 'broken_signal_2': rank 0 .*(wait) timed out waiting for a signal from rank 1" "$tmp/out"; then
    why="the table does not carry the library's error"
elif grep -q "Out of bounds values : 0 OK" "$tmp/out" && ! grep -q "Failed calls : [1-9]" "$tmp/out"; then
    why="reported as a success"
else
    echo "ok 1 - $name"
    exit 0
fi
sed 's/^/# /' "$tmp/out" "$tmp/err" | tail -n 40
echo "not ok 1 - $name: $why"
exit 1
