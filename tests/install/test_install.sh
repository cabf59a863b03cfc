#!/bin/sh
# First contact, as a user would make it (TAP): configure a fresh tree with the default prefix
# and --enable-rpath (with an existing core/ folder, as on a second configure run), install it to
# another prefix with "make install prefix=DIR", build a program against the installed library
# with pkg-config only (mscclpp and mscclpp_mpi) and run it without LD_LIBRARY_PATH; then
# check that a prefix change in the same tree rebuilds what holds the install paths.
# Needs a C compiler, pkg-config and make; the GPU backends are left out to keep it quick.
top_src=${MSCCLPP_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/install-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# A make of our own, not a job of the make that runs this test.
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u TESTS make -j2 "$@"; }
# The program must find everything through what was installed, not through the build tree.
clean_env() {
    env -u LD_LIBRARY_PATH -u MSCCLPP_PLAN_DIR -u MSCCLPP_HAL_MODULE_DIR "$@"
}

echo "1..6"
n=0
fails=0
pass() { n=$((n + 1)); echo "ok $n - $1"; }
fail() {
    n=$((n + 1))
    [ -n "$2" ] && [ -f "$2" ] && tail -n 30 "$2" | sed 's/^/# /'
    echo "not ok $n - $1"
    fails=$((fails + 1))
}
bail() { # the remaining tests cannot run
    while [ $n -lt 6 ]; do n=$((n + 1)); echo "not ok $n - $1 (an earlier step failed)"; done
    exit 1
}

for tool in pkg-config make cc; do
    if ! command -v $tool >/dev/null 2>&1; then
        echo "1..0 # SKIP $tool is not installed"
        exit 77
    fi
done

# 1: configure runs clean although core/ exists (autoconf's "rm -f core" meets our folder)
b=$tmp/build
mkdir -p "$b/core"
name="configure (default prefix, --enable-rpath) prints no rm errors and leaves no confdefs.h"
if ! (cd "$b" && "$top_src/configure" --enable-rpath --without-cuda --without-rocm \
        --without-ucx --without-verbs >"$tmp/configure.out" 2>"$tmp/configure.err"); then
    fail "$name: configure failed" "$b/config.log"
    bail "configure"
elif grep -q '^rm: ' "$tmp/configure.err" || [ -e "$b/confdefs.h" ]; then
    fail "$name" "$tmp/configure.err"
else
    pass "$name"
fi
have_mpi=no
grep -q "define MSCCLPP_HAVE_MPI 1" "$b/config.h" && have_mpi=yes

# 2: build, then install somewhere else than the configured prefix
inst=$tmp/inst
name="make install prefix=$inst in a tree configured for /usr/local"
if ! mk -C "$b" >"$tmp/make.out" 2>&1; then
    fail "make failed" "$tmp/make.out"
    bail "build"
fi
if ! mk -C "$b" install prefix="$inst" >"$tmp/install.out" 2>&1; then
    fail "$name" "$tmp/install.out"
    bail "install"
elif [ ! -f "$inst/lib/pkgconfig/mscclpp.pc" ] || ! ls "$inst"/share/libmscclpp/plans/*.json \
        >/dev/null 2>&1; then
    fail "$name: no mscclpp.pc or no plans under $inst" "$tmp/install.out"
else
    pass "$name"
fi

# 3: the .pc files name the prefix in force at install time
name="installed .pc files name $inst"
pcs="mscclpp"
[ $have_mpi = yes ] && pcs="mscclpp mscclpp_mpi"
export PKG_CONFIG_PATH="$inst/lib/pkgconfig"
bad=""
for pc in $pcs; do
    [ "$(pkg-config --variable=prefix $pc 2>/dev/null)" = "$inst" ] || bad="$bad $pc"
done
if [ -n "$bad" ]; then fail "$name (wrong or missing:$bad)" "$tmp/install.out"
else pass "$name"; fi

# 4: a user program built with pkg-config alone runs without LD_LIBRARY_PATH (rpath) and finds
# the installed plans through the path compiled into the library
name="pkg-config --cflags --libs $pcs: program builds and runs without LD_LIBRARY_PATH"
if [ $have_mpi = yes ]; then src=$top_src/tests/install/user_program.c
else
    # no MPI: the same program without its MPI lines
    grep -v 'mpi' "$top_src/tests/install/user_program.c" >"$tmp/user_program.c"
    src=$tmp/user_program.c
fi
# shellcheck disable=SC2046
if ! cc -std=c11 -o "$tmp/user" "$src" $(pkg-config --cflags --libs $pcs) >"$tmp/cc.out" 2>&1
then
    fail "$name: compile/link failed" "$tmp/cc.out"
elif ! clean_env "$tmp/user" >"$tmp/user.out" 2>&1; then
    fail "$name: the program failed" "$tmp/user.out"
elif ! grep -q '^default plans loaded: [1-9]' "$tmp/user.out"; then
    fail "$name: no default plans found" "$tmp/user.out"
else
    pass "$name"
fi

# 5: the installed tools run without LD_LIBRARY_PATH and see the installed backend modules
name="installed mscclpp-info runs without LD_LIBRARY_PATH"
if ! clean_env "$inst/bin/mscclpp-info" >"$tmp/info.out" 2>&1; then
    fail "$name" "$tmp/info.out"
elif ! grep -q 'host  *available' "$tmp/info.out"; then
    fail "$name: no host backend listed" "$tmp/info.out"
else
    pass "$name"
fi

# 6: a new prefix in the same tree (configure --prefix again, or make prefix=...) rebuilds the
# library with the new plan directory instead of keeping the old one silently
inst2=$tmp/inst2
name="a prefix change in the same tree rebuilds the paths compiled into the library"
if ! mk -C "$b" prefix="$inst2" >"$tmp/make2.out" 2>&1; then
    fail "$name: make failed" "$tmp/make2.out"
elif ! grep -q "$inst2/share/libmscclpp/plans" "$b/.libs/libmscclpp.so"; then
    fail "$name: libmscclpp.so still holds the old plan directory" "$tmp/make2.out"
else
    pass "$name"
fi

[ "$fails" -eq 0 ]
