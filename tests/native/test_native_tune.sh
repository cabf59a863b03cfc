#!/bin/sh
# The tuner times native algorithms as candidates (TAP): mscclpp-bench --native registers the
# example C allreduce (examples/native) next to the default plans, --tune sweeps both on 2 forked
# ranks of the host backend, and the table it writes is valid; a module that cannot be loaded
# fails the bench with the library's message.
. "$(dirname "$0")/../tap.sh" native-tune
bench=$top_build/tools/mscclpp-bench
mod=$top_build/tests/native/.libs/libnative_example.so
MSCCLPP_PLAN_DIR=$top_src/plans MSCCLPP_TUNING_FILE=none MSCCLPP_HAL=host
export MSCCLPP_PLAN_DIR MSCCLPP_TUNING_FILE MSCCLPP_HAL
XDG_CACHE_HOME=$tmp/cache
export XDG_CACHE_HOME

echo "1..2"

name="--tune times the native allreduce next to the plans, out of place and in place"
timeout -k 5 120 "$bench" --np 2 allreduce -b 1K -e 64K -f 64 -n 3 -w 1 --native "$mod" \
    --tune "$tmp/t.json" >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?
timed=$(grep -cE '^allreduce +(oop|ip) +[0-9]+ +native_allreduce_c +1 +0 +[0-9.]+ us' "$tmp/out")
if [ "$rc" -ne 0 ]; then fail "$name" "exit status $rc"
elif [ "$timed" -ne 4 ]; then fail "$name" "$timed native rows timed, expected 4 (2 sizes x 2)"
elif ! grep -q '"format": "mscclpp-tuning"' "$tmp/t.json"; then fail "$name" "no table"
else pass "$name"; fi

name="a module that is not one fails the bench with the library's message"
bad=$top_build/tests/native/.libs/libnative_nosyms.so
timeout -k 5 60 "$bench" --np 2 allreduce -b 1K -e 1K --native "$bad" >"$tmp/out" 2>"$tmp/err" \
    </dev/null
rc=$?
if [ "$rc" -eq 0 ]; then fail "$name" "exit status 0"
elif ! grep -q "no symbol mscclpp_native_abi_version" "$tmp/out" "$tmp/err"; then
    fail "$name" "no message naming the missing symbol"
else pass "$name"; fi
