/*
 * libmscclpp_nccl: collectives, point-to-point and groups.
 *
 * Every call is a task; outside ncclGroupStart/End a call is a group of one. At the end of a
 * group each communicator queues its tasks in the order they were issued (one thread per
 * communicator when a group spans several, as ncclCommInitAll programs do):
 *
 *   - collectives on our executor: a registered DSL plan (MSCCLPP_NCCL_PLAN_DIR) first, then
 *     the built-in plans, queued on the caller's stream with no host synchronisation (docs/
 *     nccl.md "Streams"). The plan runs on the caller's buffers when it can (any device memory
 *     for plans that touch only scratch, which every built-in plan does; memory the peers can
 *     map for plans that reach their buffers); otherwise the buffers are staged through two
 *     buffers per communicator, by copies queued on the same stream;
 *   - what our plans do not serve (64-bit integer reductions, a world or size without a plan)
 *     goes to the real NCCL/RCCL of MSCCLPP_NCCL_LIB_PATH, inside one real group;
 *   - send/recv, gather and scatter move over memory channels (port channels across nodes),
 *     one plan of two ranks per transfer, queued on the caller's stream too ("point-to-point"
 *     below).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "executor/exec_forget.h"
#include "nccl/nccl_internal.h"

typedef enum {
    T_ALLREDUCE,
    T_BROADCAST,
    T_REDUCE,
    T_ALLGATHER,
    T_REDUCESCATTER,
    T_ALLTOALL,
    T_GATHER,
    T_SCATTER,
    T_SEND,
    T_RECV,
} task_kind_t;

static const char *const kind_names[] = {
    "ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather", "ncclReduceScatter",
    "ncclAlltoAll",  "ncclGather",    "ncclScatter", "ncclSend",     "ncclRecv",
};

typedef struct {
    task_kind_t kind;
    ncclComm_t comm;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t dt;
    ncclRedOp_t op;
    int root; /* root, or peer for send/recv */
    cudaStream_t stream;
} task_t;

static _Thread_local int group_depth;
static _Thread_local task_t *queue;
static _Thread_local size_t queue_len, queue_cap;
static _Thread_local ncclResult_t group_error;
static _Thread_local char group_error_msg[1024];

/* ---- staging ------------------------------------------------------------------------------ */

/*
 * Grow both staging buffers to `bytes`. Every rank grows at the same call (sizes follow the
 * call's arguments). The old buffers may still be read by queued work: this communicator's last
 * stream is waited for first (a host synchronisation, once per growth), and the executor
 * forgets its contexts on them (plans that reach the peers' buffers keyed contexts by them;
 * every rank forgets alike).
 */
static ncclResult_t stage_reserve(ncclComm_t c, size_t bytes, const char *who)
{
    (void)shim_stream_captured(c); /* a captured call stages: captured_any, before any growth */
    if (bytes <= c->stage_bytes) return ncclSuccess;
    size_t want = (size_t)1 << 20;
    while (want < bytes) want *= 2;
    mscclpp_result_t r = MSCCLPP_OK;
    if (c->stage_in && c->captured_any) {
        /* a graph may stage through them at any replay: they stay until the communicator goes
         * (nothing is waited for during a capture) */
        if (c->n_kept + 2 > c->cap_kept) {
            int cap = c->cap_kept ? 2 * c->cap_kept : 8;
            void **k = realloc(c->kept, (size_t)cap * sizeof *k);
            if (!k) return shim_error(ncclSystemError, "%s: out of memory", who);
            c->kept = k;
            c->cap_kept = cap;
        }
        c->kept[c->n_kept++] = c->stage_in;
        c->kept[c->n_kept++] = c->stage_out;
        c->stage_in = c->stage_out = NULL;
        c->stage_bytes = 0;
    } else if (c->stage_in) {
        ncclResult_t res = shim_stream_drain(c, who);
        if (res != ncclSuccess) return res;
        r = mscclpp_executor_forget(c->exec, c->stage_in, NULL);
        if (r == MSCCLPP_OK) r = mscclpp_executor_forget(c->exec, c->stage_out, NULL);
        if (r == MSCCLPP_OK && c->p2p_exec)
            r = mscclpp_executor_forget(c->p2p_exec, c->stage_in, NULL);
        if (r == MSCCLPP_OK && c->p2p_exec)
            r = mscclpp_executor_forget(c->p2p_exec, c->stage_out, NULL);
        mscclpp_free(c->stage_in);
        mscclpp_free(c->stage_out);
        c->stage_in = c->stage_out = NULL;
        c->stage_bytes = 0;
    }
    if (r == MSCCLPP_OK) r = mscclpp_malloc(want, &c->stage_in);
    if (r == MSCCLPP_OK) r = mscclpp_malloc(want, &c->stage_out);
    if (r != MSCCLPP_OK) {
        mscclpp_free(c->stage_in);
        c->stage_in = NULL;
        return shim_from_mscclpp(r, who);
    }
    c->stage_bytes = want;
    return ncclSuccess;
}

/* A copy queued on st (NULL: now). */
static ncclResult_t copy_on(void *dst, const void *src, size_t bytes, mscclpp_stream_t st,
                            const char *who)
{
    if (!bytes || dst == src) return ncclSuccess;
    mscclpp_result_t r = mscclpp_memcpy_async(dst, src, bytes, st);
    return r == MSCCLPP_OK ? ncclSuccess : shim_from_mscclpp(r, who);
}

/* ---- operators ---------------------------------------------------------------------------- */

typedef struct {
    mscclpp_redop_t op;       /* what our plans compute */
    bool scale, average;      /* PreMulSum before, or divide by nranks after */
    unsigned char scalar[8];  /* PreMulSum scalar, in the call's dtype */
    const void *scalar_ptr;   /* or, device residence: where to read it when the call runs */
    ncclRedOp_t real_op;      /* what to hand the fallback */
    bool real_op_ok;
} op_plan_t;


