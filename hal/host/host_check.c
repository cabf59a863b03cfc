/*
 * MSCCLPP_HAL_SYNC_CHECK: the host backend as a witness of a deadlock only a GPU shows.
 *
 * A plan's kernel waits for its proxy thread (port channels: the proxy makes the puts the
 * peers wait for). On CUDA and HIP, some calls wait for the device, so a proxy that makes one
 * while the kernel runs waits for that kernel, which waits for the proxy: a hang until the
 * kernel's MSCCLPP_TIMEOUT. On the host backend the same calls return at once, so the bug
 * passes CI. With MSCCLPP_HAL_SYNC_CHECK=1, a call of the list below made by a thread marked
 * with hal_thread_serves_launches (every proxy) while a launch of this process runs fails with
 * MSCCLPP_ERR_INTERNAL, logs a warning naming the call and why a GPU would block there, and is
 * counted (host_check_refused). What is refused, with the CUDA behaviour it stands for:
 *
 *   mem_alloc, mem_alloc_shareable, host_alloc   device and page-locked allocations: in the
 *                                                CUDA guide's "implicit synchronization" list
 *   mem_free, host_free                          cudaFree / cudaFreeHost wait for the device
 *   memcpy_sync, memset_sync                     run on the legacy NULL stream (a device
 *                                                memory set is in the list too)
 *   any op on the NULL stream                    "any CUDA command to the NULL stream"
 *   memcpy_async of pageable memory              "API synchronization behavior": a copy between
 *                                                device and pageable host memory may be
 *                                                synchronous, and the driver may first stage it
 *                                                and synchronize; host to host is synchronous
 *   mem_import, mem_unimport                     mapping and unmapping a peer's memory
 *
 * Pageable here: memory the registry of host_mem.c does not know (not from mem_alloc*,
 * host_alloc, an import, or an adopted shared mapping): malloc'd or stack memory.
 *
 * Off by default, and cheap when on: a thread-local flag is read first, then a count of the
 * launches running; the variable is read only for a marked thread while a launch runs.
 */
#include <stdatomic.h>
#include <stdio.h>

#include "base/config.h"
#include "base/debug.h"
#include "hal/host/host.h"

static _Thread_local bool serves_launches; /* hal_thread_serves_launches (hal.h) */
static _Atomic int running;       /* launches of this process running now (pool_run) */
static _Atomic uint64_t refused;  /* calls refused so far */

void hal_thread_serves_launches(bool on) { serves_launches = on; }
bool hal_thread_serving_launches(void) { return serves_launches; }

void host_check_launch(int delta) { atomic_fetch_add(&running, delta); }

uint64_t host_check_refused(void) { return atomic_load(&refused); }

/* Would `op` be refused now (before looking at its arguments)? */
static bool armed(void)
{
    return hal_thread_serving_launches() && atomic_load(&running) > 0 &&
           config_get_int(CFG_MSCCLPP_HAL_SYNC_CHECK) > 0;
}

static mscclpp_result_t refuse(const char *op, const char *why)
{
    atomic_fetch_add(&refused, 1);
    WARN(SUBSYS_HAL, "MSCCLPP_HAL_SYNC_CHECK: %s by a proxy thread while a launch runs (%s): on a "
         "GPU this call can wait for the running kernel, which waits for this proxy", op, why);
    return ERR(MSCCLPP_ERR_INTERNAL, "host backend, MSCCLPP_HAL_SYNC_CHECK: %s made by a proxy "
               "thread while a launch runs (%s); on CUDA/HIP it can wait for the running "
               "kernel, which waits for this proxy: make it at context setup, before the launch, "
               "or copy between device and pinned (host_alloc) memory on a stream of one's own",
               op, why);
}

mscclpp_result_t host_check_call(const char *op, const char *why)
{
    return armed() ? refuse(op, why) : MSCCLPP_OK;
}

mscclpp_result_t host_check_stream(const char *op, hal_stream_t s)
{
    if (s || !armed()) return MSCCLPP_OK;
    return refuse(op, "the NULL stream: on CUDA the legacy default stream, which waits for the "
                      "kernel's stream");
}

mscclpp_result_t host_check_copy(const char *op, const void *dst, const void *src,
                                 hal_stream_t s)
{
    if (!armed()) return MSCCLPP_OK;
    CHECK(host_check_stream(op, s));
    bool dst_known = host_reg_known(dst), src_known = !src || host_reg_known(src);
    if (dst_known && src_known) return MSCCLPP_OK;
    char why[160];
    snprintf(why, sizeof why, "its %s %p is pageable memory (malloc'd or on a stack), which CUDA "
             "may copy synchronously", !src_known ? "source" : "destination",
             !src_known ? src : (const void *)dst);
    return refuse(op, why);
}
