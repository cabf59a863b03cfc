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
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "base/wire.h"
#include "executor/exec.h"
#include "executor/layout.h"
#include "hal/hal_api.h"
#include "hal/hal.h"

/* ---- device state ------------------------------------------------------------------------- */

size_t exec_state_bytes(const struct mscclpp_plan *plan, int rank)
{
    if (!plan || rank < 0 || rank >= plan->nranks) return 0;
    /* sems, then (8-byte aligned) the remote buffers' published offsets (kern_args.h) */
    const plan_gpu_t *g = &plan->gpus[rank];
    size_t sems = exec_round_up(sizeof(int32_t) * (size_t)g->n_sems, 8);
    return exec_round_up(sizeof(kern_state_t) + sems + sizeof(uint64_t) * (size_t)g->n_rbufs, 64);
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

/* ---- call signatures (kern_args.h, "Call signature") --------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v) { return fnv(h, &v, sizeof v); }

uint64_t exec_hash_u64(uint64_t h, uint64_t v) { return fnv_u64(h, v); }

static uint64_t fnv_str(uint64_t h, const char *s)
{
    return fnv(h, s ? s : "", s ? strlen(s) + 1 : 1);
}

/* Plan files loaded on each rank are distinct objects: the digest is of their content. */
uint64_t exec_plan_digest(const struct mscclpp_plan *p)
{
    uint64_t h = fnv_str(EXEC_HASH_SEED, p->name);
    h = fnv_str(h, p->collective);
    h = fnv_u64(h, (uint64_t)p->nranks);
    h = fnv_u64(h, p->inplace | (p->packet_protocol << 1) | (p->double_scratch << 2));
    h = fnv_u64(h, p->min_message_size);
    h = fnv_u64(h, p->max_message_size);
    /* a made plan of one rank (plan_make.c) holds only that rank's blocks, its peers are
     * stubs: every rank's copy differs there, so its name (the job's shape) stands for them */
    if (p->partial) return h ? h : 1;
    for (int r = 0; r < p->nranks; r++) {
        const plan_gpu_t *g = &p->gpus[r];
        h = fnv_u64(h, g->input_chunks | ((uint64_t)g->output_chunks << 32));
        h = fnv_u64(h, g->scratch_chunks | ((uint64_t)g->n_blocks << 32));
        for (int t = 0; t < PLAN_CH__COUNT; t++) h = fnv_u64(h, (uint64_t)g->n_chan[t]);
        for (int b = 0; b < g->n_blocks; b++) {
            h = fnv_u64(h, (uint64_t)g->blocks[b].n_ops);
            for (int i = 0; i < g->blocks[b].n_ops; i++) {
                const plan_op_t *o = &g->blocks[b].ops[i];
                h = fnv_u64(h, o->type | (o->n_src << 8) | (o->n_dst << 16) |
                                   ((uint64_t)o->n_channels << 24));
                for (int d = 0; d < o->n_src + o->n_dst; d++) {
                    const plan_desc_t *x = d < o->n_src ? &o->src[d] : &o->dst[d - o->n_src];
                    h = fnv_u64(h, x->kind | (x->buf << 8) | ((uint64_t)x->ref << 16) |
                                       ((uint64_t)x->index << 32));
                    h = fnv_u64(h, x->size);
                }
            }
        }
    }
    return h ? h : 1;
}

static const char *const sig_collectives[] = {"?",        "allreduce", "allgather", "reducescatter",
                                              "alltoall", "broadcast", "reduce"};
#define SIG_NCOLL 7

static uint64_t collective_id(const char *coll)
{
    for (int i = 1; coll && i < SIG_NCOLL; i++)
        if (!strcmp(coll, sig_collectives[i])) return (uint64_t)i;
    return 15; /* another collective: its name is in the plan's digest */
}

void exec_call_sig(const char *collective, uint32_t seq, uint64_t digest, const exec_shape_t *s,
                   uint64_t sig[KERN_SIG_WORDS])
{
    sig[0] = collective_id(collective) | ((uint64_t)(s->dtype & 0xff) << 4) |
             ((uint64_t)(s->op & 0xff) << 12) | ((uint64_t)(s->packet & 3) << 20) |
             ((uint64_t)s->inplace << 22) | ((uint64_t)(s->root & 0x1ffff) << 23) |
             ((uint64_t)(seq & 0xffffff) << 40);
    sig[1] = s->send_bytes;
    sig[2] = s->recv_bytes;
    sig[3] = digest;
    sig[4] = s->tuning;
}

#define SIG_COLL(s) ((int)((s)[0] & 0xf))
#define SIG_DTYPE(s) ((mscclpp_dtype_t)(int8_t)(((s)[0] >> 4) & 0xff))
#define SIG_OP(s) ((mscclpp_redop_t)(int8_t)(((s)[0] >> 12) & 0xff))
#define SIG_PACKET(s) ((int)(((s)[0] >> 20) & 3))
#define SIG_INPLACE(s) ((int)(((s)[0] >> 22) & 1))
#define SIG_ROOT(s) ((int)(((s)[0] >> 23) & 0x1ffff))
#define SIG_ROOTED(s) (SIG_COLL(s) == 5 || SIG_COLL(s) == 6) /* broadcast, reduce */
#define SIG_CONTEXT(s) ((unsigned)(((s)[0] >> 40) & 0xffffff))

static const char *sig_collective(const uint64_t *s)
{
    int c = SIG_COLL(s);
    return c >= 1 && c < SIG_NCOLL ? sig_collectives[c] : "a plan's own collective";
}

/* "allreduce of 4096 bytes (1024 x float32, sum, out of place, plan 'x')" */
static void sig_describe(const uint64_t *s, const char *plan_name, char *out, size_t cap)
{
    const char *dt = mscclpp_dtype_name(SIG_DTYPE(s));
    size_t es = mscclpp_dtype_size(SIG_DTYPE(s));
    const char *op = mscclpp_redop_name(SIG_OP(s));
    char size[96], root[32] = "", plan[160], ops[24] = "";
    if (s[1] == s[2]) snprintf(size, sizeof size, "%llu bytes", (unsigned long long)s[1]);
    else
        snprintf(size, sizeof size, "%llu bytes in, %llu out", (unsigned long long)s[1],
                 (unsigned long long)s[2]);
    if (SIG_ROOTED(s)) snprintf(root, sizeof root, ", root %d", SIG_ROOT(s));
    if (SIG_OP(s) != MSCCLPP_REDOP_PLAN) snprintf(ops, sizeof ops, ", %s", op ? op : "?");
    if (plan_name) snprintf(plan, sizeof plan, "plan '%s'", plan_name);
    else snprintf(plan, sizeof plan, "a plan of digest %016llx", (unsigned long long)s[3]);
    snprintf(out, cap, "%s of %s (%llu x %s%s%s, %s, %s)", sig_collective(s), size,
             (unsigned long long)(es ? s[1] / es : 0), dt ? dt : "?", ops, root,
             SIG_INPLACE(s) ? "in place" : "out of place", plan);
}

/* What two signatures differ in: "size, dtype" */
static void sig_diff(const uint64_t *a, const uint64_t *b, char *out, size_t cap)
{
    struct {
        bool differs;
        const char *what;
    } f[] = {
        {SIG_COLL(a) != SIG_COLL(b), "collective"},
        {a[1] != b[1] || a[2] != b[2], "size"},
        {SIG_DTYPE(a) != SIG_DTYPE(b), "dtype"},
        {SIG_OP(a) != SIG_OP(b), "reduction op"},
        {SIG_ROOT(a) != SIG_ROOT(b), "root"},
        {SIG_INPLACE(a) != SIG_INPLACE(b), "in-place-ness"},
        {SIG_PACKET(a) != SIG_PACKET(b), "packet type"},
        {a[3] != b[3], "plan"},
        {SIG_CONTEXT(a) != SIG_CONTEXT(b), "buffers (context)"},
    };
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof f / sizeof f[0] && n < cap; i++)
        if (f[i].differs) n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? ", " : "", f[i].what);
    if (!n) snprintf(out, cap, "the call");
}

