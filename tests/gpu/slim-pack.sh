#!/bin/sh
# Re-pack the GPU kit small enough to travel (docs/gpu.md §7, "The next GPU session").
#
# shared/tools/gpu-pack.sh builds this tree with CUDA in /tmp/gpu and packs all of it into
# .gpu/gpu.tgz (about 70 MB: every test program links the library statically, 4 MB each), but a
# device call carries the working tree and .gpu together in at most 64 MiB. This packs /tmp/gpu
# again without what no GPU step runs: the unit test programs but test_exec_agree (gpu-check's
# agree step), the fuzz, multinode and tune programs, test_nccl_percall, objects and .git. Then
# it prints the two sizes and their sum against the limit, and fails when they do not fit.
#
# usage: tests/gpu/slim-pack.sh [BUILT_DIR [PACK]]   (defaults: /tmp/gpu, .gpu/gpu.tgz of this tree)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
src=${1:-/tmp/gpu}
pack=${2:-$top/.gpu/gpu.tgz}
limit=$((64 * 1024 * 1024))
[ -d "$src/build" ] || { echo "slim-pack: $src/build is missing (run shared/tools/gpu-pack.sh first)" >&2; exit 1; }
parent=$(dirname "$src")
base=$(basename "$src")
excl=$(mktemp) || exit 1
trap 'rm -f "$excl" "$pack.new"' EXIT
for f in "$src"/build/tests/unit/*; do
    case $f in */test_exec_agree | */.libs) ;; *) echo "$base/build/tests/unit/${f##*/}" ;; esac
done >"$excl"
printf '%s\n' "$base/.git" "$base/build/tests/fuzz" "$base/build/tests/multinode" \
    "$base/build/tests/tune" "$base/build/tests/nccl/test_nccl_percall" >>"$excl"
tar -C "$parent" -czf "$pack.new" --exclude='*.o' --exclude='*.lo' -X "$excl" "$base" ||
    { echo "slim-pack: tar of $src failed" >&2; exit 1; }
mv "$pack.new" "$pack"
# what a call carries besides .gpu: the tracked files and the untracked ones git does not ignore
files=$(mktemp) || exit 1
trap 'rm -f "$excl" "$pack.new" "$files"' EXIT
git -C "$top" ls-files -co --exclude-standard -z >"$files" ||
    { echo "slim-pack: cannot list the working tree of $top with git (a call carries it)" >&2; exit 1; }
tree=$(cd "$top" && xargs -0 stat -c %s <"$files" 2>/dev/null | awk '{s += $1} END {print s + 0}')
kit=$(stat -c %s "$pack")
sum=$((tree + kit))
echo "slim-pack: $pack $((kit / 1048576)) MiB + working tree $((tree / 1048576)) MiB = $((sum / 1048576)) MiB of 64 MiB"
[ "$sum" -le "$limit" ] || {
    echo "slim-pack: too large for one call's carry: leave more out of the pack (the exclusions" \
        "above) or take large untracked files out of the tree" >&2
    exit 1
}
