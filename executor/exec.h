/*
 * The executor's objects, shared by the files that each do one of its jobs:
 *
 *   executor/executor.c  the public calls: execute, collectives, create/destroy, plan lookup
 *   executor/context.c   contexts: creation (scratch, device state, channels, the setup
 *                        exchange with the peers), per-call buffer binding, the lowered-plan
 *                        cache, teardown
 *   executor/state.c     whether the executor is broken: launch errors decoded from the device
 *                        state or a mailbox, proxy errors, the stream-sync check
 *   executor/cache.c     the one cache of contexts and native algorithms' buffer sets: most
 *                        recently used first, bounded, forget (executor/cache.h)
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
#ifndef MSCCLPP_EXECUTOR_EXEC_H
#define MSCCLPP_EXECUTOR_EXEC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "executor/cache.h"
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
    /* choice.shared's last agreement for this shape (exec_select_verdict): 0 no call yet, 1
     * every rank's buffers were shareable at the last call, -1 not */
    int8_t verdict;
} exec_select_slot_t;

/* One lowered plan of a context, for one call shape (and, for plans that address the peers'
 * input/output, one pair of in-allocation offsets: they are embedded), with its device copy. */
typedef struct exec_lowcache {
    struct exec_lowcache *next;
    size_t in_bytes, out_bytes;
    uint64_t in_off, out_off;
    mscclpp_dtype_t dtype;
    mscclpp_redop_t op;
    mscclpp_packet_t packet;
    exec_lowered_t *low;
    void *dev_blob;  /* device copy of low->blob */
    void *host_blob; /* pinned copy it was uploaded from on a stream (GPU backends), or NULL */
    bool captured;   /* a graph launches it: kept, unchanged, until the executor goes */
} exec_lowcache_t;

/* The allocations of a call's buffers as the backend described them (exec_mem_of: in of
 * send, out of recv), for a later step of the same call on those very buffers. */
typedef struct {
    bool known;
    const void *send, *recv;
    hal_mem_info_t in, out;
} exec_looked_t;

/* What a collective call adds to its signature (kern_args.h, "Call signature") that
 * exec_execute cannot see: whether the caller's buffers are in place (a staged call runs an
 * out-of-place plan), its root (a made rooted plan runs unrotated) and the digest of the tuning
 * table that chose the plan. Set by run_collective around its exec_execute. */
typedef struct {
    bool set;
    bool inplace;
    int root;
    uint64_t tuning;
    /* MSCCLPP_PLAN_DIRECT=auto's shared plan: the label of every rank's buffers, agreed for
     * this call (executor.c, agree_buffers), which a context on the caller's allocations is
     * keyed by too (exec_context_t.peers); 0: none (a plan run by name) */
    uint64_t peers;
    /* What run_collective asked the backend earlier in this very call, so that exec_execute
     * does not ask again (issue 19 item 5): the stream's capture status (capture_known), and
     * the allocations of the call's buffers (mem, exec_looked_t). */
    bool capture_known, capturing;
    const struct mscclpp_stream *capture_stream; /* the stream capture_known is about */
    exec_looked_t mem;
} exec_hint_t;

/* The call in progress, as its signature sees it. */
typedef struct {
    size_t send_bytes, recv_bytes;
    mscclpp_dtype_t dtype;
    mscclpp_redop_t op;
    mscclpp_packet_t packet;
    bool inplace;
    int root;
    uint64_t tuning;
} exec_shape_t;

/*
 * The last call, kept for the next one that repeats it exactly (executor.c, the fast path):
 * its context and lowered plan are used again without the checks, allocation lookups and cache
 * scans of a first call; valid while the cache's generation stays (no entry dropped, no lowered
 * plan flushed since). A context keyed by the plan alone (scratch only, or staged) serves the
 * same call whatever became of the buffers; one keyed by the caller's allocations (shares_io,
 * not staged) only while they are still those allocations: no mscclpp_free since
 * (hal_api_alloc_gen), or for the application's own memory the same allocation id (mem_info).
 */
typedef struct {
    bool valid;
    uint64_t gen; /* ex->cache.gen when recorded */
    const struct mscclpp_plan *plan;
    const void *send;
    void *recv;
    int rotation;
    exec_shape_t shape;
    struct exec_context *c;
    struct exec_lowcache *l;
    uint64_t in_off, out_off; /* the launch's offsets in the context's buffers (shares_io) */
    uint64_t alloc_gen;       /* hal_api_alloc_gen() when recorded (keyed contexts) */
    bool foreign;             /* a buffer is the application's own memory: ask mem_info */
    uint64_t hits;            /* calls that took it (tests) */
} exec_fast_t;

