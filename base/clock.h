/*
 * The one clock of the library: CLOCK_MONOTONIC in nanoseconds, for deadlines and timings
 * (never for wall-clock stamps, which base/log.c takes from CLOCK_REALTIME). Inline so that
 * host-compiled kernels and loadable modules use it without linking anything.
 */
#ifndef MSCCLPP_BASE_CLOCK_H
#define MSCCLPP_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline uint64_t base_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_BASE_CLOCK_H */
