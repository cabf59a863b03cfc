#!/usr/bin/env bash
# Install what libmscclpp needs to build and test on Debian 12 (run as root, or with sudo).
# Idempotent: packages already present are skipped quickly.
set -euo pipefail
pkgs=(autoconf automake libtool pkg-config make gcc g++ check libjansson-dev
      mpich libmpich-dev libucx-dev ucx-utils libibverbs-dev librdmacm-dev
      hipcc libamdhip64-dev python3 python3-pip)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# Python test tools for the DSL (pytest); the package itself needs only the standard library.
# Debian's own python3 refuses plain pip installs (PEP 668): fall back to its package.
if ! python3 -c 'import pytest' 2>/dev/null; then
    python3 -m pip install -q pytest 2>/dev/null ||
        $SUDO apt-get install -y -q --no-install-recommends python3-pytest
fi
python3 -c 'import pytest' || { echo "install-deps: pytest is not importable by python3" >&2; exit 1; }
# NumPy: the Python runtime tests and examples exchange tensors with the host backend through
# DLPack (NumPy >= 1.22); without it they skip.
if ! python3 -c 'import numpy' 2>/dev/null; then
    python3 -m pip install -q numpy 2>/dev/null ||
        $SUDO apt-get install -y -q --no-install-recommends python3-numpy
fi