/* Resolve `op` for `dt`; *ours false when our plans cannot compute it (fallback). */
static ncclResult_t resolve_op(const task_t *t, op_plan_t *p, bool *ours, const char *who)
{
    memset(p, 0, sizeof *p);
    p->real_op = t->op;
    p->real_op_ok = true;
    mscclpp_dtype_t md;
    *ours = shim_dtype_map(t->dt, &md);
    switch (t->op) {
    case ncclSum: p->op = MSCCLPP_SUM; return ncclSuccess;
    case ncclProd: p->op = MSCCLPP_PROD; return ncclSuccess;
    case ncclMax: p->op = MSCCLPP_MAX; return ncclSuccess;
    case ncclMin: p->op = MSCCLPP_MIN; return ncclSuccess;
    case ncclAvg:
        p->op = MSCCLPP_SUM;
        p->average = true;
        return ncclSuccess;
    default: break;
    }
    ncclComm_t c = t->comm;
    int i = (int)t->op - (int)ncclNumOps;
    pthread_mutex_lock(&c->lock);
    shim_redop_t o = (i >= 0 && i < SHIM_MAX_REDOPS) ? c->redops[i] : (shim_redop_t){0};
    pthread_mutex_unlock(&c->lock);
    if (!o.used)
        return shim_error(ncclInvalidArgument, "%s: operator %d is not live on comm %p (rank %d)",
                          who, (int)t->op, (void *)c, c->rank);
    if (o.dtype != t->dt)
        return shim_error(ncclInvalidArgument, "%s: PreMulSum operator %d was created for %s, "
                          "called with %s", who, (int)t->op, shim_dtype_name(o.dtype),
                          shim_dtype_name(t->dt));
    p->op = MSCCLPP_SUM;
    p->scale = true;
    p->real_op = o.real_op;
    p->real_op_ok = o.has_real_op;
    if (o.residence == ncclScalarHostImmediate) {
        memcpy(p->scalar, o.value, sizeof p->scalar);
        return ncclSuccess;
    }
    /* device residence: read when the call runs, in stream order */
    p->scalar_ptr = o.scalar_ptr;
    (void)who;
    return ncclSuccess;
}

/*
 * The arithmetic of ncclAvg (divide the result by nranks) and PreMulSum (scale the input), on
 * the device, queued on the stream (mscclpp_scale_async: a kernel on GPUs, a stream task on the
 * host backend; capturable; a device-resident scalar is read when it runs, as NCCL's is).
 */
typedef struct {
    void *dst;
    const void *src;
    size_t count;
    ncclDataType_t dt;
    int divisor;                /* > 0: divide (ncclAvg); else scale by the scalar */
    const unsigned char *scalar; /* the scalar, in dt (host-immediate) */
    const void *scalar_ptr;     /* or where the device reads it */
} math_job_t;

static ncclResult_t math_on(const math_job_t *j, mscclpp_stream_t st, const char *who)
{
    mscclpp_dtype_t md;
    if (!shim_dtype_map(j->dt, &md))
        return shim_error(ncclInternalError, "%s: no device arithmetic for %s", who,
                          shim_dtype_name(j->dt));
    mscclpp_result_t r = mscclpp_scale_async(j->dst, j->src, j->count, md, j->divisor,
                                             j->scalar_ptr ? j->scalar_ptr
                                                           : (const void *)j->scalar,
                                             j->scalar_ptr != NULL, st);
    return r == MSCCLPP_OK ? ncclSuccess : shim_from_mscclpp(r, who);
}

/* ---- collectives on our executor ---------------------------------------------------------- */

static const char *collective_of(task_kind_t k)
{
    switch (k) {
    case T_ALLREDUCE:
    case T_REDUCE: return "allreduce";
    case T_BROADCAST: return "broadcast";
    case T_ALLGATHER: return "allgather";
    case T_REDUCESCATTER: return "reducescatter";
    case T_ALLTOALL: return "alltoall";
    default: return NULL;
    }
}

/* The dtype our plans move for a data-movement collective: any dtype of the right width. */
static mscclpp_dtype_t move_dtype(ncclDataType_t dt)
{
    mscclpp_dtype_t md;
    if (shim_dtype_map(dt, &md)) return md;
    return MSCCLPP_FLOAT64; /* a dtype NCCL added after this library: moved as 8-byte words */
}

/* The sizes the collective entry points of libmscclpp compute for `count` elements per block
 * (mscclpp_allreduce and friends), for mscclpp_executor_direct. */
static void entry_sizes(const task_t *t, size_t cb, int n, size_t *in_b, size_t *out_b)
{
    *in_b = *out_b = cb;
    if (t->kind == T_ALLGATHER) *out_b = cb * (size_t)n;
    if (t->kind == T_REDUCESCATTER) *in_b = cb * (size_t)n;
    if (t->kind == T_ALLTOALL) *in_b = *out_b = cb * (size_t)n;
}

/* One collective through the entry point of libmscclpp for its kind, or the DSL plan. */
static mscclpp_result_t run_plan(const task_t *t, const mscclpp_plan_t *plan, const void *in,
                                 void *out, size_t count, size_t in_b, size_t out_b,
                                 mscclpp_dtype_t md, mscclpp_redop_t mop, mscclpp_stream_t st)
{
    ncclComm_t c = t->comm;
    if (plan) return mscclpp_execute(c->exec, plan, in, out, in_b, out_b, md, mop, st);
    switch (t->kind) {
    case T_ALLREDUCE:
    case T_REDUCE: return mscclpp_allreduce(c->exec, in, out, count, md, mop, st);
    case T_BROADCAST: return mscclpp_broadcast(c->exec, in, out, count, md, t->root, st);
    case T_ALLGATHER: return mscclpp_allgather(c->exec, in, out, count, md, st);
    case T_REDUCESCATTER: return mscclpp_reducescatter(c->exec, in, out, count, md, mop, st);
    case T_ALLTOALL: return mscclpp_alltoall(c->exec, in, out, count, md, st);
    default: return MSCCLPP_ERR_INTERNAL;
    }
}

/*
 * Whether the plan runs on the caller's buffers (docs/nccl.md "Zero-copy"): the executor says
 * the plan takes these buffers and sizes as they are (mscclpp_executor_direct), no PreMulSum
 * scales the caller's input, and the collective is one every rank passes both buffers to with
 * the same meaning (allreduce, allgather, reducescatter, alltoall: broadcast and reduce ignore
 * a buffer on some ranks, so ranks could choose different plans; they are staged). A DSL plan
 * runs as written: an in-place one only on a call in place as NCCL defines it, any other only
 * on buffers that do not overlap. The allocations are noted, so that the executor forgets
 * their contexts once they are freed. The executor keeps what mscclpp_executor_direct looked up
 * for the call that follows at once (run_ours: run_plan), which then asks nothing again.
 */
static bool zero_copy(const task_t *t, const op_plan_t *op, const mscclpp_plan_t *plan,
                      mscclpp_dtype_t md, bool unpadded, size_t in_b, size_t out_b)
{
    ncclComm_t c = t->comm;
    if (!c->zero_copy || !unpadded || (op && op->scale)) return false;
    if (t->kind != T_ALLREDUCE && t->kind != T_ALLGATHER && t->kind != T_REDUCESCATTER &&
        t->kind != T_ALLTOALL)
        return false;
    const char *s = t->send, *r = t->recv;
    if (plan) {
        bool inplace = t->kind == T_ALLGATHER       ? s == r + (size_t)c->rank * in_b
                       : t->kind == T_REDUCESCATTER ? r == s + (size_t)c->rank * out_b
                                                    : s == r;
        if (mscclpp_plan_is_inplace(plan) ? !inplace : !(s + in_b <= r || r + out_b <= s))
            return false;
    }
    int direct = 0;
    if (mscclpp_executor_direct(c->exec, plan, plan ? NULL : collective_of(t->kind), s, r, in_b,
                                out_b, md, &direct) != MSCCLPP_OK ||
        !direct)
        return false;
    /* memory the peers may map: noted, to be forgotten once ncclMemFree'd or deregistered */
    void *in_base = shim_zc_base(c, s, in_b), *out_base = shim_zc_base(c, r, out_b);
    const char *who = kind_names[t->kind];
    if (in_base && shim_zc_note(c, in_base, who) != ncclSuccess) return false;
    if (out_base && shim_zc_note(c, out_base, who) != ncclSuccess) return false;
    return true;
}

