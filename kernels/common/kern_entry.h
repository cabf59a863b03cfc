/* Entry points of the compiled interpreter, one per backend (see kernels/common/kern_args.h). */
#ifndef MSCCLPP_KERN_ENTRY_H
#define MSCCLPP_KERN_ENTRY_H

#include <stddef.h>

#include "mscclpp/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif
/*
 * Threads per block the GPU interpreter kernels take at most: their __launch_bounds__, which
 * sets the registers ptxas and the AMDGPU backend may give a thread (sm_90: 1024 threads leave
 * 64, and the interpreter spilled; 512 leave 128, and it spills nothing; gfx90a: no VGPR spills,
 * half the scratch: docs/gpu.md "Interpreter"). The HALs report it
 * (hal_device_props_t.kernel_max_threads) and reject larger launches; the lowering caps a plan's
 * num_threads_per_block at it.
 */
#define KERN_CUDA_MAX_THREADS 512
#define KERN_HIP_MAX_THREADS 512

/**
 * Host backend: run thread block `block` (of `nblocks`) of the interpreter for launch
 * arguments `args` (a kern_args_t). All blocks of a launch run concurrently on host threads;
 * the call returns when this block has finished its ops or recorded an error.
 */
void kern_host_run_block(const void *args, int block, int nblocks);

/**
 * Host backend, for tests: run block `block` as `nth` host threads that stride over the data
 * as a GPU block's threads do (thread index, block size, block syncs at a barrier, the
 * block's shared memory), so the host proves the GPU's indexing. Returns 0, or -1 (nothing
 * ran) when a thread could not be created.
 */
int kern_host_run_block_simt(const void *args, int block, int nblocks, int nth);

/**
 * CUDA backend (kernels/libkern_cuda.la): launch the interpreter kernel with `nblocks` blocks
 * of `nthreads` threads (<= KERN_CUDA_MAX_THREADS) on `stream` (a cudaStream_t). `args` points
 * at a kern_args_t of `bytes` bytes, passed by value. Returns MSCCLPP_ERR_INVALID_ARG for bad
 * sizes and MSCCLPP_ERR_SYSTEM (with the CUDA error named) if the launch fails.
 */
mscclpp_result_t kern_cuda_launch(const void *args, size_t bytes, int nblocks, int nthreads,
                                  void *stream);

/** HIP backend (kernels/libkern_hip.la): as kern_cuda_launch (<= KERN_HIP_MAX_THREADS threads),
 * `stream` is a hipStream_t. */
mscclpp_result_t kern_hip_launch(const void *args, size_t bytes, int nblocks, int nthreads,
                                 void *stream);

/**
 * Elementwise scaling (kernels/common/kern_scale.h): `args` is a kern_scale_args_t of `bytes`
 * bytes. Host: run it in the calling thread. CUDA/HIP: launch it on `stream`.
 */
void kern_host_scale(const void *args);
mscclpp_result_t kern_cuda_scale_launch(const void *args, size_t bytes, void *stream);
mscclpp_result_t kern_hip_scale_launch(const void *args, size_t bytes, void *stream);
#ifdef __cplusplus
}
#endif
#endif