/* The buffers of one call as the backend knows them (hal mem_info). */
typedef struct {
    hal_mem_info_t in, out;
    bool staged; /* an io-sharing plan on buffers the peers cannot map: the context stages */
} exec_bufs_t;

typedef struct exec_context {
    exec_cache_entry_t ce; /* in the executor's cache (executor/cache.h); owner: the plan;
                            * pinned: a graph launches with it */
    const struct mscclpp_plan *plan;
    /*
     * Key. A plan that addresses a peer's input or output (memory, port or switch channels:
     * shares_io) needs the two allocations holding the call's buffers registered and mapped by
     * the peers: its context is keyed by them (base and the backend's allocation id, which
     * tells a freed-and-reused range apart). Any other plan touches only scratch and this
     * rank's own buffers, which each call passes: one context per plan (bases NULL, ids 0).
     */
    void *send_base, *recv_base;
    uint64_t send_id, recv_id;
    size_t in_alloc, out_alloc; /* sizes of those allocations (shares_io) */
    bool shares_io;
    /* This rank's buffers of a collective call are not memory the peers can map: the context
     * owns shareable stand-ins of in_cap/out_cap bytes (one of the larger for an in-place plan)
     * that every call is copied into and out of (executor.c). Keyed without the caller's
     * buffers, so it misses only where every rank's context misses: at a size its caps do not
     * serve (the caps are the same on every rank). */
    bool staged;
    void *stage[2];
    /* Keyed by the caller's allocations and run for MSCCLPP_PLAN_DIRECT=auto's per-call
     * agreement: the label of every rank's buffers (exec_hint_t.peers), part of the key, so a
     * call where any rank's buffers differ misses on every rank alike; 0 for a plan run by name
     * (the ranks then change their buffers together) */
    uint64_t peers;
    bool reaches_io;            /* some rank addresses a peer's input/output: fence every launch
                                 * (peers publish their offsets there, kern_args.h) */
    bool baked_off;             /* the lowered plan embeds peers' buffers at this rank's own
                                 * offsets (port/switch channels): cached per offset pair */
    int rotation;
    int vrank;
    uint32_t seq;               /* the executor's context_seq when it was built: unique */
    /* The scratch serves calls of up to these sizes (the same on every rank: derived from the
     * call, not from the allocations); a larger call rebuilds the context, on every rank. */
    uint64_t in_cap, out_cap;
    bool broken;                /* a launch failed: state undefined, rebuild before reuse */
    uint64_t off[2];            /* the current call's in-allocation offsets (shares_io) */
    void **peer_ptr[3];         /* per virtual rank: input/output allocation base, scratch */
    uint64_t *peer_off[2];      /* per virtual rank: offsets of the current call's buffers (all
                                 * this rank's own: ranks use their buffers alike) */
    int n_lowered;              /* entries of `lowered` */

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
    uint64_t digest;       /* of the plan, for call signatures (exec_plan_digest) */
    kern_error_t *mailbox; /* host-mapped copy of the interpreter's first error (kern_args.h) */
    exec_port_t *port; /* port channels and their proxy (executor/exec_port.c), or NULL */
} exec_context_t;