/*
 * Run one collective with our plans, queued on st. *unsupported is set (and nothing written to
 * the caller's buffers) when no plan of ours serves it, so the caller may fall back.
 */
static ncclResult_t run_ours(const task_t *t, const op_plan_t *op, mscclpp_stream_t st,
                             bool *unsupported)
{
    ncclComm_t c = t->comm;
    const char *who = kind_names[t->kind];
    int n = c->nranks, rank = c->rank;
    bool reducing = t->kind == T_ALLREDUCE || t->kind == T_REDUCE || t->kind == T_REDUCESCATTER;
    *unsupported = false;
    mscclpp_dtype_t md = reducing ? (mscclpp_dtype_t)0 : move_dtype(t->dt);
    if (reducing) shim_dtype_map(t->dt, &md);
    mscclpp_redop_t mop = reducing ? op->op : MSCCLPP_REDOP_PLAN;
    const char *coll = collective_of(t->kind);
    /*
     * Blocks (the message, or one rank's part of it) of whole 4-byte words, times nranks for a
     * message the plan itself splits, are taken by every plan (chunk offsets of packet plans
     * must stay 4-byte aligned, and the lowering does not split odd tails yet); others are
     * staged, padded with zeroes to 16 bytes (times nranks). Only calls whose blocks need no
     * padding run on the caller's buffers, and plans are chosen for the sizes they run with.
     */
    bool split = t->kind == T_ALLREDUCE || t->kind == T_REDUCE || t->kind == T_BROADCAST;
    size_t es = shim_dtype_size(t->dt), word = split ? 4 * (size_t)n : 4;
    size_t align = split ? 16 * (size_t)n : 16, cb = t->count * es;
    size_t pb = cb % word == 0 ? cb : (cb + align - 1) / align * align, pc = pb / es;
    size_t in_b, out_b;
    entry_sizes(t, pb, n, &in_b, &out_b);
    uint64_t msg = t->kind == T_ALLGATHER ? out_b : in_b;

    /* 0. what mscclpp.ext chose (nccl/nccl_ext.c): an added DSL plan, or what runs instead */
    shim_ext_choice_t ext;
    int nlocal = 0;
    if (mscclpp_comm_local_size(c->comm, &nlocal) != MSCCLPP_OK) nlocal = 0;
    mscclpp_nccl_request_t req = {.collective = coll,
                                  .message_size = cb,
                                  .world_size = n,
                                  .n_ranks_per_node = nlocal,
                                  .rank = rank,
                                  .input_buffer = t->send,
                                  .output_buffer = t->recv,
                                  .stream = (void *)t->stream,
                                  .dtype = -1,
                                  .root =
                                      t->kind == T_BROADCAST || t->kind == T_REDUCE ? t->root : -1};
    mscclpp_dtype_t req_dt;
    if (shim_dtype_map(t->dt, &req_dt)) req.dtype = (int)req_dt;
    ncclResult_t res = shim_ext_choose(c, &req, msg, &ext);
    if (res != ncclSuccess) return res;
    if (ext.choice == MSCCLPP_NCCL_SELECT_FALLBACK) {
        *unsupported = true;
        return shim_quiet_error(ncclInvalidUsage, "the selector chose the fallback library");
    }
    if (ext.plan && t->kind == T_BROADCAST && t->root != 0) {
        /* broadcast plans are written for root 0 */
        if (ext.selected)
            return shim_error(ncclInvalidUsage,
                              "%s from root %d: the selected DSL plan '%s' "
                              "serves root 0 only",
                              who, t->root, mscclpp_plan_name(ext.plan));
        ext.plan = NULL;
    }

    /* 1. a DSL plan: of mscclpp.ext, else registered for this call (MSCCLPP_NCCL_PLAN_DIR;
     * broadcast plans are written for root 0); the selector may skip both */
    const mscclpp_plan_t *plan = ext.plan;
    if (!plan && ext.choice != MSCCLPP_NCCL_SELECT_NATIVE && c->nplans &&
        (t->kind != T_BROADCAST || t->root == 0) &&
        mscclpp_executor_select_plan(c->exec, coll, 0, msg, "source=nccl-dsl", &plan) !=
            MSCCLPP_OK)
        plan = NULL;
    bool plan_inplace = plan && mscclpp_plan_is_inplace(plan);

    mscclpp_result_t r;
    if (zero_copy(t, op, plan, md, pb == cb, in_b, out_b)) {
        if (!c->zc_logged) {
            c->zc_logged = true;
            shim_info("rank %d: %s of %zu bytes runs on the caller's buffers (zero-copy)", rank,
                      who, cb);
        }
        r = run_plan(t, plan, t->send, t->recv, t->count, in_b, out_b, md, mop, st);
        if (r == MSCCLPP_OK && op && op->average) {
            math_job_t j = {t->recv, t->recv, t->count, t->dt, n, NULL, NULL};
            res = math_on(&j, st, who);
        }
    } else {
        /* Staged: the caller's blocks are copied into the staging buffers, each padded with
         * zeroes, the plan runs there and the result is copied out, every copy queued on st.
         * An in-place DSL plan runs in place on them, in NCCL's in-place layouts. */
        size_t nb_in = 1, nb_out = 1;
        if (t->kind == T_ALLGATHER) nb_out = (size_t)n;
        if (t->kind == T_REDUCESCATTER) nb_in = (size_t)n;
        if (t->kind == T_ALLTOALL) nb_in = nb_out = (size_t)n;
        res = stage_reserve(c, in_b > out_b ? in_b : out_b, who);
        if (res != ncclSuccess) return res;
        void *in = c->stage_in, *out = c->stage_out;
        if (plan_inplace && t->kind == T_ALLGATHER) in = (char *)c->stage_out + (size_t)rank * pb;
        else if (plan_inplace && t->kind == T_REDUCESCATTER)
            out = (char *)c->stage_in + (size_t)rank * pb;
        else if (plan_inplace) in = c->stage_out;
        /* the input (scaled for PreMulSum); a broadcast reads only the root's */
        for (size_t b = 0; b < nb_in && (t->kind != T_BROADCAST || rank == t->root); b++) {
            char *dst = (char *)in + b * pb;
            const char *src = (const char *)t->send + b * cb;
            if (op && op->scale) {
                math_job_t j = {dst, src, t->count, t->dt, 0, op->scalar, op->scalar_ptr};
                res = math_on(&j, st, who);
            } else {
                res = copy_on(dst, src, cb, st, who);
            }
            if (res == ncclSuccess && pb > cb) {
                mscclpp_result_t m = mscclpp_memset_async(dst + cb, 0, pb - cb, st);
                if (m != MSCCLPP_OK) res = shim_from_mscclpp(m, who);
            }
            if (res != ncclSuccess) return res;
        }
        r = run_plan(t, plan, in, out, pc, in_b, out_b, md, mop, st);
        /* the result, out of staging (an average divided on the way) */
        for (size_t b = 0; r == MSCCLPP_OK && b < nb_out && res == ncclSuccess &&
                           (t->kind != T_REDUCE || rank == t->root);
             b++) {
            char *dst = (char *)t->recv + b * cb;
            const char *src = (const char *)out + b * pb;
            if (op && op->average) {
                math_job_t j = {dst, src, t->count, t->dt, n, NULL, NULL};
                res = math_on(&j, st, who);
            } else {
                res = copy_on(dst, src, cb, st, who);
            }
        }
    }
    if (plan && plan == ext.plan) {
        if (r == MSCCLPP_OK) shim_ext_ran(ext.index);
        if (shim_info_enabled())
            shim_info("rank %d: %s of %llu bytes ran DSL plan '%s' of mscclpp.ext (%s)", rank, who,
                      (unsigned long long)msg, mscclpp_plan_name(ext.plan),
                      ext.selected ? "selected" : "first that fits");
    } else if (plan) {
        /* said once per plan and communicator: enough to see which plan serves what */
        for (int i = 0; i < c->nplans && i < 64; i++)
            if (c->plans[i] == plan && !(c->dsl_logged & (1ull << i))) {
                c->dsl_logged |= 1ull << i;
                shim_info("rank %d: %s of %llu bytes ran DSL plan '%s'", rank, who,
                          (unsigned long long)msg, mscclpp_plan_name(plan));
            }
    }
    if (r == MSCCLPP_ERR_UNSUPPORTED) {
        *unsupported = true; /* keep the message, in case there is no fallback */
        return shim_quiet_error(ncclInvalidUsage, "%s", mscclpp_last_error());
    }
    if (r != MSCCLPP_OK) {
        char what[160];
        snprintf(what, sizeof what, "%s (rank %d of %d, %zu x %s, %s)", who, rank, n, t->count,
                 shim_dtype_name(t->dt), reducing ? shim_op_name(t->op) : "no op");
        res = shim_from_mscclpp(r, what);
        if (r == MSCCLPP_ERR_REMOTE || r == MSCCLPP_ERR_TIMEOUT) c->async_error = res;
        return res;
    }
    return res;
}

