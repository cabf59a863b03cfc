/*
 * CUDA build of the plan interpreter (kernels/common/kern_interp.h): one kernel, one block per
 * plan thread block, up to KERN_CUDA_MAX_THREADS (512) threads. Linked into the CUDA HAL module
 * through kernels/libkern_cuda.la.
 */
#include <cuda_runtime.h>

#include "kernels/common/kern_entry.h"
#include "kernels/common/kern_interp.h"

/* The arguments are read where the launch put them (no per-thread copy); the block's shared
 * memory holds its constants and its staged ops (kern_smem_t, about 9 KiB). The launch bound
 * is 512, not 1024: at 1024 ptxas has 64 registers per thread and spilled (sm_90: 360 bytes of
 * stack, 712 bytes of spill stores); at 512 it uses 124 and spills nothing, and 512 threads
 * moved as many bytes as 1024 (docs/gpu.md "Interpreter"). */
extern "C" __global__ void __launch_bounds__(KERN_CUDA_MAX_THREADS)
    kern_cuda_entry(const KERN_GRID_CONST kern_args_t args)
{
    __shared__ kern_smem_t sm;
    kern_run_block(&args, (int)blockIdx.x, (int)gridDim.x, (int)threadIdx.x, (int)blockDim.x, &sm,
                   NULL);
}

extern "C" mscclpp_result_t kern_cuda_launch(const void *args, size_t bytes, int nblocks,
                                             int nthreads, void *stream)
{
    if (!args || bytes != sizeof(kern_args_t) || nblocks < 1 || nthreads < 1 ||
        nthreads > KERN_CUDA_MAX_THREADS)
        return MSCCLPP_ERR_INVALID_ARG;
    kern_args_t a = *(const kern_args_t *)args;
    void *params[1] = {&a};
    /* the CUDA error stays readable through cudaGetLastError() for the caller's message */
    cudaError_t e = cudaLaunchKernel((const void *)kern_cuda_entry, dim3((unsigned)nblocks),
                                     dim3((unsigned)nthreads), params, 0, (cudaStream_t)stream);
    return e == cudaSuccess ? MSCCLPP_OK : MSCCLPP_ERR_SYSTEM;
}