/* Physical rank of virtual rank v of a launch of `plan` whose signature is `sig`: a loaded
 * plan written for root plan->root runs rotated to serve the call's root (select.c). */
static int phys_rank(const uint64_t *sig, int v, const struct mscclpp_plan *plan)
{
    int n = plan ? plan->nranks : 0;
    if (!sig[0] || n <= 0 || v < 0) return v;
    int rotation = ((SIG_ROOT(sig) - plan->root) % n + n) % n;
    return (v + rotation) % n;
}

mscclpp_result_t exec_disagree_error(int me, const uint64_t *mine, const char *plan_name, int peer,
                                     const uint64_t *theirs, const char *how)
{
    char a[320], b[320], diff[160];
    sig_describe(mine, plan_name, a, sizeof a);
    sig_describe(theirs, theirs[3] == mine[3] ? plan_name : NULL, b, sizeof b);
    sig_diff(mine, theirs, diff, sizeof diff);
    const char *tables = mine[3] != theirs[3] && mine[4] != theirs[4]
                             ? " (the ranks loaded different tuning tables: give every rank the "
                               "same MSCCLPP_TUNING_FILE)"
                             : "";
    return ERR(MSCCLPP_ERR_INVALID_ARG,
               "ranks disagree on a call: rank %d calls %s, rank %d "
               "calls %s: they differ in %s%s%s; every rank must make the same calls in the same "
               "order",
               me, a, peer, b, diff, tables, how ? how : "");
}