struct mscclpp_executor {
    mscclpp_comm_t *comm;
    const hal_ops_t *hal;
    bool host_memory; /* the backend's device memory is host memory (hal_device_props_t) */
    int max_threads;  /* threads per block its interpreter kernel takes at most (0: any):
                       * every launch is capped at it (hal_device_props_t.kernel_max_threads) */
    bool p2p;         /* runs plans of two ranks each (mscclpp_executor_set_p2p): setups meet
                       * only the plan's ranks, under one tag; every launch fences */
    exec_registry_t registry;
    /* contexts and native algorithms' buffer sets (executor/cache.h); its dead list also
     * keeps setups that failed after talking: peers may still map their memory */
    exec_cache_t cache;
    uint32_t context_seq;
    void *tmp;        /* staging input for in-place calls served by out-of-place plans */
    size_t tmp_bytes;
    /* mscclpp_alltoallv's staging pair (alltoallv.c), kept (exec_keep) until the executor goes */
    void *a2av_in, *a2av_out;
    size_t a2av_bytes;
    /* its count-exact path: the plan (made on first use), the per-call count tables (host
     * memory the device reads, one per call in flight) and the table of the call in progress
     * (kern_args_t.vtab of its launch; NULL for every other launch) */
    struct mscclpp_plan *a2av_plan;
    struct exec_a2av_tab *a2av_tabs;
    uint64_t *a2av_vtab;
    /* for tests: the calls that went direct, count-exact and staged, and (when a2av_count is
     * set before the calls) the bytes the count-exact launches moved, counted by the kernel
     * (kern_args.h, "Alltoallv"), added once each launch is done */
    uint64_t a2av_ways[3];
    bool a2av_count;
    uint64_t a2av_moved; /* atomic */
    uint64_t source;  /* id as an error source of streams (hal_api.h) */
    bool setup_talked; /* the context setup in progress has sent or received a message */
    bool setup_disagreed; /* it failed because the ranks disagree on the call, midway */
    bool setup_refused;   /* every rank refused it before committing anything: usable */
    struct exec_announce *announcing; /* that setup's announcement (context.c), or NULL */
    exec_shape_t shape;   /* the call in progress (one at a time) */
    exec_hint_t hint;     /* what run_collective adds to it; hint.mem is also set by
                           * mscclpp_execute, and all of it is cleared when the call returns */
    /* What mscclpp_executor_direct looked up, handed to the executor's next call (its
     * run_collective or mscclpp_execute takes it when the buffers are the same, so a call that
     * asks first and then runs looks each buffer up once). Valid until that next call, whatever
     * it is (exec_execute drops it), mscclpp_executor_forget, or an mscclpp_free
     * (handed_gen: hal_api_alloc_gen when looked up). */
    exec_looked_t handed;
    uint64_t handed_gen;
    exec_fast_t fast;     /* the last call, for the next that repeats it (executor.c) */
    /* The executor is broken once a collective failed (state.c). A stream sync may poll the
     * mailboxes from another thread: the lock guards the context list and these. */
    pthread_mutex_t lock;
    mscclpp_result_t broken;
    bool disagreed; /* `broken` is ranks disagreeing on a call: the next call resynchronises */
    char broken_msg[768];
    exec_tuning_t *tuning; /* loaded tuning table, or NULL (executor/tuning.h) */
    struct exec_made *made; /* this job's topology and its rooted made plans (select.c) */
    exec_select_slot_t chosen[EXEC_SELECT_CACHE]; /* plan choices per call shape (select.c) */
    /* The launch fence (kern_args.h): the signature of the previous launch, then the first
     * error of any launch, in device memory (KERN_EXEC_WORDS words) the launches read and
     * update. */
    uint64_t *last_sig;
    /* the phase trace's table and the last launch (MSCCLPP_KERN_TRACE, exec_trace.c), or NULL */
    struct exec_trace *trace;
    bool launched; /* some launch happened: last_seq names its context */
    uint32_t last_seq;
    /* our call's signature, owed to a peer that sets up a context we do not (state.c) */
    struct {
        bool pending;
        int peer, tag;
        uint64_t sig[KERN_SIG_WORDS];
    } answer;
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
    /* MSCCLPP_PLAN_DIRECT=auto's per-call buffer agreement (executor.c, agree_buffers): with
     * every rank on one node through a board of host shared memory (POSIX shm, any backend),
     * each rank's words stored into every peer's board; else (board_state -1) a bootstrap
     * allgather. 0: not set up yet. */
    int board_state;
    uint64_t *board;        /* mine: every rank's slots, two per rank (agreement parity) */
    uint64_t **board_peer;  /* every rank's board as mapped here (mine for this rank) */
    size_t board_bytes;     /* each board's mapping */
    uint64_t board_seq;     /* agreements so far: the same on every rank */
};

/* The context after `c` (the first for NULL) in the executor's cache; NULL at the end. Inline:
 * the files that walk the contexts (state.c) need no call into context.c or cache.c. */
static inline exec_context_t *exec_context_next(const mscclpp_executor_t *ex,
                                                const exec_context_t *c)
{
    for (exec_cache_entry_t *e = c ? c->ce.next : ex->cache.head; e; e = e->next)
        if (e->ops->kind == EXEC_CACHE_CONTEXT)
            return (exec_context_t *)((char *)e - offsetof(exec_context_t, ce));
    return NULL;
}

