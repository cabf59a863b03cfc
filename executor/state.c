/*
 * State: the device state of a context (state.h) and whether the executor is broken.
 *
 * A collective that failed on one rank leaves the others in an unknown place (some finished,
 * some wait, setup messages half exchanged), and rebuilding a context needs every rank. So the
 * first failure of a collective step (context setup, the per-call offset exchange, a launch, or
 * an error the interpreter recorded) breaks the executor for good, as ncclCommAbort does: every
 * later call returns that error, naming it, at once. Errors of launches on a user stream reach
 * the host through each context's error mailbox (kern_args.h) with no device sync: every call
 * checks the mailboxes first, mscclpp_stream_synchronize asks the executor after its sync (the
 * executor is an error source of the streams it launched on, hal_api.h), and
 * mscclpp_executor_get_async_error polls them.
 */
#include "executor/state.h"

#include <stdio.h>
#include <string.h>

#include "base/debug.h"
#include "executor/executor.h"
#include "executor/layout.h"

/* ---- device state ------------------------------------------------------------------------- */

size_t exec_state_bytes(const struct mscclpp_plan *plan, int rank)
{
    if (!plan || rank < 0 || rank >= plan->nranks) return 0;
    return exec_round_up(sizeof(kern_state_t) + sizeof(int32_t) * (size_t)plan->gpus[rank].n_sems, 64);
}

mscclpp_result_t exec_state_init(const struct mscclpp_plan *plan, int rank, void *image,
                                 size_t bytes)
{
    CHECK_ARG(plan != NULL && image != NULL);
    CHECK_ARG(rank >= 0 && rank < plan->nranks);
    if (bytes < exec_state_bytes(plan, rank))
        return ERR_ARG("exec_state_init: %zu bytes given, the state of rank %d needs %zu", bytes,
                       rank, exec_state_bytes(plan, rank));
    const plan_gpu_t *g = &plan->gpus[rank];
    memset(image, 0, bytes);
    kern_state_t *st = image;
    st->magic = KERN_STATE_MAGIC;
    for (int b = 0; b < KERN_MAX_BLOCKS; b++) st->flags[b] = 1;
    st->n_sems = (uint32_t)g->n_sems;
    int32_t *sems = (int32_t *)(st + 1);
    for (int i = 0; i < g->n_sems; i++) sems[i] = g->sem_init[i];
    return MSCCLPP_OK;
}

/* Decoded errors are recorded, not logged: the caller logs the error once, after comm_fail
 * has looked for the rank that failed first (issue 22 item 5). */
#define DECODED(result, ...) core_error_quiet((result), __VA_ARGS__)