/* KERN_WAIT_MISMATCH: both ranks, both calls, what differs. */
static mscclpp_result_t mismatch_error(const kern_error_t *e, const struct mscclpp_plan *plan)
{
    int me = phys_rank(e->sig, e->rank, plan), peer = phys_rank(e->sig, e->peer, plan);
    char how[200] = "";
    uint32_t kind = (uint32_t)(e->seen >> 32) & 0xff;
    if (e->op >= 0)
        snprintf(how, sizeof how,
                 "; rank %d had begun its call without the launch fence (its "
                 "previous call had the same shape)",
                 me);
    else if (kind == KERN_REC_ANSWER)
        snprintf(how, sizeof how,
                 "; rank %d had begun its call without the launch fence (its "
                 "previous call had the same shape)",
                 peer);
    if (kind == KERN_REC_SETUP)
        snprintf(how, sizeof how,
                 "; rank %d is setting up its call's buffers, this rank "
                 "repeats its previous call",
                 peer);
    return exec_disagree_error(me, e->sig, plan ? plan->name : NULL, peer, e->peer_sig, how);
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
    if (e->what == KERN_WAIT_MISMATCH || e->what == KERN_WAIT_EARLIER)
        core_set_culprit(-1); /* ranks that disagree, or a failure reported by its own launch */
    if (e->what == KERN_WAIT_MISMATCH) return mismatch_error(e, plan);
    const char *name = plan && plan->name ? plan->name : "?";
    char where[96] = "";
    if (e->iter) snprintf(where, sizeof(where), " (pipeline iteration %u)", e->iter);
    mscclpp_result_t code = (mscclpp_result_t)e->code;
    /* the peer this block waited for is whom the failure blames (comm_fail looks further);
     * a wait for packets whose writer this rank's plan does not know blames a peer it cannot
     * name (a made plan keeps only this rank's ops) */
    if (e->what != KERN_WAIT_EARLIER)
        core_set_culprit(code == MSCCLPP_ERR_ABORTED ? -1
                         : e->peer >= 0              ? phys_rank(e->sig, e->peer, plan)
                         : e->what == KERN_WAIT_PACKET && code == MSCCLPP_ERR_TIMEOUT
                             ? CORE_CULPRIT_UNKNOWN
                             : -1);
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
                       "with flag %llu (last seen flag %llu; this rank's plan does not say which rank "
                       "writes them)",
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
        if (e->peer >= 0) {
            return DECODED(code,
                       "plan '%s': rank %d block %d %s timed out waiting for the fence record "
                       "from rank %d (rank %d is gone or stuck in an earlier call, or its call "
                       "differs from this one while having the shape of its previous call)",
                       name, phys_rank(e->sig, e->rank, plan), e->block, at,
                       phys_rank(e->sig, e->peer, plan), phys_rank(e->sig, e->peer, plan));
        }
        return DECODED(code, "plan '%s': rank %d block %d timed out waiting for block 0 to pass the "
                   "launch fence", name, e->rank, e->block);
    case KERN_WAIT_EARLIER:
        return DECODED(code,
                   "plan '%s': rank %d: not run: an earlier launch of this executor failed "
                   "(%s)",
                   name, e->rank, mscclpp_result_string(code));
    case KERN_WAIT_PLAN:
        return DECODED(code,
                       "plan '%s': rank %d block %d: the launch does not match its lowered plan or "
                       "state (launched %llu blocks, plan has %llu; else a bad magic, or block "
                       "entries away from KERN_PLAN_BLOCKS_OFF, or a block's ops, descriptors or "
                       "ids away from where the arguments' per-block layout puts them, "
                       "KERN_LAYOUT_*): a plan blob or launch arguments "
                       "not made by this build's exec_lower, or a library bug to report",
                       name, e->rank, e->block, (unsigned long long)e->expected,
                       (unsigned long long)e->seen);
    default:
        return DECODED(code, "plan '%s': rank %d block %d %s failed", name, e->rank, e->block, at);
    }
}

/* ---- the agreement step of context setups -------------------------------------------------- */

