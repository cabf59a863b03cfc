/*
 * The proxy: a host thread that drains a FIFO of 16-byte triggers (kernels/common/kern_args.h,
 * kern_fifo_t) pushed by the plan interpreter, in order, into a handler (transport calls), and
 * drives transport progress while the FIFO is empty. The FIFO lives in host-mapped memory
 * (hal host_alloc) so a GPU kernel can push into it; its head counter in device memory.
 *
 * While the FIFO is empty the thread drives progress and backs off by the one wait policy of
 * the library (base/wait.h: spin, yield, then short sleeps with a fine timer slack); a sleep
 * ends early when a transport's event descriptor (proxy_arm_fn) becomes readable.
 *
 * Errors: the first failing trigger (or progress call) is recorded, with its message, and
 * published in the FIFO's `err` word, which every port wait of the interpreter polls; later
 * triggers are consumed without being executed, so no pusher blocks on a full FIFO.
 */
#ifndef MSCCLPP_CORE_PROXY_H
#define MSCCLPP_CORE_PROXY_H

#include <poll.h>
#include <stdint.h>

#include "hal/hal.h"
#include "kernels/common/kern_args.h"
#include "mscclpp/mscclpp.h"

typedef struct proxy proxy_t;

/** Name of every proxy thread (pthread_setname_np; 15 characters at most). */
#define PROXY_THREAD_NAME "mscclpp-proxy"

/** Executes one trigger; returns an error (with mscclpp_last_error() set) to stop the proxy. */
typedef mscclpp_result_t (*proxy_handler_fn)(void *arg, uint64_t fst, uint64_t snd);
/** Drives progress when the FIFO is idle; an error is recorded like a trigger's. */
typedef mscclpp_result_t (*proxy_progress_fn)(void *arg);

/**
 * Optional: before the idle proxy sleeps, arm the transports' event descriptors and fill up to
 * `cap` of them into `fds` (`*n` of them; 0: none, sleep plainly; -1: work came in meanwhile,
 * progress again instead of sleeping). The proxy then sleeps in ppoll for the wait policy's
 * time, woken early by any of them (an inbound put over the network).
 */
typedef mscclpp_result_t (*proxy_arm_fn)(void *arg, struct pollfd *fds, int cap, int *n);

/**
 * Allocate a FIFO of `slots` triggers (rounded up to a power of two) and its head counter on
 * `hal`, and start the thread (`arm` may be NULL). `spin`: polls before the idle proxy yields,
 * from base_wait_spin() with every thread of the node that polls beside it. `name` appears in
 * error messages ("rank 3").
 */
mscclpp_result_t proxy_create(const hal_ops_t *hal, uint32_t slots, uint32_t spin,
                              proxy_handler_fn handler, proxy_progress_fn progress,
                              proxy_arm_fn arm, void *arg, const char *name, proxy_t **out);
kern_fifo_t *proxy_fifo(proxy_t *p);
uint64_t *proxy_head(proxy_t *p);
/** MSCCLPP_OK, or the proxy's first error re-recorded for the calling thread. */
mscclpp_result_t proxy_error(proxy_t *p);
/**
 * Wait (bounded by MSCCLPP_TIMEOUT) until the proxy has handled every trigger pushed before
 * the call, then return proxy_error(): after a launch has finished, a failure of one of its
 * trailing operations (a put with no flush) is known. Safe on NULL.
 */
mscclpp_result_t proxy_drain(proxy_t *p);

/**
 * Whether the proxy is inside one handler call (a transport call) that began at least
 * `min_ns` ago: then true, with how long (*for_ns), the trigger it handles (*fst, *snd) and
 * how many more valid triggers wait in the FIFO behind it (*behind). For the message of a
 * launch that timed out while its proxy never failed: a proxy stuck in a call looks, from the
 * peers, exactly like a put that was never made.
 */
bool proxy_busy(proxy_t *p, uint64_t min_ns, uint64_t *for_ns, uint64_t *fst, uint64_t *snd,
                uint64_t *behind);
/** Stop the thread (after it consumed what was pushed) and free the FIFO. Safe on NULL. */
void proxy_destroy(proxy_t *p);

#endif
