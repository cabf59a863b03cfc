/* Internals shared by the files of the host backend (hal/host). */
#ifndef MSCCLPP_HAL_HOST_H
#define MSCCLPP_HAL_HOST_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "hal/fd_broker.h"
#include "hal/hal.h"

#define HOST_COOKIE_BYTES HAL_FDB_SECRET_BYTES /* the broker secret of an export */

/* host_mem.c: memfd allocations and the registry of every mapping (own and imported) */
mscclpp_result_t host_mem_alloc(size_t bytes, void **ptr);
mscclpp_result_t host_mem_alloc_shareable(size_t bytes, void **ptr);
mscclpp_result_t host_mem_free(void *ptr);
mscclpp_result_t host_host_alloc(size_t bytes, void **ptr);
mscclpp_result_t host_host_free(void *ptr);
mscclpp_result_t host_mem_range(const void *ptr, void **base, size_t *size);
/* Also adopts the application's shared file mappings (host_mem.c, "Foreign memory"). */
/* The host backend's own table; hal_host_ops (hal/hal.c) hands it out, or the counting table
 * around it (hal_count_enable). */
const hal_ops_t *host_ops_table(void);
mscclpp_result_t host_mem_info(const void *ptr, hal_mem_info_t *info);
mscclpp_result_t host_memcpy_sync(void *dst, const void *src, size_t bytes);
mscclpp_result_t host_memset_sync(void *dst, int value, size_t bytes);
size_t host_page_size(void);
size_t host_round_pages(size_t bytes);

/* An own allocation as the fd broker serves it (a dup of its memfd) and its handle names it. */
typedef struct {
    uint64_t id;             /* registry id: tells a free and reallocation in between apart */
    uint64_t size;           /* bytes asked for */
    hal_fdb_ticket_t ticket; /* its pid is the exporting process: a forked child re-serves */
} host_export_t;
/* Export state of the allocation at `base` (shareable only): if this process serves it already,
 * its export in *ex and *memfd = -1; else *ex without a ticket and its memfd for the caller to
 * serve borrowed (hal_fdb_serve_borrowed: the registry closes it at mem_free, after the
 * withdraw). */
mscclpp_result_t host_reg_export(void *base, host_export_t *ex, int *memfd);
/* Record that `base` is served under ex->ticket. If another thread recorded an export first,
 * *ex becomes that one and *superseded true: the caller withdraws its own ticket. */
mscclpp_result_t host_reg_set_export(void *base, host_export_t *ex, bool *superseded);
/* Import of one of this process's own exports: the original base, refcounted. */
mscclpp_result_t host_reg_self_import(uint64_t key, const uint8_t cookie[HOST_COOKIE_BYTES],
                                      void **base);
/* An earlier import of the same remote allocation (refcount taken), else false. */
bool host_reg_find_import(pid_t pid, uint64_t key, const uint8_t cookie[HOST_COOKIE_BYTES],
                          void **base);
/* Register a mapping made by mem_import (refcount 1). */
mscclpp_result_t host_reg_add_import(void *base, size_t size, size_t map_len, pid_t pid,
                                     uint64_t key, const uint8_t cookie[HOST_COOKIE_BYTES]);
mscclpp_result_t host_mem_unimport(void *base);

/* host_share.c: export/import through the fd broker (hal/fd_broker.c) */
mscclpp_result_t host_mem_export(void *base, hal_mem_handle_t *handle);
mscclpp_result_t host_mem_import(const hal_mem_handle_t *handle, void **base);