/* Bootstrap tags of context setup: base + sequence, inside the 0..32767 every MPI allows */
#define EXEC_TAG_BASE 0x6000
#define EXEC_TAG_SPAN 0x2000
#define AGREE_MAGIC 0x45524741u /* "AGRE" */
#define AGREE_VERSION 2u        /* 2: the flags word carries `staged` */
#define AGREE_ANSWER 1u
#define AGREE_STAGED 2u
/* magic, version, status, flags (AGREE_*), scratch, signature, why (fixed size) */
#define AGREE_BYTES (16 + 8 + 8 * KERN_SIG_WORDS + EXEC_AGREE_WHY)

int exec_setup_tag(uint32_t seq) { return EXEC_TAG_BASE + (int)(seq % EXEC_TAG_SPAN); }

mscclpp_result_t exec_agree_send(mscclpp_executor_t *ex, int peer, int tag, const exec_agree_t *a)
{
    uint8_t buf[AGREE_BYTES];
    wire_writer_t w = {buf, sizeof buf, 0, false};
    wire_put_u32(&w, AGREE_MAGIC);
    wire_put_u32(&w, AGREE_VERSION);
    wire_put_u32(&w, (uint32_t)(int32_t)a->status);
    wire_put_u32(&w, (a->answer ? AGREE_ANSWER : 0u) | (a->staged ? AGREE_STAGED : 0u));
    wire_put_u64(&w, a->scratch);
    for (int i = 0; i < KERN_SIG_WORDS; i++) wire_put_u64(&w, a->sig[i]);
    wire_put_bytes(&w, a->why, EXEC_AGREE_WHY);
    if (w.overflow) return ERR(MSCCLPP_ERR_INTERNAL, "executor: agreement message overflow");
    return mscclpp_bootstrap_send(ex->comm->boot, buf, sizeof buf, peer, tag);
}

mscclpp_result_t exec_agree_recv(mscclpp_executor_t *ex, int peer, int tag, exec_agree_t *a)
{
    uint8_t buf[AGREE_BYTES];
    mscclpp_result_t got = mscclpp_bootstrap_recv(ex->comm->boot, buf, sizeof buf, peer, tag);
    if (got != MSCCLPP_OK) {
        /* the bootstrap's words name a tag: say which wait it was and what to look for */
        char why[512];
        snprintf(why, sizeof why, "%s", mscclpp_last_error());
        return ERR(got, "rank %d: setting up a plan's context, rank %d's answer did not come: "
                   "%s (it is gone, stuck in an earlier call, or makes another call: every "
                   "rank must make the same calls in the same order)",
                   ex->comm->rank, peer, why);
    }
    wire_reader_t r = {buf, sizeof buf, 0, false};
    if (wire_get_u32(&r) != AGREE_MAGIC || wire_get_u32(&r) != AGREE_VERSION)
        return ERR(MSCCLPP_ERR_REMOTE,
                   "executor: rank %d sent a setup message of another "
                   "format or version",
                   peer);
    a->status = (mscclpp_result_t)(int32_t)wire_get_u32(&r);
    uint32_t flags = wire_get_u32(&r);
    a->answer = (flags & AGREE_ANSWER) != 0;
    a->staged = (flags & AGREE_STAGED) != 0;
    a->scratch = wire_get_u64(&r);
    for (int i = 0; i < KERN_SIG_WORDS; i++) a->sig[i] = wire_get_u64(&r);
    wire_get_bytes(&r, a->why, EXEC_AGREE_WHY);
    a->why[EXEC_AGREE_WHY - 1] = '\0';
    if (r.bad || a->status > 0)
        return ERR(MSCCLPP_ERR_REMOTE, "executor: rank %d sent a malformed setup message", peer);
    return MSCCLPP_OK;
}

/*
 * A launch that repeated its previous call found a peer's KERN_REC_SETUP record: that peer's
 * host waits in the agreement step of its new context for our call's signature. Remember to
 * send it (outside the lock: answer_flush). Lock held.
 */
static void answer_note_locked(mscclpp_executor_t *ex, const kern_error_t *e,
                               const struct mscclpp_plan *plan)
{
    if (e->what != KERN_WAIT_MISMATCH || ((uint32_t)(e->seen >> 32) & 0xff) != KERN_REC_SETUP)
        return;
    ex->answer.pending = true;
    ex->answer.peer = phys_rank(e->sig, e->peer, plan);
    ex->answer.tag = exec_setup_tag((uint32_t)((e->peer_sig[0] >> 40) & 0xffffff));
    memcpy(ex->answer.sig, e->sig, sizeof ex->answer.sig);
}

/* Send the answer answer_note_locked kept, keeping the calling thread's error message (of
 * code `code`). */