mscclpp_result_t exec_state_error(const void *state, const struct mscclpp_plan *plan)
{
    CHECK_ARG(state != NULL);
    const kern_state_t *st = state;
    const kern_error_t *e = &st->err;
    if (e->code == 0) return MSCCLPP_OK;
    const char *name = plan && plan->name ? plan->name : "?";
    char where[96] = "";
    if (e->iter) snprintf(where, sizeof(where), " (pipeline iteration %u)", e->iter);
    mscclpp_result_t code = (mscclpp_result_t)e->code;
    /* the peer this block waited for is whom the failure blames (comm_fail looks further) */
    core_set_culprit(code != MSCCLPP_ERR_ABORTED && e->peer >= 0 ? e->peer : -1);
    const char *opn = exec_op_name(e->op_type);
    /* the interpreter records its own op index; split plan ops make it differ from the plan's */
    int pop = exec_plan_op_of(plan, e->rank, e->block, e->op);
    if (pop < 0) pop = e->op;
    /* op -1: the launch fence before the first op (kern_args.h, "Launch fence") */
    char at[192];
    if (e->op < 0)
        snprintf(at, sizeof at, "before op 0, in the launch fence (this call's size, buffers "
                 "or plan differ from the previous call's)");
    else
        snprintf(at, sizeof at, "op %d (%s)%s", pop, opn, where);
    if (code == MSCCLPP_ERR_ABORTED) /* the wait was fine: another thread aborted the comm */
        return DECODED(code,
                       "plan '%s': rank %d block %d %s: interrupted (peer %d, channel %d): the "
                       "communicator was aborted (mscclpp_comm_abort)",
                       name, e->rank, e->block, at, e->peer, e->channel);
    switch (e->what) {
    case KERN_WAIT_SIGNAL:
        return DECODED(code,
                       "plan '%s': rank %d block %d %s timed out waiting for a signal from "
                       "rank %d on memory channel %d (expected %llu, got %llu)",
                       name, e->rank, e->block, at, e->peer, e->channel,
                       (unsigned long long)e->expected, (unsigned long long)e->seen);
    case KERN_WAIT_PACKET:
        if (e->peer >= 0)
            return DECODED(code,
                           "plan '%s': rank %d block %d %s timed out waiting for LL "
                           "packets from rank %d with flag %llu (last seen flag %llu)",
                           name, e->rank, e->block, at, e->peer, (unsigned long long)e->expected,
                           (unsigned long long)e->seen);
        return DECODED(code,
                       "plan '%s': rank %d block %d %s timed out waiting for LL packets "
                       "with flag %llu (last seen flag %llu; no op of the plan writes them)",
                       name, e->rank, e->block, at, (unsigned long long)e->expected,
                       (unsigned long long)e->seen);
    case KERN_WAIT_BARRIER:
        return DECODED(code,
                       "plan '%s': rank %d block %d %s timed out in barrier %d: %llu of "
                       "%llu blocks arrived",
                       name, e->rank, e->block, at, e->channel, (unsigned long long)e->seen,
                       (unsigned long long)e->expected);
    case KERN_WAIT_SEMAPHORE:
        return DECODED(code,
                       "plan '%s': rank %d block %d %s timed out acquiring semaphore %d "
                       "(value %lld)",
                       name, e->rank, e->block, at, e->channel, (long long)(int64_t)e->seen);
    case KERN_WAIT_PORT:
        return DECODED(code,
                       "plan '%s': rank %d block %d %s timed out waiting for a signal from "
                       "rank %d on port channel %d (expected %llu, got %llu)",
                       name, e->rank, e->block, at, e->peer, e->channel,
                       (unsigned long long)e->expected, (unsigned long long)e->seen);
    case KERN_WAIT_PROXY:
        if (code == MSCCLPP_ERR_TIMEOUT)
            return DECODED(code,
                           "plan '%s': rank %d block %d %s timed out waiting for the proxy "
                           "on port channel %d to rank %d (FIFO position %llu, proxy at %llu)",
                           name, e->rank, e->block, at, e->channel, e->peer,
                           (unsigned long long)e->expected, (unsigned long long)e->seen);
        if (e->channel < 0) /* a wait of another kind gave up on this rank's failed proxy */
            return DECODED(code,
                           "plan '%s': rank %d block %d %s stopped waiting because this "
                           "rank's proxy failed",
                           name, e->rank, e->block, at);
        return DECODED(code,
                       "plan '%s': rank %d block %d %s: the proxy failed (port channel %d "
                       "to rank %d)",
                       name, e->rank, e->block, at, e->channel, e->peer);
    case KERN_WAIT_FENCE:
        return DECODED(code,
                       "plan '%s': rank %d block %d timed out waiting for block 0 to pass the "
                       "launch fence",
                       name, e->rank, e->block);
    case KERN_WAIT_PLAN:
        return DECODED(code,
                       "plan '%s': rank %d block %d: the launch does not match its lowered plan or "
                       "state (launched %llu blocks, plan has %llu; bad magic?)",
                       name, e->rank, e->block, (unsigned long long)e->expected,
                       (unsigned long long)e->seen);
    default:
        return DECODED(code, "plan '%s': rank %d block %d %s failed", name, e->rank, e->block, at);
    }
}

/* ---- a broken executor --------------------------------------------------------------------- */

/* Break the executor with `r`, whose message the calling thread holds. Lock held. */
static void poison_locked(mscclpp_executor_t *ex, mscclpp_result_t r)
{
    if (ex->broken != MSCCLPP_OK || r == MSCCLPP_OK) return;
    ex->broken = r;
    snprintf(ex->broken_msg, sizeof ex->broken_msg, "%s", mscclpp_last_error());
}

mscclpp_result_t exec_poison(mscclpp_executor_t *ex, mscclpp_result_t r)
{
    pthread_mutex_lock(&ex->lock);
    poison_locked(ex, r);
    pthread_mutex_unlock(&ex->lock);
    return r;
}

/*
 * A launch that failed on a port operation says where (plan, rank, op, channel, peer); the
 * proxy that failed says why (the transport's sentence): the error gets both, with the
 * proxy's code. `r`: the launch's error, its message held by the calling thread.
 */