/* ---- context.c ---------------------------------------------------------------------------- */

/* What the backend knows of the allocation holding p (hal mem_info); all zero for NULL or for
 * memory it does not know (no error recorded). */
void exec_mem_of(const hal_ops_t *hal, const void *p, hal_mem_info_t *m);

/* Whether a plan addresses some rank's input or output from another rank, or moves it through
 * a port channel: its contexts need the call's allocations registered (exec_context_t). */
bool exec_plan_shares_io(const struct mscclpp_plan *plan);
/* Whether some rank of the plan addresses another rank's input or output. */
bool exec_plan_reaches_io(const struct mscclpp_plan *plan);

/*
 * The context of (plan, rotation) for a call of these sizes, and for plans that share their
 * input/output also of the allocations holding the buffers, built (collectively) on first use
 * and again, larger, for a call its scratch does not fit. Every rank hits or misses together
 * as long as each uses its buffers alike (the same program on every rank).
 */
mscclpp_result_t exec_context_get(mscclpp_executor_t *ex, const struct mscclpp_plan *plan,
                                  const exec_bufs_t *bufs, size_t in_bytes, size_t out_bytes,
                                  int rotation, mscclpp_dtype_t dtype, exec_context_t **out);

/* Bind this call's buffers: their in-allocation offsets (plans that share input/output
 * address the peers' buffers at this rank's own offsets; nothing is exchanged). */
mscclpp_result_t exec_context_bind(mscclpp_executor_t *ex, exec_context_t *c, uint64_t in_off,
                                   uint64_t out_off);

/* The lowered plan of this call shape and bound offsets (cached per context), its blob copied
 * to the device (ordered on `stream` when there is one). */
mscclpp_result_t exec_context_lowered(mscclpp_executor_t *ex, exec_context_t *c,
                                      size_t in_bytes, size_t out_bytes, mscclpp_dtype_t dtype,
                                      mscclpp_redop_t op, mscclpp_packet_t packet,
                                      hal_stream_t stream, exec_lowcache_t **out);

/* Free every entry of the cache (contexts and native buffer sets), and with dead_too the dead
 * ones (failed setups kept for the peers, what graphs launch), the retired lowered plans and
 * the kept buffers (only when the executor goes: graphs may still launch them). */
void exec_contexts_free_all(mscclpp_executor_t *ex, bool dead_too);

/* Keep device memory `p` (a buffer a graph uses) until the executor goes. */
mscclpp_result_t exec_keep(mscclpp_executor_t *ex, void *p);
/** Frees mscclpp_alltoallv's plan and count tables (alltoallv.c): after the launches drained
 *  and the contexts are gone. */
void exec_alltoallv_release(mscclpp_executor_t *ex);

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

/* A digest of what a plan makes every rank do: equal digests, one program. Never 0. */
uint64_t exec_plan_digest(const struct mscclpp_plan *plan);
/** One 64-bit word into a running FNV-1a hash (the one of exec_plan_digest), which starts at
 * EXEC_HASH_SEED (FNV-1a's offset basis). */
#define EXEC_HASH_SEED 1469598103934665603ull
uint64_t exec_hash_u64(uint64_t h, uint64_t v);

/* The signature of a call (kern_args.h, "Call signature") on the context of (collective, seq,
 * plan digest). */
void exec_call_sig(const char *collective, uint32_t seq, uint64_t digest, const exec_shape_t *shape,
                   uint64_t sig[KERN_SIG_WORDS]);

/* The context number a call's signature carries: its sequence number, the same on every rank
 * since contexts are built collectively; 0 on a point-to-point executor, whose contexts are
 * built pair by pair, so numbered differently on each rank (the plan names the pair). */
static inline uint32_t exec_sig_seq(const mscclpp_executor_t *ex, const exec_context_t *c)
{
    return ex->p2p ? 0 : c->seq;
}

/* The error of ranks that disagree: rank `me` calls `mine` (its plan's name `plan_name`, or
 * NULL), rank `peer` `theirs`; `how` ends the sentence (or ""). INVALID_ARG. */
mscclpp_result_t exec_disagree_error(int me, const uint64_t *mine, const char *plan_name, int peer,
                                     const uint64_t *theirs, const char *how);

/* Bootstrap tag of the setup of context `seq`. */
int exec_setup_tag(uint32_t seq);

