#!/bin/sh
# mscclpp-bench --nodes leaves nothing behind (TAP; issue 22 item 8): after a run that fails,
# after Ctrl-C (SIGINT to its process group), after `kill` of the launcher alone (SIGTERM) and
# after `kill -9` of the launcher, no rank keeps running and no namespace (mscclpp-<pid>-nK),
# bridge (mbr<pid>) or veth end (mp<pid>nK) of that launcher is left once the next launcher ran
# (it sweeps what dead launchers left). Counts come from `ip netns list` and `ip -br link`.
# Needs root and iproute2 (network namespaces); skipped with the reason otherwise.
top_build=${MSCCLPP_TOP_BUILDDIR:-.}
top_src=${MSCCLPP_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bench=$top_build/tools/mscclpp-bench
: "${MSCCLPP_PLAN_DIR:=$top_src/plans}"
export MSCCLPP_PLAN_DIR
MSCCLPP_TIMEOUT=5
export MSCCLPP_TIMEOUT
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-cleanup.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

echo "1..5"
n=0
fails=0
pass() { n=$((n + 1)); echo "ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
fail() {
    n=$((n + 1))
    sed 's/^/# /' "$tmp/err" 2>/dev/null | tail -n 15
    echo "not ok $n - $1: $2"
    fails=$((fails + 1))
}

why=""
[ "$(id -u)" = 0 ] || why="network namespaces need root"
[ -z "$why" ] && ! command -v ip >/dev/null 2>&1 && why="the ip command (iproute2) is missing"
[ -z "$why" ] && ! command -v python3 >/dev/null 2>&1 && why="python3 (starts the bench as a job) is missing"
if [ -z "$why" ] && ! ip netns add mscclpp-probe-$$ 2>/dev/null; then
    why="ip netns add failed (no namespace support?)"
else
    ip netns del mscclpp-probe-$$ 2>/dev/null
fi
if [ -n "$why" ]; then
    for c in "a failing run" "Ctrl-C" "kill of the launcher" "kill -9 of the launcher" \
        "the sweep"; do
        skip "$c" "$why"
    done
    exit 0
fi

# leftovers PID: namespaces and links of the launcher PID still present
leftovers() {
    ns=$(ip netns list 2>/dev/null | grep -c "^mscclpp-$1-n")
    ln=$(ip -br link 2>/dev/null | grep -cE "^(mbr$1|mp$1n[0-9]+)[ @]")
    echo $((ns + ln))
}
# alive PID...: how many of these processes still exist
alive() {
    k=0
    for p in "$@"; do kill -0 "$p" 2>/dev/null && k=$((k + 1)); done
    echo $k
}
# A long sweep across 2 nodes of 1 rank, in its own process group, with SIGINT and SIGQUIT
# not ignored (as a foreground job of an interactive shell; a script's background job starts
# with them ignored), so that the signal lands while the ranks run. Sets $pid and $ranks.
start() {
    setsid python3 -c 'import os, signal, sys
for s in (signal.SIGINT, signal.SIGQUIT): signal.signal(s, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$bench" allreduce --np 2 --nodes 2 -b 4K -e 64M -f 2 \
        -n 100 -w 1 --time-limit 120 >"$tmp/out" 2>"$tmp/err" </dev/null &
    pid=$!
    i=0
    while [ "$(ps -o pid= --ppid "$pid" | wc -l)" -lt 2 ] && [ $i -lt 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    sleep 2
    ranks=$(ps -o pid= --ppid "$pid" | tr -d ' ' | tr '\n' ' ')
}
# wait_gone PID...: up to 5 s for the processes to go
wait_gone() {
    i=0
    while [ "$(alive "$@")" -gt 0 ] && [ $i -lt 50 ]; do
        sleep 0.1
        i=$((i + 1))
    done
}
# check NAME WANT_RC RC: ranks gone, nothing of $pid left, the launcher's exit status
check() {
    # shellcheck disable=SC2086
    wait_gone $ranks
    # shellcheck disable=SC2086
    a=$(alive $ranks)
    l=$(leftovers "$pid")
    if [ -z "$ranks" ]; then
        fail "$1" "the ranks never started"
    elif [ "$a" -ne 0 ] || [ "$l" -ne 0 ]; then
        fail "$1" "$a ranks still running, $l namespaces/links left"
    elif [ "$3" -ne "$2" ]; then
        fail "$1" "the launcher exited with $3, not $2 (died of the signal)"
    else
        pass "$1: exit $3, 0 ranks left, 0 namespaces/links left"
    fi
    # shellcheck disable=SC2086
    [ "$a" -ne 0 ] && kill -9 $ranks 2>/dev/null
}

# 1: a run that fails in every rank (the plan file does not exist) after the namespaces exist
timeout -k 5 120 "$bench" --np 2 --nodes 2 -b 8 -e 8 --plan "$tmp/none.json" \
    >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?
pid=$(grep -o 'network namespaces mscclpp-[0-9]*-n' "$tmp/err" | head -n 1 | tr -dc 0-9)
ranks=""
if [ "$rc" -eq 0 ]; then
    fail "a failing run" "exit status 0"
elif [ -z "$pid" ]; then
    fail "a failing run" "the launcher made no namespaces"
elif [ "$(leftovers "$pid")" -ne 0 ]; then
    fail "a failing run" "$(leftovers "$pid") namespaces/links left"
else
    pass "a failing run (exit $rc): 0 namespaces/links left"
fi

# 2: Ctrl-C: SIGINT to the whole process group (launcher and ranks); the launcher dies of it
start
/bin/kill -s INT -- "-$pid"
wait "$pid"
rc=$?
check "Ctrl-C" 130 $rc

# 3: kill of the launcher alone (SIGTERM): it stops its ranks, cleans up and dies of it
start
kill "$pid"
wait "$pid"
rc=$?
check "kill of the launcher" 143 $rc

# 4: kill -9 of the launcher: its ranks die with it (the kernel kills them); its namespaces
# stay until the next launcher sweeps them (5)
start
kill -9 "$pid"
wait "$pid"
# shellcheck disable=SC2086
wait_gone $ranks
# shellcheck disable=SC2086
a=$(alive $ranks)
if [ -z "$ranks" ]; then
    fail "kill -9 of the launcher" "the ranks never started"
elif [ "$a" -ne 0 ]; then
    fail "kill -9 of the launcher" "$a ranks still running 5 s later"
    # shellcheck disable=SC2086
    kill -9 $ranks 2>/dev/null
else
    pass "kill -9 of the launcher: 0 ranks left ($(leftovers "$pid") namespaces/links to sweep)"
fi

# 5: the next launcher removes what the dead one left
dead=$pid
timeout -k 5 120 "$bench" allreduce --np 2 --nodes 2 -b 8 -e 8 -n 1 -w 0 \
    >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?
l=$(leftovers "$dead")
if [ "$rc" -ne 0 ]; then
    fail "the sweep" "the next run failed (exit $rc)"
elif [ "$l" -ne 0 ]; then
    fail "the sweep" "$l namespaces/links of the dead launcher $dead left"
else
    pass "the sweep: the next launcher removed what the killed one left"
fi
# never leave anything of ours behind, whatever failed above
ip netns del "mscclpp-$dead-n0" 2>/dev/null
ip netns del "mscclpp-$dead-n1" 2>/dev/null
ip link del "mbr$dead" 2>/dev/null
[ "$fails" -eq 0 ]
