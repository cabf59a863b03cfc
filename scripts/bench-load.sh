#!/usr/bin/env bash
# Host waits under background load (issue 22 item 9): our allreduce against MPICH's, timed in
# the same processes (mscclpp-bench --mpi under mpiexec -n 2), with K busy loops running beside
# the two ranks on this machine's cores, and without them; variants and loads interleaved in
# every round, so that all of them see the machine's moment.
#
#   scripts/bench-load.sh [-r ROUNDS] [-k BUSY_LOOPS] [-t TAIL] [-c CPUS] [-d BUILD] [-v NAME=LIBDIR]...
#                         [-x NAME=VAR=VALUE]... [-- ARGS]
#
# -d: the build whose mscclpp-bench runs (default ./build). -v: a variant, the directory of the
# libmscclpp.so.0 it runs with (put first on LD_LIBRARY_PATH; a copy of main's library beside
# a branch's, say); default one variant "build" with BUILD/.libs. -x: an environment variable
# variant NAME runs with (repeatable; e.g. -v short=build/.libs -x short=MSCCLPP_HOST_SLICE_US=100
# -v kernel=build/.libs -x kernel=MSCCLPP_HOST_SLICE_US=0). ARGS: the bench's arguments
# (default "allreduce -b 8 -e 16M -f 8 -n 200 -w 20", the issue's sweep). Needs mpiexec
# (MPICH) and a build with MPI.
# Prints, per run, "RUN variant loops load1" and per size "size ours_us mpich_us ours/mpich";
# at the end the medians of ours/mpich and of our time over the rounds, per variant, loops and
# size (variants run back to back in each round: compare them with each other), and the tails:
# per variant and loops, "tail VARIANT LOOPS n/rows (worst x) n/rows (worst x)" counts the size
# rows of ours, then of MPICH, slower than TAIL (default 10) times that variant's median without
# busy loops at that size; and "rows VARIANT LOOPS" the mean row, rows over 100 us (ours /
# MPICH) and rows of ours over 10x MPICH's same row. -s LOG: no runs, only the summaries of the output of an earlier run.
# -c CPUS: ranks and busy loops run on these CPUs only (taskset -c): "-c 0" puts both ranks on
# one core, the state the scheduler sometimes leaves them in beside busy processes.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
rounds=3
loops=2
tail_x=10
summarize=
pin=()
build=$top/build
variants=()
declare -A venv=()
while [ $# -gt 0 ]; do
    case "$1" in
    -r) rounds=$2; shift 2 ;;
    -k) loops=$2; shift 2 ;;
    -t) tail_x=$2; shift 2 ;;
    -s) summarize=$2; shift 2 ;;
    -c) pin=(taskset -c "$2"); shift 2 ;;
    -d) build=$2; shift 2 ;;
    -v) variants+=("$2"); shift 2 ;;
    -x) venv[${2%%=*}]="${venv[${2%%=*}]:-} ${2#*=}"; shift 2 ;;
    --) shift; break ;;
    *) echo "bench-load: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ ${#variants[@]} -eq 0 ] && variants=("build=$build/.libs")
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(allreduce -b 8 -e 16M -f 8 -n 200 -w 20)
[ -n "$summarize" ] || command -v mpiexec >/dev/null ||
    { echo "bench-load: mpiexec not found" >&2; exit 1; }
bench=$build/tools/.libs/mscclpp-bench
[ -x "$bench" ] || bench=$build/tools/mscclpp-bench
: "${MSCCLPP_PLAN_DIR:=$top/plans}"
export MSCCLPP_PLAN_DIR
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-load.XXXXXX") || exit 1
busy=()
stop_busy() {
    for p in "${busy[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${busy[@]}"; do wait "$p" 2>/dev/null; done
    busy=()
}
trap 'stop_busy; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
start_busy() {
    for _ in $(seq 1 "$1"); do
        "${pin[@]}" sh -c 'while :; do :; done' &
        busy+=($!)
    done
}

# run NAME LIBDIR LOOPS: one bench run; rows "size ours mpich ratio" (the table's out-of-place
# time is column 6, MPICH's time column 14, as mscclpp-bench --mpi prints them)
run() {
    local name=$1 lib=$2 k=$3 load
    load=$(cut -d' ' -f1 /proc/loadavg)
    echo "RUN $name loops=$k load=$load${venv[$name]:+ env:${venv[$name]}}"
    # shellcheck disable=SC2086 # the variant's assignments are words
    if ! LD_LIBRARY_PATH="$lib:$build/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 600 \
        env ${venv[$name]:-} "${pin[@]}" mpiexec -n 2 "$bench" "${args[@]}" --mpi >"$tmp/out" 2>"$tmp/err"; then
        echo "bench-load: $name with $k loops failed:" >&2
        tail -n 5 "$tmp/err" >&2
        return
    fi
    awk -v v="$name" -v k="$k" '!/^#/ && NF >= 15 && $1 ~ /^[0-9]+$/ && $14 > 0 {
        printf "  %10s %10s %10s %8.3f\n", $1, $6, $14, $6 / $14
        printf "R %s %s %s %.4f %s %s\n", v, k, $1, $6 / $14, $6, $14 >> "'"$tmp/all"'" }' "$tmp/out"
}

