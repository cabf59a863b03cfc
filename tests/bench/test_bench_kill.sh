#!/bin/sh
# mscclpp-bench's launcher when a rank dies (TAP): a rank killed (SIGKILL) mid-run is reported as
# killed; the survivors are left to fail and exit by themselves (their own error lines show)
# instead of being killed at once and labelled "killed by signal 9"; the launcher returns within
# MSCCLPP_TIMEOUT + its 5 s grace.
. "$(dirname "$0")/../tap.sh" bench-kill
bench=$top_build/tools/mscclpp-bench
: "${MSCCLPP_PLAN_DIR:=$top_src/plans}"
export MSCCLPP_PLAN_DIR
MSCCLPP_TIMEOUT=3
export MSCCLPP_TIMEOUT
echo "1..1"

now() { date +%s.%N; }
# A long sweep (many sizes, many iterations) so that the kill lands mid-run.
"$bench" allreduce --np 3 -b 4K -e 64M -f 2 -n 200 -w 2 --time-limit 120 \
    >"$tmp/out" 2>"$tmp/err" </dev/null &
pid=$!
# Wait for the three ranks, then for the run to be under way.
i=0
while [ "$(ps -o pid= --ppid "$pid" | wc -l)" -lt 3 ] && [ $i -lt 100 ]; do
    sleep 0.1
    i=$((i + 1))
done
sleep 2
victim=$(ps -o pid= --ppid "$pid" | sort -n | sed -n 2p | tr -d ' ')
if [ -z "$victim" ]; then
    wait "$pid"
    sed 's/^/# /' "$tmp/err" | tail -20
    echo "not ok 1 - the bench ended before a rank could be killed"
    exit 1
fi
kill -9 "$victim"
t0=$(now)
wait "$pid"
rc=$?
dt=$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
sed 's/^/# /' "$tmp/err" | tail -20
echo "# bench exited $rc, ${dt} s after rank 1 was killed"
bad=""
[ "$rc" -ne 0 ] || bad="$bad exit status 0;"
grep -q "rank 1 killed by signal 9" "$tmp/err" || bad="$bad the killed rank is not reported;"
if grep -E "rank (0|2) killed by signal" "$tmp/err" >/dev/null; then
    bad="$bad a survivor is reported killed by a signal;"
fi
if grep -q "killed by the launcher" "$tmp/err"; then
    bad="$bad survivors did not exit within MSCCLPP_TIMEOUT + 5 s;"
fi
if awk -v d="$dt" -v t="$MSCCLPP_TIMEOUT" 'BEGIN { exit !(d > t + 5 + 2) }'; then
    bad="$bad took ${dt} s;"
fi
if [ -n "$bad" ]; then
    echo "not ok 1 - a rank killed mid-run:$bad"
    exit 1
fi
echo "ok 1 - a rank killed mid-run: reported as killed, survivors exit by themselves in ${dt} s"
