#!/usr/bin/env bash
# Install what libmscclpp needs to build and test on Debian 12 (run as root, or with sudo).
#   scripts/install-deps.sh [PROFILE]
#   cpu   (default) compilers, autotools, jansson, Check, MPICH, UCX, ibverbs, Python + pytest:
#         everything the host (CPU) backend and its tests use
#   cuda  cpu, and a check that the CUDA toolkit (nvcc) is there: NVIDIA ships it outside
#         Debian main, so it is not installed here (see docs/gpu.md)
#   rocm  cpu + hipcc and the HIP runtime headers (Debian's ROCm packages)
#   all   cpu + rocm + the cuda check (what CI uses)
# Idempotent: packages already present are skipped quickly.
set -euo pipefail
profile=${1:-cpu}

# One package per line, so that additions merge cleanly.
pkgs_cpu=(
    autoconf
    automake
    libtool
    pkg-config
    make
    gcc
    g++
    check
    libjansson-dev
    mpich
    libmpich-dev
    libucx-dev
    ucx-utils
    libibverbs-dev
    librdmacm-dev
    python3
    python3-pip
    clang
    libclang-rt-14-dev
)
pkgs_rocm=(
    hipcc
    libamdhip64-dev
)

case $profile in
cpu | cuda) pkgs=("${pkgs_cpu[@]}") ;;
rocm | all) pkgs=("${pkgs_cpu[@]}" "${pkgs_rocm[@]}") ;;
-h | --help)
    sed -n '2,10s/^# \{0,1\}//p' "$0"
    exit 0
    ;;
*)
    echo "install-deps: unknown profile '$profile' (cpu, cuda, rocm or all)" >&2
    exit 2
    ;;
esac

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps ($profile): installing ${missing[*]}"
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

if [ "$profile" = cuda ] || [ "$profile" = all ]; then
    # configure looks for nvcc on PATH and in /usr/local/cuda (--with-cuda=DIR to point at it).
    if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
        echo "install-deps ($profile): CUDA toolkit found"
    elif [ "$profile" = cuda ]; then
        echo "install-deps: no CUDA toolkit (nvcc); install it from NVIDIA (see docs/gpu.md)" >&2
        exit 1
    else
        echo "install-deps (all): no CUDA toolkit (nvcc): the CUDA backend will not be built"
    fi
fi
# NumPy: the Python runtime tests and examples exchange tensors with the host backend through
# DLPack (NumPy >= 1.22); without it they skip.
if ! python3 -c 'import numpy' 2>/dev/null; then
    python3 -m pip install -q numpy 2>/dev/null ||
        $SUDO apt-get install -y -q --no-install-recommends python3-numpy
fi
