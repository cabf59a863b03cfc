/*
 * The HIP version of allreduce_native_cuda.cu: the same source, with HIP's names for the few
 * runtime calls it makes. Built with hipcc by
 * mscclpp.compile_native("allreduce_native_hip", "allreduce_native_hip.hip").
 */
#include <hip/hip_runtime.h>

#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaStream_t hipStream_t
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaStreamSynchronize hipStreamSynchronize
#define NATIVE_ALGO_NAME "native_allreduce_hip"

#include "allreduce_native_cuda.cu"
