/* The spin budget of host waits (hal/host/host_wait.h), read once. */
#include <stdatomic.h>

#include "base/config.h"
#include "hal/host/host_wait.h"

uint32_t host_spin_polls(void)
{
    static _Atomic int64_t cached = -1;
    int64_t v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        v = config_get_int(CFG_MSCCLPP_HOST_SPIN);
        if (v < 0) v = 0;
        if (v > 100000000) v = 100000000;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return (uint32_t)v;
}
