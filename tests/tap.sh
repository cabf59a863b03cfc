# The preamble of the TAP shell tests, sourced first thing:
#     . "$(dirname "$0")/../tap.sh" NAME        (NAME: the temporary folder's prefix)
# It sets
#   top_src, top_build  the source and build trees (make check exports MSCCLPP_TOP_SRCDIR and
#                       MSCCLPP_TOP_BUILDDIR; by hand: the tree above tests/, and the current
#                       folder as the build)
#   tmp                 a private temporary folder, removed at exit
#   n, fails            tests reported so far, failures among them
# and defines
#   pass TITLE          "ok N - TITLE"
#   skip TITLE WHY      "ok N - TITLE # SKIP WHY"
#   fail TITLE [WHY]    the last 40 lines of $tmp/out and $tmp/err as comments, then
#                       "not ok N - TITLE: WHY"; when WHY names a file, its last 30 lines instead
#   run CMD...          CMD with stdin closed, stdout in $tmp/out, stderr in $tmp/err, its exit
#                       status in $rc, killed after $limit seconds (default 300)
#   mk ARGS...          a make of its own (-j2), not a job of the make that runs the test
#   skip_all WHY        "1..0 # SKIP WHY" and exit 77 (the whole script cannot run here)
# shellcheck shell=sh
top_build=${MSCCLPP_TOP_BUILDDIR:-.}
top_src=${MSCCLPP_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/${1:-mscclpp-test}.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
n=0
fails=0
rc=0

pass() { n=$((n + 1)); echo "ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
fail() {
    n=$((n + 1))
    fails=$((fails + 1))
    if [ -n "${2:-}" ] && [ -f "$2" ]; then
        tail -n 30 "$2" | sed 's/^/# /'
        echo "not ok $n - $1"
    else
        sed 's/^/# /' "$tmp/out" "$tmp/err" 2>/dev/null | tail -n 40
        echo "not ok $n - $1${2:+: $2}"
    fi
}
run() {
    timeout -k 5 "${limit:-300}" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
}
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u TESTS make -j2 "$@"; }
skip_all() {
    echo "1..0 # SKIP $1"
    exit 77
}
