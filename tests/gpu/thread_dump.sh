#!/usr/bin/env bash
# Where a hung multi-process test waits: run COMMAND in the background and, AFTER seconds later,
# write every thread of its processes (name, wchan, syscall number) and, where a gdb is installed
# and may attach, their stacks, to OUT; then wait for COMMAND and return its status. Used for the
# UCX 2x1 hang on the GPU (docs/gpu.md §7): cuda-gdb cannot attach to an MPS client ("Late attach
# is not supported with CUDA MPS"), so run it with GPU_TESTS_MPS=0 / without MPS for stacks.
# Without a debugger too, a thread in a futex wait gets its futex's word and, read as a pthread
# mutex, the holder's thread id, name and state: whom a proxy's put waits for (the ucx
# transport's own lock names its holder in its warning after 1 s as well).
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
            sc=$(cat "$t/syscall" 2>/dev/null)
            echo "  tid ${t##*/} $(cat "$t/comm" 2>/dev/null) wchan=$(cat "$t/wchan" 2>/dev/null)" \
                "syscall=${sc%% *}"
            # A futex wait (202 on x86-64): if its word is a pthread mutex, the int 8 bytes in
            # is the holder's tid (glibc); read through /proc/PID/mem (the command is our
            # descendant, so no ptrace attach is needed, and MPS clients allow it).
            [ "${sc%% *}" = 202 ] || continue
            uaddr=$(echo "$sc" | cut -d' ' -f2)
            words=$(dd if=/proc/"$p"/mem bs=1 skip=$((uaddr)) count=12 2>/dev/null | od -An -td4 -v)
            read -r word _ owner _ <<<"$words"
            if [ -n "${owner:-}" ]; then
                echo "    futex $uaddr: word $word, mutex owner tid $owner" \
                    "($(cat /proc/"$p"/task/"$owner"/comm 2>/dev/null || echo 'not a thread here:' \
                    'a futex that is no mutex'), wchan=$(cat /proc/"$p"/task/"$owner"/wchan 2>/dev/null)," \
                    "syscall=$(cut -d' ' -f1 /proc/"$p"/task/"$owner"/syscall 2>/dev/null))"
            fi
        done
        [ -n "$gdb" ] && timeout 20 "$gdb" -batch -p "$p" -ex "thread apply all bt 30" 2>&1 |
            grep -E '^Thread|^#|attach' | head -200
    done
} >"$out" 2>&1
wait "$pid"
