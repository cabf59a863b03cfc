#!/usr/bin/env bash
# Configure and build libmscclpp out of tree in ./build (extra arguments go to configure).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -x configure ] || autoreconf -fi >/dev/null
mkdir -p build
cd build
if [ ! -f config.status ] || [ $# -gt 0 ]; then
    ../configure -q "$@"
fi
make -j"$(nproc)" >/dev/null
echo "build: ok ($(cd .. && pwd)/build)"
