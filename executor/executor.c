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
 * See executor/executor.h for the objects and how the files divide the work.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/config.h"
#include "base/debug.h"
#include "executor/executor.h"
#include "hal/hal_api.h"

/* ---- execution --------------------------------------------------------------------------- */

/* The checks of a call that need no peer: a context for unusable buffers would be built for
 * nothing. */
static mscclpp_result_t check_call(mscclpp_executor_t *ex, const mscclpp_plan_t *plan,
                                   const void *send, void *recv, size_t send_bytes,
                                   size_t recv_bytes, mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                   mscclpp_packet_t packet, mscclpp_stream_t stream)
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
    void *base;
    size_t in_alloc, out_alloc;
    exec_alloc_of(ex->hal, send, &base, &in_alloc);
    exec_alloc_of(ex->hal, recv, &base, &out_alloc);
    if (!in_alloc || !out_alloc)
        return ERR_ARG("execute: buffers must be memory of the %s backend (mscclpp_malloc); "
                       "%s is not", ex->hal->name, !in_alloc ? "send" : "recv");
    return MSCCLPP_OK;
}

/*
 * The launch fence's decision for this call (kern_args.h, "Launch fence"). It is made on the
 * host, so a captured launch keeps the decision of its capture on every replay, and replays
 * may run between any two calls: a captured launch always fences, and once the executor has
 * captured, so does every later launch (docs/graphs.md). A decision taken on the device would
 * spare those fences.
 */