static void answer_flush(mscclpp_executor_t *ex, mscclpp_result_t code)
{
    pthread_mutex_lock(&ex->lock);
    bool pending = ex->answer.pending;
    int peer = ex->answer.peer, tag = ex->answer.tag;
    uint64_t sig[KERN_SIG_WORDS];
    memcpy(sig, ex->answer.sig, sizeof sig);
    ex->answer.pending = false;
    pthread_mutex_unlock(&ex->lock);
    if (!pending) return;
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", mscclpp_last_error());
    exec_agree_t a;
    memset(&a, 0, sizeof a);
    memcpy(a.sig, sig, sizeof a.sig);
    a.answer = true;
    if (exec_agree_send(ex, peer, tag, &a) != MSCCLPP_OK)
        TRACE(SUBSYS_EXEC, "rank %d: could not answer rank %d's setup: %s", ex->comm->rank, peer,
              mscclpp_last_error());
    core_error_quiet(code, "%s", keep);
}

/* ---- a broken executor --------------------------------------------------------------------- */

/* Break the executor with `r`, whose message the calling thread holds (`disagreed`: ranks
 * disagreed on a call, which the next call repairs). Lock held. */
static void poison_locked(mscclpp_executor_t *ex, mscclpp_result_t r, bool disagreed)
{
    if (ex->broken != MSCCLPP_OK || r == MSCCLPP_OK) return;
    ex->broken = r;
    /* graphs hold contexts a disagreement may have left mid-call: no resync then */
    ex->disagreed = disagreed && !ex->captured_any;
    snprintf(ex->broken_msg, sizeof ex->broken_msg, "%s", mscclpp_last_error());
}

mscclpp_result_t exec_poison(mscclpp_executor_t *ex, mscclpp_result_t r)
{
    pthread_mutex_lock(&ex->lock);
    poison_locked(ex, r, false);
    pthread_mutex_unlock(&ex->lock);
    return r;
}

mscclpp_result_t exec_disagree(mscclpp_executor_t *ex, mscclpp_result_t r)
{
    pthread_mutex_lock(&ex->lock);
    poison_locked(ex, r, true);
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
        /* a wait that timed out while this rank's proxy sat in one call since: what the peers
         * wait for may be what it holds (0.5 s: no healthy transport call lasts that long) */
        char stuck[512];
        if (r == MSCCLPP_ERR_TIMEOUT && exec_port_stuck(c->port, 500000000ull, stuck, sizeof stuck))
            return core_error_quiet(r, "%s; %s", where, stuck);
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
    /* the launch that failed first, not one that only found its failure (KERN_WAIT_EARLIER) */
    for (int pass = 0; pass < 2; pass++)
        for (exec_context_t *c = exec_context_next(ex, NULL); c; c = exec_context_next(ex, c)) {
            if (!c->mailbox || __atomic_load_n(&c->mailbox->code, __ATOMIC_ACQUIRE) == 0) continue;
            kern_state_t st;
            memset(&st, 0, sizeof st);
            st.err = *(volatile kern_error_t *)c->mailbox; /* complete once code is seen */
            if ((st.err.what == KERN_WAIT_EARLIER) != (pass == 1)) continue;
            mscclpp_result_t r = with_proxy_reason(c, exec_state_error(&st, c->plan));
            /* a disagreement blames no rank (exec_disagree_error logged it) */
            if (st.err.what != KERN_WAIT_MISMATCH) r = comm_fail(ex->comm, r, false);
            answer_note_locked(ex, &st.err, c->plan);
            poison_locked(ex,
                          r != MSCCLPP_OK
                              ? r
                              : ERR(MSCCLPP_ERR_INTERNAL, "executor: undecodable error record"),
                          st.err.what == KERN_WAIT_MISMATCH);
            return true;
        }
    /* a proxy can fail after its launch ended (a trailing put with no flush): the launch saw
     * nothing, so the proxy's own record is the only place the error lives */
    for (exec_context_t *c = exec_context_next(ex, NULL); c; c = exec_context_next(ex, c)) {
        mscclpp_result_t pr = exec_port_error(c->port);
        if (pr != MSCCLPP_OK) {
            poison_locked(ex, comm_fail(ex->comm, pr, false), false);
            return true;
        }
    }
    return false;
}

/* Every later call's error (not logged again: the first report was). */
static mscclpp_result_t broken_error(mscclpp_result_t r, const char *msg)
{
    return core_error_quiet(r,
                            "executor broken by an earlier error: %s; destroy it (and the "
                            "communicator) and create new ones",
                            msg);
}