/* host_stream.c: streams, events, launch */
mscclpp_result_t host_memcpy_async(void *dst, const void *src, size_t bytes, hal_stream_t s);
mscclpp_result_t host_memset_async(void *dst, int value, size_t bytes, hal_stream_t s);
mscclpp_result_t host_stream_create(hal_stream_t *s);
mscclpp_result_t host_stream_destroy(hal_stream_t s);
mscclpp_result_t host_stream_sync(hal_stream_t s);
mscclpp_result_t host_stream_capturing(hal_stream_t s, bool *capturing);
mscclpp_result_t host_stream_begin_capture(hal_stream_t s);
mscclpp_result_t host_stream_end_capture(hal_stream_t s, hal_graph_t *graph);
mscclpp_result_t host_graph_launch(hal_graph_t graph, hal_stream_t s);
mscclpp_result_t host_graph_destroy(hal_graph_t graph);
mscclpp_result_t host_event_create(hal_event_t *e);
mscclpp_result_t host_event_destroy(hal_event_t e);
mscclpp_result_t host_event_record(hal_event_t e, hal_stream_t s);
mscclpp_result_t host_event_sync(hal_event_t e);
mscclpp_result_t host_event_elapsed_ms(hal_event_t start, hal_event_t end, float *ms);
mscclpp_result_t host_launch(const void *args, size_t args_bytes, int nblocks, int nthreads,
                             hal_stream_t s);
mscclpp_result_t host_launch_host_func(hal_host_fn_t fn, void *arg, hal_stream_t s);
mscclpp_result_t host_launch_scale(const void *args, size_t args_bytes, hal_stream_t s);
mscclpp_result_t host_stream_wait_event(hal_stream_t s, hal_event_t e);

/* What a launch runs per block; kern_host_run_block unless a test replaces it. */
typedef void (*host_block_fn_t)(const void *args, int block, int nblocks);
/** Replace the block function (tests); NULL restores kern_host_run_block. Returns the old one. */
host_block_fn_t host_set_block_fn(host_block_fn_t fn);
/** Threads in the block pool of `s` (NULL: the pool of synchronous launches). */
int host_stream_pool_threads(hal_stream_t s);
/** Threads ever created for block pools in this process (tests check reuse). */
uint64_t host_pool_threads_created(void);
/** Tasks a stream holds at most (queued + running); a full queue makes the enqueuer wait. */
#define HOST_STREAM_DEPTH 1024
/** Most tasks `s` ever held at once, and tasks it keeps allocated now (tests check bounds). */
void host_stream_depth_stats(hal_stream_t s, uint64_t *max_depth, uint64_t *allocated);
/** Times the worker of `s` woke threads waiting in a sync (tests: once per sync that waited). */
uint64_t host_stream_sync_wakes(hal_stream_t s);
/** Times the worker of `s` woke a thread waiting for space in a full queue (tests: once per
 * batch of HOST_STREAM_DEPTH / 4 finished tasks, not once per task). */
uint64_t host_stream_space_wakes(hal_stream_t s);

/* host_check.c: MSCCLPP_HAL_SYNC_CHECK (calls a GPU could make wait for a running launch) */
/** A launch of this process starts running (+1) or ends (-1). */
void host_check_launch(int delta);
/** OK, or (the check on, a proxy thread, a launch running) a loud refusal of `op`, saying `why`
 * a GPU could block there. */
mscclpp_result_t host_check_call(const char *op, const char *why);
/** host_check_call for an op given stream `s`: refused only on the NULL stream. */
mscclpp_result_t host_check_stream(const char *op, hal_stream_t s);
/** host_check_stream, and refused too when `dst` or `src` (NULL: none) is pageable memory. */
mscclpp_result_t host_check_copy(const char *op, const void *dst, const void *src,
                                 hal_stream_t s);
/** Calls refused so far in this process (tests). */
uint64_t host_check_refused(void);
/** Whether `p` lies in memory the registry knows (own allocations, imports, adopted mappings):
 * what CUDA would know as device or pinned memory; anything else counts as pageable. */
bool host_reg_known(const void *p);

/* Create a thread with every signal blocked (signals belong to the application's threads). */
int host_thread_create(pthread_t *th, void *(*fn)(void *), void *arg);

#endif /* MSCCLPP_HAL_HOST_H */
