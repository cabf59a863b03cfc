/*
 * The executor's objects, shared by the files that each do one of its jobs:
 *
 *   executor/executor.c  the public calls: execute, collectives, create/destroy, plan lookup
 *   executor/context.c   contexts: creation (scratch, device state, channels, the setup
 *                        exchange with the peers), per-call buffer binding, the lowered-plan
 *                        cache, teardown
 *   executor/state.c     whether the executor is broken: launch errors decoded from the device
 *                        state or a mailbox, proxy errors, the stream-sync check
 *
 * and, below them, executor/layout.c (chunk and scratch geometry) and executor/lower.c (plan ops
 * -> interpreter program), which know nothing of these objects.
 *
 * A context holds what a plan needs for one pair of buffers: scratch, the counters of its
 * memory channels paired with the peers' (plan-format §5.2), the peers' buffers it uses (§5.4),
 * the members of its switch channels (§5.5) and the device state (flag, semaphores, barriers,
 * error record) that persists across launches. Building one is collective: every rank of the
 * plan builds the same contexts in the same order.
 */
#ifndef MSCCLPP_EXECUTOR_EXECUTOR_H
#define MSCCLPP_EXECUTOR_EXECUTOR_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "executor/exec_port.h"
#include "executor/lower.h"
#include "executor/plan.h"
#include "executor/registry.h"
#include "executor/select.h"
#include "executor/tuning.h"

/* A cached plan choice for one call shape (select.c). */
#define EXEC_SELECT_CACHE 16
typedef struct {
    bool valid, inplace;
    uint64_t gen; /* the registry's generation when chosen: a registration invalidates */
    size_t in_bytes, out_bytes;
    mscclpp_dtype_t dtype;
    int root;
    char collective[24];
    exec_choice_t choice;
} exec_select_slot_t;

/* One lowered plan of a context, for one call shape, with its device copy. */
typedef struct exec_lowcache {
    struct exec_lowcache *next;
    size_t in_bytes, out_bytes;
    mscclpp_dtype_t dtype;
    mscclpp_redop_t op;
    mscclpp_packet_t packet;
    exec_lowered_t *low;
    void *dev_blob; /* device copy of low->blob */
    bool captured;  /* a graph launches it: kept, unchanged, until the executor goes */
} exec_lowcache_t;

/* What identifies a call for the launch fence; compared with memcmp (zero-initialised). */
typedef struct {
    uint64_t context_seq;
    uint64_t in_bytes, out_bytes;
    int32_t dtype, op, packet, pad;
} exec_call_key_t;

typedef struct exec_context {
    struct exec_context *next;
    const struct mscclpp_plan *plan;
    void *send_base, *recv_base; /* key: the allocations holding the buffers */
    uint64_t send_id, recv_id;   /* and which ones (hal_api_alloc_id; 0: not mscclpp_malloc's) */
    int rotation;
    int vrank;
    uint32_t seq;               /* the executor's context_seq when it was built: unique */
    size_t in_alloc, out_alloc; /* sizes of those allocations */
    bool broken;                /* a launch failed: state undefined, rebuild before reuse */
    bool captured;              /* a graph launches with it: freed only with the executor */
    bool io_offsets;            /* some rank addresses a peer's input/output: exchange the
                                 * in-allocation offsets of every call */
    bool resolved;              /* rbufs/members hold pointers for peer_off */
    void **peer_ptr[3];         /* per virtual rank: input/output allocation base, scratch */
    uint64_t *peer_off[2];      /* per virtual rank: offsets of the current call's buffers */

    void *scratch;
    uint64_t scratch_bytes;
    uint64_t scratch_half; /* double-scratch plans: upper half's offset, the same on all ranks */
    void *state;
    size_t state_bytes;
    uint64_t *inbound;  /* n_mem 64-byte slots, shareable */
    uint64_t *expected; /* n_mem counters, device memory */
    uint64_t *dummy;    /* target of signals on channels the peer does not pair */
    exec_memchan_t *chans;
    void **rbufs;
    exec_switch_t *switches;
    void **members;
    void **mappings; /* peer mappings to release */
    int n_mappings;
    exec_lowcache_t *lowered;
    kern_error_t *mailbox; /* host-mapped copy of the interpreter's first error (kern_args.h) */
    exec_port_t *port; /* port channels and their proxy (executor/exec_port.c), or NULL */
} exec_context_t;

