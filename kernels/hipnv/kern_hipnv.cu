/*
 * HIP on NVIDIA: kernels/hip/kern_hip.hip and kern_scale.hip, unchanged, compiled by nvcc
 * against the HIP stand-in of vendor/hipnv (below every layer: hip/hip_runtime.h there defines
 * __HIPCC__, so kernels/common takes its HIP path:
 * HIP atomics and scopes, the HIP clock and back-off, the HIP launch). Linked into
 * libmscclpp-hal-hipnv.so through kernels/libkern_hipnv.la.
 */
#include "kernels/hip/kern_hip.hip"
#include "kernels/hip/kern_scale.hip" /* mscclpp_scale_async's kernel (hal launch_scale) */

/* what this build is for: the interpreter's HIP path, never its CUDA one */
#if !defined(KERN_HIP) || defined(KERN_CUDA)
#error "kernels/common took its CUDA path: is -I vendor/hipnv first on the include path?"
#endif
