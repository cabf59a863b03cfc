/*
 * Portability layer of the plan interpreter: the few things that differ between gcc (host
 * backend), nvcc (CUDA) and hipcc (HIP). Everything else in kernels/common is plain C that is
 * also valid CUDA/HIP C++.
 *
 *   KERN_FN              qualifier of interpreter functions (static inline / __device__)
 *   KERN_BIG_FN          same for the large ones (reduce loops, one op), never inlined on GPUs
 *   KERN_GRID_CONST      launch arguments read in place (CUDA __grid_constant__)
 *   KERN_UNROLL          unroll the next loop completely (its bound is a constant)
 *   KERN_NOUNROLL        do not unroll the next loop (register pressure)
 *   KERN_BLOCK_SYNC(h)   block-wide barrier; `h` is the host barrier of a block run by several
 *                        host threads (kern_host_run_block_simt), NULL with one
 *   kern_*_u32/u64       atomics with explicit order and scope: "sys" = visible to peers
 *                        (other processes / GPUs), "dev" = the blocks of this rank
 *   kern_ld_pkt2/st_pkt2 one 16-byte LL access: two 8-byte packet units, each read and written
 *                        whole (CUDA: one v2.u64 access; HIP and host: two 8-byte ones)
 *   kern_clock_ns()      monotonic nanoseconds for timeouts
 *   kern_backoff()       what a waiter does between polls
 *   KERN_RED_U           16-byte vectors a thread keeps in flight per source in a reduce (the
 *                        accumulators of float32 at 2: 8 registers; the addresses come from
 *                        the block's table in shared memory, kern_reduce_io)
 *   KERN_COPY_U          same for copies (one source: 4 vectors, 64 bytes, in flight)
 */
#ifndef MSCCLPP_KERN_PORT_H
#define MSCCLPP_KERN_PORT_H

#if defined(__CUDACC__) && !defined(__HIPCC__)
#define KERN_CUDA 1
#elif defined(__HIPCC__)
#define KERN_HIP 1
#else
#define KERN_HOST 1
#endif

#if defined(KERN_HOST)
#include <stdint.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#include "base/wait.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KERN_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define KERN_PAUSE() __asm__ __volatile__("yield" ::: "memory")
#else
#define KERN_PAUSE() ((void)0)
#endif
#else
#include <stdint.h>
#endif

/* ------------------------------------------------------------------------------------------ */
#if defined(KERN_HOST)

#define KERN_FN static inline
#define KERN_BIG_FN static /* large functions: the compiler decides */
#define KERN_GRID_CONST
#define KERN_UNROLL _Pragma("GCC unroll 16")
#define KERN_NOUNROLL _Pragma("GCC unroll 1")
#define KERN_RED_U 4
#define KERN_COPY_U 4
/* kern_host.c: a block of several host threads meets at a pthread barrier */
void kern_host_block_sync(void *barrier);
#define KERN_BLOCK_SYNC(h) ((h) ? kern_host_block_sync(h) : (void)0)

