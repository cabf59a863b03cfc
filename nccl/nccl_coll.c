/*
 * libmscclpp_nccl: collectives, point-to-point and groups.
 *
 * Every call is a task; outside ncclGroupStart/End a call is a group of one. At the end of a
 * group each communicator runs its tasks in the order they were issued (one thread per
 * communicator when a group spans several, as ncclCommInitAll programs do):
 *
 *   - collectives on our executor: a registered DSL plan (MSCCLPP_NCCL_PLAN_DIR) first, then
 *     the built-in plans. Plans need memory the backend can share (mscclpp_malloc): they run
 *     on ncclMemAlloc'd or registered buffers directly (zero-copy), and other buffers are
 *     staged through two buffers per communicator;
 *   - what our plans do not serve (64-bit integer reductions, a world or size without a plan)
 *     goes to the real NCCL/RCCL of MSCCLPP_NCCL_LIB_PATH, inside one real group;
 *   - send/recv, gather and scatter move through the communicator's bootstrap (host copies
 *     over its TCP connections, which drain inbound traffic while a send blocks, so all sends
 *     first and then all receives cannot deadlock). GPU buffers bounce through host memory.
 *
 * Every task completes before ncclGroupEnd (or the call) returns: the caller's stream is
 * synchronized before its buffers are read, so the work it queued earlier is done, and nothing
 * is left queued afterwards.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
 * call's arguments), so the executor reset that must come first (its contexts name the old
 * buffers, and a new buffer may reuse an old address) is collective on all ranks together.
 */
