/*
 * CUDA build of the elementwise scaling of kernels/common/kern_scale.h (mscclpp_scale_async):
 * a grid-stride loop, linked into the CUDA HAL module through kernels/libkern_cuda.la.
 */
#include <cuda_runtime.h>

#include "kernels/common/kern_scale.h"
#include "mscclpp/mscclpp.h"

extern "C" __global__ void __launch_bounds__(256) kern_cuda_scale_entry(kern_scale_args_t a)
{
    uint64_t first = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    kern_scale_range(&a, first, (uint64_t)gridDim.x * blockDim.x);
}

extern "C" mscclpp_result_t kern_cuda_scale_launch(const void *args, size_t bytes, void *stream)
{
    if (!args || bytes != sizeof(kern_scale_args_t)) return MSCCLPP_ERR_INVALID_ARG;
    kern_scale_args_t a = *(const kern_scale_args_t *)args;
    uint64_t blocks = (a.count + 255) / 256;
    if (blocks > 1024) blocks = 1024;
    if (blocks == 0) return MSCCLPP_OK;
    void *params[1] = {&a};
    cudaError_t e = cudaLaunchKernel((const void *)kern_cuda_scale_entry, dim3((unsigned)blocks),
                                     dim3(256), params, 0, (cudaStream_t)stream);
    return e == cudaSuccess ? MSCCLPP_OK : MSCCLPP_ERR_SYSTEM;
}
