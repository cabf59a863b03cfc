/*
 * HIP build of the plan interpreter (kernels/common/kern_interp.h): one kernel, one block per
 * plan thread block, up to KERN_HIP_MAX_THREADS threads (64-wide wavefronts). Linked into the
 * HIP HAL module through kernels/libkern_hip.la.
 */
#include <hip/hip_runtime.h>

#include "kernels/common/kern_entry.h"
#include "kernels/common/kern_interp.h"

/* The arguments are read where the launch put them (no per-thread copy); the block's shared
 * memory holds its constants and its staged ops (kern_smem_t, about 9 KiB). The launch bound is
 * 512 (kern_entry.h): gfx90a then spills no VGPRs and needs half the scratch of 1024. */
extern "C" __global__ void __launch_bounds__(KERN_HIP_MAX_THREADS)
    kern_hip_entry(const KERN_GRID_CONST kern_args_t args)
{
    __shared__ kern_smem_t sm;
    kern_run_block(&args, (int)blockIdx.x, (int)gridDim.x, (int)threadIdx.x, (int)blockDim.x, &sm,
                   NULL);
}

extern "C" mscclpp_result_t kern_hip_launch(const void *args, size_t bytes, int nblocks,
                                            int nthreads, void *stream)
{
    if (!args || bytes != sizeof(kern_args_t) || nblocks < 1 || nthreads < 1 ||
        nthreads > KERN_HIP_MAX_THREADS)
        return MSCCLPP_ERR_INVALID_ARG;
    kern_args_t a = *(const kern_args_t *)args;
    void *params[1] = {&a};
    /* the HIP error stays readable through hipGetLastError() for the caller's message */
    hipError_t e = hipLaunchKernel((const void *)kern_hip_entry, dim3((unsigned)nblocks),
                                   dim3((unsigned)nthreads), params, 0, (hipStream_t)stream);
    return e == hipSuccess ? MSCCLPP_OK : MSCCLPP_ERR_SYSTEM;
}
