/*
 * Host backend waits: the names the host backend uses for the one wait policy of base/wait.h
 * (spin, then yield, then short sleeps), plus futex sleeps for waits that may last long.
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
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/wait.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef base_wait_t host_wait_t;

/** Spin budget of host backend waits whose caller cannot count the pollers (base_wait_spin). */
static inline uint32_t host_spin_polls(void) { return base_wait_spin(0); }

static inline uint64_t host_now_ns(void) { return base_now_ns(); }
static inline void host_cpu_relax(void) { base_cpu_relax(); }

/** Start a wait that may last `timeout_ns` (0: unbounded), spinning `spin` polls first. */
static inline void host_wait_init_spin(host_wait_t *w, uint64_t timeout_ns, uint32_t spin)
{
    base_wait_init(w, timeout_ns, spin);
}

/** Start a wait that may last `timeout_ns` (0: unbounded), spinning the default budget. */
static inline void host_wait_init(host_wait_t *w, uint64_t timeout_ns)
{
    base_wait_init(w, timeout_ns, host_spin_polls());
}

static inline bool host_wait_idle(const host_wait_t *w) { return base_wait_idle(w); }
static inline bool host_wait_pause(host_wait_t *w) { return base_wait_pause(w); }

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