static ncclResult_t stage_reserve(ncclComm_t c, size_t bytes, const char *who)
{
    if (bytes <= c->stage_bytes) return ncclSuccess;
    size_t want = (size_t)1 << 20;
    while (want < bytes) want *= 2;
    mscclpp_result_t r = MSCCLPP_OK;
    if (c->stage_in) {
        r = mscclpp_executor_reset(c->exec);
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

static ncclResult_t copy(void *dst, const void *src, size_t bytes, const char *who)
{
    if (!bytes || dst == src) return ncclSuccess;
    mscclpp_result_t r = mscclpp_memcpy(dst, src, bytes);
    return r == MSCCLPP_OK ? ncclSuccess : shim_from_mscclpp(r, who);
}

/* ---- operators ---------------------------------------------------------------------------- */

typedef struct {
    mscclpp_redop_t op;       /* what our plans compute */
    bool scale, average;      /* PreMulSum before, or divide by nranks after */
    unsigned char scalar[8];  /* PreMulSum scalar, in the call's dtype */
    ncclRedOp_t real_op;      /* what to hand the fallback */
    bool real_op_ok;
} op_plan_t;

static bool is_host_math_dtype(ncclDataType_t dt)
{
    return dt != ncclFloat8e4m3 && dt != ncclFloat8e5m2;
}

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
        *ours = *ours && is_host_math_dtype(t->dt);
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
    *ours = *ours && is_host_math_dtype(t->dt);
    if (o.residence == ncclScalarHostImmediate) {
        memcpy(p->scalar, o.value, sizeof p->scalar);
        return ncclSuccess;
    }
    /* device residence: read now, when the collective runs */
    return copy(p->scalar, o.scalar_ptr, shim_dtype_size(t->dt), who);
}

/* dst (staging) = src * scalar, through host memory so any backend's buffers work */
static ncclResult_t scaled_copy(void *dst, const void *src, size_t count, ncclDataType_t dt,
                                const void *scalar, const char *who)
{
    size_t bytes = count * shim_dtype_size(dt);
    void *tmp = malloc(bytes ? bytes : 1);
    if (!tmp) return shim_error(ncclSystemError, "%s: out of host memory (%zu bytes)", who, bytes);
    ncclResult_t res = copy(tmp, src, bytes, who);
    if (res == ncclSuccess) shim_scale(tmp, tmp, count, dt, scalar);
    if (res == ncclSuccess) res = copy(dst, tmp, bytes, who);
    free(tmp);
    return res;
}

static ncclResult_t divided_copy(void *dst, const void *src, size_t count, ncclDataType_t dt,
                                 int n, const char *who)
{
    size_t bytes = count * shim_dtype_size(dt);
    void *tmp = malloc(bytes ? bytes : 1);
    if (!tmp) return shim_error(ncclSystemError, "%s: out of host memory (%zu bytes)", who, bytes);
    ncclResult_t res = copy(tmp, src, bytes, who);
    if (res == ncclSuccess) shim_divide(tmp, count, dt, n);
    if (res == ncclSuccess) res = copy(dst, tmp, bytes, who);
    free(tmp);
    return res;
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

/*
 * Whether this call runs the plan on the caller's buffers instead of staging them: both are
 * ncclMemAlloc'd or registered memory the backend can share (shim_zc_base), the sizes need no
 * padding, no PreMulSum scales the input, and the collective is one every rank passes both
 * buffers to (allreduce, allgather, reducescatter, alltoall; broadcast and reduce ignore a
 * buffer on some ranks). Buffers must not overlap, unless exactly in place as NCCL defines
 * it, which the built-in collectives handle (DSL plans are called out of place). The
 * allocations are noted, so that the executor forgets their contexts once they are freed.
 */
static bool zero_copy(const task_t *t, const op_plan_t *op, bool unpadded, size_t in_b,
                      size_t out_b)
{
    ncclComm_t c = t->comm;
    if (!unpadded || (op && op->scale)) return false;
    if (t->kind != T_ALLREDUCE && t->kind != T_ALLGATHER && t->kind != T_REDUCESCATTER &&
        t->kind != T_ALLTOALL)
        return false;
    const char *s = t->send, *r = t->recv;
    size_t rank_off = (size_t)c->rank * (t->kind == T_ALLGATHER ? in_b : out_b);
    bool inplace = t->kind == T_ALLGATHER       ? s == r + rank_off
                   : t->kind == T_REDUCESCATTER ? r == s + rank_off
                                                : s == r;
    bool disjoint = s + in_b <= r || r + out_b <= s;
    if (!disjoint && !(inplace && c->nplans == 0)) return false;
    void *in_base = shim_zc_base(c, s, in_b);
    void *out_base = in_base ? shim_zc_base(c, r, out_b) : NULL;
    if (!out_base) return false;
    const char *who = kind_names[t->kind];
    if (shim_zc_note(c, in_base, who) != ncclSuccess) return false;
    if (shim_zc_note(c, out_base, who) != ncclSuccess) return false;
    return true;
}

/*
 * Run one collective with our plans. *unsupported is set (and nothing written to the caller's
 * buffers) when no plan of ours serves it, so the caller may fall back.
 */
static ncclResult_t run_ours(const task_t *t, const op_plan_t *op, bool *unsupported)
{
    ncclComm_t c = t->comm;
    const char *who = kind_names[t->kind];
    int n = c->nranks, rank = c->rank;
    bool reducing = t->kind == T_ALLREDUCE || t->kind == T_REDUCE || t->kind == T_REDUCESCATTER;
    *unsupported = false;
    /*
     * Staging also pads: plans split a message into per-rank chunks whose offsets must stay
     * 4-byte aligned (packet plans), and the caller's count need not divide. Each block (the
     * message, or one rank's part of it) is padded to 16 bytes, times nranks for a message the
     * plan itself splits; the padding is zeroed and never copied back.
     */
    size_t nb_in = 1, nb_out = 1;
    if (t->kind == T_ALLGATHER) nb_out = (size_t)n;
    if (t->kind == T_REDUCESCATTER) nb_in = (size_t)n;
    if (t->kind == T_ALLTOALL) nb_in = nb_out = (size_t)n;
    bool split = t->kind == T_ALLREDUCE || t->kind == T_REDUCE || t->kind == T_BROADCAST;
    size_t es = shim_dtype_size(t->dt), align = split ? 16 * (size_t)n : 16;
    size_t cb = t->count * es, pb = (cb + align - 1) / align * align, pc = pb / es;
    size_t in_b = nb_in * pb, out_b = nb_out * pb;
    const char *coll = collective_of(t->kind);
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
    /* an in-place DSL plan runs in place on the staging buffers (NCCL's in-place layouts) */
    bool ext_inplace = ext.plan && mscclpp_plan_is_inplace(ext.plan);

    const void *in = NULL;
    void *out = NULL;
    /* DSL plans of mscclpp.ext run on staged buffers */
    bool zc = !ext.plan && zero_copy(t, op, cb == pb, in_b, out_b);
    if (zc) {
        in = t->send;
        out = t->recv;
        if (!c->zc_logged) {
            c->zc_logged = true;
            shim_info("rank %d: %s of %zu bytes runs on the caller's buffers (zero-copy)", rank,
                      who, cb);
        }
    } else {
        res = stage_reserve(c, in_b > out_b ? in_b : out_b, who);
        if (res != ncclSuccess) return res;
        in = c->stage_in;
        out = c->stage_out;
        if (ext_inplace && t->kind == T_ALLGATHER) in = (char *)c->stage_out + (size_t)rank * pb;
        else if (ext_inplace && t->kind == T_REDUCESCATTER)
            out = (char *)c->stage_in + (size_t)rank * pb;
        else if (ext_inplace) in = c->stage_out;
    }
    /* the input into staging (scaled for PreMulSum); a broadcast reads only the root's */
    for (size_t b = 0; !zc && b < nb_in && (t->kind != T_BROADCAST || rank == t->root); b++) {
        char *dst = (char *)in + b * pb;
        const char *src = (const char *)t->send + b * cb;
        if (op && op->scale)
            res = scaled_copy(dst, src, t->count, t->dt, op->scalar, who);
        else
            res = copy(dst, src, cb, who);
        if (res == ncclSuccess && pb > cb) {
            mscclpp_result_t m = mscclpp_memset(dst + cb, 0, pb - cb);
            if (m != MSCCLPP_OK) res = shim_from_mscclpp(m, who);
        }
        if (res != ncclSuccess) return res;
    }
    /*
     * No barrier before the plan: back-to-back calls on the same buffers are ordered by the
     * plans' own signals, and a call of another shape or plan by the executor's launch fence
     * (kernels/common/kern_args.h), which waits for every peer's previous launch to end.
     */
    mscclpp_dtype_t md = reducing ? (mscclpp_dtype_t)0 : move_dtype(t->dt);
    if (reducing) shim_dtype_map(t->dt, &md);
    mscclpp_redop_t mop = reducing ? op->op : MSCCLPP_REDOP_PLAN;
    /*
     * Where the plan runs. A NULL stream runs it in this thread, with no hand-off to a stream
     * worker (about 15 us per call on the host backend); but NULL-stream launches of one
     * process share one pool of block threads, one launch at a time, so ranks of one process
     * (ncclCommInitAll, a thread per communicator) would wait for each other forever. So: the
     * NULL stream on the host backend while this process has one communicator, else ours.
     */
    mscclpp_stream_t st = c->stream;
    if (shim_sole_comm() && strcmp(mscclpp_backend_name(), "host") == 0) st = NULL;

    /* 1. a DSL plan: of mscclpp.ext, else registered for this call (MSCCLPP_NCCL_PLAN_DIR;
     * broadcast plans are written for root 0); the selector may skip both */
    const mscclpp_plan_t *plan = NULL;
    mscclpp_result_t r = MSCCLPP_ERR_UNSUPPORTED;
    if (ext.plan) {
        r = mscclpp_execute(c->exec, ext.plan, in, out, in_b, out_b, md, mop, st);
        if (r == MSCCLPP_OK) shim_ext_ran(ext.index);
        if (shim_info_enabled())
            shim_info("rank %d: %s of %llu bytes ran DSL plan '%s' of mscclpp.ext (%s)", rank, who,
                      (unsigned long long)msg, mscclpp_plan_name(ext.plan),
                      ext.selected ? "selected" : "first that fits");
    } else if (ext.choice != MSCCLPP_NCCL_SELECT_NATIVE && c->nplans &&
               (t->kind != T_BROADCAST || t->root == 0) &&
               mscclpp_executor_select_plan(c->exec, coll, 0, msg, "source=nccl-dsl", &plan) ==
                   MSCCLPP_OK) {
        r = mscclpp_execute(c->exec, plan, in, out, in_b, out_b, md, mop, st);
        /* said once per plan and communicator: enough to see which plan serves what */
        for (int i = 0; i < c->nplans && i < 64; i++)
            if (c->plans[i] == plan && !(c->dsl_logged & (1ull << i))) {
                c->dsl_logged |= 1ull << i;
                shim_info("rank %d: %s of %llu bytes ran DSL plan '%s'", rank, who,
                          (unsigned long long)msg, mscclpp_plan_name(plan));
            }
    } else {
        /* 2. the built-in plans */
        switch (t->kind) {
        case T_ALLREDUCE:
        case T_REDUCE:
            r = mscclpp_allreduce(c->exec, in, out, pc, md, mop, st);
            break;
        case T_BROADCAST:
            r = mscclpp_broadcast(c->exec, in, out, pc, md, t->root, st);
            break;
        case T_ALLGATHER:
            r = mscclpp_allgather(c->exec, in, out, pc, md, st);
            break;
        case T_REDUCESCATTER:
            r = mscclpp_reducescatter(c->exec, in, out, pc, md, mop, st);
            break;
        case T_ALLTOALL:
            r = mscclpp_alltoall(c->exec, in, out, pc, md, st);
            break;
        default: return shim_error(ncclInternalError, "%s: not a collective", who);
        }
    }
    if (r == MSCCLPP_OK && st) r = mscclpp_stream_synchronize(st);
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
    if (t->kind == T_REDUCE && rank != t->root) return ncclSuccess;
    if (zc) /* the result is in place; an average still divides it */
        return op && op->average ? divided_copy(t->recv, t->recv, t->count, t->dt, n, who)
                                 : ncclSuccess;
    for (size_t b = 0; b < nb_out && res == ncclSuccess; b++) {
        char *dst = (char *)t->recv + b * cb;
        const char *src = (const char *)out + b * pb;
        if (op && op->average)
            res = divided_copy(dst, src, t->count, t->dt, n, who);
        else
            res = copy(dst, src, cb, who);
    }
    return res;
}

/* One rank: every collective is a local copy (scaled or averaged as asked). */
static ncclResult_t run_single(const task_t *t, const op_plan_t *op)
{
    const char *who = kind_names[t->kind];
    size_t es = shim_dtype_size(t->dt), bytes = t->count * es;
    if (op && op->scale) return scaled_copy(t->recv, t->send, t->count, t->dt, op->scalar, who);
    /* average over one rank is the value itself */
    return copy(t->recv, t->send, bytes, who);
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

typedef struct {
    const void *send; /* sends */
    void *recv;       /* receives */
    size_t bytes;
    int peer;
    const char *who;
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
    ncclResult_t res = ncclSuccess;
    switch (t->kind) {
    case T_SEND: return xfer_push(sends, (xfer_t){t->send, NULL, b, t->root, who});
    case T_RECV: return xfer_push(recvs, (xfer_t){NULL, t->recv, b, t->root, who});
    case T_GATHER:
        if (c->rank != t->root) return xfer_push(sends, (xfer_t){t->send, NULL, b, t->root, who});
        for (int r = 0; r < c->nranks && res == ncclSuccess; r++)
            res = xfer_push(recvs, (xfer_t){NULL, (char *)t->recv + (size_t)r * b, b, r, who});
        if (res == ncclSuccess) res = xfer_push(sends, (xfer_t){t->send, NULL, b, c->rank, who});
        return res;
    case T_SCATTER:
        if (c->rank != t->root) return xfer_push(recvs, (xfer_t){NULL, t->recv, b, t->root, who});
        for (int r = 0; r < c->nranks && res == ncclSuccess; r++)
            res = xfer_push(sends,
                            (xfer_t){(const char *)t->send + (size_t)r * b, NULL, b, r, who});
        if (res == ncclSuccess) res = xfer_push(recvs, (xfer_t){NULL, t->recv, b, c->rank, who});
        return res;
    default: return shim_error(ncclInternalError, "%s: not point-to-point", who);
    }
}

static ncclResult_t p2p_run(ncclComm_t c, xfers_t *sends, xfers_t *recvs)
{
    if (!sends->n && !recvs->n) return ncclSuccess;
    mscclpp_bootstrap_t *boot = NULL;
    mscclpp_result_t r = mscclpp_comm_bootstrap(c->comm, &boot);
    if (r != MSCCLPP_OK) return shim_from_mscclpp(r, "ncclGroupEnd: send/recv");
    bool host = strcmp(mscclpp_backend_name(), "host") == 0;
    ncclResult_t res = ncclSuccess;
    void *bounce = NULL;
    size_t bounce_b = 0;
    char what[160];
    /* to itself: matched in order with the receives from itself below */
    size_t self_next = 0;
    for (size_t i = 0; i < sends->n && res == ncclSuccess; i++) {
        xfer_t *x = &sends->v[i];
        if (x->peer == c->rank) continue;
        const void *data = x->send;
        if (!host && x->bytes) { /* device memory: bounce through the host */
            if (bounce_b < x->bytes) {
                free(bounce);
                bounce_b = 0;
                if (!(bounce = malloc(x->bytes))) {
                    res = shim_error(ncclSystemError, "%s: out of host memory", x->who);
                    break;
                }
                bounce_b = x->bytes;
            }
            if ((res = copy(bounce, x->send, x->bytes, x->who)) != ncclSuccess) break;
            data = bounce;
        }
        r = mscclpp_bootstrap_send(boot, data, x->bytes, x->peer, SHIM_P2P_TAG);
        if (r != MSCCLPP_OK) {
            snprintf(what, sizeof what, "%s (rank %d to rank %d, %zu bytes)", x->who, c->rank,
                     x->peer, x->bytes);
            res = shim_from_mscclpp(r, what);
        }
    }
    for (size_t i = 0; i < recvs->n && res == ncclSuccess; i++) {
        xfer_t *x = &recvs->v[i];
        if (x->peer == c->rank) {
            while (self_next < sends->n && sends->v[self_next].peer != c->rank) self_next++;
            if (self_next == sends->n) {
                res = shim_error(ncclInvalidUsage, "%s: rank %d receives from itself with no "
                                 "matching send in the group", x->who, c->rank);
                break;
            }
            xfer_t *s = &sends->v[self_next++];
            if (s->bytes != x->bytes) {
                res = shim_error(ncclInvalidUsage, "%s: rank %d sends %zu bytes to itself but "
                                 "receives %zu", x->who, c->rank, s->bytes, x->bytes);
                break;
            }
            res = copy(x->recv, s->send, x->bytes, x->who);
            continue;
        }
        void *dst = x->recv;
        if (!host && x->bytes) {
            if (bounce_b < x->bytes) {
                free(bounce);
                bounce_b = 0;
                if (!(bounce = malloc(x->bytes))) {
                    res = shim_error(ncclSystemError, "%s: out of host memory", x->who);
                    break;
                }
                bounce_b = x->bytes;
            }
            dst = bounce;
        }
        r = mscclpp_bootstrap_recv(boot, dst, x->bytes, x->peer, SHIM_P2P_TAG);
        if (r != MSCCLPP_OK) {
            snprintf(what, sizeof what, "%s (rank %d from rank %d, %zu bytes)", x->who, c->rank,
                     x->peer, x->bytes);
            res = shim_from_mscclpp(r, what);
            if (r == MSCCLPP_ERR_REMOTE || r == MSCCLPP_ERR_TIMEOUT) c->async_error = res;
        } else if (dst != x->recv) {
            res = copy(x->recv, dst, x->bytes, x->who);
        }
    }
    /* a send to itself nobody received is a mismatch too */
    for (size_t i = self_next; i < sends->n && res == ncclSuccess; i++)
        if (sends->v[i].peer == c->rank)
            res = shim_error(ncclInvalidUsage, "%s: rank %d sends to itself with no matching "
                             "receive in the group", sends->v[i].who, c->rank);
    free(bounce);
    return res;
}

/* ---- running one communicator's tasks ----------------------------------------------------- */

static ncclResult_t run_comm_tasks(ncclComm_t c, const task_t *tasks, size_t ntasks)
{
    /* before any plan runs: contexts on memory freed or deregistered since the last group */
    ncclResult_t res = shim_zc_forget_stale(c, kind_names[tasks[0].kind]);
    /* the caller's earlier work on its streams must be done before we read its buffers */
    for (size_t i = 0; i < ntasks && res == ncclSuccess; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) seen = tasks[j].stream == tasks[i].stream;
        if (!seen) res = shim_stream_sync(c, tasks[i].stream, kind_names[tasks[i].kind]);
    }
    if (res != ncclSuccess) return res;

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
        if (c->nranks == 1 && ours) {
            res = run_single(t, reducing ? &op : NULL);
            continue;
        }
        bool unsupported = !ours;
        if (ours) {
            res = run_ours(t, reducing ? &op : NULL, &unsupported);
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
    if (res == ncclSuccess) res = p2p_run(c, &sends, &recvs);
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
