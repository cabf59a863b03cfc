#!/bin/sh
# Run MPI test programs under "$MPIEXEC -n N" for N in $MPI_NPROCS (default "2 4 8") and print
# TAP, one line per program x N. Programs come from the arguments, else from $MPI_TEST_PROGS
# (space-separated). A program that exits 77 is reported as skipped; each run is bounded by
# "timeout $MPI_TEST_TIMEOUT" (default 120 s). With MPIEXEC empty every line is a SKIP.
progs="$*"
[ -n "$progs" ] || progs="$MPI_TEST_PROGS"
nps="${MPI_NPROCS:-2 4 8}"
limit="${MPI_TEST_TIMEOUT:-120}"

count=0
for p in $progs; do for n in $nps; do count=$((count + 1)); done; done
if [ "$count" -eq 0 ]; then
    echo "1..0 # SKIP no MPI test programs given"
    exit 0
fi
echo "1..$count"

i=0
fails=0
for p in $progs; do
    name=$(basename "$p")
    for n in $nps; do
        i=$((i + 1))
        if [ -z "$MPIEXEC" ]; then
            echo "ok $i - $name -n $n # SKIP no mpiexec"
            continue
        fi
        case $p in /*) path=$p ;; *) path=./$p ;; esac
        out=$(timeout -k 5 "$limit" $MPIEXEC -n "$n" "$path" 2>&1 </dev/null)
        rc=$?
        case $rc in
        0) echo "ok $i - $name -n $n" ;;
        77) echo "ok $i - $name -n $n # SKIP $(echo "$out" | tail -n 1)" ;;
        124 | 137)
            echo "$out" | sed 's/^/# /'
            echo "not ok $i - $name -n $n: timed out after ${limit} s"
            fails=$((fails + 1))
            ;;
        *)
            echo "$out" | sed 's/^/# /'
            echo "not ok $i - $name -n $n: exit status $rc"
            fails=$((fails + 1))
            ;;
        esac
    done
done
[ "$fails" -eq 0 ]
