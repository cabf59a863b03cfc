#!/bin/sh
# First contact, as a user would make it (TAP): configure a fresh tree with the default prefix
# and --enable-rpath (with an existing core/ folder, as on a second configure run), install it to
# another prefix with "make install prefix=DIR", build a program against the installed library
# with pkg-config only (mscclpp and mscclpp_mpi) and run it without LD_LIBRARY_PATH; check that
# the installed library reads its own plans and nothing else (not the source tree it came from,
# not a user's plan cache unasked, and says so when it has none); then check that a prefix change
# in the same tree rebuilds what holds the install paths.
# The source tree may be configured in place (./configure && make check): a second configure
# from it is refused by autoconf, so the test configures a copy of the distributed files then
# ("make distdir"). Needs a C compiler, pkg-config and make; the GPU backends are left out.
. "$(dirname "$0")/../tap.sh" install-test
# The program must find everything through what was installed, not through the build tree.
clean_env() {
    env -u LD_LIBRARY_PATH -u MSCCLPP_PLAN_DIR -u MSCCLPP_HAL_MODULE_DIR -u MSCCLPP_CACHE_DIR \
        HOME="$tmp/home" "$@"
}
total=9
echo "1..$total"
bail() { # the remaining tests cannot run
    while [ $n -lt $total ]; do n=$((n + 1)); echo "not ok $n - $1 (an earlier step failed)"; done
    exit 1
}

for tool in pkg-config make cc; do
    command -v $tool >/dev/null 2>&1 || skip_all "$tool is not installed"
done

# The tree to configure: the source itself, or, when it is configured in place, a copy of what
# a release tarball would hold.
src=$top_src
if [ -f "$top_src/config.status" ]; then
    if ! mk -C "$top_src" distdir distdir="$tmp/src" >"$tmp/distdir.out" 2>&1; then
        fail "make distdir in the source tree configured in place" "$tmp/distdir.out"
        bail "distdir"
    fi
    src=$tmp/src
fi

# 1: configure runs clean although core/ exists (autoconf's "rm -f core" meets our folder)
b=$tmp/build
mkdir -p "$b/core"
name="configure (default prefix, --enable-rpath) prints no rm errors and leaves no confdefs.h"
if ! (cd "$b" && "$src/configure" --enable-rpath --without-cuda --without-rocm \
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
# the installed plans through the path compiled into the library (HOME is an empty folder)
name="pkg-config --cflags --libs $pcs: program builds and runs without LD_LIBRARY_PATH"
if [ $have_mpi = yes ]; then prog=$top_src/tests/install/user_program.c
else
    # no MPI: the same program without its MPI lines
    grep -v 'mpi' "$top_src/tests/install/user_program.c" >"$tmp/user_program.c"
    prog=$tmp/user_program.c
fi
# shellcheck disable=SC2046
if ! cc -std=c11 -o "$tmp/user" "$prog" $(pkg-config --cflags --libs $pcs) >"$tmp/cc.out" 2>&1
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

# 6: the per-user plan cache (what mscclpp.compile writes) is read only when asked for
name="a plan in ~/.cache/mscclpp is registered only with MSCCLPP_CACHE_DIR set"
mkdir -p "$tmp/home/.cache/mscclpp"
# the plan's own name is the file's first "name" (the ops have names too)
sed '0,/"name": *"[^"]*"/s//"name": "from_user_cache"/' \
    "$inst/share/libmscclpp/plans/allreduce_1.json" >"$tmp/home/.cache/mscclpp/cached_allreduce_1.json"
clean_env "$tmp/user" list allreduce >"$tmp/list.out" 2>&1
rc_plain=$?
clean_env MSCCLPP_CACHE_DIR="$tmp/home/.cache/mscclpp" "$tmp/user" list allreduce \
    >"$tmp/list2.out" 2>&1
rc_asked=$?
if [ $rc_plain -ne 0 ] || ! grep -q '^plan: ' "$tmp/list.out"; then
    fail "$name: the program failed or listed no plan" "$tmp/list.out"
elif grep -q 'from_user_cache' "$tmp/list.out"; then
    fail "$name: read without MSCCLPP_CACHE_DIR" "$tmp/list.out"
elif [ $rc_asked -ne 0 ] || ! grep -q '^plan: from_user_cache' "$tmp/list2.out"; then
    fail "$name: not read with MSCCLPP_CACHE_DIR set" "$tmp/list2.out"
else
    pass "$name"
fi

# 7: without its installed plans the library finds none and says so: it does not fall back to
# the source tree it was built from (that path is used only by a library loaded from the build
# folder, base/self.c)
name="with share/libmscclpp/plans removed, no plans and a warning (never the source tree's)"
mv "$inst/share/libmscclpp/plans" "$tmp/plans.moved"
clean_env "$tmp/user" >"$tmp/noplans.out" 2>&1
rc_none=$?
mv "$tmp/plans.moved" "$inst/share/libmscclpp/plans"
if [ $rc_none -eq 0 ] || grep -q '^default plans loaded: [1-9]' "$tmp/noplans.out"; then
    fail "$name: plans were found" "$tmp/noplans.out"
elif ! grep -q 'no plans found in .*share/libmscclpp/plans' "$tmp/noplans.out"; then
    fail "$name: no warning naming the plan folder" "$tmp/noplans.out"
else
    pass "$name"
fi

# 8: the build tree's programs run from a fresh build without any setting (the README's first
# command, ./build/tools/mscclpp-bench): the library loaded from the build folder reads the
# source tree's plans (plans made for the job are turned off, so only plan files can serve)
name="the build tree's mscclpp-bench finds the source tree's plans with nothing set"
clean_env MSCCLPP_DEBUG=INFO MSCCLPP_PLAN_MAKE=off "$b/tools/mscclpp-bench" allreduce --np 2 \
    -b 64 -e 64 -n 1 -w 0 >"$tmp/buildtree.out" 2>&1
rc_tree=$?
if [ $rc_tree -ne 0 ]; then
    fail "$name: the benchmark failed" "$tmp/buildtree.out"
elif ! grep -q "loaded [1-9][0-9]* default plans from $src/plans" "$tmp/buildtree.out"; then
    fail "$name: no plans loaded from $src/plans" "$tmp/buildtree.out"
else
    pass "$name"
fi

# 9: a new prefix in the same tree (configure --prefix again, or make prefix=...) rebuilds the
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
