# Start and stop a CUDA MPS control daemon for GPU tests (sourced by tests/gpu/run-gpu-tests.sh
# and scripts/gpu-check.sh; POSIX sh).
#
# Several ranks on one GPU run their kernels concurrently only under MPS; without it their
# contexts time-slice and every collective takes milliseconds (docs/gpu.md §5). mps_start uses a
# daemon that already runs (CUDA_MPS_PIPE_DIRECTORY, else /tmp/nvidia-mps), or starts one of its
# own with private pipe and log directories, so that stopping it later cannot disturb anybody
# else's daemon. GPU_TESTS_MPS=0 turns this off.
#   mps_start   -> 0 when MPS serves this shell's children (CUDA_MPS_PIPE_DIRECTORY exported)
#   mps_stop    -> stops the daemon only if mps_start started it
MPS_OURS=""

mps_running() {
    [ -e "${1:-${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}}/control" ]
}

mps_start() {
    if [ "${GPU_TESTS_MPS:-1}" = 0 ]; then
        echo "# MPS: not started (GPU_TESTS_MPS=0)"
        return 1
    fi
    pipe=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}
    if mps_running "$pipe"; then
        export CUDA_MPS_PIPE_DIRECTORY="$pipe"
        echo "# MPS: using the daemon that already runs ($pipe)"
        return 0
    fi
    if ! command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
        echo "# MPS: nvidia-cuda-mps-control not found; ranks sharing a GPU will time-slice"
        return 1
    fi
    MPS_OURS=$(mktemp -d "${TMPDIR:-/tmp}/mscclpp-mps.XXXXXX") || return 1
    mkdir -p "$MPS_OURS/pipe" "$MPS_OURS/log"
    if CUDA_MPS_PIPE_DIRECTORY="$MPS_OURS/pipe" CUDA_MPS_LOG_DIRECTORY="$MPS_OURS/log" \
        nvidia-cuda-mps-control -d; then
        export CUDA_MPS_PIPE_DIRECTORY="$MPS_OURS/pipe" CUDA_MPS_LOG_DIRECTORY="$MPS_OURS/log"
        i=0
        while ! mps_running && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        echo "# MPS: started a daemon (pipes in $MPS_OURS/pipe)"
        return 0
    fi
    echo "# MPS: nvidia-cuda-mps-control -d failed; ranks sharing a GPU will time-slice"
    rm -rf "$MPS_OURS"
    MPS_OURS=""
    return 1
}

mps_stop() {
    [ -n "$MPS_OURS" ] || return 0
    echo quit | CUDA_MPS_PIPE_DIRECTORY="$MPS_OURS/pipe" nvidia-cuda-mps-control >/dev/null 2>&1
    i=0
    while mps_running "$MPS_OURS/pipe" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    echo "# MPS: stopped the daemon started for the tests"
    rm -rf "$MPS_OURS"
    MPS_OURS=""
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