struct mscclpp_executor {
    mscclpp_comm_t *comm;
    const hal_ops_t *hal;
    exec_registry_t registry;
    exec_context_t *contexts;
    exec_context_t *dead; /* setups that failed after talking: peers may still map their
                           * memory, so it is released only with the executor */
    uint32_t context_seq;
    void *tmp;        /* staging input for in-place calls served by out-of-place plans */
    size_t tmp_bytes;
    /* mscclpp_alltoallv's staging pair (alltoallv.c), kept (exec_keep) until the executor goes */
    void *a2av_in, *a2av_out;
    size_t a2av_bytes;
    uint64_t *offs;   /* allgather scratch for per-call offsets, 2 per rank */
    uint64_t source;  /* id as an error source of streams (hal_api.h) */
    bool setup_talked; /* the context setup in progress has sent or received a message */
    /* The executor is broken once a collective failed (state.c). A stream sync may poll the
     * mailboxes from another thread: the lock guards the context list and these. */
    pthread_mutex_t lock;
    mscclpp_result_t broken;
    char broken_msg[768];
    exec_tuning_t *tuning; /* loaded tuning table, or NULL (executor/tuning.h) */
    struct exec_made *made; /* this job's topology and its rooted made plans (select.c) */
    exec_select_slot_t chosen[EXEC_SELECT_CACHE]; /* plan choices per call shape (select.c) */
    /* The launch fence (kern_args.h): a launch of another context or call shape than the
     * previous launch first waits for every peer's previous launch. */
    bool launched;
    exec_call_key_t last_call;
    /*
     * Capture (docs/graphs.md): `capturing` holds for the call in progress (its stream is being
     * captured). What a graph launches (lowered plans, contexts, the staging buffer) is never
     * freed or changed while the executor lives: retired lowered plans wait in `retired`
     * (captured ones until the executor goes, others until the next drain), buffers in `kept`.
     */
    bool capturing;
    bool captured_any; /* some call was captured: replays may run between any two calls */
    exec_lowcache_t *retired;
    void **kept;
    int n_kept, cap_kept;
    bool tmp_captured; /* a graph stages into `tmp` */
};

/* ---- context.c ---------------------------------------------------------------------------- */

/* The allocation holding p (base and size); for memory the backend does not know, the pointer
 * itself and size 0. */
void exec_alloc_of(const hal_ops_t *hal, const void *p, void **base, size_t *size);

/*
 * The context of (plan, send allocation, recv allocation, rotation), built (collectively) on
 * first use. Keyed by allocations, not pointers, so that every rank hits or misses together as
 * long as each keeps its buffers in the same allocations.
 */
mscclpp_result_t exec_context_get(mscclpp_executor_t *ex, const struct mscclpp_plan *plan,
                                  const void *send, void *recv, int rotation,
                                  mscclpp_dtype_t dtype, exec_context_t **out);

/* Bind this call's buffers (in-allocation offsets): collective for plans with io_offsets. */
mscclpp_result_t exec_context_bind(mscclpp_executor_t *ex, exec_context_t *c, uint64_t in_off,
                                   uint64_t out_off);

/* The lowered plan of this call shape (cached per context), its blob copied to the device. */
mscclpp_result_t exec_context_lowered(mscclpp_executor_t *ex, exec_context_t *c,
                                      size_t in_bytes, size_t out_bytes, mscclpp_dtype_t dtype,
                                      mscclpp_redop_t op, mscclpp_packet_t packet,
                                      exec_lowcache_t **out);

/* Free every context whose input allocation is `send_base` (the staging buffer goes), after the
 * launches queued on the executor's streams, whose error it returns. */
mscclpp_result_t exec_contexts_free_input(mscclpp_executor_t *ex, const void *send_base);

/* Free every live context, and with dead_too the failed setups kept for the peers, the
 * retired lowered plans and the kept buffers (only when the executor goes: graphs may still
 * launch them). */
void exec_contexts_free_all(mscclpp_executor_t *ex, bool dead_too);

/* Keep device memory `p` (a buffer a graph uses) until the executor goes. */
mscclpp_result_t exec_keep(mscclpp_executor_t *ex, void *p);

/* Whether the executor's streams cannot be drained now: the call in progress is being
 * captured, or another of its streams is (waiting for it would invalidate that capture). What
 * would be freed after a drain is retired instead. */
bool exec_cannot_drain(mscclpp_executor_t *ex);

/* ---- executor.c --------------------------------------------------------------------------- */

/*
 * Run `plan` for one call: `rotation` makes rank r play virtual rank (r - rotation) mod n (a
 * loaded rooted plan serving another root), `nthreads` the threads per block (0: the plan's).
 */
mscclpp_result_t exec_execute(mscclpp_executor_t *ex, const struct mscclpp_plan *plan,
                              const void *send, void *recv, size_t send_bytes, size_t recv_bytes,
                              mscclpp_dtype_t dtype, mscclpp_redop_t op, mscclpp_packet_t packet,
                              mscclpp_stream_t stream, int rotation, int nthreads);

/* ---- state.c ------------------------------------------------------------------------------ */

/* Break the executor with `r`, whose message the calling thread holds; returns r. */
mscclpp_result_t exec_poison(mscclpp_executor_t *ex, mscclpp_result_t r);

/*
 * MSCCLPP_OK, or the error that broke the executor: the original message the first time it is
 * found in a mailbox, then "executor broken by an earlier error: ..." on every call.
 */
mscclpp_result_t exec_check(mscclpp_executor_t *ex);

/* Stream sync callback (hal_api_check_fn): exec_check from any thread. */
mscclpp_result_t exec_stream_check(void *arg);

/* After a launch without a stream: the error it recorded in its device state, if any (breaks
 * the executor). */
mscclpp_result_t exec_check_launch(mscclpp_executor_t *ex, exec_context_t *c);

#endif /* MSCCLPP_EXECUTOR_EXECUTOR_H */
