/*
 * The executor's public calls: execute a plan, the collectives with registered plans, create
 * and destroy, plan registration and lookup. A call goes:
 *
 *   exec_execute      checks the call, then exec_check (state.c: is the executor broken?)
 *   exec_context_get  the context for these buffers, built collectively once (context.c)
 *   exec_context_bind this call's buffer offsets (context.c)
 *   exec_context_lowered  the plan lowered for this call shape (context.c -> lower.c, layout.c)
 *   hal->launch       the interpreter (kernels/common/kern_interp.h) on the stream
 *   exec_check_launch without a stream: the error the launch recorded (state.c)
 *
 * A call that repeats the last one exactly skips the checks and lookups between exec_ready and
 * the launch (fast_hit: ex->fast), when its context still serves it: always for one keyed by
 * the plan alone (scratch only, or staged), while the caller's allocations are the same ones for
 * one keyed by them.
 *
 * See executor/exec.h for the objects and how the files divide the work.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/config.h"
#include "base/debug.h"
#include "base/wait.h"
#include "executor/exec.h"
#include "hal/hal_api.h"

/* ---- execution --------------------------------------------------------------------------- */

/* The allocations of the call's buffers: what was looked up earlier in this call (ex->hint.mem:
 * run_collective's agreement, or what mscclpp_executor_direct handed over), else asked of the
 * backend, once for a call in place. */
static void call_mem_of(const mscclpp_executor_t *ex, const void *send, const void *recv,
                        hal_mem_info_t *in, hal_mem_info_t *out)
{
    const exec_looked_t *m = &ex->hint.mem;
    if (m->known && m->send == send && m->recv == recv) {
        *in = m->in;
        *out = m->out;
        return;
    }
    exec_mem_of(ex->hal, send, in);
    if (recv == send) *out = *in; /* in place: one allocation */
    else exec_mem_of(ex->hal, recv, out);
}

/* What mscclpp_executor_direct handed over (ex->handed), taken by the call that follows it:
 * *m gets it when it is about these very buffers and no mscclpp_free came between; in every
 * case the executor holds nothing afterwards (a later call asks the backend again). */
static void take_handed(mscclpp_executor_t *ex, const void *send, const void *recv,
                        exec_looked_t *m)
{
    const exec_looked_t *h = &ex->handed;
    if (h->known && h->send == send && h->recv == recv && ex->handed_gen == hal_api_alloc_gen())
        *m = *h;
    ex->handed = (exec_looked_t){0};
}

/* The checks of a call that need no peer: a context for unusable buffers would be built for
 * nothing. */
static mscclpp_result_t check_call(mscclpp_executor_t *ex, const mscclpp_plan_t *plan,
                                   const void *send, void *recv, size_t send_bytes,
                                   size_t recv_bytes, mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                   mscclpp_packet_t packet, mscclpp_stream_t stream,
                                   exec_bufs_t *bufs)
{
    CHECK_ARG(ex != NULL);
    CHECK_ARG(plan != NULL);
    CHECK_ARG((int)dtype >= 0 && dtype < MSCCLPP_DTYPE_COUNT);
    CHECK_ARG(op == MSCCLPP_REDOP_PLAN || ((int)op >= 0 && op < MSCCLPP_REDOP_COUNT));
    CHECK_ARG(packet == MSCCLPP_PACKET_LL16 || packet == MSCCLPP_PACKET_LL8);
    if (plan->nranks != ex->comm->nranks)
        return ERR_ARG("plan '%s' is written for %d ranks, the communicator has %d", plan->name,
                       plan->nranks, ex->comm->nranks);
    if ((send_bytes && !send) || (recv_bytes && !recv))
        return ERR_ARG("execute: NULL buffer with a non-zero size");
    /* the interpreter works in whole elements: a partial one would be dropped, not moved */
    size_t es = mscclpp_dtype_size(dtype);
    if (es > 1 && (send_bytes % es || recv_bytes % es))
        return ERR_ARG("execute: %zu bytes in, %zu out is not a whole number of %s elements "
                       "(%zu bytes each)",
                       send_bytes, recv_bytes, mscclpp_dtype_name(dtype), es);
    uint64_t msg = exec_message_size(plan->collective, send_bytes, recv_bytes);
    if (msg < plan->min_message_size || msg > plan->max_message_size)
        return ERR_ARG("plan '%s' accepts messages of %llu to %llu bytes, got %llu", plan->name,
                       (unsigned long long)plan->min_message_size,
                       (unsigned long long)plan->max_message_size, (unsigned long long)msg);
    /* an in-place plan reads its input from the output buffer (or the reverse): called out of
     * place it would compute on bytes the caller never wrote */
    if (plan->inplace &&
        !exec_call_in_place(plan->collective, ex->comm->rank, send, recv, send_bytes, recv_bytes))
        return ERR_ARG("plan '%s' is in-place: %s; call it that way, or use an out-of-place plan",
                       plan->name,
                       plan->collective && !strcmp(plan->collective, "allgather")
                           ? "the send buffer must be the rank's own block of the receive buffer"
                       : plan->collective && !strcmp(plan->collective, "reducescatter")
                           ? "the receive buffer must be the rank's own block of the send buffer"
                           : "the send and receive buffers must be the same");
    if (stream && stream->ops != ex->hal)
        return ERR_ARG("execute: stream of backend %s, executor runs on %s", stream->ops->name,
                       ex->hal->name);
    /*
     * The buffers: a plan that reaches a peer's input or output needs memory the peers can map
     * (exec_context_t); any other plan needs memory its kernel can use: the backend's device
     * memory, or any memory on a backend whose device memory is host memory (host backend).
     */
    call_mem_of(ex, send, recv, &bufs->in, &bufs->out);
    bufs->staged = false;
    if (exec_plan_shares_io(plan)) {
        const hal_mem_info_t *bad = !bufs->in.shareable ? &bufs->in
                                    : !bufs->out.shareable ? &bufs->out : NULL;
        uint64_t in_off = (uint64_t)((const char *)send - (const char *)bufs->in.base);
        uint64_t out_off = (uint64_t)((const char *)recv - (const char *)bufs->out.base);
        /* a collective (run_collective) on buffers the peers cannot map runs on the context's
         * shareable stand-ins instead (exec_context_t.staged), so that the plan chosen by the
         * call's shape serves every rank whatever its memory; a plan run by name refuses */
        if (ex->hint.set &&
            (bad || send_bytes > bufs->in.size - in_off || recv_bytes > bufs->out.size - out_off)) {
            bufs->staged = true;
            return MSCCLPP_OK;
        }
        if (bad)
            return ERR_ARG("execute: plan '%s' shares its input and output with its peers "
                           "(it reaches theirs, or its port channels move its own), so they "
                           "must be memory the %s backend can share with other processes "
                           "(mscclpp_malloc, or device memory from the driver; host backend: a "
                           "shared mapping); the %s buffer %p is not",
                           plan->name, ex->hal->name, bad == &bufs->in ? "send" : "recv",
                           bad == &bufs->in ? send : (const void *)recv);
        if (send_bytes > bufs->in.size - in_off || recv_bytes > bufs->out.size - out_off)
            return ERR_ARG("execute: %zu/%zu bytes do not fit the buffers (%zu/%zu bytes to the "
                           "end of their allocations)", send_bytes, recv_bytes,
                           (size_t)(bufs->in.size - in_off), (size_t)(bufs->out.size - out_off));
    } else if (!ex->host_memory && ((send_bytes && !bufs->in.size) ||
                                    (recv_bytes && !bufs->out.size))) {
        return ERR_ARG("execute: buffers must be device memory of the %s backend; %s %p is not",
                       ex->hal->name, send_bytes && !bufs->in.size ? "send" : "recv",
                       send_bytes && !bufs->in.size ? send : (const void *)recv);
    }
    return MSCCLPP_OK;
}