/* One rank: every collective is a local copy (scaled or averaged as asked), queued on st. */
static ncclResult_t run_single(const task_t *t, const op_plan_t *op, mscclpp_stream_t st)
{
    const char *who = kind_names[t->kind];
    size_t es = shim_dtype_size(t->dt), bytes = t->count * es;
    if (op && op->scale) {
        math_job_t j = {t->recv, t->send, t->count, t->dt, 0, op->scalar, op->scalar_ptr};
        return math_on(&j, st, who);
    }
    /* average over one rank is the value itself */
    return copy_on(t->recv, t->send, bytes, st, who);
}

static ncclResult_t run_real(const task_t *t, const op_plan_t *op, const shim_real_t *rl)
{
    ncclComm_t rc = t->comm->real;
    const char *who = kind_names[t->kind];
    ncclRedOp_t rop = op ? op->real_op : ncclSum;
    if (op && !op->real_op_ok)
        return shim_error(ncclInvalidUsage, "%s: the fallback library could not create this "
                          "PreMulSum operator", who);
    ncclResult_t res = ncclInternalError;
    bool have = false;
    switch (t->kind) {
    case T_ALLREDUCE:
        if ((have = rl->AllReduce != NULL))
            res = rl->AllReduce(t->send, t->recv, t->count, t->dt, rop, rc, t->stream);
        break;
    case T_REDUCE:
        if ((have = rl->Reduce != NULL))
            res = rl->Reduce(t->send, t->recv, t->count, t->dt, rop, t->root, rc, t->stream);
        break;
    case T_BROADCAST:
        if ((have = rl->Broadcast != NULL))
            res = rl->Broadcast(t->send, t->recv, t->count, t->dt, t->root, rc, t->stream);
        break;
    case T_ALLGATHER:
        if ((have = rl->AllGather != NULL))
            res = rl->AllGather(t->send, t->recv, t->count, t->dt, rc, t->stream);
        break;
    case T_REDUCESCATTER:
        if ((have = rl->ReduceScatter != NULL))
            res = rl->ReduceScatter(t->send, t->recv, t->count, t->dt, rop, rc, t->stream);
        break;
    case T_ALLTOALL:
        if ((have = rl->AlltoAll != NULL))
            res = rl->AlltoAll(t->send, t->recv, t->count, t->dt, rc, t->stream);
        break;
    default: break;
    }
    if (!have)
        return shim_error(ncclInvalidUsage, "%s: the fallback library %s does not export it", who,
                          rl->path);
    if (res != ncclSuccess)
        return shim_error(res, "%s: the fallback library %s failed: %s", who, rl->path,
                          rl->GetLastError ? rl->GetLastError(rc) : ncclGetErrorString(res));
    return ncclSuccess;
}

/* ---- point-to-point ----------------------------------------------------------------------- */

/*
 * ncclSend/ncclRecv (and ncclGather/ncclScatter, which become sends and receives) move data
 * between GPUs over channels, queued on the caller's stream like the collectives; the bootstrap
 * carries none of it (docs/nccl.md "Point-to-point"). Each transfer from rank s to rank t runs
 * a plan of those two ranks only (p2p_plan): s puts its buffer into t's scratch over a memory
 * channel (a port channel when t is on another node, through the proxy, flushed before the
 * launch ends), signals, and t copies the scratch into its buffer. A `nop` (the block's sync)
 * sits between the put and the signal and between the wait and the copy: a signal publishes
 * only what the whole block has written before a sync, and a wait only lets thread i past for
 * channel i (plan-format.md 2.3). Without them a GPU receiver copied stale scratch (an H200,
 * torch_nccl.py's 512 B ring; the host backend, with one thread a block, never showed it), and
 * the verifier, which p2p_plan now runs on each plan it makes, names the race. The plans run on the
 * communicator's point-to-point executor (mscclpp_executor_set_p2p), whose every launch
 * fences: when the plan's first op runs, the peer has reached the same transfer, so its
 * scratch is free. Transfers of a group are queued in one order every rank agrees on (the
 * pair, then the direction, then their order to that peer), so the first transfer not yet
 * done always has both its ranks ready: no deadlock, whatever the group holds.
 */