static bool fence_decide(const mscclpp_executor_t *ex, const exec_call_key_t *key)
{
    if (ex->capturing || ex->captured_any) return true;
    return ex->launched && memcmp(key, &ex->last_call, sizeof *key) != 0;
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
    if (comm_aborted(ex->comm)) return exec_poison(ex, comm_abort_error(ex->comm, "execute"));
    core_set_culprit(-1); /* whom this call's failure blames, if it fails (comm_fail) */
    bool capturing = false;
    /* a stream of another backend is reported by the checks below */
    if (!stream || stream->ops == ex->hal) CHECK(stream_capturing(ex, stream, &capturing));
    bool outer = ex->capturing;
    ex->capturing = capturing;
    mscclpp_result_t r = execute_captured(ex, plan, send, recv, send_bytes, recv_bytes, dtype, op,
                                          packet, stream, rotation, nthreads);
    ex->capturing = outer;
    return r;
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
    CHECK(check_call(ex, plan, send, recv, send_bytes, recv_bytes, dtype, op, packet, stream));
    int vrank = (ex->comm->rank - rotation + ex->comm->nranks) % ex->comm->nranks;
    if (plan->partial && plan->part_rank != vrank)
        return ERR_ARG("plan '%s' holds rank %d's part only (a plan made for one rank); this is "
                       "rank %d",
                       plan->name, plan->part_rank, vrank);
    CHECK(exec_check(ex));

    exec_context_t *c = NULL;
    ex->setup_talked = false;
    mscclpp_result_t r = exec_context_get(ex, plan, send, recv, rotation, dtype, &c);
    if (r != MSCCLPP_OK) {
        /* a setup that failed before any message (an unsupported plan, local memory) left
         * the peers where they were; one that talked did not */
        if (ex->setup_talked ||
            (r != MSCCLPP_ERR_UNSUPPORTED && r != MSCCLPP_ERR_INVALID_ARG &&
             r != MSCCLPP_ERR_NO_MEMORY))
            r = exec_poison(ex, comm_fail(ex->comm, r, true)); /* the others learn whom to blame */
        return r;
    }
    uint64_t in_off = (uint64_t)((const char *)send - (const char *)c->send_base);
    uint64_t out_off = (uint64_t)((const char *)recv - (const char *)c->recv_base);
    if (send_bytes > c->in_alloc - in_off || recv_bytes > c->out_alloc - out_off)
        return ERR_ARG("execute: %zu/%zu bytes do not fit the buffers (%zu/%zu bytes to the end "
                       "of their allocations)", send_bytes, recv_bytes,
                       (size_t)(c->in_alloc - in_off), (size_t)(c->out_alloc - out_off));
    r = exec_context_bind(ex, c, in_off, out_off);
    if (r != MSCCLPP_OK) /* the offset exchange is collective */
        return exec_poison(ex, comm_fail(ex->comm, r, true));
    exec_lowcache_t *l = NULL;
    CHECK(exec_context_lowered(ex, c, send_bytes, recv_bytes, dtype, op, packet, &l));
    if (ex->capturing) {
        /* a graph launches them from now on: never freed or changed while the executor lives */
        l->captured = true;
        c->captured = true;
    }
    l->low->args.input = send;
    l->low->args.output = recv;
    l->low->args.mailbox = c->mailbox;
    l->low->args.abort = __atomic_load_n(&ex->comm->abort_word, __ATOMIC_ACQUIRE);
    /* Only what every rank agrees on decides the fence: the context (built collectively, so
     * its sequence number is the same everywhere) and the call shape. Not the lowered plan's
     * identity: it is also rebuilt when this rank alone moved its buffers in their allocation. */
    exec_call_key_t key = {c->seq, send_bytes, recv_bytes, dtype, op, packet};
    l->low->args.fence = fence_decide(ex, &key);
    hal_stream_t hs = hal_api_stream(stream);
    /* before the launch: a sync that races with it must already ask us (a graph made by the
     * capture in progress asks us after each replay) */
    CHECK(ex->capturing ? hal_api_stream_note_capture(stream, ex->source)
                        : hal_api_stream_note(stream, ex->source));
    if (!nthreads) nthreads = l->low->nthreads;
    r = ex->hal->launch(&l->low->args, sizeof l->low->args, l->low->nblocks, nthreads, hs);
    if (r != MSCCLPP_OK) {
        c->broken = true;
        return exec_poison(ex, r);
    }
    ex->launched = true;
    ex->last_call = key;
    if (ex->capturing) ex->captured_any = true;
    if (!hs) return exec_check_launch(ex, c);
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
    return exec_execute(exec, plan, send, recv, send_bytes, recv_bytes, dtype, op,
                        MSCCLPP_PACKET_LL16, stream, 0, 0);
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
    uint64_t *abort_word = NULL; /* for the launches (kern_args_t.abort) */
    mscclpp_result_t aw = comm_abort_word(comm, &abort_word);
    if (aw != MSCCLPP_OK) {
        free(ex);
        return aw;
    }
    pthread_mutex_init(&ex->lock, NULL);
    mscclpp_result_t res = hal_api_source_add(exec_stream_check, ex, &ex->source);
    if (res != MSCCLPP_OK) {
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
        pthread_mutex_destroy(&ex->lock);
        free(ex);
        return tr;
    }
    *exec = ex;
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
    exec_native_release(exec); /* before the communicator may go */
    exec_contexts_free_all(exec, true);
    if (exec->tmp) exec->hal->mem_free(exec->tmp);
    free(exec->offs);
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
    return exec_registry_load_dir(&exec->registry, dir ? dir : exec_plan_dir(), nloaded, NULL);
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

/* What executor/tuning.c needs of an executor (the tuning table and the per-call launch). */
void exec_tuning_view(mscclpp_executor_t *ex, exec_tuning_view_t *v)
{
    *v = (exec_tuning_view_t){.hal = ex->hal,
                              .registry = &ex->registry,
                              .nranks = ex->comm->nranks,
                              .nlocal = ex->comm->nlocal,
                              .tuning = &ex->tuning};
}

/* ---- collectives with registered plans --------------------------------------------------- */

/*
 * Run `collective` with the plan exec_select (select.c) chooses; an in-place call served by an
 * out-of-place plan first copies its input into a staging buffer.
 */
static mscclpp_result_t run_collective(mscclpp_executor_t *ex, const char *collective,
                                       const void *send, void *recv, size_t in_bytes,
                                       size_t out_bytes, bool inplace, const void *stage_src,
                                       mscclpp_dtype_t dtype, mscclpp_redop_t op, int root,
                                       mscclpp_stream_t stream)
{
    exec_call_t call = {collective, inplace, in_bytes, out_bytes, dtype, root};
    exec_choice_t ch;
    CHECK(exec_select(ex, &call, &ch));
    if (!ch.staged)
        return exec_execute(ex, ch.plan, send, recv, in_bytes, out_bytes, dtype, op,
                            MSCCLPP_PACKET_LL16, stream, ch.rotation, ch.nthreads);
    bool capturing = false;
    CHECK(stream_capturing(ex, stream, &capturing));
    if (ex->tmp_bytes < in_bytes) {
        if (ex->tmp && (ex->tmp_captured || capturing || exec_cannot_drain(ex))) {
            /* a graph stages into the old buffer, or queued work may still read it and cannot
             * be waited for now: it stays, with its contexts, until the executor goes */
            CHECK(exec_keep(ex, ex->tmp));
        } else if (ex->tmp) {
            /* contexts keyed on the old staging buffer go with it */
            CHECK(exec_contexts_free_input(ex, ex->tmp));
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
    mscclpp_result_t r = exec_execute(ex, ch.plan, ex->tmp, recv, in_bytes, out_bytes, dtype, op,
                                      MSCCLPP_PACKET_LL16, stream, ch.rotation, ch.nthreads);
    /* a failed call must not leave the staging copy queued behind the caller's back (a
     * capture cannot be waited for: the copy is only recorded there) */
    if (r != MSCCLPP_OK && stream && !capturing) (void)ex->hal->stream_sync(hal_api_stream(stream));
    return r;
}

static mscclpp_result_t coll_check(mscclpp_executor_t *ex, const void *send, void *recv,
                                   mscclpp_dtype_t dtype, size_t *es)
{
    CHECK_ARG(ex != NULL);
    CHECK_ARG(send != NULL);
    CHECK_ARG(recv != NULL);
    CHECK_ARG((int)dtype >= 0 && dtype < MSCCLPP_DTYPE_COUNT);
    *es = mscclpp_dtype_size(dtype);
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_allreduce(mscclpp_executor_t *exec, const void *send,
                                               void *recv, size_t count, mscclpp_dtype_t dtype,
                                               mscclpp_redop_t op, mscclpp_stream_t stream)
{
    size_t es;
    CHECK(coll_check(exec, send, recv, dtype, &es));
    CHECK_ARG((int)op >= 0 && op < MSCCLPP_REDOP_COUNT);
    size_t b = count * es;
    return run_collective(exec, "allreduce", send, recv, b, b, send == recv, send, dtype, op, 0,
                          stream);
}

MSCCLPP_API mscclpp_result_t mscclpp_allgather(mscclpp_executor_t *exec, const void *send,
                                               void *recv, size_t send_count,
                                               mscclpp_dtype_t dtype, mscclpp_stream_t stream)
{
    size_t es;
    CHECK(coll_check(exec, send, recv, dtype, &es));
    int n = exec->comm->nranks, rank = exec->comm->rank;
    size_t in = send_count * es;
    bool inplace = (const char *)send == (char *)recv + (size_t)rank * in;
    return run_collective(exec, "allgather", send, recv, in, in * (size_t)n, inplace, send, dtype,
                          MSCCLPP_REDOP_PLAN, 0, stream);
}

MSCCLPP_API mscclpp_result_t mscclpp_reducescatter(mscclpp_executor_t *exec, const void *send,
                                                   void *recv, size_t recv_count,
                                                   mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                                   mscclpp_stream_t stream)
{
    size_t es;
    CHECK(coll_check(exec, send, recv, dtype, &es));
    CHECK_ARG((int)op >= 0 && op < MSCCLPP_REDOP_COUNT);
    int n = exec->comm->nranks, rank = exec->comm->rank;
    size_t out = recv_count * es;
    bool inplace = (char *)recv == (const char *)send + (size_t)rank * out;
    return run_collective(exec, "reducescatter", send, recv, out * (size_t)n, out, inplace, send,
                          dtype, op, 0, stream);
}

MSCCLPP_API mscclpp_result_t mscclpp_alltoall(mscclpp_executor_t *exec, const void *send,
                                              void *recv, size_t count, mscclpp_dtype_t dtype,
                                              mscclpp_stream_t stream)
{
    size_t es;
    CHECK(coll_check(exec, send, recv, dtype, &es));
    size_t b = count * es * (size_t)exec->comm->nranks;
    return run_collective(exec, "alltoall", send, recv, b, b, send == recv, send, dtype,
                          MSCCLPP_REDOP_PLAN, 0, stream);
}

MSCCLPP_API mscclpp_result_t mscclpp_broadcast(mscclpp_executor_t *exec, const void *send,
                                               void *recv, size_t count, mscclpp_dtype_t dtype,
                                               int root, mscclpp_stream_t stream)
{
    size_t es;
    CHECK(coll_check(exec, send, recv, dtype, &es));
    CHECK_ARG(root >= 0 && root < exec->comm->nranks);
    size_t b = count * es;
    /* a loaded plan written for another root serves `root` with its ranks rotated (select.c) */
    return run_collective(exec, "broadcast", send, recv, b, b, send == recv, send, dtype,
                          MSCCLPP_REDOP_PLAN, root, stream);
}

MSCCLPP_API mscclpp_result_t mscclpp_reduce(mscclpp_executor_t *exec, const void *send, void *recv,
                                            size_t count, mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                            int root, mscclpp_stream_t stream)
{
    size_t es;
    CHECK(coll_check(exec, send, recv, dtype, &es));
    CHECK_ARG((int)op >= 0 && op < MSCCLPP_REDOP_COUNT);
    CHECK_ARG(root >= 0 && root < exec->comm->nranks);
    size_t b = count * es;
    return run_collective(exec, "reduce", send, recv, b, b, send == recv, send, dtype, op, root,
                          stream);
}