/* Whether the call's stream is being captured (no stream: never). */
static mscclpp_result_t stream_capturing(const mscclpp_executor_t *ex, mscclpp_stream_t stream,
                                         bool *capturing)
{
    *capturing = false;
    if (!stream) return MSCCLPP_OK;
    return ex->hal->stream_capturing(hal_api_stream(stream), capturing);
}

static mscclpp_result_t execute_captured(mscclpp_executor_t *ex, const mscclpp_plan_t *plan,
                                         const void *send, void *recv, size_t send_bytes,
                                         size_t recv_bytes, mscclpp_dtype_t dtype,
                                         mscclpp_redop_t op, mscclpp_packet_t packet,
                                         mscclpp_stream_t stream, int rotation, int nthreads);

mscclpp_result_t exec_execute(mscclpp_executor_t *ex, const struct mscclpp_plan *plan,
                              const void *send, void *recv, size_t send_bytes, size_t recv_bytes,
                              mscclpp_dtype_t dtype, mscclpp_redop_t op, mscclpp_packet_t packet,
                              mscclpp_stream_t stream, int rotation, int nthreads)
{
    CHECK_ARG(ex != NULL);
    ex->handed.known = false; /* what a call takes (run_collective, mscclpp_execute) is taken */
    if (comm_aborted(ex->comm)) return exec_poison(ex, comm_abort_error(ex->comm, "execute"));
    core_set_culprit(-1); /* whom this call's failure blames, if it fails (comm_fail) */
    bool capturing = false;
    /* a stream of another backend is reported by the checks below; run_collective may have
     * asked already in this call */
    if (ex->hint.set && ex->hint.capture_known && ex->hint.capture_stream == stream)
        capturing = ex->hint.capturing;
    else if (!stream || stream->ops == ex->hal) CHECK(stream_capturing(ex, stream, &capturing));
    bool outer = ex->capturing;
    ex->capturing = capturing;
    mscclpp_result_t r = execute_captured(ex, plan, send, recv, send_bytes, recv_bytes, dtype, op,
                                          packet, stream, rotation, nthreads);
    ex->capturing = outer;
    return r;
}

/* The call's shape as its signature sees it (exec_shape_t): the caller's in-place-ness and
 * root (a staged call runs an out-of-place plan; a made rooted plan runs unrotated) and the
 * tuning table's digest, from run_collective's ex->hint when it set one. */
static exec_shape_t call_shape(const mscclpp_executor_t *ex, const mscclpp_plan_t *plan,
                               const void *send, void *recv, size_t send_bytes, size_t recv_bytes,
                               mscclpp_dtype_t dtype, mscclpp_redop_t op, mscclpp_packet_t packet,
                               int rotation)
{
    const exec_hint_t *h = ex->hint.set ? &ex->hint : NULL;
    exec_shape_t shape = {.send_bytes = send_bytes,
                          .recv_bytes = recv_bytes,
                          .dtype = dtype,
                          .op = op,
                          .packet = packet};
    shape.inplace = h ? h->inplace
                      : exec_call_in_place(plan->collective, ex->comm->rank, send, recv, send_bytes,
                                           recv_bytes);
    shape.root = h ? h->root : (plan->root + rotation) % ex->comm->nranks;
    shape.tuning = h ? h->tuning : 0;
    return shape;
}

static bool same_shape(const exec_shape_t *a, const exec_shape_t *b)
{
    return a->send_bytes == b->send_bytes && a->recv_bytes == b->recv_bytes &&
           a->dtype == b->dtype && a->op == b->op && a->packet == b->packet &&
           a->inplace == b->inplace && a->root == b->root && a->tuning == b->tuning;
}

/* Whether this call repeats the last one exactly, whose context and lowered plan are still the
 * executor's (ex->fast). */
static bool fast_hit(const mscclpp_executor_t *ex, const mscclpp_plan_t *plan, const void *send,
                     const void *recv, int rotation, mscclpp_stream_t stream,
                     const exec_shape_t *shape)
{
    const exec_fast_t *f = &ex->fast;
    if (!(f->valid && f->gen == ex->cache.gen && f->plan == plan && f->send == send &&
          f->recv == recv && f->rotation == rotation && same_shape(&f->shape, shape) &&
          (!stream || stream->ops == ex->hal) && !f->c->broken))
        return false;
    /* the cache's most recent entry, as a lookup would leave it (another entry used since,
     * a native algorithm's set, goes through the lookup once: eviction keeps its order) */
    if (&f->c->ce != ex->cache.head) return false;
    const exec_context_t *c = f->c;
    if (c->staged) return ex->hint.set; /* a collective's call (a plan run by name refuses) */
    if (!c->shares_io) return true;     /* keyed by the plan alone */
    /* MSCCLPP_PLAN_DIRECT=auto: every rank's buffers, agreed for this call (run_collective) */
    if (c->peers != (ex->hint.set ? ex->hint.peers : 0)) return false;
    /* keyed by the buffers' allocations (exec_context_get): still the same ones? */
    if (!f->foreign) return hal_api_alloc_gen() == f->alloc_gen;
    hal_mem_info_t in, out;
    call_mem_of(ex, send, recv, &in, &out);
    return in.base == c->send_base && in.id == c->send_id && out.base == c->recv_base &&
           out.id == c->recv_id;
}

/*
 * A staged call (exec_context_t.staged) runs on its context's stand-ins: *send / *recv become
 * where the plan finds the caller's bytes there. An in-place plan has one stand-in, which gets
 * the caller's whole span (both buffers, as they overlap) at the same relative offsets.
 * *from / *bytes: what launch_staged copies in.
 */
static mscclpp_result_t stage_at(const exec_context_t *c, const void **send, void **recv,
                                 size_t send_bytes, size_t recv_bytes, const void **from,
                                 size_t *bytes)
{
    const char *s = *send, *r = *recv;
    *from = s;
    *bytes = send_bytes;
    if (!c->plan->inplace) {
        *send = c->send_base;
        *recv = c->recv_base;
    } else {
        const char *lo = s < r ? s : r;
        const char *hi = s + send_bytes > r + recv_bytes ? s + send_bytes : r + recv_bytes;
        *from = lo;
        *bytes = (size_t)(hi - lo);
        *send = (char *)c->recv_base + (s - lo);
        *recv = (char *)c->recv_base + (r - lo);
    }
    size_t have = c->plan->inplace ? c->out_alloc : c->in_alloc;
    if (*bytes > have)
        return ERR(MSCCLPP_ERR_INTERNAL,
                   "plan '%s': a staged call of %zu bytes exceeds its context's %zu-byte stand-in",
                   c->plan->name, *bytes, have);
    return MSCCLPP_OK;
}

static mscclpp_result_t launch(mscclpp_executor_t *ex, exec_context_t *c, exec_lowcache_t *l,
                               const void *send, void *recv, uint64_t in_off, uint64_t out_off,
                               mscclpp_stream_t stream, int nthreads);
static void board_release(mscclpp_executor_t *ex);

/* A staged call's launch: the caller's input into the stand-ins on the call's stream (or now,
 * without one), the launch on them, the output back to the caller's buffer behind it. */
static mscclpp_result_t launch_staged(mscclpp_executor_t *ex, exec_context_t *c, exec_lowcache_t *l,
                                      const void *send, void *recv, size_t send_bytes,
                                      size_t recv_bytes, uint64_t in_off, uint64_t out_off,
                                      mscclpp_stream_t stream, int nthreads)
{
    const void *run_send = send, *from;
    void *run_recv = recv;
    size_t bytes;
    CHECK(stage_at(c, &run_send, &run_recv, send_bytes, recv_bytes, &from, &bytes));
    void *to = c->plan->inplace ? c->recv_base : c->send_base;
    hal_stream_t hs = hal_api_stream(stream);
    if (bytes)
        CHECK(hs ? ex->hal->memcpy_async(to, from, bytes, hs)
                 : ex->hal->memcpy_sync(to, from, bytes));
    CHECK(launch(ex, c, l, run_send, run_recv, in_off, out_off, stream, nthreads));
    if (!recv_bytes) return MSCCLPP_OK;
    return hs ? ex->hal->memcpy_async(recv, run_recv, recv_bytes, hs)
              : ex->hal->memcpy_sync(recv, run_recv, recv_bytes);
}

