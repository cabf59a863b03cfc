#!/usr/bin/env bash
# Where a hung multi-process test waits: run COMMAND in the background and, AFTER seconds later,
# write every thread of its processes (name, wchan, syscall number) and, where a gdb is installed
# and may attach, their stacks, to OUT; then wait for COMMAND and return its status. Used for the
# UCX 2x1 hang on the GPU (docs/gpu.md §7): cuda-gdb cannot attach to an MPS client ("Late attach
# is not supported with CUDA MPS"), so run it with GPU_TESTS_MPS=0 / without MPS for stacks.
#   usage: tests/gpu/thread_dump.sh AFTER OUT COMMAND [ARG...]
set -u
[ $# -ge 3 ] || { echo "usage: $0 AFTER OUT COMMAND [ARG...]" >&2; exit 2; }
after=$1 out=$2
shift 2
"$@" &
pid=$!
sleep "$after"
gdb=$(command -v gdb || command -v cuda-gdb || ls /usr/local/cuda/bin/cuda-gdb 2>/dev/null || true)
{
    echo "# $(date -u '+%F %T') UTC, ${after} s after: $*; gdb: ${gdb:-none}"
    # the command and every process below it
    pids="$pid $(pgrep -P "$pid" | tr '\n' ' ')"
    for c in $(pgrep -P "$pid"); do pids="$pids $(pgrep -P "$c" | tr '\n' ' ')"; done
    for p in $pids; do
        [ -d "/proc/$p" ] || continue
        echo "== pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-120)"
        for t in /proc/"$p"/task/*; do
            echo "  tid ${t##*/} $(cat "$t/comm" 2>/dev/null) wchan=$(cat "$t/wchan" 2>/dev/null)" \
                "syscall=$(cut -d' ' -f1 "$t/syscall" 2>/dev/null)"
        done
        [ -n "$gdb" ] && timeout 20 "$gdb" -batch -p "$p" -ex "thread apply all bt 30" 2>&1 |
            grep -E '^Thread|^#|attach' | head -200
    done
} >"$out" 2>&1
wait "$pid"