typedef struct {
    const void *send; /* sends */
    void *recv;       /* receives */
    size_t bytes;
    int peer;
    const char *who;
    cudaStream_t stream;
} xfer_t;

typedef struct {
    xfer_t *v;
    size_t n, cap;
} xfers_t;

static ncclResult_t xfer_push(xfers_t *l, xfer_t x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        xfer_t *v = realloc(l->v, cap * sizeof *v);
        if (!v) return shim_error(ncclSystemError, "%s: out of memory", x.who);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return ncclSuccess;
}

/* Append the transfers of a send/recv/gather/scatter task, in issue order. */
static ncclResult_t p2p_expand(const task_t *t, xfers_t *sends, xfers_t *recvs)
{
    ncclComm_t c = t->comm;
    size_t b = t->count * shim_dtype_size(t->dt);
    const char *who = kind_names[t->kind];
    cudaStream_t st = t->stream;
    ncclResult_t res = ncclSuccess;
    switch (t->kind) {
    case T_SEND: return xfer_push(sends, (xfer_t){t->send, NULL, b, t->root, who, st});
    case T_RECV: return xfer_push(recvs, (xfer_t){NULL, t->recv, b, t->root, who, st});
    case T_GATHER:
        if (c->rank != t->root)
            return xfer_push(sends, (xfer_t){t->send, NULL, b, t->root, who, st});
        for (int r = 0; r < c->nranks && res == ncclSuccess; r++)
            res = xfer_push(recvs,
                            (xfer_t){NULL, (char *)t->recv + (size_t)r * b, b, r, who, st});
        if (res == ncclSuccess)
            res = xfer_push(sends, (xfer_t){t->send, NULL, b, c->rank, who, st});
        return res;
    case T_SCATTER:
        if (c->rank != t->root)
            return xfer_push(recvs, (xfer_t){NULL, t->recv, b, t->root, who, st});
        for (int r = 0; r < c->nranks && res == ncclSuccess; r++)
            res = xfer_push(
                sends, (xfer_t){(const char *)t->send + (size_t)r * b, NULL, b, r, who, st});
        if (res == ncclSuccess)
            res = xfer_push(recvs, (xfer_t){NULL, t->recv, b, c->rank, who, st});
        return res;
    default: return shim_error(ncclInternalError, "%s: not point-to-point", who);
    }
}

/* The plan that moves a buffer from rank s to rank t (JSON, loaded once per pair and
 * direction): memory channels within a node, port channels across nodes. */
static ncclResult_t p2p_plan(ncclComm_t c, int s, int t, const mscclpp_plan_t **out,
                             const char *who)
{
    const int n = c->nranks;
    mscclpp_plan_t **slot = &c->p2p_plans[(size_t)s * (size_t)n + (size_t)t];
    if (*slot) {
        *out = *slot;
        return ncclSuccess;
    }
    int local = 1;
    if (mscclpp_executor_peer_local(c->exec, s == c->rank ? t : s, &local) != MSCCLPP_OK)
        return shim_from_mscclpp(MSCCLPP_ERR_INTERNAL, who);
    const char *ch = local ? "memory" : "port";
    size_t cap = 1024 + (size_t)n * 200;
    char *json = malloc(cap);
    if (!json) return shim_error(ncclSystemError, "%s: out of memory", who);
    size_t len = (size_t)snprintf(
        json, cap, "{\"name\":\"nccl_p2p_%d_to_%d\",\"collective\":\"custom\","
        "\"protocol\":\"Simple\",\"inplace\":false,\"reuse_resources\":false,"
        "\"use_double_scratch_buffer\":false,\"buffer_alignment\":16,"
        "\"num_threads_per_block\":1024,\"min_message_size\":0,"
        "\"max_message_size\":18446744073709551615,\"gpus\":[", s, t);
    for (int r = 0; r < n && len < cap; r++) {
        const char *sep = r ? "," : "";
        if (r == s)
            len += (size_t)snprintf(
                json + len, cap - len,
                "%s{\"id\":%d,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":0,"
                "\"channels\":[{\"channel_type\":\"%s\",\"connected_to\":[%d]}],"
                "\"remote_buffers\":[{\"rank\":%d,\"type\":\"s\",\"access_channel_types\":"
                "[\"%s\"]}],\"semaphores\":[],\"threadblocks\":[{\"id\":0,\"channels\":"
                "[{\"channel_type\":\"%s\",\"channel_ids\":[0]}],\"remote_buffer_refs\":"
                "[{\"access_channel_type\":\"%s\",\"remote_buffer_ids\":[0]}],\"ops\":["
                "{\"name\":\"put\",\"src_buff\":[{\"type\":\"i\",\"index\":0,\"size\":1}],"
                "\"dst_buff\":[{\"buffer_id\":0,\"index\":0,\"size\":1}],"
                "\"channel_ids\":[0],\"channel_type\":\"%s\"},{\"name\":\"nop\"},"
                "{\"name\":\"signal\",\"channel_ids\":[0],\"channel_type\":\"%s\"}%s]}]}",
                sep, r, ch, t, t, ch, ch, ch, ch, ch,
                local ? "" : ",{\"name\":\"flush\",\"channel_ids\":[0],"
                             "\"channel_type\":\"port\"}");
        else if (r == t)
            len += (size_t)snprintf(
                json + len, cap - len,
                "%s{\"id\":%d,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":1,"
                "\"channels\":[{\"channel_type\":\"%s\",\"connected_to\":[%d]}],"
                "\"remote_buffers\":[],\"semaphores\":[],\"threadblocks\":[{\"id\":0,"
                "\"channels\":[{\"channel_type\":\"%s\",\"channel_ids\":[0]}],"
                "\"remote_buffer_refs\":[],\"ops\":["
                "{\"name\":\"wait\",\"channel_ids\":[0],\"channel_type\":\"%s\"},"
                "{\"name\":\"nop\"},{\"name\":\"copy\",\"src_buff\":[{\"type\":\"s\",\"index\":0,\"size\":1}],"
                "\"dst_buff\":[{\"type\":\"o\",\"index\":0,\"size\":1}]}]}]}",
                sep, r, ch, s, ch, ch);
        else
            len += (size_t)snprintf(json + len, cap - len,
                                    "%s{\"id\":%d,\"input_chunks\":1,\"output_chunks\":1,"
                                    "\"scratch_chunks\":0,\"channels\":[],\"remote_buffers\":[],"
                                    "\"semaphores\":[],\"threadblocks\":[]}",
                                    sep, r);
    }
    if (len < cap) len += (size_t)snprintf(json + len, cap - len, "]}");
    mscclpp_result_t r = len < cap ? mscclpp_plan_load_string(json, len, slot)
                                   : MSCCLPP_ERR_INTERNAL;
    free(json);
    /* the plan is ours, so a fault in it is ours too: the verifier simulates it once per pair
     * and direction (deadlocks, races; a 2-rank, 2-block plan: microseconds) */
    if (r == MSCCLPP_OK && (r = mscclpp_plan_verify(*slot)) != MSCCLPP_OK) {
        mscclpp_plan_destroy(*slot);
        *slot = NULL;
        r = MSCCLPP_ERR_INTERNAL;
    }
    if (r != MSCCLPP_OK) {
        char what[160];
        snprintf(what, sizeof what, "%s: the send/recv plan from rank %d to rank %d", who, s, t);
        return shim_from_mscclpp(r, what);
    }
    *out = *slot;
    return ncclSuccess;
}

