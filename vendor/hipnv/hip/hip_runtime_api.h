/*
 * HIP on NVIDIA, for this project's HIP module only ("hipnv"): the HIP runtime API that
 * the files of hal/hip and kernels/hip/kern_hip.hip call, each mapped onto the CUDA runtime (or, where
 * HIP's NVIDIA platform itself calls the driver, onto a driver entry point fetched at run time).
 *
 * Why our own: Debian's HIP 5.2 NVIDIA headers (/usr/include/hip/nvidia_detail) do not compile
 * against CUDA 13 (cudaDeviceProp lost clockRate and computeMode, cudaMemPrefetchAsync changed),
 * and no newer HIP is available offline. This file maps exactly what the module and the kernel
 * use, with HIP's signatures, so the HIP sources compile unchanged; a hip* call they start to use
 * and this file lacks fails the hipnv build (CI compiles it wherever nvcc is found).
 *
 * Found first on the include path (-I vendor/hipnv) when building libmscclpp-hal-hipnv.so and
 * kernels/libkern_hipnv.la, never otherwise. It lives in vendor/, below every layer: it stands
 * in for a vendor's headers, which the HIP backend (hal/hip) and the kernels (kernels/hip) both
 * compile against, and is part of neither. Like HIP's NVIDIA platform, error codes are the
 * CUDA runtime's (hipError_t is cudaError_t here): messages name the CUDA error.
 *
 * What differs from AMD on purpose, and why it is right on NVIDIA:
 *  - hipExtMallocWithFlags(hipDeviceMallocFinegrained) is cudaMalloc: CUDA device memory is
 *    coherent for peers (IPC, system-scope atomics) without a fine-grained kind.
 *  - hipHostMallocCoherent has no CUDA flag: mapped pinned memory is read by device and host
 *    through the system scope the kernel's atomics name.
 *  - hipDeviceProp_t holds only the fields the module reads; gcnArchName is "sm_XY".
 */
#ifndef MSCCLPP_HIPNV_HIP_RUNTIME_API_H
#define MSCCLPP_HIPNV_HIP_RUNTIME_API_H

#include <cuda.h> /* driver types and enums only: driver functions are fetched at run time */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifndef __HIP_PLATFORM_NVIDIA__
#define __HIP_PLATFORM_NVIDIA__ 1
#endif
/** This build is HIP on NVIDIA through hal/hipnv (the module reports it). */
#define MSCCLPP_HIPNV_API 1