mscclpp_result_t exec_check(mscclpp_executor_t *ex)
{
    pthread_mutex_lock(&ex->lock);
    bool fresh = poll_mailboxes_locked(ex);
    mscclpp_result_t r = ex->broken;
    char msg[sizeof ex->broken_msg];
    if (r != MSCCLPP_OK && !fresh) memcpy(msg, ex->broken_msg, sizeof msg);
    pthread_mutex_unlock(&ex->lock);
    if (fresh) answer_flush(ex, r);
    if (r == MSCCLPP_OK || fresh) return r;
    return broken_error(r, msg);
}

/* May run in any thread: a stream sync calls it. */
mscclpp_result_t exec_stream_check(void *arg)
{
    mscclpp_executor_t *ex = arg;
    /* the stream's launches are done: wait until their proxies handled what they pushed, so
     * that a trailing put that fails is this sync's error (exec_check reads the records) */
    pthread_mutex_lock(&ex->lock);
    for (exec_context_t *c = exec_context_next(ex, NULL); c; c = exec_context_next(ex, c))
        (void)exec_port_drain(c->port);
    pthread_mutex_unlock(&ex->lock);
    return exec_check(ex);
}

mscclpp_result_t exec_check_launch(mscclpp_executor_t *ex, exec_context_t *c)
{
    kern_state_t st;
    CHECK(ex->hal->memcpy_sync(&st, c->state, sizeof st));
    if (st.err.code != 0 && st.err.what == KERN_WAIT_EARLIER) {
        /* a launch queued on a stream failed before this one: its error is the one to report
         * (its mailbox holds it) */
        c->broken = true;
        pthread_mutex_lock(&ex->lock);
        bool fresh = poll_mailboxes_locked(ex);
        mscclpp_result_t r = ex->broken;
        char msg[sizeof ex->broken_msg];
        memcpy(msg, ex->broken_msg, sizeof msg);
        pthread_mutex_unlock(&ex->lock);
        if (fresh) answer_flush(ex, r);
        if (r == MSCCLPP_OK) return exec_poison(ex, exec_state_error(&st, c->plan));
        return fresh ? r : broken_error(r, msg);
    }
    mscclpp_result_t r = exec_state_error(&st, c->plan);
    bool disagreed = st.err.what == KERN_WAIT_MISMATCH;
    if (r != MSCCLPP_OK) {
        c->broken = true;
        if (!disagreed) { /* a disagreement blames no rank (exec_disagree_error logged it) */
            r = with_proxy_reason(c, r); /* the transport call that failed, if the proxy did */
            r = comm_fail(ex->comm, r, false);
        }
    } else {
        /* a synchronous call returns once every trigger it pushed was handed to the
         * transport: a trailing put (no flush) that fails is this call's error */
        r = exec_port_drain(c->port);
        if (r != MSCCLPP_OK) r = comm_fail(ex->comm, r, false);
    }
    if (r != MSCCLPP_OK) {
        pthread_mutex_lock(&ex->lock);
        if (disagreed) answer_note_locked(ex, &st.err, c->plan);
        poison_locked(ex, r, disagreed && r == MSCCLPP_ERR_INVALID_ARG);
        pthread_mutex_unlock(&ex->lock);
        answer_flush(ex, r);
    }
    return r;
}

/* ---- context setups announced to peers that repeat their previous call -------------------- */

/* Store words [first, first + n) of a peer's counter slot (mapped), in order. */
static mscclpp_result_t slot_store(const mscclpp_executor_t *ex, uint64_t *slot, int first,
                                   const uint64_t *v, int n)
{
    if (ex->hal == hal_host_ops()) {
        /* release: the peer's interpreter reads with acquire loads (kern_rec_read) */
        for (int i = 0; i < n; i++) __atomic_store_n(slot + first + i, v[i], __ATOMIC_RELEASE);
        return MSCCLPP_OK;
    }
    return ex->hal->memcpy_sync(slot + first, v, (size_t)n * sizeof *v);
}

static mscclpp_result_t slot_load(const mscclpp_executor_t *ex, const uint64_t *slot, int first,
                                  uint64_t *v, int n)
{
    if (ex->hal == hal_host_ops()) {
        for (int i = 0; i < n; i++) v[i] = __atomic_load_n(slot + first + i, __ATOMIC_ACQUIRE);
        return MSCCLPP_OK;
    }
    return ex->hal->memcpy_sync(v, slot + first, (size_t)n * sizeof *v);
}

/* The memory-channel fence ids of context p (malloc'd, *n of them), or NULL when out of
 * memory. */
static uint32_t *mem_fence_ids(const exec_context_t *p, int *n)
{
    *n = exec_fence_ids(p->plan, p->vrank, false, NULL);
    uint32_t *ids = calloc((size_t)*n + 1, sizeof *ids);
    if (ids) exec_fence_ids(p->plan, p->vrank, false, ids);
    return ids;
}