/* One transfer of this rank's group, in the order every rank agrees on (p2p_order). */
typedef struct {
    int lo, hi;     /* the pair */
    int from_lo;    /* direction: lo -> hi */
    size_t k;       /* its place among the pair's transfers in that direction */
    const xfer_t *x;
    bool is_send;
} p2p_op_t;

static int p2p_order(const void *a, const void *b)
{
    const p2p_op_t *x = a, *y = b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    if (x->hi != y->hi) return x->hi < y->hi ? -1 : 1;
    if (x->from_lo != y->from_lo) return x->from_lo > y->from_lo ? -1 : 1;
    if (x->k != y->k) return x->k < y->k ? -1 : 1;
    if (x->is_send != y->is_send) return x->is_send ? -1 : 1; /* to itself: the send first */
    return 0;
}

static ncclResult_t p2p_run(ncclComm_t c, const xfers_t *sends, const xfers_t *recvs)
{
    const int me = c->rank, n = c->nranks;
    size_t nops = sends->n + recvs->n;
    if (!nops) return ncclSuccess;
    ncclResult_t res = ncclSuccess;
    if (!c->p2p_exec) {
        mscclpp_result_t r = mscclpp_executor_create(c->comm, &c->p2p_exec);
        if (r == MSCCLPP_OK) r = mscclpp_executor_set_p2p(c->p2p_exec);
        if (r == MSCCLPP_OK && !c->p2p_plans) {
            c->p2p_plans = calloc((size_t)n * (size_t)n, sizeof *c->p2p_plans);
            if (!c->p2p_plans) r = MSCCLPP_ERR_NO_MEMORY;
        }
        if (r != MSCCLPP_OK) {
            mscclpp_executor_destroy(c->p2p_exec);
            c->p2p_exec = NULL;
            return shim_from_mscclpp(r, "ncclGroupEnd: send/recv");
        }
    }
    p2p_op_t *ops = calloc(nops, sizeof *ops);
    size_t *count = calloc((size_t)n * 2, sizeof *count); /* per peer: sends, receives so far */
    if (!ops || !count) {
        free(ops);
        free(count);
        return shim_error(ncclSystemError, "ncclGroupEnd: out of memory");
    }
    size_t k = 0;
    for (int dir = 0; dir < 2; dir++) {
        const xfers_t *l = dir ? recvs : sends;
        for (size_t i = 0; i < l->n; i++) {
            const xfer_t *x = &l->v[i];
            int from = dir ? x->peer : me, to = dir ? me : x->peer;
            ops[k] = (p2p_op_t){from < to ? from : to, from < to ? to : from, from < to,
                                count[(size_t)x->peer * 2 + (size_t)dir]++, x, !dir};
            k++;
        }
    }
    qsort(ops, nops, sizeof *ops, p2p_order);
    /* to itself: the k-th send meets the k-th receive (both sorted next to each other) */
    size_t self_sends = count[(size_t)me * 2], self_recvs = count[(size_t)me * 2 + 1];
    if (self_sends != self_recvs)
        res = shim_error(ncclInvalidUsage, "%s: rank %d sends %zu buffers to itself and receives "
                         "%zu in the group", ops[0].x->who, me, self_sends, self_recvs);
    char what[200];
    for (size_t i = 0; i < nops && res == ncclSuccess; i++) {
        const p2p_op_t *o = &ops[i];
        const xfer_t *x = o->x;
        mscclpp_stream_t st = NULL;
        bool wait = false;
        if ((res = shim_stream_get(c, x->stream, &st, &wait, x->who)) != ncclSuccess) break;
        if ((res = shim_stream_enter(c, st, x->who)) != ncclSuccess) break;
        if (wait) c->p2p_sync_after = true;
        if (x->peer == me) {
            if (!o->is_send) continue; /* done with its send */
            const xfer_t *r = NULL;
            for (size_t j = 0; j < nops && !r; j++)
                if (!ops[j].is_send && ops[j].lo == me && ops[j].hi == me && ops[j].k == o->k)
                    r = ops[j].x;
            if (!r || r->bytes != x->bytes) {
                res = shim_error(ncclInvalidUsage, "%s: rank %d sends %zu bytes to itself but "
                                 "receives %zu", x->who, me, x->bytes, r ? r->bytes : 0);
                break;
            }
            res = copy_on(r->recv, x->send, x->bytes, st, x->who);
            continue;
        }
        if (!x->bytes) continue;
        const mscclpp_plan_t *plan = NULL;
        int from = o->is_send ? me : x->peer, to = o->is_send ? x->peer : me;
        if ((res = p2p_plan(c, from, to, &plan, x->who)) != ncclSuccess) break;
        void *buf = o->is_send ? (void *)x->send : x->recv;
        /* a port channel's proxy moves registered memory only: other memory (malloc'd on the
         * host backend) is staged, the copies queued on the stream */
        int direct = 0;
        if (mscclpp_executor_direct(c->p2p_exec, plan, NULL, buf, buf, x->bytes, x->bytes,
                                    MSCCLPP_UINT8, &direct) != MSCCLPP_OK)
            direct = 0;
        if (!direct) {
            if ((res = stage_reserve(c, x->bytes, x->who)) != ncclSuccess) break;
            buf = o->is_send ? c->stage_in : c->stage_out;
            if (o->is_send && (res = copy_on(buf, x->send, x->bytes, st, x->who)) != ncclSuccess)
                break;
        }
        mscclpp_result_t r = mscclpp_execute(c->p2p_exec, plan, buf, buf, x->bytes, x->bytes,
                                             MSCCLPP_UINT8, MSCCLPP_REDOP_PLAN, st);
        if (r == MSCCLPP_OK && !direct && !o->is_send)
            res = copy_on(x->recv, buf, x->bytes, st, x->who);
        if (r != MSCCLPP_OK) {
            snprintf(what, sizeof what, "%s (rank %d %s rank %d, %zu bytes)", x->who, me,
                     o->is_send ? "to" : "from", x->peer, x->bytes);
            res = shim_from_mscclpp(r, what);
            if (r == MSCCLPP_ERR_REMOTE || r == MSCCLPP_ERR_TIMEOUT) c->async_error = res;
        }
    }
    free(ops);
    free(count);
    return res;
}