if [ -n "$summarize" ]; then
    # the rows as run() printed them, under their "RUN variant loops=K ..." lines
    awk '$1 == "RUN" { v = $2; k = $3; sub(/^loops=/, "", k); next }
         v != "" && NF == 4 && $1 ~ /^[0-9]+$/ && $3 > 0 {
             printf "R %s %s %s %.4f %s %s\n", v, k, $1, $2 / $3, $2, $3 }' "$summarize" >"$tmp/all"
    rounds=$(awk '$1 == "RUN" { n[$2 " " $3]++ } END { for (g in n) if (n[g] > m) m = n[g];
                  print m + 0 }' "$summarize")
else
    for _ in $(seq 1 "$rounds"); do
        for k in 0 "$loops"; do
            start_busy "$k"
            sleep 1
            for v in "${variants[@]}"; do run "${v%%=*}" "${v#*=}" "$k"; done
            stop_busy
        done
    done
fi
echo "# medians over $rounds rounds: variant, busy loops, size, ours/MPICH, ours (us)"
[ -f "$tmp/all" ] && awk 'function med(s, a, n, i, j, t) { n = split(s, a, " ");
          for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
              if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
          return a[int((n + 1) / 2)] }
    { key = $2 " " $3 " " $4; r[key] = r[key] " " $5; u[key] = u[key] " " $6 }
    END { for (key in r) print key, med(r[key]), med(u[key]) }' "$tmp/all" |
    sort -k1,1 -k2,2n -k3,3n
# Per variant and loops: the mean row (us), ours and MPICH's; rows over 100 us, ours and MPICH's;
# rows of ours slower than 10x MPICH's same row (same run and size: the machine's moment).
echo "# rows: variant, busy loops, mean row us ours / MPICH, rows > 100 us ours / MPICH," \
    "rows > 10x MPICH's same row"
[ -f "$tmp/all" ] && awk '{ g = $2 " " $3; n[g]++; so[g] += $6; sm[g] += $7
        if ($6 > 100) bo[g]++; if ($7 > 100) bm[g]++; if ($5 > 10) x[g]++ }
    END { for (g in n) printf "rows %s %.1f / %.1f %d / %d %d/%d\n", g, so[g] / n[g],
          sm[g] / n[g], bo[g], bm[g], x[g], n[g] }' "$tmp/all" | sort -k2,2 -k3,3n
# The tail: a median hides runs in which every call of a size took 100x longer. Per variant and
# loops, the size rows (one per run and size) whose time is more than TAIL times the variant's
# quiet time (median over the rounds without busy loops, same size), ours and MPICH's (timed in
# the same processes), and the worst such row of each.
echo "# tails: rows > ${tail_x}x the variant's quiet median (0 loops, same size): variant, busy" \
    "loops, ours n/rows (worst x), MPICH n/rows (worst x)"
[ -f "$tmp/all" ] && awk -v tx="$tail_x" 'function med(s, a, n, i, j, t) { n = split(s, a, " ");
          for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
              if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
          return a[int((n + 1) / 2)] }
    { n++; v[n] = $2; k[n] = $3; sz[n] = $4; us[n] = $6; mp[n] = $7
      if ($3 == 0) { qo[$2 " " $4] = qo[$2 " " $4] " " $6; qm[$2 " " $4] = qm[$2 " " $4] " " $7 } }
    END {
        for (q in qo) { mo[q] = med(qo[q]); mm[q] = med(qm[q]) }
        for (i = 1; i <= n; i++) {
            q = v[i] " " sz[i]; g = v[i] " " k[i]; rows[g]++
            if (!(q in mo)) continue
            xo = mo[q] > 0 ? us[i] / mo[q] : 0; xm = mm[q] > 0 ? mp[i] / mm[q] : 0
            if (xo > tx) to[g]++; if (xm > tx) tm[g]++
            if (xo > wo[g]) wo[g] = xo; if (xm > wm[g]) wm[g] = xm }
        for (g in rows) printf "tail %s %d/%d (%.0fx) %d/%d (%.0fx)\n", g, to[g], rows[g], wo[g],
            tm[g], rows[g], wm[g] }' "$tmp/all" | sort -k2,2 -k3,3n