/* exec_execute with ex->capturing set for the call. */
static mscclpp_result_t execute_captured(mscclpp_executor_t *ex, const mscclpp_plan_t *plan,
                                         const void *send, void *recv, size_t send_bytes,
                                         size_t recv_bytes, mscclpp_dtype_t dtype,
                                         mscclpp_redop_t op, mscclpp_packet_t packet,
                                         mscclpp_stream_t stream, int rotation, int nthreads)
{
    /* a native algorithm (executor/native.c) checks and runs its own calls */
    if (exec_native_of(plan))
        return exec_native_execute(ex, plan, send, recv, send_bytes, recv_bytes, dtype, op, 0,
                                   nthreads, rotation, stream);
    CHECK_ARG(plan != NULL);
    bool resync;
    uint32_t resync_seq;
    /* the last call again: what a first call checks and looks up held then and still does */
    const exec_shape_t shape =
        call_shape(ex, plan, send, recv, send_bytes, recv_bytes, dtype, op, packet, rotation);
    if (fast_hit(ex, plan, send, recv, rotation, stream, &shape)) {
        CHECK(exec_ready(ex, &resync, &resync_seq));
        if (!resync) {
            const exec_fast_t *f = &ex->fast;
            ex->shape = shape;
            ex->fast.hits++;
            if (!f->c->staged)
                return launch(ex, f->c, f->l, send, recv, f->in_off, f->out_off, stream, nthreads);
            return launch_staged(ex, f->c, f->l, send, recv, send_bytes, recv_bytes, f->in_off,
                                 f->out_off, stream, nthreads);
        }
        exec_contexts_free_all(ex, false); /* then as a first call (the cache is empty) */
        CHECK(exec_resync_done(ex, resync_seq));
    }
    ex->fast.valid = false;
    const uint64_t alloc_gen = hal_api_alloc_gen(); /* before the buffers are looked up */
    exec_bufs_t bufs;
    CHECK(check_call(ex, plan, send, recv, send_bytes, recv_bytes, dtype, op, packet, stream,
                     &bufs));
    int vrank = (ex->comm->rank - rotation + ex->comm->nranks) % ex->comm->nranks;
    if (plan->partial && plan->part_rank != vrank)
        return ERR_ARG("plan '%s' holds rank %d's part only (a plan made for one rank); this is "
                       "rank %d",
                       plan->name, plan->part_rank, vrank);
    CHECK(exec_ready(ex, &resync, &resync_seq));
    if (resync) {
        exec_contexts_free_all(ex, false);
        CHECK(exec_resync_done(ex, resync_seq));
    }

    /* what a new context's agreement step carries, and every launch's signature */
    ex->shape = shape;
    exec_context_t *c = NULL;
    ex->setup_talked = false;
    ex->setup_disagreed = false;
    ex->setup_refused = false;
    mscclpp_result_t r =
        exec_context_get(ex, plan, &bufs, send_bytes, recv_bytes, rotation, dtype, &c);
    if (r != MSCCLPP_OK) {
        /* a setup that failed before any message (an unsupported plan, local memory), or that
         * every rank refused in its agreement step, left the peers where they were; one that
         * failed later did not */
        if (ex->setup_disagreed) return exec_disagree(ex, r);
        if (ex->setup_refused) return r;
        if (ex->setup_talked ||
            (r != MSCCLPP_ERR_UNSUPPORTED && r != MSCCLPP_ERR_INVALID_ARG &&
             r != MSCCLPP_ERR_NO_MEMORY))
            r = exec_poison(ex, comm_fail(ex->comm, r, true)); /* the others learn whom to blame */
        return r;
    }
    /* the buffers the plan runs on (a staged context's stand-ins: stage_at), and their
     * offsets in the allocations the peers reach */
    const void *run_send = send, *from;
    void *run_recv = recv;
    size_t bytes;
    if (c->staged) CHECK(stage_at(c, &run_send, &run_recv, send_bytes, recv_bytes, &from, &bytes));
    uint64_t in_off = 0, out_off = 0;
    if (c->shares_io) {
        in_off = (uint64_t)((const char *)run_send - (const char *)c->send_base);
        out_off = (uint64_t)((const char *)run_recv - (const char *)c->recv_base);
    }
    CHECK(exec_context_bind(ex, c, in_off, out_off));
    hal_stream_t hs = hal_api_stream(stream);
    exec_lowcache_t *l = NULL;
    CHECK(exec_context_lowered(ex, c, send_bytes, recv_bytes, dtype, op, packet, hs, &l));
    CHECK(c->staged ? launch_staged(ex, c, l, send, recv, send_bytes, recv_bytes, in_off, out_off,
                                    stream, nthreads)
                    : launch(ex, c, l, send, recv, in_off, out_off, stream, nthreads));
    /* the same call again takes this context and lowered plan as they are (fast_hit) */
    ex->fast = (exec_fast_t){.valid = true,
                             .gen = ex->cache.gen,
                             .plan = plan,
                             .send = send,
                             .recv = recv,
                             .rotation = rotation,
                             .shape = shape,
                             .c = c,
                             .l = l,
                             .in_off = in_off,
                             .out_off = out_off,
                             .alloc_gen = alloc_gen,
                             .foreign = bufs.in.foreign || bufs.out.foreign,
                             .hits = ex->fast.hits};
    return MSCCLPP_OK;
}