mscclpp_result_t exec_setup_announce(mscclpp_executor_t *ex, const struct mscclpp_plan *plan,
                                     int rotation, exec_announce_t *a)
{
    memset(a, 0, sizeof *a);
    /* nothing to say: no launch yet; a point-to-point executor's launches alternate between
     * contexts of different pairs, so a record in its previous one would stop a peer that
     * legitimately goes on there; during a capture nothing can be drained (the setup times out
     * instead, naming the peer) */
    if (!ex->launched || ex->p2p || exec_cannot_drain(ex)) return MSCCLPP_OK;
    exec_context_t *p = NULL;
    pthread_mutex_lock(&ex->lock);
    for (exec_context_t *c = exec_context_next(ex, NULL); c && !p; c = exec_context_next(ex, c))
        if (c->seq == ex->last_seq) p = c;
    pthread_mutex_unlock(&ex->lock);
    if (!p || p->broken || !p->state || !p->plan->gpus[p->vrank].n_chan[PLAN_CH_MEMORY])
        return MSCCLPP_OK;
    /* the launches queued there end first: then the flag below is the next launch's */
    CHECK(hal_api_source_drain(ex->source));
    uint32_t flag = 0;
    /* every block advances its own flag, all alike: block 0's is the next launch's */
    CHECK(ex->hal->memcpy_sync(&flag, &((kern_state_t *)p->state)->flags[0], sizeof flag));
    (void)rotation; /* the call's root is in ex->shape */
    exec_call_sig(plan->collective, ex->context_seq, exec_plan_digest(plan), &ex->shape, a->sig);
    int n;
    uint32_t *ids = mem_fence_ids(p, &n);
    if (!ids) return ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
    uint64_t zero = 0, rec = KERN_REC(KERN_REC_SETUP, flag);
    mscclpp_result_t r = MSCCLPP_OK;
    for (int i = 0; i < n && r == MSCCLPP_OK; i++) {
        uint64_t *slot = p->chans[ids[i]].outbound;
        r = slot_store(ex, slot, KERN_REC_WORD, &zero, 1);
        if (r == MSCCLPP_OK) r = slot_store(ex, slot, KERN_REC_SIG, a->sig, KERN_SIG_WORDS);
        if (r == MSCCLPP_OK) r = slot_store(ex, slot, KERN_REC_WORD, &rec, 1);
    }
    free(ids);
    CHECK(r);
    a->prev = p;
    a->flag = flag;
    a->plan_name = plan->name;
    return MSCCLPP_OK;
}

mscclpp_result_t exec_setup_withdraw(mscclpp_executor_t *ex, const exec_announce_t *a)
{
    const exec_context_t *p = a->prev;
    if (!p) return MSCCLPP_OK;
    int n;
    uint32_t *ids = mem_fence_ids(p, &n);
    if (!ids) return ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
    uint64_t zero = 0;
    mscclpp_result_t r = MSCCLPP_OK;
    for (int i = 0; i < n && r == MSCCLPP_OK; i++)
        r = slot_store(ex, p->chans[ids[i]].outbound, KERN_REC_WORD, &zero, 1);
    free(ids);
    return r;
}

mscclpp_result_t exec_setup_settle(mscclpp_executor_t *ex, exec_announce_t *a, mscclpp_result_t r)
{
    exec_context_t *p = a->prev;
    if (!p) return r;
    char why[768];
    snprintf(why, sizeof why, "%s", mscclpp_last_error());
    if (r == MSCCLPP_OK || ex->setup_refused) {
        /* every peer took part in the setup with us and built the context: nobody is to
         * find the record any more (a setup refused by every rank withdrew it already) */
        mscclpp_result_t wr = exec_setup_withdraw(ex, a);
        if (r != MSCCLPP_OK) return core_error_quiet(r, "%s", why); /* the refusal stands */
        return wr;
    }
    int n;
    uint32_t *ids = mem_fence_ids(p, &n);
    if (!ids) return r; /* the setup's own error */
    mscclpp_result_t out = r;
    uint64_t answer = KERN_REC(KERN_REC_ANSWER, a->flag);
    for (int i = 0; i < n && !ex->setup_disagreed; i++) {
        uint64_t w[1 + KERN_SIG_WORDS];
        if (slot_load(ex, p->chans[ids[i]].inbound, KERN_REC_WORD, w, 1 + KERN_SIG_WORDS) !=
                MSCCLPP_OK ||
            w[0] != answer)
            continue;
        int nr = ex->comm->nranks;
        int peer = (p->plan->gpus[p->vrank].peers[PLAN_CH_MEMORY][ids[i]] + p->rotation) % nr;
        char how[900];
        snprintf(how, sizeof how,
                 "; rank %d repeats its previous call while this rank sets up "
                 "buffers for its call (the setup failed: %s)",
                 peer, why);
        ex->setup_disagreed = true;
        out = exec_disagree_error(ex->comm->rank, a->sig, a->plan_name, peer, w + 1, how);
        break;
    }
    free(ids);
    if (out == r) core_error_quiet(r, "%s", why); /* the setup's own error stands */
    return out;
}

