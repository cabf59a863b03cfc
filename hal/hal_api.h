/* Internal view of the public memory/stream wrappers (hal/hal_api.c). */
#ifndef MSCCLPP_HAL_API_H
#define MSCCLPP_HAL_API_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "hal/hal.h"

/**
 * A public stream: the HAL stream of the backend that created it, and the error sources
 * (executors) that launched work on it since its last synchronize, so that synchronize can ask
 * them whether that work failed (a device kernel reports its errors in memory, not through the
 * stream).
 */
struct mscclpp_stream {
    const hal_ops_t *ops;
    hal_stream_t hal;
    int borrowed; /* mscclpp_stream_wrap: the native stream belongs to the caller */
    pthread_mutex_t lock; /* guards the watch list */
    uint64_t *watch;      /* source ids, each once */
    int n_watch, cap_watch;
    uint64_t *captured; /* sources that queued work into the capture in progress, each once:
                           * a graph of it asks them after each replay's sync */
    int n_captured, cap_captured;
    hal_event_t mark;     /* recorded here for mscclpp_stream_wait_stream (lazily made) */
};

/**
 * How many times the application has freed library memory (mscclpp_free) so far: while it
 * stays, every mscclpp_malloc'd buffer seen earlier is still the allocation it was (an address
 * is reused only after a free). Memory the application allocated itself is not counted.
 */
uint64_t hal_api_alloc_gen(void);

/** The HAL stream behind a public stream (NULL for a NULL stream: synchronous). */
static inline hal_stream_t hal_api_stream(mscclpp_stream_t stream)
{
    return stream ? stream->hal : NULL;
}

/**
 * An error source's check: return MSCCLPP_OK, or the error its work on streams recorded
 * (with the message set for mscclpp_last_error()). Must not block on the device.
 */
typedef mscclpp_result_t (*hal_api_check_fn)(void *arg);

/**
 * Register an error source (the HAL never sees what it is: an executor registers itself).
 * Sets *id (never 0). The check runs under a process-wide lock, so once
 * hal_api_source_remove(id) returned it never runs again and `arg` may be freed.
 */
mscclpp_result_t hal_api_source_add(hal_api_check_fn check, void *arg, uint64_t *id);
void hal_api_source_remove(uint64_t id);

/**
 * Before a source goes away with work still queued on streams (an executor destroyed before
 * its streams were synchronised): synchronise every live stream that source `id` launched on,
 * run its check (the error that work recorded is returned, not lost) and forget it on those
 * streams, so that no later synchronize asks for it. Each sync is as bounded as the work on
 * the stream (every wait of the interpreter is bounded by MSCCLPP_TIMEOUT).
 */
mscclpp_result_t hal_api_source_drain(uint64_t id);

/**
 * Whether a stream that source `id` launched on since its last synchronize is being captured
 * now (hal_api_source_drain cannot wait for such a stream: it would invalidate the capture).
 */
bool hal_api_source_capturing(uint64_t id);

/**
 * Note that source `id` is about to launch work on `stream` (nothing for a NULL stream):
 * mscclpp_stream_synchronize and mscclpp_stream_destroy then run its check after the sync.
 */
mscclpp_result_t hal_api_stream_note(mscclpp_stream_t stream, uint64_t id);

/**
 * Note that source `id` queues work into the capture in progress on `stream`: the graph that
 * capture makes notes it on every stream it is launched on (mscclpp_graph_launch).
 */
mscclpp_result_t hal_api_stream_note_capture(mscclpp_stream_t stream, uint64_t id);


#endif /* MSCCLPP_HAL_API_H */
