/*
 * Back-off for host waits: spin MSCCLPP_HOST_SPIN polls (cpu pause), then sched_yield a while,
 * then short nanosleeps that grow to HOST_WAIT_SLEEP_MAX_NS. Many ranks x blocks share few
 * cores, so a waiter must give its core away soon; the spin phase keeps small-message latency
 * low when the peer is running. Shared by the host backend and the host-compiled interpreter.
 *
 *     host_wait_t w;
 *     host_wait_init(&w, config_timeout_ns());
 *     while (atomic_load_explicit(flag, memory_order_acquire) < want)
 *         if (!host_wait_pause(&w)) return ERR(MSCCLPP_ERR_TIMEOUT, "... waited on ...");
 */
#ifndef MSCCLPP_HAL_HOST_WAIT_H
#define MSCCLPP_HAL_HOST_WAIT_H

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HOST_WAIT_YIELDS 64              /* sched_yield calls after the spin phase */
#define HOST_WAIT_SLEEP_MIN_NS 1000u     /* first nanosleep */
#define HOST_WAIT_SLEEP_MAX_NS 50000u    /* longest nanosleep (wake-up latency bound) */

/** State of one wait; initialize with host_wait_init for every new wait. */
typedef struct {
    uint32_t polls;       /* pauses so far */
    uint32_t spin;        /* polls spent spinning */
    uint32_t sleep_ns;    /* next nanosleep */
    uint64_t deadline_ns; /* CLOCK_MONOTONIC; 0: no deadline */
} host_wait_t;

/** MSCCLPP_HOST_SPIN, read once per process (hal/host/host_wait.c). */
uint32_t host_spin_polls(void);

/** CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t host_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/** One polite busy-wait step (pause on x86, yield on arm). */
static inline void host_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

/** Start a wait that may last `timeout_ns` (0: unbounded), spinning `spin` polls first. */
static inline void host_wait_init_spin(host_wait_t *w, uint64_t timeout_ns, uint32_t spin)
{
    w->polls = 0;
    w->spin = spin;
    w->sleep_ns = HOST_WAIT_SLEEP_MIN_NS;
    w->deadline_ns = timeout_ns ? host_now_ns() + timeout_ns : 0;
}

/** Start a wait that may last `timeout_ns` (0: unbounded), spinning MSCCLPP_HOST_SPIN polls. */
static inline void host_wait_init(host_wait_t *w, uint64_t timeout_ns)
{
    host_wait_init_spin(w, timeout_ns, host_spin_polls());
}

/** True once the wait has passed its spin and yield phases (a caller may block instead). */
static inline bool host_wait_idle(const host_wait_t *w)
{
    return w->polls >= w->spin + HOST_WAIT_YIELDS;
}

/**
 * Back off one step. Returns false when the deadline has passed (checked every 128 polls while
 * spinning, at every step after), true otherwise.
 */
static inline bool host_wait_pause(host_wait_t *w)
{
    uint32_t n = w->polls++;
    if (n < w->spin) {
        host_cpu_relax();
        if ((n & 127u) != 127u) return true;
    } else if (n < w->spin + HOST_WAIT_YIELDS) {
        sched_yield();
    } else {
        struct timespec ts = {0, (long)w->sleep_ns};
        nanosleep(&ts, NULL);
        if (w->sleep_ns < HOST_WAIT_SLEEP_MAX_NS) {
            w->sleep_ns *= 2;
            if (w->sleep_ns > HOST_WAIT_SLEEP_MAX_NS) w->sleep_ns = HOST_WAIT_SLEEP_MAX_NS;
        }
    }
    if (w->polls == 0) w->polls = UINT32_MAX; /* saturate instead of wrapping back to spinning */
    return w->deadline_ns == 0 || host_now_ns() < w->deadline_ns;
}

/**
 * Sleep while *addr == expected, at most timeout_ns (0: no limit). `shared`: the word lives in
 * memory mapped by several processes. Returns 0, or -1 with errno (EAGAIN: value differed,
 * ETIMEDOUT, EINTR). Wake with host_futex_wake after changing *addr.
 */
static inline int host_futex_wait(const uint32_t *addr, uint32_t expected, uint64_t timeout_ns,
                                  bool shared)
{
    struct timespec ts, *tsp = NULL;
    if (timeout_ns) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
        ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
        tsp = &ts;
    }
    return (int)syscall(SYS_futex, addr, shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, expected, tsp,
                        NULL, 0);
}

/** Wake up to `n` waiters of addr (INT_MAX: all). */
static inline void host_futex_wake(const uint32_t *addr, int n, bool shared)
{
    syscall(SYS_futex, addr, shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_HAL_HOST_WAIT_H */