static mscclpp_result_t with_proxy_reason(exec_context_t *c, mscclpp_result_t r)
{
    if (r == MSCCLPP_OK || !c->port) return r;
    char where[768];
    snprintf(where, sizeof where, "%s", mscclpp_last_error());
    int culprit = core_culprit();
    mscclpp_result_t pr = exec_port_error(c->port); /* leaves the message alone when OK */
    if (pr == MSCCLPP_OK) {
        core_set_culprit(culprit);
        return r;
    }
    char why[768];
    snprintf(why, sizeof why, "%s", mscclpp_last_error());
    /* the proxy's peer (exec_port_error set it) is whom a failed transport call blames */
    if (core_culprit() < 0) core_set_culprit(culprit);
    return core_error_quiet(pr, "%s: %s", where, why); /* logged by the caller */
}

/*
 * Fold an error some launch left in a mailbox into ex->broken (decoded like a synchronous
 * failure: plan, rank, block, op, peer). True when this call found it. Lock held.
 */
static bool poll_mailboxes_locked(mscclpp_executor_t *ex)
{
    if (ex->broken != MSCCLPP_OK) return false;
    for (exec_context_t *c = ex->contexts; c; c = c->next) {
        if (!c->mailbox || __atomic_load_n(&c->mailbox->code, __ATOMIC_ACQUIRE) == 0) continue;
        kern_state_t st;
        memset(&st, 0, sizeof st);
        st.err = *(volatile kern_error_t *)c->mailbox; /* complete once code is seen */
        mscclpp_result_t r = with_proxy_reason(c, exec_state_error(&st, c->plan));
        r = comm_fail(ex->comm, r, false);
        poison_locked(ex, r != MSCCLPP_OK ? r
                                          : ERR(MSCCLPP_ERR_INTERNAL,
                                                "executor: undecodable error record"));
        return true;
    }
    /* a proxy can fail after its launch ended (a trailing put with no flush): the launch saw
     * nothing, so the proxy's own record is the only place the error lives */
    for (exec_context_t *c = ex->contexts; c; c = c->next) {
        mscclpp_result_t pr = exec_port_error(c->port);
        if (pr != MSCCLPP_OK) {
            poison_locked(ex, comm_fail(ex->comm, pr, false));
            return true;
        }
    }
    return false;
}

mscclpp_result_t exec_check(mscclpp_executor_t *ex)
{
    pthread_mutex_lock(&ex->lock);
    bool fresh = poll_mailboxes_locked(ex);
    mscclpp_result_t r = ex->broken;
    char msg[sizeof ex->broken_msg];
    if (r != MSCCLPP_OK && !fresh) memcpy(msg, ex->broken_msg, sizeof msg);
    pthread_mutex_unlock(&ex->lock);
    if (r == MSCCLPP_OK || fresh) return r;
    /* not logged again: the first report was */
    return core_error_quiet(r, "executor broken by an earlier error: %s; destroy it (and the "
                            "communicator) and create new ones", msg);
}

/* May run in any thread: a stream sync calls it. */
mscclpp_result_t exec_stream_check(void *arg)
{
    mscclpp_executor_t *ex = arg;
    /* the stream's launches are done: wait until their proxies handled what they pushed, so
     * that a trailing put that fails is this sync's error (exec_check reads the records) */
    pthread_mutex_lock(&ex->lock);
    for (exec_context_t *c = ex->contexts; c; c = c->next) (void)exec_port_drain(c->port);
    pthread_mutex_unlock(&ex->lock);
    return exec_check(ex);
}

mscclpp_result_t exec_check_launch(mscclpp_executor_t *ex, exec_context_t *c)
{
    kern_state_t st;
    CHECK(ex->hal->memcpy_sync(&st, c->state, sizeof st));
    mscclpp_result_t r = exec_state_error(&st, c->plan);
    if (r != MSCCLPP_OK) {
        c->broken = true;
        r = with_proxy_reason(c, r); /* the transport call that failed, if the proxy did */
        r = comm_fail(ex->comm, r, false);
    } else {
        /* a synchronous call returns once every trigger it pushed was handed to the
         * transport: a trailing put (no flush) that fails is this call's error */
        r = exec_port_drain(c->port);
        if (r != MSCCLPP_OK) r = comm_fail(ex->comm, r, false);
    }
    if (r != MSCCLPP_OK) {
        pthread_mutex_lock(&ex->lock);
        poison_locked(ex, r);
        pthread_mutex_unlock(&ex->lock);
    }
    return r;
}