/* ---- running one communicator's tasks ----------------------------------------------------- */

static ncclResult_t run_comm_tasks(ncclComm_t c, const task_t *tasks, size_t ntasks)
{
    /* before any plan runs: contexts on memory freed or deregistered since the last group */
    ncclResult_t res = shim_zc_forget_stale(c, kind_names[tasks[0].kind]);
    if (res != ncclSuccess) return res;
    bool sync_after = false; /* host backend, NULL stream, several communicators */

    xfers_t sends = {0}, recvs = {0};
    task_t *fallback = NULL;
    op_plan_t *fallback_ops = NULL;
    size_t nfallback = 0;
    for (size_t i = 0; i < ntasks && res == ncclSuccess; i++) {
        const task_t *t = &tasks[i];
        const char *who = kind_names[t->kind];
        if (t->kind >= T_GATHER) {
            res = p2p_expand(t, &sends, &recvs);
            continue;
        }
        if (t->count == 0) continue;
        bool reducing = t->kind == T_ALLREDUCE || t->kind == T_REDUCE ||
                        t->kind == T_REDUCESCATTER;
        op_plan_t op;
        bool ours = true;
        if (reducing && (res = resolve_op(t, &op, &ours, who)) != ncclSuccess) break;
        mscclpp_stream_t st = NULL;
        bool wait = false;
        if (ours) {
            /* queued on the caller's stream, after this communicator's earlier work */
            if ((res = shim_stream_get(c, t->stream, &st, &wait, who)) != ncclSuccess) break;
            if ((res = shim_stream_enter(c, st, who)) != ncclSuccess) break;
            sync_after = sync_after || wait;
        }
        if (c->nranks == 1 && ours) {
            res = run_single(t, reducing ? &op : NULL, st);
            continue;
        }
        bool unsupported = !ours;
        if (ours) {
            res = run_ours(t, reducing ? &op : NULL, st, &unsupported);
            if (!unsupported) continue;
            res = ncclSuccess; /* its message stays the last error, for the case below */
        } else {
            shim_quiet_error(ncclInvalidUsage, "%s with %s is not computed by libmscclpp's "
                             "plans", shim_dtype_name(t->dt), shim_op_name(t->op));
        }
        /* not ours: the real library, after our other tasks */
        if (!c->real) {
            char why[1024];
            snprintf(why, sizeof why, "%s", shim_last_error());
            res = shim_error(ncclInvalidUsage, "%s: no libmscclpp plan serves this call (%s) and "
                             "no fallback library is loaded (set MSCCLPP_NCCL_LIB_PATH to the "
                             "real libnccl.so.2 or librccl.so)", who, why);
            break;
        }
        task_t *ft = realloc(fallback, (nfallback + 1) * sizeof *ft);
        op_plan_t *fo = ft ? realloc(fallback_ops, (nfallback + 1) * sizeof *fo) : NULL;
        if (ft) fallback = ft;
        if (fo) fallback_ops = fo;
        if (!ft || !fo) {
            res = shim_error(ncclSystemError, "%s: out of memory", who);
            break;
        }
        fallback[nfallback] = *t;
        /* data-movement tasks carry no operator: run_real ignores theirs */
        fallback_ops[nfallback] = reducing ? op : (op_plan_t){.real_op_ok = true};
        nfallback++;
    }
    if (res == ncclSuccess && nfallback) {
        const shim_real_t *rl = shim_real();
        char why[256];
        snprintf(why, sizeof why, "%s of %zu x %s", kind_names[fallback[0].kind],
                 fallback[0].count, shim_dtype_name(fallback[0].dt));
        shim_note_fallback(why);
        shim_clear_error();
        if (rl->GroupStart) rl->GroupStart();
        for (size_t i = 0; i < nfallback && res == ncclSuccess; i++) {
            bool reducing = fallback[i].kind == T_ALLREDUCE || fallback[i].kind == T_REDUCE ||
                            fallback[i].kind == T_REDUCESCATTER;
            res = run_real(&fallback[i], reducing ? &fallback_ops[i] : NULL, rl);
        }
        if (rl->GroupEnd) {
            ncclResult_t e = rl->GroupEnd();
            if (res == ncclSuccess && e != ncclSuccess)
                res = shim_error(e, "ncclGroupEnd of the fallback library %s failed", rl->path);
        }
    }
    c->p2p_sync_after = false;
    if (res == ncclSuccess) res = p2p_run(c, &sends, &recvs);
    sync_after = sync_after || c->p2p_sync_after;
    if (res == ncclSuccess && sync_after) {
        mscclpp_result_t r = mscclpp_stream_synchronize(c->stream);
        if (r != MSCCLPP_OK) res = shim_from_mscclpp(r, kind_names[tasks[0].kind]);
    }
    free(sends.v);
    free(recvs.v);
    free(fallback);
    free(fallback_ops);
    return res;
}

/* A communicator's tasks, run as one call on it: ncclCommAbort on another thread interrupts
 * them, and neither abort nor destroy frees the communicator before they are done. */
