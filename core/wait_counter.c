/* Bounded host-side waits on a semaphore counter, with the one wait policy of base/wait.h. */
#include "base/config.h"
#include "base/debug.h"
#include "base/wait.h"
#include "core/core.h"

mscclpp_result_t core_wait_counter(const uint64_t *counter, uint64_t target, bool relaxed,
                                   const char *what)
{
    int order = relaxed ? __ATOMIC_RELAXED : __ATOMIC_ACQUIRE;
    if (__atomic_load_n(counter, order) >= target) return MSCCLPP_OK;
    uint64_t limit = config_timeout_ns();
    base_wait_t w;
    base_wait_init(&w, limit, base_wait_spin(0));
    while (__atomic_load_n(counter, order) < target) {
        if (base_wait_pause(&w)) continue;
        if (__atomic_load_n(counter, order) >= target) break; /* arrived while we slept */
        return ERR(MSCCLPP_ERR_TIMEOUT, "%s: timed out after %.1f s (counter %llu, want %llu)",
                   what, (double)limit / 1e9,
                   (unsigned long long)__atomic_load_n(counter, __ATOMIC_RELAXED),
                   (unsigned long long)target);
    }
    return MSCCLPP_OK;
}