/* One rank's message in the agreement step of a context setup (context.c, context_agree). */
#define EXEC_AGREE_WHY 192
typedef struct {
    uint64_t sig[KERN_SIG_WORDS]; /* the call it builds the context for */
    mscclpp_result_t status;      /* whether it could prepare it */
    bool answer;                  /* sent by a rank that repeats its previous call instead */
    bool staged;                  /* its context runs on stand-ins of its buffers */
    uint64_t scratch;             /* its scratch bytes */
    char why[EXEC_AGREE_WHY];     /* why not (status != OK) */
} exec_agree_t;

mscclpp_result_t exec_agree_send(mscclpp_executor_t *ex, int peer, int tag, const exec_agree_t *a);
mscclpp_result_t exec_agree_recv(mscclpp_executor_t *ex, int peer, int tag, exec_agree_t *a);

/* A context setup announced in the context of the executor's previous launch. */
typedef struct exec_announce {
    exec_context_t *prev; /* NULL: nothing announced */
    uint32_t flag;        /* the flag of prev's next launch */
    uint64_t sig[KERN_SIG_WORDS];
    const char *plan_name;
} exec_announce_t;

/*
 * Before building a context for the call in progress (ex->shape) on (plan, rotation): write a
 * KERN_REC_SETUP record with its signature into the peers' slots of the launch fence channels
 * of the previous launch's context (memory channels; kern_args.h, "Launch fence"), after the
 * launches queued there ended (their error, if any, is returned).
 */
mscclpp_result_t exec_setup_announce(mscclpp_executor_t *ex, const struct mscclpp_plan *plan,
                                     int rotation, exec_announce_t *a);

/* Withdraw the announcement (zero its records; again is harmless). */
mscclpp_result_t exec_setup_withdraw(mscclpp_executor_t *ex, const exec_announce_t *a);

/* After the setup (result `r`): withdraw the announcement when it succeeded; when it failed
 * and a peer answered the announcement, the ranks disagree: that error instead of `r`. */
mscclpp_result_t exec_setup_settle(mscclpp_executor_t *ex, exec_announce_t *a, mscclpp_result_t r);

/* Break the executor with `r`, whose message the calling thread holds; returns r. */
mscclpp_result_t exec_poison(mscclpp_executor_t *ex, mscclpp_result_t r);

/* Whether the executor's streams cannot be drained now: the call in progress is being
 * captured, or another of its streams is (waiting for it would invalidate that capture). What
 * would be freed after a drain is retired instead. */
bool exec_cannot_drain(mscclpp_executor_t *ex);

/* Same for ranks that disagree on a call (nothing is lost: the next call resynchronises the
 * executors of every rank, exec_ready). */
mscclpp_result_t exec_disagree(mscclpp_executor_t *ex, mscclpp_result_t r);

/*
 * At the start of a call: MSCCLPP_OK, or the error that broke the executor (exec_check). After
 * ranks disagreed, whose error has been reported, first resynchronise with every rank (they all
 * got that error): wait for the queued launches and agree that every rank is there; then
 * *resync is true and the caller drops every context (exec_contexts_free_all: their counters
 * and flags are past repair) and calls exec_resync_done(ex, *resync_seq), which resets the
 * launch fence and takes up the context numbering every rank agreed on.
 */
mscclpp_result_t exec_ready(mscclpp_executor_t *ex, bool *resync, uint32_t *resync_seq);
mscclpp_result_t exec_resync_done(mscclpp_executor_t *ex, uint32_t seq);

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

/* ---- the interpreter's phase trace (exec_trace.c, MSCCLPP_KERN_TRACE) ---------------------- */
typedef struct exec_trace exec_trace_t;
/** Read MSCCLPP_KERN_TRACE; when set, allocate the table (ex->trace), else leave it NULL. */
mscclpp_result_t exec_trace_attach(mscclpp_executor_t *ex);
/** Point launch `l`'s arguments at the table (NULL without one) and note it as the last. */
void exec_trace_launch(mscclpp_executor_t *ex, const exec_context_t *c, exec_lowcache_t *l,
                       int nthreads);
/** After the executor's stream work: write PREFIX.rank<R>.txt and free the table. */
mscclpp_result_t exec_trace_finish(mscclpp_executor_t *ex);

#endif /* MSCCLPP_EXECUTOR_EXEC_H */