static ncclResult_t run_comm(ncclComm_t c, const task_t *tasks, size_t ntasks)
{
    ncclResult_t res = shim_comm_enter(c, kind_names[tasks[0].kind]);
    if (res != ncclSuccess) return res;
    res = run_comm_tasks(c, tasks, ntasks);
    if (c->test_leave_ms) {
        /* test hook: the call's last moment inside the communicator, made long */
        struct timespec ts = {(time_t)(c->test_leave_ms / 1000),
                              (long)(c->test_leave_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    shim_comm_leave(c);
    return res;
}

typedef struct {
    ncclComm_t comm;
    task_t *tasks;
    size_t n;
    ncclResult_t res;
    char err[1024];
} comm_batch_t;

static void *run_batch_thread(void *p)
{
    comm_batch_t *b = p;
    b->res = run_comm(b->comm, b->tasks, b->n);
    if (b->res != ncclSuccess) snprintf(b->err, sizeof b->err, "%s", shim_last_error());
    return NULL;
}

/* Run a group's tasks: per communicator in issue order, communicators side by side. */
static ncclResult_t run_group(task_t *tasks, size_t n)
{
    if (!n) return ncclSuccess;
    comm_batch_t *b = calloc(n, sizeof *b);
    task_t *sorted = calloc(n, sizeof *sorted);
    if (!b || !sorted) {
        free(b);
        free(sorted);
        return shim_error(ncclSystemError, "ncclGroupEnd: out of memory");
    }
    size_t nb = 0, k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < nb && b[j].comm != tasks[i].comm) j++;
        if (j < nb) continue;
        b[nb].comm = tasks[i].comm;
        b[nb].tasks = sorted + k;
        for (size_t m = i; m < n; m++)
            if (tasks[m].comm == tasks[i].comm) sorted[k++] = tasks[m];
        b[nb].n = (size_t)(sorted + k - b[nb].tasks);
        nb++;
    }
    ncclResult_t res = ncclSuccess;
    if (nb == 1) {
        res = run_comm(b[0].comm, b[0].tasks, b[0].n);
    } else {
        /* each communicator's ranks wait for each other: they must progress concurrently */
        pthread_t *th = calloc(nb, sizeof *th);
        size_t started = 0;
        if (!th) res = shim_error(ncclSystemError, "ncclGroupEnd: out of memory");
        for (size_t i = 0; th && i < nb; i++, started++)
            if (pthread_create(&th[i], NULL, run_batch_thread, &b[i]) != 0) {
                res = shim_error(ncclSystemError, "ncclGroupEnd: cannot start a thread");
                break;
            }
        for (size_t i = 0; i < started; i++) pthread_join(th[i], NULL);
        for (size_t i = 0; i < started && res == ncclSuccess; i++)
            if (b[i].res != ncclSuccess) res = shim_error(b[i].res, "%s", b[i].err);
        free(th);
    }
    free(b);
    free(sorted);
    return res;
}

/* ---- the API ------------------------------------------------------------------------------ */

static ncclResult_t submit(task_t t)
{
    const char *who = kind_names[t.kind];
    ncclComm_t c = t.comm;
    ncclResult_t res = shim_check_comm(c, who);
    if (res == ncclSuccess && ((int)t.dt < 0 || t.dt >= ncclNumTypes))
        res = shim_error(ncclInvalidArgument, "%s: invalid datatype %d (rank %d)", who, (int)t.dt,
                         c->rank);
    bool reducing = t.kind == T_ALLREDUCE || t.kind == T_REDUCE || t.kind == T_REDUCESCATTER;
    if (res == ncclSuccess && reducing && (int)t.op < 0)
        res = shim_error(ncclInvalidArgument, "%s: invalid reduction operator %d (rank %d)", who,
                         (int)t.op, c->rank);
    bool rooted = t.kind == T_BROADCAST || t.kind == T_REDUCE || t.kind == T_GATHER ||
                  t.kind == T_SCATTER;
    if (res == ncclSuccess && rooted && (t.root < 0 || t.root >= c->nranks))
        res = shim_error(ncclInvalidArgument, "%s: root %d is outside [0, %d) (rank %d)", who,
                         t.root, c->nranks, c->rank);
    if (res == ncclSuccess && (t.kind == T_SEND || t.kind == T_RECV) &&
        (t.root < 0 || t.root >= c->nranks))
        res = shim_error(ncclInvalidArgument, "%s: peer %d is outside [0, %d) (rank %d)", who,
                         t.root, c->nranks, c->rank);
    if (res == ncclSuccess && t.count) {
        /* which buffers this rank reads and writes, as NCCL defines them */
        bool is_root = rooted && c->rank == t.root;
        bool need_send = t.kind != T_RECV && (t.kind != T_BROADCAST || is_root) &&
                         (t.kind != T_SCATTER || is_root);
        bool need_recv = t.kind != T_SEND && (t.kind != T_REDUCE || is_root) &&
                         (t.kind != T_GATHER || is_root);
        if (need_send && !t.send)
            res = shim_error(ncclInvalidArgument, "%s: sendbuff is NULL (rank %d, count %zu)",
                             who, c->rank, t.count);
        else if (need_recv && !t.recv)
            res = shim_error(ncclInvalidArgument, "%s: recvbuff is NULL (rank %d, count %zu)",
                             who, c->rank, t.count);
    }
    if (res != ncclSuccess) {
        if (group_depth > 0 && group_error == ncclSuccess) {
            group_error = res;
            snprintf(group_error_msg, sizeof group_error_msg, "%s", shim_last_error());
        }
        return res;
    }
    if (group_depth == 0) return run_group(&t, 1);
    if (queue_len == queue_cap) {
        size_t cap = queue_cap ? 2 * queue_cap : 32;
        task_t *q = realloc(queue, cap * sizeof *q);
        if (!q) return shim_error(ncclSystemError, "%s: out of memory queueing the task", who);
        queue = q;
        queue_cap = cap;
    }
    queue[queue_len++] = t;
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    if (group_depth == 0)
        return shim_error(ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart to close");
    if (--group_depth > 0) return ncclSuccess;
    ncclResult_t res;
    if (group_error != ncclSuccess) {
        /* a task of the group was refused: run none of it, as NCCL does */
        res = shim_error(group_error, "ncclGroupEnd: a call in the group failed: %s",
                         group_error_msg);
    } else {
        res = run_group(queue, queue_len);
    }
    queue_len = 0;
    group_error = ncclSuccess;
    group_error_msg[0] = '\0';
    return res;
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    return shim_error(ncclInvalidUsage, "ncclGroupSimulateEnd is not supported by libmscclpp_nccl"
                      " (simInfo %p)", (void *)simInfo);
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    return submit((task_t){T_ALLREDUCE, comm, sendbuff, recvbuff, count, datatype, op, 0, stream});
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return submit(
        (task_t){T_BROADCAST, comm, sendbuff, recvbuff, count, datatype, ncclSum, root, stream});
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream)
{
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream)
{
    return submit((task_t){T_REDUCE, comm, sendbuff, recvbuff, count, datatype, op, root, stream});
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return submit(
        (task_t){T_ALLGATHER, comm, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, stream});
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
    return submit(
        (task_t){T_REDUCESCATTER, comm, sendbuff, recvbuff, recvcount, datatype, op, 0, stream});
}

ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return submit(
        (task_t){T_ALLTOALL, comm, sendbuff, recvbuff, count, datatype, ncclSum, 0, stream});
}

ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return submit(
        (task_t){T_GATHER, comm, sendbuff, recvbuff, count, datatype, ncclSum, root, stream});
}

ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return submit(
        (task_t){T_SCATTER, comm, sendbuff, recvbuff, count, datatype, ncclSum, root, stream});
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    return submit((task_t){T_SEND, comm, sendbuff, NULL, count, datatype, ncclSum, peer, stream});
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    return submit((task_t){T_RECV, comm, NULL, recvbuff, count, datatype, ncclSum, peer, stream});
}
