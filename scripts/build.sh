#!/usr/bin/env bash
# Configure and build libmscclpp out of tree in ./build (extra arguments go to configure, e.g.
# --prefix=/opt/mscclpp --enable-rpath). Without arguments an existing build folder keeps its
# configuration; with arguments configure runs again, and what depends on the install paths is
# rebuilt (see install-dirs.stamp in Makefile.am).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -x configure ] || autoreconf -fi >/dev/null
mkdir -p build
cd build
if [ ! -f config.status ] || [ $# -gt 0 ]; then
    # The "checking ..." lines go to configure.out; the summary is printed below. configure must
    # run clean: our core/ folder once made autoconf's "rm -f core" print errors (and leave
    # confdefs.h behind), so any rm complaint is a regression.
    ../configure "$@" >configure.out 2>configure.err || {
        cat configure.err >&2
        echo "build: configure failed; see $(pwd)/config.log" >&2
        exit 1
    }
    if grep -q '^rm: ' configure.err || [ -e confdefs.h ]; then
        cat configure.err >&2
        echo "build: configure printed rm errors or left confdefs.h behind" >&2
        exit 1
    fi
    cat configure.err >&2
    sed -n '/^libmscclpp .* configured:/,$p' configure.out | sed '/^ *$/d'
fi
make -j"$(nproc)" >/dev/null
echo "build: ok ($(pwd), prefix $(sed -n 's/^prefix = //p' Makefile))"