#ifdef __cplusplus
#define HIPNV_FN static inline
extern "C" {
#else
#define HIPNV_FN static inline __attribute__((unused))
#endif

/* ----- types ---------------------------------------------------------------------------------- */

typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef cudaGraph_t hipGraph_t;
typedef cudaGraphExec_t hipGraphExec_t;
typedef cudaIpcMemHandle_t hipIpcMemHandle_t;
typedef enum cudaStreamCaptureStatus hipStreamCaptureStatus;
typedef enum cudaStreamCaptureMode hipStreamCaptureMode;
typedef enum cudaMemcpyKind hipMemcpyKind;
typedef cudaHostFn_t hipHostFn_t;
typedef void *hipDeviceptr_t; /* as on AMD: a plain pointer */

typedef struct {
    char name[256];
    char gcnArchName[256]; /* "sm_90": the target, as gcnArchName names an AMD one */
    int warpSize;
    int multiProcessorCount;
    int maxThreadsPerBlock;
    size_t totalGlobalMem;
} hipDeviceProp_t;

/* ----- constants ------------------------------------------------------------------------------ */

#define hipSuccess cudaSuccess
#define hipErrorNotReady cudaErrorNotReady
#define hipErrorOutOfMemory cudaErrorMemoryAllocation
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipErrorInvalidDevice cudaErrorInvalidDevice
#define hipErrorNoDevice cudaErrorNoDevice
#define hipErrorInsufficientDriver cudaErrorInsufficientDriver
#define hipErrorNotInitialized cudaErrorInitializationError
#define hipErrorNoBinaryForGpu cudaErrorNoKernelImageForDevice

#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipEventDefault cudaEventDefault
#define hipMemcpyDefault cudaMemcpyDefault
#define hipStreamCaptureStatusNone cudaStreamCaptureStatusNone
#define hipStreamCaptureModeGlobal cudaStreamCaptureModeGlobal
#define hipStreamCaptureModeRelaxed cudaStreamCaptureModeRelaxed
#define hipIpcMemLazyEnablePeerAccess cudaIpcMemLazyEnablePeerAccess
#define hipHostMallocMapped cudaHostAllocMapped
#define hipHostMallocPortable cudaHostAllocPortable
#define hipHostMallocCoherent 0u
#define hipDeviceMallocFinegrained 1u

/* hipPointerGetAttribute: the attributes are the driver's (HIP's NVIDIA platform passes them
 * through), so the memory type compares with CUDA's value */
#define HIP_POINTER_ATTRIBUTE_MEMORY_TYPE CU_POINTER_ATTRIBUTE_MEMORY_TYPE
#define HIP_POINTER_ATTRIBUTE_BUFFER_ID CU_POINTER_ATTRIBUTE_BUFFER_ID
#define hipMemoryTypeDevice CU_MEMORYTYPE_DEVICE
typedef CUpointer_attribute hipPointer_attribute;

/* ----- errors and devices --------------------------------------------------------------------- */

HIPNV_FN const char *hipGetErrorString(hipError_t e) { return cudaGetErrorString(e); }
HIPNV_FN const char *hipGetErrorName(hipError_t e) { return cudaGetErrorName(e); }
HIPNV_FN hipError_t hipGetLastError(void) { return cudaGetLastError(); }
HIPNV_FN hipError_t hipGetDeviceCount(int *n) { return cudaGetDeviceCount(n); }
HIPNV_FN hipError_t hipSetDevice(int d) { return cudaSetDevice(d); }
HIPNV_FN hipError_t hipGetDevice(int *d) { return cudaGetDevice(d); }

HIPNV_FN hipError_t hipGetDeviceProperties(hipDeviceProp_t *p, int dev)
{
    struct cudaDeviceProp c;
    hipError_t e = cudaGetDeviceProperties(&c, dev);
    if (e != cudaSuccess) return e;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", c.name);
    snprintf(p->gcnArchName, sizeof p->gcnArchName, "sm_%d%d", c.major, c.minor);
    p->warpSize = c.warpSize;
    p->multiProcessorCount = c.multiProcessorCount;
    p->maxThreadsPerBlock = c.maxThreadsPerBlock;
    p->totalGlobalMem = c.totalGlobalMem;
    return cudaSuccess;
}

/* ----- memory --------------------------------------------------------------------------------- */

HIPNV_FN hipError_t hipMalloc(void **p, size_t n) { return cudaMalloc(p, n); }
HIPNV_FN hipError_t hipExtMallocWithFlags(void **p, size_t n, unsigned flags)
{
    (void)flags; /* fine-grained: what cudaMalloc memory is to peers already */
    return cudaMalloc(p, n);
}
HIPNV_FN hipError_t hipFree(void *p) { return cudaFree(p); }
HIPNV_FN hipError_t hipHostMalloc(void **p, size_t n, unsigned flags)
{
    return cudaHostAlloc(p, n, flags);
}
HIPNV_FN hipError_t hipHostFree(void *p) { return cudaFreeHost(p); }
HIPNV_FN hipError_t hipMemcpyAsync(void *d, const void *s, size_t n, hipMemcpyKind k,
                                   hipStream_t st)
{
    return cudaMemcpyAsync(d, s, n, k, st);
}
HIPNV_FN hipError_t hipMemsetAsync(void *d, int v, size_t n, hipStream_t st)
{
    return cudaMemsetAsync(d, v, n, st);
}

/* The driver calls HIP's NVIDIA platform makes (cuMemGetAddressRange, cuPointerGetAttribute),
 * fetched through the runtime so that nothing links libcuda (the module loads without a
 * driver, as the CUDA module does). A missing entry point reads as "not initialized". */
HIPNV_FN void *hipnv_driver_fn(const char *symbol, unsigned version)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return fn;
}
/* CUresult and cudaError_t agree on the codes met here (1 invalid value, 3 not initialized,
 * 201 invalid context); the rest pass through as numbers. */
HIPNV_FN hipError_t hipnv_from_cu(CUresult r)
{
    return r == CUDA_SUCCESS ? cudaSuccess : (hipError_t)r;
}

HIPNV_FN hipError_t hipMemGetAddressRange(hipDeviceptr_t *base, size_t *size, hipDeviceptr_t p)
{
    typedef CUresult (*fn_t)(CUdeviceptr *, size_t *, CUdeviceptr);
    fn_t fn = (fn_t)hipnv_driver_fn("cuMemGetAddressRange", 3020);
    if (!fn) return cudaErrorInitializationError;
    CUdeviceptr b = 0;
    CUresult r = fn(&b, size, (CUdeviceptr)(uintptr_t)p);
    if (r == CUDA_SUCCESS) *base = (void *)(uintptr_t)b;
    return hipnv_from_cu(r);
}
HIPNV_FN hipError_t hipPointerGetAttribute(void *data, hipPointer_attribute attr, hipDeviceptr_t p)
{
    typedef CUresult (*fn_t)(void *, CUpointer_attribute, CUdeviceptr);
    fn_t fn = (fn_t)hipnv_driver_fn("cuPointerGetAttribute", 4000);
    if (!fn) return cudaErrorInitializationError;
    return hipnv_from_cu(fn(data, attr, (CUdeviceptr)(uintptr_t)p));
}