KERN_FN uint64_t kern_ld_acq_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
KERN_FN uint64_t kern_ld_rlx_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
KERN_FN void kern_st_rlx_u64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
/* signal: release at system scope (covers this thread's earlier writes) */
KERN_FN void kern_add_rel_sys_u64(uint64_t *p, uint64_t v)
{
    __atomic_fetch_add(p, v, __ATOMIC_RELEASE);
}
KERN_FN void kern_add_rlx_sys_u64(uint64_t *p, uint64_t v)
{
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
KERN_FN uint64_t kern_add_rlx_dev_u64(uint64_t *p, uint64_t v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
KERN_FN uint32_t kern_ld_acq_u32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
KERN_FN uint32_t kern_ld_rlx_u32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
KERN_FN void kern_st_rel_u32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
KERN_FN void kern_st_rlx_u32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
KERN_FN uint32_t kern_add_acqrel_u32(uint32_t *p, uint32_t v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
}
KERN_FN int32_t kern_ld_acq_i32(const int32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
KERN_FN int32_t kern_ld_rlx_i32(const int32_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
KERN_FN int kern_cas_acqrel_i32(int32_t *p, int32_t expect, int32_t v)
{
    return __atomic_compare_exchange_n(p, &expect, v, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}
KERN_FN void kern_add_rel_i32(int32_t *p, int32_t v) { __atomic_fetch_add(p, v, __ATOMIC_RELEASE); }
KERN_FN void kern_fence_sys(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/*
 * LL packets are 8-byte units [data, flag] written and read whole. Release/acquire (free on
 * x86) also orders what a rank did before sending a packet with what the receiver does after
 * reading it, as C11 requires (GPUs rely on the same causality with volatile accesses).
 */
KERN_FN uint64_t kern_ld_pkt(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
KERN_FN void kern_st_pkt(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
KERN_FN void kern_ld_pkt2(const uint64_t *p, uint64_t *u0, uint64_t *u1)
{
    *u0 = kern_ld_pkt(p);
    *u1 = kern_ld_pkt(p + 1);
}
KERN_FN void kern_st_pkt2(uint64_t *p, uint64_t u0, uint64_t u1)
{
    kern_st_pkt(p, u0);
    kern_st_pkt(p + 1, u1);
}

KERN_FN uint64_t kern_clock_ns(uint32_t clock_khz)
{
    (void)clock_khz;
    return base_now_ns();
}

/* Host back-off: the library's one wait policy (base/wait.h), with the spin the executor chose
 * for this launch (kern_args_t.host_spin, from base_wait_spin). */
KERN_FN void kern_backoff(uint32_t n, uint32_t spin) { base_wait_step(n, spin); }
/* polls between two looks at the clock and the error flag */
#define KERN_CHECK_EVERY(spin, n) base_wait_check_due((n), (spin))

KERN_FN void kern_memcpy(void *d, const void *s, uint64_t n) { memmove(d, s, (size_t)n); }

/* ------------------------------------------------------------------------------------------ */
#else /* CUDA or HIP */

#include "base/wait_sched.h"

#define KERN_FN static __device__ inline
/* Large functions stay out of line: one copy each keeps compile time and code size sane. Not
 * __noinline__: HIP's host_defines.h defines it as nothing, and hipcc inlines every function
 * not marked noinline (-amdgpu-early-inline-all): with it the whole interpreter (every reduce
 * loop of every dtype and op) became one kernel body of 12 MB of LLVM IR, and gfx90a code
 * generation ran for tens of minutes. */
#define KERN_BIG_FN static __device__ __attribute__((noinline))
#define KERN_UNROLL _Pragma("unroll")
#define KERN_NOUNROLL _Pragma("unroll 1")
#define KERN_BLOCK_SYNC(h) __syncthreads()
#define KERN_RED_U 2
#define KERN_COPY_U 4
/* The error record, the proxy and the clock are looked at on the 64th poll of a wait and every
 * 1024th after it, never on the first: a wait that is about to succeed (most of them) pays no
 * extra round trip. A launch that already failed is seen within 64 polls of each wait. */
#define KERN_CHECK_EVERY(spin, n) (((n) & 1023) == 63)
#if defined(KERN_CUDA)
#define KERN_GRID_CONST __grid_constant__
#else
#define KERN_GRID_CONST /* HIP reads kernel arguments from the kernarg segment in place */
#endif

#if defined(KERN_CUDA)

KERN_FN uint64_t kern_ld_acq_u64(const uint64_t *p)
{
    unsigned long long v;
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
KERN_FN uint64_t kern_ld_rlx_u64(const uint64_t *p)
{
    unsigned long long v;
    asm volatile("ld.relaxed.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
KERN_FN void kern_st_rlx_u64(uint64_t *p, uint64_t v)
{
    asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(p), "l"((unsigned long long)v) : "memory");
}
KERN_FN void kern_add_rel_sys_u64(uint64_t *p, uint64_t v)
{
    asm volatile("red.release.sys.add.u64 [%0], %1;" ::"l"(p), "l"((unsigned long long)v)
                 : "memory");
}
KERN_FN void kern_add_rlx_sys_u64(uint64_t *p, uint64_t v)
{
    asm volatile("red.relaxed.sys.add.u64 [%0], %1;" ::"l"(p), "l"((unsigned long long)v)
                 : "memory");
}
KERN_FN uint64_t kern_add_rlx_dev_u64(uint64_t *p, uint64_t v)
{
    unsigned long long o;
    asm volatile("atom.add.relaxed.gpu.u64 %0, [%1], %2;"
                 : "=l"(o)
                 : "l"(p), "l"((unsigned long long)v)
                 : "memory");
    return o;
}
KERN_FN uint32_t kern_ld_acq_u32(const uint32_t *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
KERN_FN uint32_t kern_ld_rlx_u32(const uint32_t *p)
{
    unsigned v;
    asm volatile("ld.relaxed.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
KERN_FN void kern_st_rel_u32(uint32_t *p, uint32_t v)
{
    asm volatile("st.release.gpu.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
KERN_FN void kern_st_rlx_u32(uint32_t *p, uint32_t v)
{
    asm volatile("st.relaxed.gpu.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
KERN_FN uint32_t kern_add_acqrel_u32(uint32_t *p, uint32_t v)
{
    unsigned o;
    asm volatile("atom.add.acq_rel.gpu.u32 %0, [%1], %2;" : "=r"(o) : "l"(p), "r"(v) : "memory");
    return o;
}
KERN_FN int32_t kern_ld_acq_i32(const int32_t *p)
{
    int v;
    asm volatile("ld.acquire.gpu.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
KERN_FN int32_t kern_ld_rlx_i32(const int32_t *p)
{
    int v;
    asm volatile("ld.relaxed.gpu.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
KERN_FN int kern_cas_acqrel_i32(int32_t *p, int32_t expect, int32_t v)
{
    int o;
    asm volatile("atom.cas.acq_rel.gpu.b32 %0, [%1], %2, %3;"
                 : "=r"(o)
                 : "l"(p), "r"(expect), "r"(v)
                 : "memory");
    return o == expect;
}
KERN_FN void kern_add_rel_i32(int32_t *p, int32_t v)
{
    asm volatile("red.release.gpu.add.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
KERN_FN void kern_fence_sys(void) { __threadfence_system(); }
KERN_FN uint64_t kern_ld_pkt(const uint64_t *p)
{
    unsigned long long v;
    asm volatile("ld.volatile.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
KERN_FN void kern_st_pkt(uint64_t *p, uint64_t v)
{
    asm volatile("st.volatile.u64 [%0], %1;" ::"l"(p), "l"((unsigned long long)v) : "memory");
}
/* a vector access is single-copy atomic per element (PTX memory model): each 8-byte unit
 * [payload, flag] is read and written whole, as with two 8-byte accesses, in one instruction */
KERN_FN void kern_ld_pkt2(const uint64_t *p, uint64_t *u0, uint64_t *u1)
{
    unsigned long long a, b;
    asm volatile("ld.volatile.v2.u64 {%0,%1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
    *u0 = a;
    *u1 = b;
}
KERN_FN void kern_st_pkt2(uint64_t *p, uint64_t u0, uint64_t u1)
{
    asm volatile("st.volatile.v2.u64 [%0], {%1,%2};" ::"l"(p), "l"((unsigned long long)u0),
                 "l"((unsigned long long)u1)
                 : "memory");
}
KERN_FN uint64_t kern_clock_ns(uint32_t clock_khz)
{
    unsigned long long t;
    (void)clock_khz;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
/* The policy's shape (base/wait.h): spin `spin` polls (kern_args_t.dev_spin), then sleep
 * briefly, and longer after BASE_WAIT_DEV_LONG_FACTOR times as many. */
KERN_FN void kern_backoff(uint32_t n, uint32_t spin)
{
#if __CUDA_ARCH__ >= 700
    if (n > spin) __nanosleep(n > BASE_WAIT_DEV_LONG_FACTOR * spin ? 1000 : 100);
#else
    (void)n;
    (void)spin;
#endif
}

#else /* HIP */

#define KERN_HIP_SYS __HIP_MEMORY_SCOPE_SYSTEM
#define KERN_HIP_DEV __HIP_MEMORY_SCOPE_AGENT
KERN_FN uint64_t kern_ld_acq_u64(const uint64_t *p)
{
    return __hip_atomic_load(p, __ATOMIC_ACQUIRE, KERN_HIP_SYS);
}
KERN_FN uint64_t kern_ld_rlx_u64(const uint64_t *p)
{
    return __hip_atomic_load(p, __ATOMIC_RELAXED, KERN_HIP_SYS);
}
KERN_FN void kern_st_rlx_u64(uint64_t *p, uint64_t v)
{
    __hip_atomic_store(p, v, __ATOMIC_RELAXED, KERN_HIP_SYS);
}
KERN_FN void kern_add_rel_sys_u64(uint64_t *p, uint64_t v)
{
    (void)__hip_atomic_fetch_add(p, v, __ATOMIC_RELEASE, KERN_HIP_SYS);
}
KERN_FN void kern_add_rlx_sys_u64(uint64_t *p, uint64_t v)
{
    (void)__hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, KERN_HIP_SYS);
}
KERN_FN uint64_t kern_add_rlx_dev_u64(uint64_t *p, uint64_t v)
{
    return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, KERN_HIP_DEV);
}
KERN_FN uint32_t kern_ld_acq_u32(const uint32_t *p)
{
    return __hip_atomic_load(p, __ATOMIC_ACQUIRE, KERN_HIP_DEV);
}
KERN_FN uint32_t kern_ld_rlx_u32(const uint32_t *p)
{
    return __hip_atomic_load(p, __ATOMIC_RELAXED, KERN_HIP_DEV);
}
KERN_FN void kern_st_rel_u32(uint32_t *p, uint32_t v)
{
    __hip_atomic_store(p, v, __ATOMIC_RELEASE, KERN_HIP_DEV);
}
KERN_FN void kern_st_rlx_u32(uint32_t *p, uint32_t v)
{
    __hip_atomic_store(p, v, __ATOMIC_RELAXED, KERN_HIP_DEV);
}
KERN_FN uint32_t kern_add_acqrel_u32(uint32_t *p, uint32_t v)
{
    return __hip_atomic_fetch_add(p, v, __ATOMIC_ACQ_REL, KERN_HIP_DEV);
}
KERN_FN int32_t kern_ld_acq_i32(const int32_t *p)
{
    return __hip_atomic_load(p, __ATOMIC_ACQUIRE, KERN_HIP_DEV);
}
KERN_FN int32_t kern_ld_rlx_i32(const int32_t *p)
{
    return __hip_atomic_load(p, __ATOMIC_RELAXED, KERN_HIP_DEV);
}
KERN_FN int kern_cas_acqrel_i32(int32_t *p, int32_t expect, int32_t v)
{
    return __hip_atomic_compare_exchange_strong(p, &expect, v, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE,
                                                KERN_HIP_DEV);
}
KERN_FN void kern_add_rel_i32(int32_t *p, int32_t v)
{
    (void)__hip_atomic_fetch_add(p, v, __ATOMIC_RELEASE, KERN_HIP_DEV);
}
KERN_FN void kern_fence_sys(void) { __threadfence_system(); }
KERN_FN uint64_t kern_ld_pkt(const uint64_t *p)
{
    return __hip_atomic_load(p, __ATOMIC_RELAXED, KERN_HIP_SYS);
}
KERN_FN void kern_st_pkt(uint64_t *p, uint64_t v)
{
    __hip_atomic_store(p, v, __ATOMIC_RELAXED, KERN_HIP_SYS);
}
KERN_FN void kern_ld_pkt2(const uint64_t *p, uint64_t *u0, uint64_t *u1)
{
    *u0 = kern_ld_pkt(p);
    *u1 = kern_ld_pkt(p + 1);
}
KERN_FN void kern_st_pkt2(uint64_t *p, uint64_t u0, uint64_t u1)
{
    kern_st_pkt(p, u0);
    kern_st_pkt(p + 1, u1);
}
/* s_memrealtime (wall_clock64) ticks at a constant rate (hipDeviceAttributeWallClockRate, kHz); 100 MHz on
 * MI200/MI300 when the HAL does not say. */
KERN_FN uint64_t kern_clock_ns(uint32_t clock_khz)
{
#if defined(__HIP_DEVICE_COMPILE__)
    uint64_t t = (uint64_t)__builtin_amdgcn_s_memrealtime();
#else
    uint64_t t = 0; /* host pass of hipcc: never runs */
#endif
    uint32_t khz = clock_khz ? clock_khz : 100000u;
    return t * 1000000ull / khz;
}
/* The policy's shape, as on CUDA (s_sleep counts units of 64 clocks). */
KERN_FN void kern_backoff(uint32_t n, uint32_t spin)
{
    if (n > BASE_WAIT_DEV_LONG_FACTOR * spin)
        __builtin_amdgcn_s_sleep(127);
    else if (n > spin)
        __builtin_amdgcn_s_sleep(8);
}

#endif /* CUDA / HIP */

KERN_FN void kern_memcpy(void *d, const void *s, uint64_t n)
{
    char *dd = (char *)d;
    const char *ss = (const char *)s;
    for (uint64_t i = 0; i < n; i++) dd[i] = ss[i];
}

#endif /* KERN_HOST */

#endif /* MSCCLPP_KERN_PORT_H */
