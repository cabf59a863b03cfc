/*
 * HIP on NVIDIA, device side, for kernels/hip/kern_hip.hip compiled by nvcc (see
 * hip_runtime_api.h in this folder for the host API and why this exists).
 *
 * hipcc on AMD predefines what the HIP path of kernels/common/kern_port.h relies on: __HIPCC__,
 * __HIP_DEVICE_COMPILE__ in the device pass, the memory scopes __HIP_MEMORY_SCOPE_*, and the
 * builtins __hip_atomic_{load,store,fetch_add,compare_exchange_strong} and
 * __builtin_amdgcn_s_{memrealtime,sleep}. Here each is defined with the same meaning on an
 * NVIDIA target, so the interpreter compiles its HIP path (KERN_HIP), not its CUDA one:
 *
 *  - __hip_atomic_*(p, order, scope): cuda::atomic_ref of the matching thread scope (system,
 *    device for AGENT, block for WORKGROUP) with the same C++ memory order: the PTX memory
 *    model's ld.acquire/st.release/atom.*.acq_rel at .sys/.gpu/.cta, as hipcc emits
 *    scoped loads/stores/atomics for AMDGPU;
 *  - __builtin_amdgcn_s_memrealtime(): %globaltimer (ns) counted in the 100 MHz ticks
 *    kern_clock_ns() assumes when the launch gives no wall-clock rate;
 *  - __builtin_amdgcn_s_sleep(n) (n x 64 clocks): __nanosleep of about as long.
 */
#ifndef MSCCLPP_HIPNV_HIP_RUNTIME_H
#define MSCCLPP_HIPNV_HIP_RUNTIME_H

#include "hip_runtime_api.h"

#include <cuda_runtime.h>

#if defined(__CUDACC__) && !defined(__HIPCC__)
#define __HIPCC__ 1
#endif
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#define __HIP_DEVICE_COMPILE__ 1
#endif

/* clang's values */
#define __HIP_MEMORY_SCOPE_SINGLETHREAD 1
#define __HIP_MEMORY_SCOPE_WAVEFRONT 2
#define __HIP_MEMORY_SCOPE_WORKGROUP 3
#define __HIP_MEMORY_SCOPE_AGENT 4
#define __HIP_MEMORY_SCOPE_SYSTEM 5

#if defined(__CUDACC__)
#include <cuda/atomic>

namespace hipnv
{

__host__ __device__ constexpr cuda::std::memory_order order(int o)
{
    return o == __ATOMIC_RELAXED   ? cuda::std::memory_order_relaxed
           : o == __ATOMIC_CONSUME ? cuda::std::memory_order_consume
           : o == __ATOMIC_ACQUIRE ? cuda::std::memory_order_acquire
           : o == __ATOMIC_RELEASE ? cuda::std::memory_order_release
           : o == __ATOMIC_ACQ_REL ? cuda::std::memory_order_acq_rel
                                   : cuda::std::memory_order_seq_cst;
}

/* The failure order of a compare-exchange (never a release one). */
__host__ __device__ constexpr cuda::std::memory_order fail_order(int o)
{
    return o == __ATOMIC_ACQ_REL || o == __ATOMIC_ACQUIRE ? cuda::std::memory_order_acquire
           : o == __ATOMIC_SEQ_CST                        ? cuda::std::memory_order_seq_cst
                                                          : cuda::std::memory_order_relaxed;
}

/* T of a non-deduced parameter: the value takes the pointer's type, as the builtins convert */
template <typename T> struct same {
    typedef T type;
};

/* Run `body` with `R` bound to the atomic_ref type of `scope` over T. */
#define HIPNV_SCOPED(T, scope, body)                                  \
    do {                                                              \
        if ((scope) == __HIP_MEMORY_SCOPE_SYSTEM) {                   \
            typedef cuda::atomic_ref<T, cuda::thread_scope_system> R; \
            body;                                                     \
        } else if ((scope) == __HIP_MEMORY_SCOPE_WORKGROUP ||         \
                   (scope) == __HIP_MEMORY_SCOPE_WAVEFRONT ||         \
                   (scope) == __HIP_MEMORY_SCOPE_SINGLETHREAD) {      \
            typedef cuda::atomic_ref<T, cuda::thread_scope_block> R;  \
            body;                                                     \
        } else {                                                      \
            typedef cuda::atomic_ref<T, cuda::thread_scope_device> R; \
            body;                                                     \
        }                                                             \
    } while (0)

} // namespace hipnv

template <typename T>
static __device__ __forceinline__ T __hip_atomic_load(const T *p, int order, int scope)
{
    T *q = const_cast<T *>(p);
    HIPNV_SCOPED(T, scope, return R(*q).load(hipnv::order(order)));
    return T();
}

template <typename T>
static __device__ __forceinline__ void __hip_atomic_store(T *p, typename hipnv::same<T>::type v,
                                                          int order, int scope)
{
    HIPNV_SCOPED(T, scope, R(*p).store(v, hipnv::order(order)));
}

template <typename T>
static __device__ __forceinline__ T __hip_atomic_fetch_add(T *p, typename hipnv::same<T>::type v,
                                                           int order, int scope)
{
    HIPNV_SCOPED(T, scope, return R(*p).fetch_add(v, hipnv::order(order)));
    return T();
}

/* expected is updated with the value found, as the builtin does */
template <typename T>
static __device__ __forceinline__ bool __hip_atomic_compare_exchange_strong(
    T *p, T *expected, typename hipnv::same<T>::type desired, int order, int fail, int scope)
{
    HIPNV_SCOPED(T, scope,
                 return R(*p).compare_exchange_strong(*expected, desired, hipnv::order(order),
                                                      hipnv::fail_order(fail)));
    return false;
}

#undef HIPNV_SCOPED

static __device__ __forceinline__ unsigned long long hipnv_memrealtime(void)
{
#if defined(__CUDA_ARCH__)
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t / 10u; /* 100 MHz ticks */
#else
    return 0; /* host pass: never runs */
#endif
}

static __device__ __forceinline__ void hipnv_s_sleep(unsigned n)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    __nanosleep(32u * n); /* 64 clocks at about 2 GHz per unit */
#else
    (void)n;
#endif
}

#define __builtin_amdgcn_s_memrealtime() hipnv_memrealtime()
#define __builtin_amdgcn_s_sleep(n) hipnv_s_sleep(n)

#endif /* __CUDACC__ */

#endif /* MSCCLPP_HIPNV_HIP_RUNTIME_H */