/* Launch lowered plan `l` of context `c` for this call (ex->shape) on `stream`. */
static mscclpp_result_t launch(mscclpp_executor_t *ex, exec_context_t *c, exec_lowcache_t *l,
                               const void *send, void *recv, uint64_t in_off, uint64_t out_off,
                               mscclpp_stream_t stream, int nthreads)
{
    hal_stream_t hs = hal_api_stream(stream);
    if (ex->capturing) {
        /* a graph launches them from now on: never freed or changed while the executor lives */
        l->captured = true;
        c->ce.pinned = true;
    }
    l->low->args.input = send;
    l->low->args.output = recv;
    l->low->args.io_off[0] = in_off; /* published to the peers at the fence */
    l->low->args.io_off[1] = out_off;
    l->low->args.mailbox = c->mailbox;
    l->low->args.abort = __atomic_load_n(&ex->comm->abort_word, __ATOMIC_ACQUIRE);
    /* The signature decides the fence on the device (kern_args.h, "Launch fence"), so a
     * replayed graph fences where it must with nothing decided at capture. Only what every rank
     * agrees on goes in: the context (built collectively, so its sequence number is the same
     * everywhere) and the call. Not the buffers' offsets in their allocations, which one rank
     * alone may move. */
    exec_call_sig(c->plan->collective, exec_sig_seq(ex, c), c->digest, &ex->shape,
                  l->low->args.sig);
    l->low->args.last_sig = ex->last_sig;
    /* mscclpp_alltoallv's counts (NULL for the rest), which its plan's ops read */
    if (c->plan->per_peer && !ex->a2av_vtab)
        return ERR(MSCCLPP_ERR_INTERNAL,
                   "plan '%s' moves alltoallv counts; only "
                   "mscclpp_alltoallv runs it",
                   c->plan->name);
    l->low->args.vtab = ex->a2av_vtab;
    /* A context that reaches the peers' input or output fences every launch: those buffers
     * are the callers', ready (input written, output no longer read by the caller's earlier
     * work) only once the peer's stream has reached this launch, and the peers publish their
     * offsets there (kern_args.h). So does a point-to-point executor's every launch
     * (mscclpp_executor_set_p2p): its contexts alternate between pairs. */
    l->low->args.fence = ex->p2p || c->reaches_io;
    /* before the launch: a sync that races with it must already ask us (a graph made by the
     * capture in progress asks us after each replay) */
    CHECK(ex->capturing ? hal_api_stream_note_capture(stream, ex->source)
                        : hal_api_stream_note(stream, ex->source));
    if (!nthreads) nthreads = l->low->nthreads;
    if (ex->max_threads > 0 && nthreads > ex->max_threads) {
        /* a caller's or a tuning file's count (the plan's own was capped when lowered) */
        TRACE(SUBSYS_PLAN,
              "plan '%s': %d threads per block capped at %d, the most the %s "
              "interpreter kernel takes",
              c->plan->name, nthreads, ex->max_threads, ex->hal->name);
        nthreads = ex->max_threads;
    }
    exec_trace_launch(ex, c, l, nthreads);
    mscclpp_result_t r =
        ex->hal->launch(&l->low->args, sizeof l->low->args, l->low->nblocks, nthreads, hs);
    if (r != MSCCLPP_OK) {
        c->broken = true;
        return exec_poison(ex, r);
    }
    ex->last_seq = c->seq; /* the context a new one's setup announces itself on */
    ex->launched = true;
    if (ex->capturing) ex->captured_any = true;
    if (!hs) CHECK(exec_check_launch(ex, c));
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_execute_ex(mscclpp_executor_t *exec,
                                                const mscclpp_plan_t *plan, const void *send,
                                                void *recv, size_t send_bytes, size_t recv_bytes,
                                                mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                                mscclpp_packet_t packet, mscclpp_stream_t stream)
{
    return exec_execute(exec, plan, send, recv, send_bytes, recv_bytes, dtype, op, packet, stream,
                        0, 0);
}

MSCCLPP_API mscclpp_result_t mscclpp_execute(mscclpp_executor_t *exec, const mscclpp_plan_t *plan,
                                             const void *send, void *recv, size_t send_bytes,
                                             size_t recv_bytes, mscclpp_dtype_t dtype,
                                             mscclpp_redop_t op, mscclpp_stream_t stream)
{
    CHECK_ARG(exec != NULL);
    /* the allocations mscclpp_executor_direct just looked up for these buffers, if it did */
    take_handed(exec, send, recv, &exec->hint.mem);
    mscclpp_result_t r = exec_execute(exec, plan, send, recv, send_bytes, recv_bytes, dtype, op,
                                      MSCCLPP_PACKET_LL16, stream, 0, 0);
    exec->hint.mem.known = false;
    return r;
}

/* ---- executor object and registry -------------------------------------------------------- */

MSCCLPP_API mscclpp_result_t mscclpp_executor_create(mscclpp_comm_t *comm,
                                                     mscclpp_executor_t **exec)
{
    CHECK_ARG(comm != NULL);
    CHECK_ARG(exec != NULL);
    *exec = NULL;
    mscclpp_executor_t *ex = calloc(1, sizeof *ex);
    if (!ex) return ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
    ex->comm = comm;
    ex->hal = comm->hal;
    hal_device_props_t props;
    memset(&props, 0, sizeof props);
    int dev = 0;
    if (ex->hal->device_get(&dev) == MSCCLPP_OK &&
        ex->hal->device_props(dev, &props) == MSCCLPP_OK) {
        ex->host_memory = props.host_memory;
        ex->max_threads = props.kernel_max_threads;
    } else {
        core_clear_error();
    }
    uint64_t *abort_word = NULL; /* for the launches (kern_args_t.abort) */
    mscclpp_result_t aw = comm_abort_word(comm, &abort_word);
    if (aw != MSCCLPP_OK) {
        free(ex);
        return aw;
    }
    pthread_mutex_init(&ex->lock, NULL);
    /* the launch fence's record of the previous launch (kern_args.h): none yet */
    mscclpp_result_t res =
        ex->hal->mem_alloc(KERN_EXEC_WORDS * sizeof(uint64_t), (void **)&ex->last_sig);
    if (res == MSCCLPP_OK)
        res = ex->hal->memset_sync(ex->last_sig, 0, KERN_EXEC_WORDS * sizeof(uint64_t));
    if (res == MSCCLPP_OK) res = exec_trace_attach(ex);
    if (res == MSCCLPP_OK) res = hal_api_source_add(exec_stream_check, ex, &ex->source);
    if (res != MSCCLPP_OK) {
        exec_trace_finish(ex); /* nothing launched: frees the table, writes nothing */
        if (ex->last_sig) ex->hal->mem_free(ex->last_sig);
        pthread_mutex_destroy(&ex->lock);
        free(ex);
        return res;
    }
    exec_registry_init(&ex->registry);
    exec_plans_load_defaults(&ex->registry, ex->hal->name, comm->nranks, comm->nlocal);
    mscclpp_result_t tr = exec_tuning_attach(ex);
    /* the plans made for this job, registered after every loaded one */
    if (tr == MSCCLPP_OK) tr = exec_select_attach(ex);
    if (tr != MSCCLPP_OK) {
        exec_tuning_free(ex->tuning);
        exec_registry_fini(&ex->registry);
        exec_select_detach(ex);
        hal_api_source_remove(ex->source);
        exec_trace_finish(ex);
        ex->hal->mem_free(ex->last_sig);
        pthread_mutex_destroy(&ex->lock);
        free(ex);
        return tr;
    }
    *exec = ex;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_set_p2p(mscclpp_executor_t *exec)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(exec->cache.head == NULL);
    exec->p2p = true;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_peer_local(mscclpp_executor_t *exec, int peer,
                                                         int *local)
{
    CHECK_ARG(exec != NULL && local != NULL);
    CHECK_ARG(peer >= 0 && peer < exec->comm->nranks);
    *local = exec->comm->node_id[peer] == exec->comm->node_id[exec->comm->rank];
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_get_async_error(mscclpp_executor_t *exec,
                                                              mscclpp_result_t *result)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(result != NULL);
    /* the error's message is left for mscclpp_last_error(); the query itself succeeded */
    *result = exec_check(exec);
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_reset(mscclpp_executor_t *exec)
{
    CHECK_ARG(exec != NULL);
    /* the barrier below cannot bring back ranks that are gone or elsewhere */
    CHECK(exec_check(exec));
    exec_contexts_free_all(exec, false);
    /* peers may still read from our scratch until they are done with theirs */
    return mscclpp_bootstrap_barrier(exec->comm->boot);
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_destroy(mscclpp_executor_t *exec)
{
    if (!exec) return MSCCLPP_OK;
    /* Launches still queued on user streams use the contexts freed below: wait for them
     * (bounded: every interpreter wait is) and report what they recorded, which no later
     * stream sync could ask a destroyed executor for. */
    mscclpp_result_t res = hal_api_source_drain(exec->source);
    /* then, so that no stream sync asks a half-destroyed executor */
    hal_api_source_remove(exec->source);
    /* the launches are done: the phase trace's last rows are final (MSCCLPP_KERN_TRACE) */
    mscclpp_result_t tr = exec_trace_finish(exec);
    if (res == MSCCLPP_OK) res = tr;
    exec_native_release(exec); /* before the communicator may go */
    exec_contexts_free_all(exec, true);
    exec_alltoallv_release(exec);
    board_release(exec); /* no peer writes it: each agreement of theirs needs one of mine */
    if (exec->tmp) exec->hal->mem_free(exec->tmp);
    exec->hal->mem_free(exec->last_sig);
    exec_tuning_free(exec->tuning);
    exec_registry_fini(&exec->registry);
    exec_select_detach(exec);
    pthread_mutex_destroy(&exec->lock);
    free(exec);
    return res;
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_register_plan(mscclpp_executor_t *exec,
                                                            const mscclpp_plan_t *plan,
                                                            int ranks_per_node, const char *tags)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(plan != NULL);
    CHECK_ARG(ranks_per_node >= 0);
    return exec_registry_register(&exec->registry, plan, ranks_per_node, tags);
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_load_plan_dir(mscclpp_executor_t *exec,
                                                            const char *dir, int *nloaded)
{
    CHECK_ARG(exec != NULL);
    return exec_registry_load_dir_first(&exec->registry, dir ? dir : exec_plan_dir(), nloaded,
                                        NULL);
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_select_plan(mscclpp_executor_t *exec,
                                                          const char *collective, int inplace,
                                                          uint64_t message_bytes, const char *tags,
                                                          const mscclpp_plan_t **plan)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(collective != NULL);
    CHECK_ARG(plan != NULL);
    return exec_registry_select(&exec->registry, collective, exec->comm->nranks,
                                exec->comm->nlocal, inplace != 0, message_bytes, tags, plan);
}

/* Forgetting an allocation (exec_forget.h): the entries of the executor's cache that hold it,
 * plan contexts and native algorithms' buffer sets alike (executor/cache.h). */
MSCCLPP_API mscclpp_result_t mscclpp_executor_forget(mscclpp_executor_t *exec, const void *base,
                                                     int *dropped)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(base != NULL);
    exec->handed.known = false; /* an allocation was freed: nothing looked up before holds */
    int n = 0;
    mscclpp_result_t r = exec_cache_forget(exec, base, &n);
    if (dropped) *dropped = n;
    return r;
}

/* A plan run as the caller launches it: a native algorithm with its own kernels, or a loaded
 * plan with the caller's thread count (its block count is the plan's). */
MSCCLPP_API mscclpp_result_t mscclpp_execute_launch(
    mscclpp_executor_t *exec, const mscclpp_plan_t *plan, const void *send, void *recv,
    size_t send_bytes, size_t recv_bytes, mscclpp_dtype_t dtype, mscclpp_redop_t op,
    mscclpp_packet_t packet, int nblocks, int nthreads_per_block, mscclpp_stream_t stream)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(plan != NULL);
    /* a native algorithm takes any launch shape: it launches its own kernels */
    if (exec_native_of(plan))
        return exec_native_execute(exec, plan, send, recv, send_bytes, recv_bytes, dtype, op,
                                   nblocks, nthreads_per_block, 0, stream);
    if (nthreads_per_block < 0 || nthreads_per_block > 1024)
        return ERR_ARG("plan '%s': nthreads_per_block %d is not in [0, 1024] (0: the plan's)",
                       plan->name, nthreads_per_block);
    /* A plan's thread blocks are its program: each block runs its own op list, so the count
       cannot change at launch. Other counts are other plans (variants the DSL generates). */
    if (nblocks < 0 || (nblocks != 0 && nblocks != exec_plan_nblocks(plan)))
        return ERR(MSCCLPP_ERR_UNSUPPORTED,
                   "plan '%s' runs %d thread blocks per rank; "
                   "nblocks=%d needs a plan variant with that many (mscclpp_executor_list_plans)",
                   plan->name, exec_plan_nblocks(plan), nblocks);
    return exec_execute(exec, plan, send, recv, send_bytes, recv_bytes, dtype, op, packet, stream,
                        0, nthreads_per_block);
}

/* ---- collectives with registered plans --------------------------------------------------- */

static mscclpp_result_t run_staged(mscclpp_executor_t *ex, const exec_choice_t *ch,
                                   const void *stage_src, void *recv, size_t in_bytes,
                                   size_t out_bytes, mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                   mscclpp_stream_t stream);
static bool runs_on(mscclpp_executor_t *ex, const struct mscclpp_plan *plan, const void *send,
                    const void *recv, size_t send_bytes, size_t recv_bytes,
                    mscclpp_dtype_t dtype);
static bool runs_on_mem(mscclpp_executor_t *ex, const struct mscclpp_plan *plan,
                        const void *send, const void *recv, size_t send_bytes,
                        size_t recv_bytes, mscclpp_dtype_t dtype, const hal_mem_info_t *in,
                        const hal_mem_info_t *out);

#define AGREE_BUFS_MAGIC 0x53465542u /* "BUFS" */
#define AGREE_BUFS_VERSION 1u
#define AGREE_BUFS_SHAREABLE 1u
#define AGREE_BUFS_WORDS 3 /* magic << 32 | version, flags, identity; then the call's hash */
#define BOARD_SLOT_U64 8   /* a board slot, 64 bytes: word 0 the agreement's number, then its words */

/* The board's bytes for n ranks: two slots per rank (agreements alternate between them). */
static size_t board_size(int n)
{
    size_t b = (size_t)n * 2 * BOARD_SLOT_U64 * sizeof(uint64_t);
    return (b + 4095) / 4096 * 4096;
}

static void board_release(mscclpp_executor_t *ex)
{
    for (int q = 0; ex->board_peer && q < ex->comm->nranks; q++)
        if (ex->board_peer[q] && ex->board_peer[q] != ex->board)
            munmap(ex->board_peer[q], ex->board_bytes);
    if (ex->board) munmap(ex->board, ex->board_bytes);
    free(ex->board_peer);
    ex->board = NULL;
    ex->board_peer = NULL;
}

#define BOARD_NAME_MAX 64

/* A board of `bytes` in a POSIX shared-memory object named `name` (made, or opened when
 * !create), mapped here; NULL when it cannot be. The object's pages start zeroed. */
static uint64_t *board_map(const char *name, size_t bytes, bool create)
{
    int fd = shm_open(name, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), 0600);
    if (fd < 0) return NULL;
    struct stat st;
    void *m = MAP_FAILED;
    bool sized = create ? ftruncate(fd, (off_t)bytes) == 0
                        : fstat(fd, &st) == 0 && (size_t)st.st_size == bytes;
    if (sized) m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED && create) shm_unlink(name);
    return m == MAP_FAILED ? NULL : m;
}

/*
 * The board, set up at the first buffer agreement (every rank makes it at the same call):
 * where every rank is on this node, each rank makes a POSIX shared-memory object (host memory
 * whatever the backend: only host threads read and write it), the ranks exchange the names in
 * one bootstrap allgather, map every peer's, and say in a second one whether they could; each
 * removes its own name after it (every peer has opened it by then, or given up), so nothing
 * outlives the mappings. Every rank uses the board only when every rank could map every one;
 * otherwise every rank agrees through the bootstrap (board_state -1). A failure of the
 * bootstrap itself breaks the executor (the caller).
 */
static mscclpp_result_t board_setup(mscclpp_executor_t *ex)
{
    static _Atomic unsigned made; /* boards this process made, for unique names */
    const int n = ex->comm->nranks, me = ex->comm->rank;
    bool local = true;
    for (int q = 0; q < n && local; q++) local = q == me || comm_same_node(ex->comm, q);
    ex->board_state = -1;
    if (!local) return MSCCLPP_OK; /* a rank elsewhere: every rank has one, so all decide so */
    const size_t bytes = board_size(n);
    char(*names)[BOARD_NAME_MAX] = calloc((size_t)n, sizeof *names);
    uint8_t *ok = calloc((size_t)n, 1);
    ex->board_peer = calloc((size_t)n, sizeof *ex->board_peer);
    if (!names || !ok || !ex->board_peer) {
        free(names);
        free(ok);
        board_release(ex);
        return ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
    }
    ex->board_bytes = bytes;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(names[me], BOARD_NAME_MAX, "/mscclpp-board-%ld-%d-%u-%lx", (long)getpid(), me,
             made++, (unsigned long)ts.tv_nsec);
    ex->board = board_map(names[me], bytes, true);
    if (!ex->board) {
        INFO(SUBSYS_EXEC, "rank %d: no shared board for buffer agreements (shm_open %s: %s): "
             "the bootstrap", me, names[me], strerror(errno));
        names[me][0] = '\0';
    }
    mscclpp_result_t r = mscclpp_bootstrap_allgather(ex->comm->boot, names, sizeof *names);
    bool mine = r == MSCCLPP_OK && ex->board;
    for (int q = 0; q < n && mine; q++) {
        if (q == me) {
            ex->board_peer[q] = ex->board;
            continue;
        }
        names[q][BOARD_NAME_MAX - 1] = '\0'; /* a peer's words: a string whatever it sent */
        ex->board_peer[q] = names[q][0] ? board_map(names[q], bytes, false) : NULL;
        mine = ex->board_peer[q] != NULL;
    }
    ok[me] = mine;
    if (r == MSCCLPP_OK) r = mscclpp_bootstrap_allgather(ex->comm->boot, ok, 1);
    if (ex->board) shm_unlink(names[me]); /* every peer has it mapped, or never will */
    bool every = r == MSCCLPP_OK;
    for (int q = 0; q < n && every; q++) every = ok[q];
    free(names);
    free(ok);
    if (!every) {
        board_release(ex);
        return r; /* OK: some rank could not map some board, so every rank uses the bootstrap */
    }
    ex->board_state = 1;
    return MSCCLPP_OK;
}

/*
 * One agreement on the board: my `w` words of all[] (w < BOARD_SLOT_U64) into my slot of this
 * agreement's parity on every peer's board, number last (release), then every peer's from my
 * board once their number is this agreement's. A slot is rewritten two agreements later at the
 * earliest, by which time its reader took part in the one between: it has read it.
 */
static mscclpp_result_t board_exchange(mscclpp_executor_t *ex, uint64_t *all, size_t w)
{
    const int n = ex->comm->nranks, me = ex->comm->rank;
    const uint64_t seq = ++ex->board_seq;
    const size_t par = (size_t)(seq & 1);
    const uint64_t *mine = all + (size_t)me * w;
    for (int q = 0; q < n; q++) {
        if (q == me) continue;
        uint64_t *s = ex->board_peer[q] + ((size_t)me * 2 + par) * BOARD_SLOT_U64;
        for (size_t i = 0; i < w; i++) __atomic_store_n(s + 1 + i, mine[i], __ATOMIC_RELAXED);
        __atomic_store_n(s, seq, __ATOMIC_RELEASE);
    }
    for (int q = 0; q < n; q++) {
        if (q == me) continue;
        const uint64_t *s = ex->board + ((size_t)q * 2 + par) * BOARD_SLOT_U64;
        base_wait_t wt;
        base_wait_init(&wt, config_timeout_ns(), BASE_WAIT_SPIN_SHARED);
        while (__atomic_load_n(s, __ATOMIC_ACQUIRE) != seq) {
            if (comm_aborted(ex->comm)) return comm_abort_error(ex->comm, "buffer agreement");
            if (!base_wait_pause(&wt))
                return ERR(MSCCLPP_ERR_TIMEOUT,
                           "rank %d: rank %d did not reach the buffer agreement of this call "
                           "(MSCCLPP_PLAN_DIRECT=auto, docs/plan-selection.md) within "
                           "MSCCLPP_TIMEOUT: it is gone, stuck in an earlier call, or makes "
                           "another call (every rank must make the same calls in the same order)",
                           me, q);
        }
        for (size_t i = 0; i < w; i++)
            all[(size_t)q * w + i] = __atomic_load_n(s + 1 + i, __ATOMIC_RELAXED);
    }
    return MSCCLPP_OK;
}

/* Every rank's `w` words of all[] (mine in place): on the board where there is one. */
static mscclpp_result_t agree_exchange(mscclpp_executor_t *ex, uint64_t *all, size_t w)
{
    if (!ex->board_state) CHECK(board_setup(ex));
    if (ex->board_state > 0) return board_exchange(ex, all, w);
    return mscclpp_bootstrap_allgather(ex->comm->boot, all, w * sizeof *all);
}

/*
 * MSCCLPP_PLAN_DIRECT=auto (exec_choice_t.shared): whether this call runs the plan for calls
 * whose ranks all pass shareable buffers, agreed by every rank for this very call. NCCL lets a
 * rank pass other buffers at any call, so no rank can tell from its own buffers whether its
 * peers' are still those a context mapped (a rank that moved alone made the call time out on
 * every rank). One bootstrap allgather: each rank's "the shared plan takes my buffers as they
 * are" (memory the peers can map, the sizes fit) and their identity (allocations); every rank
 * then decides alike: *shared when all take them, and *label, which the context is keyed by
 * (exec_context_t.peers): a call where any rank's buffers differ from a context's misses it on
 * every rank, so the new one is built by all. Only calls auto's shared plan may serve pay it.
 */
static mscclpp_result_t agree_buffers(mscclpp_executor_t *ex, const exec_call_t *call,
                                      const exec_choice_t *ch, const void *send, void *recv,
                                      bool *shared, uint64_t *label, exec_hint_t *looked)
{
    const int n = ex->comm->nranks, me = ex->comm->rank;
    const struct mscclpp_plan *p = ch->shared;
    /* the buffers as mscclpp_executor_direct looked them up in this call, else asked now */
    const bool known = looked->mem.known && looked->mem.send == send && looked->mem.recv == recv;
    hal_mem_info_t in, out;
    if (known) out = looked->mem.out;
    else exec_mem_of(ex->hal, recv, &out);
    bool mine;
    uint64_t id = EXEC_HASH_SEED;
    if (!ch->shared_staged) {
        if (known) in = looked->mem.in;
        else if (send == recv) in = out;
        else exec_mem_of(ex->hal, send, &in);
        mine = runs_on_mem(ex, p, send, recv, call->in_bytes, call->out_bytes, call->dtype, &in,
                           &out);
        /* the call's own buffers, looked up: exec_execute need not ask again (call_mem_of) */
        looked->mem = (exec_looked_t){true, send, recv, in, out};
        id = exec_hash_u64(exec_hash_u64(id, (uint64_t)(uintptr_t)in.base), in.id);
    } else {
        /* an in-place call on an out-of-place plan: its input goes to the executor's staging
         * buffer (run_staged), shareable, grown alike on every rank */
        uint64_t out_off = (uint64_t)((const char *)recv - (const char *)out.base);
        mine = out.shareable && call->out_bytes <= out.size - out_off &&
               exec_layout_fits(p, me, call->in_bytes, call->out_bytes, call->dtype);
        id = exec_hash_u64(id, 1); /* "the staging buffer" */
    }
    id = exec_hash_u64(exec_hash_u64(id, (uint64_t)(uintptr_t)out.base), out.id);
    /* the call itself: ranks that make different calls here find out, none having started */
    const uint64_t what = exec_call_hash(call);
    const size_t w = AGREE_BUFS_WORDS + 1;
    uint64_t *all = calloc((size_t)n * w, sizeof *all);
    if (!all) return ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
    uint64_t *my = all + (size_t)me * w;
    my[0] = ((uint64_t)AGREE_BUFS_MAGIC << 32) | AGREE_BUFS_VERSION;
    my[1] = mine ? AGREE_BUFS_SHAREABLE : 0;
    my[2] = id;
    my[3] = what;
    mscclpp_result_t r = agree_exchange(ex, all, w);
    if (r != MSCCLPP_OK && !strstr(mscclpp_last_error(), "buffer agreement")) {
        /* the bootstrap's own words (its first use sets the board up) name neither the call
         * nor what to do */
        char why[512];
        snprintf(why, sizeof why, "%s", mscclpp_last_error());
        r = ERR(r, "rank %d: the buffer agreement of this %s call (MSCCLPP_PLAN_DIRECT=auto, "
                "docs/plan-selection.md) failed: %s; a peer is gone, stuck in an earlier call, "
                "or makes another call (every rank must make the same calls in the same order)",
                me, call->collective, why);
    }
    if (r != MSCCLPP_OK) {
        free(all);
        /* a peer that is gone, or not making this call: nothing was launched, but the peers
         * may be anywhere now */
        return exec_poison(ex, comm_fail(ex->comm, r, true));
    }
    bool every = true;
    uint64_t h = EXEC_HASH_SEED;
    int other = -1;
    for (int q = 0; q < n; q++) {
        const uint64_t *t = all + (size_t)q * w;
        if (t[0] != my[0]) {
            free(all);
            return exec_poison(ex, ERR(MSCCLPP_ERR_REMOTE,
                                       "executor: rank %d sent a buffer agreement of another "
                                       "format or version",
                                       q));
        }
        if (t[3] != what && other < 0) other = q;
        every = every && (t[1] & AGREE_BUFS_SHAREABLE);
        h = exec_hash_u64(h, t[2]);
    }
    free(all);
    if (other >= 0) /* every rank got the same words: all refuse this call, unharmed */
        return ERR_ARG("ranks disagree on a call: rank %d and rank %d make different %s calls "
                       "(size, dtype, in-place-ness or root; here %zu bytes in, %zu out); every "
                       "rank must make the same calls in the same order",
                       me, other, call->collective, call->in_bytes, call->out_bytes);
    *shared = every;
    *label = h ? h : 1;
    return MSCCLPP_OK;
}

/* A broken executor reports (or, after ranks disagreed, resynchronises) before the buffer
 * agreement: every rank then does, since they all broke alike. */
static mscclpp_result_t ready_for_agreement(mscclpp_executor_t *ex, mscclpp_stream_t stream,
                                           bool *capture_known, bool *captured)
{
    if (comm_aborted(ex->comm)) return exec_poison(ex, comm_abort_error(ex->comm, "execute"));
    bool capturing = false;
    if (stream && stream->ops == ex->hal) CHECK(stream_capturing(ex, stream, &capturing));
    /* what exec_execute would ask (a stream of another backend: its checks report it) */
    *capture_known = !stream || stream->ops == ex->hal;
    *captured = capturing;
    if (capturing) return MSCCLPP_OK; /* exec_execute decides (a capture cannot resync) */
    bool resync;
    uint32_t seq;
    CHECK(exec_ready(ex, &resync, &seq));
    if (!resync) return MSCCLPP_OK;
    exec_contexts_free_all(ex, false);
    return exec_resync_done(ex, seq);
}

/*
 * Run `collective` with the plan exec_select (select.c) chooses; an in-place call served by an
 * out-of-place plan first copies its input into a staging buffer. Where the choice has a plan
 * for calls whose ranks all pass shareable buffers (exec_choice_t.shared), every rank says
 * whether its buffers are such, for this call (agree_buffers): all of them run that plan, or
 * all run the other one.
 */
static mscclpp_result_t run_collective(mscclpp_executor_t *ex, const char *collective,
                                       const void *send, void *recv, size_t in_bytes,
                                       size_t out_bytes, bool inplace, const void *stage_src,
                                       mscclpp_dtype_t dtype, mscclpp_redop_t op, int root,
                                       mscclpp_stream_t stream)
{
    exec_hint_t looked = {0}; /* what this call asked the backend already */
    /* what mscclpp_executor_direct looked up for it, if it asked first (the NCCL layer) */
    take_handed(ex, send, recv, &looked.mem);
    exec_call_t call = {collective, inplace, in_bytes, out_bytes, dtype, root};
    exec_choice_t ch;
    CHECK(exec_select(ex, &call, &ch));
    bool shared = false;
    uint64_t label = 0;
    if (ch.shared) {
        CHECK(ready_for_agreement(ex, stream, &looked.capture_known, &looked.capturing));
        looked.capture_stream = stream;
        CHECK(agree_buffers(ex, &call, &ch, send, recv, &shared, &label, &looked));
        /* what mscclpp_executor_choose_plan and mscclpp_executor_direct report */
        if (exec_select_verdict(ex, &call) != (shared ? 1 : -1))
            exec_select_agreed(ex, &call, ch.shared, shared);
    }
    if (shared) {
        ch.plan = ch.shared;
        ch.rotation = ch.shared_rotation;
        ch.staged = ch.shared_staged;
    }
    /* what the call's signature says that exec_execute cannot see (kern_args.h) */
    looked.set = true;
    looked.inplace = inplace;
    looked.root = root;
    looked.tuning = ex->tuning ? ex->tuning->digest : 0;
    looked.peers = label;
    ex->hint = looked;
    mscclpp_result_t r;
    if (!ch.staged)
        r = exec_execute(ex, ch.plan, send, recv, in_bytes, out_bytes, dtype, op,
                         MSCCLPP_PACKET_LL16, stream, ch.rotation, ch.nthreads);
    else r = run_staged(ex, &ch, stage_src, recv, in_bytes, out_bytes, dtype, op, stream);
    ex->hint = (exec_hint_t){0};
    return r;
}

/* An in-place call served by an out-of-place plan: its input is copied into `tmp` first. */
static mscclpp_result_t run_staged(mscclpp_executor_t *ex, const exec_choice_t *ch,
                                   const void *stage_src, void *recv, size_t in_bytes,
                                   size_t out_bytes, mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                   mscclpp_stream_t stream)
{
    bool capturing = false;
    CHECK(stream_capturing(ex, stream, &capturing));
    if (ex->tmp_bytes < in_bytes) {
        if (ex->tmp && (ex->tmp_captured || capturing || exec_cannot_drain(ex))) {
            /* a graph stages into the old buffer, or queued work may still read it and cannot
             * be waited for now: it stays, with its contexts, until the executor goes */
            CHECK(exec_keep(ex, ex->tmp));
        } else if (ex->tmp) {
            /* launches still queued read the old staging buffer: they end first; contexts
             * keyed on it (plans that reach their peers' input) go with it */
            int n;
            CHECK(hal_api_source_drain(ex->source));
            CHECK(exec_cache_forget(ex, ex->tmp, &n));
            ex->hal->mem_free(ex->tmp);
        }
        ex->tmp = NULL;
        ex->tmp_bytes = 0;
        ex->tmp_captured = false;
        size_t want = in_bytes < 4096 ? 4096 : in_bytes;
        CHECK(ex->hal->mem_alloc_shareable(want, &ex->tmp));
        ex->tmp_bytes = want;
    }
    if (capturing) ex->tmp_captured = true;
    if (stream)
        CHECK(ex->hal->memcpy_async(ex->tmp, stage_src, in_bytes, hal_api_stream(stream)));
    else
        CHECK(ex->hal->memcpy_sync(ex->tmp, stage_src, in_bytes));
    mscclpp_result_t r = exec_execute(ex, ch->plan, ex->tmp, recv, in_bytes, out_bytes, dtype, op,
                                      MSCCLPP_PACKET_LL16, stream, ch->rotation, ch->nthreads);
    /* a failed call must not leave the staging copy queued behind the caller's back (a
     * capture cannot be waited for: the copy is only recorded there) */
    if (r != MSCCLPP_OK && stream && !capturing) (void)ex->hal->stream_sync(hal_api_stream(stream));
    return r;
}

/* runs_on, with the buffers' allocations already looked up (exec_mem_of: *in of send, *out
 * of recv), so that a caller that needs them too asks the backend once per buffer. */
static bool runs_on_mem(mscclpp_executor_t *ex, const struct mscclpp_plan *plan,
                        const void *send, const void *recv, size_t send_bytes,
                        size_t recv_bytes, mscclpp_dtype_t dtype, const hal_mem_info_t *in,
                        const hal_mem_info_t *out)
{
    exec_bufs_t b = {.in = *in, .out = *out};
    if (exec_native_of(plan)) /* maps the callers' allocations itself */
        return b.in.shareable && b.out.shareable;
    if (!exec_layout_fits(plan, ex->comm->rank, send_bytes, recv_bytes, dtype)) return false;
    if (exec_plan_shares_io(plan)) {
        if (!b.in.shareable || !b.out.shareable) return false;
        uint64_t in_off = (uint64_t)((const char *)send - (const char *)b.in.base);
        uint64_t out_off = (uint64_t)((const char *)recv - (const char *)b.out.base);
        return send_bytes <= b.in.size - in_off && recv_bytes <= b.out.size - out_off;
    }
    return ex->host_memory || ((!send_bytes || b.in.size) && (!recv_bytes || b.out.size));
}

/* Whether `plan` would run on these very buffers: its chunk layout takes the sizes, and the
 * buffers are memory it can use (check_call's rules, without recording an error). What it
 * looked up is handed to the executor's next call (ex->handed, take_handed). */
static bool runs_on(mscclpp_executor_t *ex, const struct mscclpp_plan *plan, const void *send,
                    const void *recv, size_t send_bytes, size_t recv_bytes,
                    mscclpp_dtype_t dtype)
{
    if (!exec_native_of(plan) && !exec_layout_fits(plan, ex->comm->rank, send_bytes, recv_bytes,
                                                   dtype))
        return false; /* no lookup needed */
    const uint64_t gen = hal_api_alloc_gen(); /* before the lookups, as exec_execute's */
    hal_mem_info_t in, out;
    exec_mem_of(ex->hal, send, &in);
    if (recv == send) out = in; /* in place: one allocation */
    else exec_mem_of(ex->hal, recv, &out);
    ex->handed = (exec_looked_t){true, send, recv, in, out};
    ex->handed_gen = gen;
    return runs_on_mem(ex, plan, send, recv, send_bytes, recv_bytes, dtype, &in, &out);
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_direct(mscclpp_executor_t *exec,
                                                     const mscclpp_plan_t *plan,
                                                     const char *collective, const void *send,
                                                     const void *recv, size_t send_bytes,
                                                     size_t recv_bytes, mscclpp_dtype_t dtype,
                                                     int *direct)
{
    CHECK_ARG(exec != NULL);
    exec->handed.known = false; /* only what this call looks up is handed on */
    CHECK_ARG(direct != NULL);
    CHECK_ARG((int)dtype >= 0 && dtype < MSCCLPP_DTYPE_COUNT);
    *direct = 0;
    if (plan) {
        *direct = runs_on(exec, plan, send, recv, send_bytes, recv_bytes, dtype);
        return MSCCLPP_OK;
    }
    CHECK_ARG(collective != NULL);
    bool inplace =
        exec_call_in_place(collective, exec->comm->rank, send, recv, send_bytes, recv_bytes);
    exec_call_t call = {collective, inplace, send_bytes, recv_bytes, dtype, 0};
    exec_choice_t ch;
    if (exec_select(exec, &call, &ch) != MSCCLPP_OK) {
        core_clear_error(); /* no plan: the call itself says why */
        return MSCCLPP_OK;
    }
    /* auto's shared plan: as the shape's last call agreed (none yet: as if every rank's buffers
     * were shareable); each call agrees anew (run_collective) */
    if (ch.shared && exec_select_verdict(exec, &call) >= 0) {
        ch.plan = ch.shared;
        ch.staged = ch.shared_staged;
    }
    const struct mscclpp_plan *p = ch.plan;
    if (!ch.staged)
        *direct = runs_on(exec, p, send, recv, send_bytes, recv_bytes, dtype);
    else /* run_collective: the input goes to the executor's own staging buffer, on the stream */
        *direct = exec_native_of(p) ? 0
                  : exec_plan_shares_io(p)
                      ? 0 /* the staging buffer's contexts would follow its growth: stage outside */
                      : runs_on(exec, p, recv, recv, send_bytes, recv_bytes, dtype);
    return MSCCLPP_OK;
}

/* The checks every collective makes: *bytes = count elements of dtype, times `ranks` (the
 * buffer that holds every rank's block), refused when it does not fit a size_t. */
static mscclpp_result_t coll_check(mscclpp_executor_t *ex, const char *coll, const void *send,
                                   void *recv, size_t count, mscclpp_dtype_t dtype, int ranks,
                                   size_t *bytes)
{
    CHECK_ARG(ex != NULL);
    CHECK_ARG((int)dtype >= 0 && dtype < MSCCLPP_DTYPE_COUNT);
    size_t es = mscclpp_dtype_size(dtype);
    if (count > SIZE_MAX / es / (size_t)ranks)
        return ERR_ARG("%s: a count of %zu %s elements%s overflows the byte count (%zu elements "
                       "at most)",
                       coll, count, mscclpp_dtype_name(dtype), ranks > 1 ? " for every rank" : "",
                       SIZE_MAX / es / (size_t)ranks);
    CHECK_ARG(send != NULL);
    CHECK_ARG(recv != NULL);
    *bytes = count * es;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_allreduce(mscclpp_executor_t *exec, const void *send,
                                               void *recv, size_t count, mscclpp_dtype_t dtype,
                                               mscclpp_redop_t op, mscclpp_stream_t stream)
{
    size_t b;
    CHECK(coll_check(exec, "allreduce", send, recv, count, dtype, 1, &b));
    CHECK_ARG((int)op >= 0 && op < MSCCLPP_REDOP_COUNT);
    return run_collective(exec, "allreduce", send, recv, b, b, send == recv, send, dtype, op, 0,
                          stream);
}

MSCCLPP_API mscclpp_result_t mscclpp_allgather(mscclpp_executor_t *exec, const void *send,
                                               void *recv, size_t send_count,
                                               mscclpp_dtype_t dtype, mscclpp_stream_t stream)
{
    size_t in;
    CHECK_ARG(exec != NULL);
    int n = exec->comm->nranks, rank = exec->comm->rank;
    CHECK(coll_check(exec, "allgather", send, recv, send_count, dtype, n, &in));
    bool inplace = (const char *)send == (char *)recv + (size_t)rank * in;
    return run_collective(exec, "allgather", send, recv, in, in * (size_t)n, inplace, send, dtype,
                          MSCCLPP_REDOP_PLAN, 0, stream);
}

MSCCLPP_API mscclpp_result_t mscclpp_reducescatter(mscclpp_executor_t *exec, const void *send,
                                                   void *recv, size_t recv_count,
                                                   mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                                   mscclpp_stream_t stream)
{
    size_t out;
    CHECK_ARG(exec != NULL);
    int n = exec->comm->nranks, rank = exec->comm->rank;
    CHECK(coll_check(exec, "reducescatter", send, recv, recv_count, dtype, n, &out));
    CHECK_ARG((int)op >= 0 && op < MSCCLPP_REDOP_COUNT);
    bool inplace = (char *)recv == (const char *)send + (size_t)rank * out;
    return run_collective(exec, "reducescatter", send, recv, out * (size_t)n, out, inplace, send,
                          dtype, op, 0, stream);
}

MSCCLPP_API mscclpp_result_t mscclpp_alltoall(mscclpp_executor_t *exec, const void *send,
                                              void *recv, size_t count, mscclpp_dtype_t dtype,
                                              mscclpp_stream_t stream)
{
    size_t b;
    CHECK_ARG(exec != NULL);
    CHECK(coll_check(exec, "alltoall", send, recv, count, dtype, exec->comm->nranks, &b));
    b *= (size_t)exec->comm->nranks;
    return run_collective(exec, "alltoall", send, recv, b, b, send == recv, send, dtype,
                          MSCCLPP_REDOP_PLAN, 0, stream);
}

MSCCLPP_API mscclpp_result_t mscclpp_broadcast(mscclpp_executor_t *exec, const void *send,
                                               void *recv, size_t count, mscclpp_dtype_t dtype,
                                               int root, mscclpp_stream_t stream)
{
    size_t b;
    CHECK(coll_check(exec, "broadcast", send, recv, count, dtype, 1, &b));
    CHECK_ARG(root >= 0 && root < exec->comm->nranks);
    /* a loaded plan written for another root serves `root` with its ranks rotated (select.c) */
    return run_collective(exec, "broadcast", send, recv, b, b, send == recv, send, dtype,
                          MSCCLPP_REDOP_PLAN, root, stream);
}

MSCCLPP_API mscclpp_result_t mscclpp_reduce(mscclpp_executor_t *exec, const void *send, void *recv,
                                            size_t count, mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                            int root, mscclpp_stream_t stream)
{
    size_t b;
    CHECK(coll_check(exec, "reduce", send, recv, count, dtype, 1, &b));
    CHECK_ARG((int)op >= 0 && op < MSCCLPP_REDOP_COUNT);
    CHECK_ARG(root >= 0 && root < exec->comm->nranks);
    return run_collective(exec, "reduce", send, recv, b, b, send == recv, send, dtype, op, root,
                          stream);
}