HIPNV_FN hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t *h, void *p)
{
    return cudaIpcGetMemHandle(h, p);
}
HIPNV_FN hipError_t hipIpcOpenMemHandle(void **p, hipIpcMemHandle_t h, unsigned flags)
{
    return cudaIpcOpenMemHandle(p, h, flags);
}
HIPNV_FN hipError_t hipIpcCloseMemHandle(void *p) { return cudaIpcCloseMemHandle(p); }

/* ----- streams, events, graphs ---------------------------------------------------------------- */

HIPNV_FN hipError_t hipStreamCreateWithFlags(hipStream_t *s, unsigned flags)
{
    return cudaStreamCreateWithFlags(s, flags);
}
HIPNV_FN hipError_t hipStreamDestroy(hipStream_t s) { return cudaStreamDestroy(s); }
HIPNV_FN hipError_t hipStreamQuery(hipStream_t s) { return cudaStreamQuery(s); }
HIPNV_FN hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned flags)
{
    return cudaStreamWaitEvent(s, e, flags);
}
HIPNV_FN hipError_t hipLaunchHostFunc(hipStream_t s, hipHostFn_t fn, void *arg)
{
    return cudaLaunchHostFunc(s, fn, arg);
}
HIPNV_FN hipError_t hipStreamIsCapturing(hipStream_t s, hipStreamCaptureStatus *st)
{
    return cudaStreamIsCapturing(s, st);
}
HIPNV_FN hipError_t hipStreamBeginCapture(hipStream_t s, hipStreamCaptureMode m)
{
    return cudaStreamBeginCapture(s, m);
}
HIPNV_FN hipError_t hipStreamEndCapture(hipStream_t s, hipGraph_t *g)
{
    return cudaStreamEndCapture(s, g);
}
HIPNV_FN hipError_t hipThreadExchangeStreamCaptureMode(hipStreamCaptureMode *m)
{
    return cudaThreadExchangeStreamCaptureMode(m);
}
/* HIP keeps the CUDA 11 signature (error node, log buffer); CUDA 12 took flags instead */
HIPNV_FN hipError_t hipGraphInstantiate(hipGraphExec_t *x, hipGraph_t g, void *error_node,
                                        char *log, size_t log_size)
{
    (void)error_node;
    if (log && log_size) log[0] = '\0';
    return cudaGraphInstantiate(x, g, 0);
}
HIPNV_FN hipError_t hipGraphLaunch(hipGraphExec_t x, hipStream_t s)
{
    return cudaGraphLaunch(x, s);
}
HIPNV_FN hipError_t hipGraphExecDestroy(hipGraphExec_t x) { return cudaGraphExecDestroy(x); }
HIPNV_FN hipError_t hipGraphDestroy(hipGraph_t g) { return cudaGraphDestroy(g); }

HIPNV_FN hipError_t hipEventCreateWithFlags(hipEvent_t *e, unsigned flags)
{
    return cudaEventCreateWithFlags(e, flags);
}
HIPNV_FN hipError_t hipEventDestroy(hipEvent_t e) { return cudaEventDestroy(e); }
HIPNV_FN hipError_t hipEventRecord(hipEvent_t e, hipStream_t s) { return cudaEventRecord(e, s); }
HIPNV_FN hipError_t hipEventQuery(hipEvent_t e) { return cudaEventQuery(e); }
HIPNV_FN hipError_t hipEventElapsedTime(float *ms, hipEvent_t a, hipEvent_t b)
{
    return cudaEventElapsedTime(ms, a, b);
}

/* ----- kernels -------------------------------------------------------------------------------- */

HIPNV_FN hipError_t hipLaunchKernel(const void *f, dim3 grid, dim3 block, void **args, size_t shmem,
                                    hipStream_t s)
{
    return cudaLaunchKernel(f, grid, block, args, shmem, s);
}

#ifdef __cplusplus
}
#endif
#undef HIPNV_FN

#endif /* MSCCLPP_HIPNV_HIP_RUNTIME_API_H */