/* ---- resynchronising after ranks disagreed ------------------------------------------------- */

#define RESYNC_MAGIC 0x434e5952u /* "RYNC" */

bool exec_cannot_drain(mscclpp_executor_t *ex)
{
    /* the call in progress captures, or a stream we launched on is captured by someone else
     * (torch.cuda.graph on a stream of an earlier direct call) */
    return ex->capturing || hal_api_source_capturing(ex->source);
}

mscclpp_result_t exec_ready(mscclpp_executor_t *ex, bool *resync, uint32_t *resync_seq)
{
    *resync = false;
    pthread_mutex_lock(&ex->lock);
    bool fresh = poll_mailboxes_locked(ex); /* the calling thread holds its message */
    mscclpp_result_t r = ex->broken;
    bool disagreed = ex->disagreed;
    char why[sizeof ex->broken_msg];
    memcpy(why, ex->broken_msg, sizeof why);
    pthread_mutex_unlock(&ex->lock);
    if (fresh) answer_flush(ex, r);
    if (r == MSCCLPP_OK || fresh) return r;
    /* a capture can neither wait for streams nor talk to the peers: the call after it does */
    if (!disagreed || ex->capturing) return broken_error(r, why);
    mscclpp_comm_t *comm = ex->comm;
    const int n = comm->nranks;
    INFO(SUBSYS_EXEC, "rank %d: resynchronising the executor after: %s", comm->rank, why);
    /* the launches still queued end at once: their contexts' records hold the error */
    (void)hal_api_source_drain(ex->source);
    core_clear_error();
    uint64_t *all = calloc((size_t)n * 2, sizeof *all);
    if (!all) return exec_poison(ex, ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory"));
    all[2 * comm->rank] = RESYNC_MAGIC;
    all[2 * comm->rank + 1] = ex->context_seq;
    r = mscclpp_bootstrap_allgather(comm->boot, all, 2 * sizeof *all);
    uint32_t seq = 0;
    int absent = -1;
    for (int p = 0; r == MSCCLPP_OK && p < n; p++) {
        if (all[2 * p] != RESYNC_MAGIC && absent < 0) absent = p;
        if (all[2 * p + 1] > seq) seq = (uint32_t)all[2 * p + 1];
    }
    free(all);
    if (r == MSCCLPP_OK && absent >= 0)
        r = ERR(MSCCLPP_ERR_REMOTE, "rank %d is not resynchronising its executor", absent);
    if (r != MSCCLPP_OK) {
        /* a rank that did not get the disagreement (or broke otherwise) cannot be met again */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
        r = ERR(r, "after ranks disagreed (%s), resynchronising the executors failed: %s", why,
                msg);
        pthread_mutex_lock(&ex->lock);
        ex->broken = MSCCLPP_OK; /* replaced by this error, which no call repairs */
        poison_locked(ex, r, false);
        pthread_mutex_unlock(&ex->lock);
        return r;
    }
    /* every rank is here with its launches done: nobody touches the contexts any more; the
     * caller frees them (context.c) and then finishes with exec_resync_done */
    *resync = true;
    *resync_seq = seq;
    return MSCCLPP_OK;
}

mscclpp_result_t exec_resync_done(mscclpp_executor_t *ex, uint32_t seq)
{
    mscclpp_result_t r = ex->hal->memset_sync(ex->last_sig, 0, KERN_EXEC_WORDS * sizeof(uint64_t));
    if (r != MSCCLPP_OK) {
        pthread_mutex_lock(&ex->lock);
        ex->broken = MSCCLPP_OK;
        poison_locked(ex, r, false);
        pthread_mutex_unlock(&ex->lock);
        return r;
    }
    pthread_mutex_lock(&ex->lock);
    ex->context_seq = seq;
    ex->launched = false;
    ex->broken = MSCCLPP_OK;
    ex->disagreed = false;
    ex->broken_msg[0] = '\0';
    pthread_mutex_unlock(&ex->lock);
    return MSCCLPP_OK;
}
