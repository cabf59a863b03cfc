/*
 * The plan interpreter: one source for the host (gcc, C11), CUDA (nvcc) and HIP (hipcc).
 * Included once by each backend's entry file (kernels/host/kern_host.c,
 * kernels/cuda/kern_cuda.cu, kernels/hip/kern_hip.hip), which calls kern_run_block().
 *
 * C subset valid as C11 and CUDA/HIP C++: no templates, no function pointers, no flexible
 * arrays; the per-(dtype, op) reduce loops are generated with the X-macros of kern_dtype.h.
 * Semantics: plan-format §2 with the intended behaviour of plan-format §10; layout of
 * the arguments and packets: kern_args.h.
 *
 * Where the time goes on a GPU, and what this file does about it (docs/gpu.md, "Interpreter"):
 * - A block's constants (a copy of the launch arguments, table pointers, the LL flag, the
 *   scratch half) live once per block in shared memory (kern_blk_t), written by thread 0 while
 *   the others stage the block's ops, descriptors and ids into shared memory; one block sync,
 *   then every op is decoded from shared memory. A thread's own state (kern_ctx_t) is a few
 *   words: no per-thread copy of the arguments, no pointer arrays on the stack.
 * - No per-op look at the error record: a wait looks at it on its 64th poll and every 1024th
 *   after (kern_port.h, KERN_CHECK_EVERY); a thread that saw the launch fail skips its later
 *   waits (kern_ctx_t.failed).
 * - Data loops move 16-byte vectors for every dtype, several in flight per thread (KERN_RED_U,
 *   KERN_COPY_U), every load of a step before its stores. A copy keeps up to KERN_FAST
 *   destination pointers in registers; a reduce reads its addresses from a table the block
 *   fills in shared memory once per op (kern_reduce_io), so its loops hold no pointer set-up and
 *   spill nothing. Heads and tails that are not whole vectors are done element by element in
 *   the same op (no padding anywhere).
 * - A launch ends with each block storing its own next LL flag: no atomic, no block waits for
 *   another (kern_state_t.flags).
 */
#ifndef MSCCLPP_KERN_INTERP_H
#define MSCCLPP_KERN_INTERP_H

#include "kernels/common/kern_args.h"
#include "kernels/common/kern_port.h"
#include "kernels/common/kern_dtype.h"

#define KERN_ERR_INVALID_ARG (-1) /* MSCCLPP_ERR_INVALID_ARG */
#define KERN_ERR_TIMEOUT (-6)     /* MSCCLPP_ERR_TIMEOUT */
#define KERN_ERR_ABORTED (-9)     /* MSCCLPP_ERR_ABORTED */

/* destinations of a copy whose pointers a thread keeps in registers (one pass over the source
 * per KERN_FAST of them) */
#define KERN_FAST 4

/* sources and destinations of a reduce op, together (plan.h: at most PLAN_MAX_DESCS = 72 of
 * each, a switch channel PLAN_MAX_SWITCH_MEMBERS = 64 members) */
#define KERN_IO_MAX 144

/** What the threads of a block share (GPU: shared memory; written by thread 0 at the start). */
typedef struct {
    kern_args_t a; /* this launch's arguments */
    kern_state_t *st;
    const kern_plan_t *p;
    const kern_op_t *ops;     /* the block's ops (staged, or in the blob) */
    const kern_desc_t *descs; /* the block's descriptors (op->desc counts from here) */
    const uint32_t *ids;      /* the block's ids (op->ids counts from here) */
    const kern_chan_t *chans;
    void *const *rbufs;
    uint64_t *roff; /* the state's: remote buffers' published offsets (kern_args.h) */
    const kern_switch_t *sw;
    void *const *members;
    int32_t *sems;
    char *base[3]; /* input, output, scratch */
    uint64_t half; /* double-scratch offset of this launch */
    uint32_t flag; /* LL flag of this launch */
    uint32_t spin;
    uint32_t n_ops;
    int32_t block;
    int32_t bad;   /* the launch is malformed (recorded by thread 0): run nothing */
    int32_t fence;   /* KERN_FENCE_*: whether and why it fences (kern_fence_needed, thread 0) */
    int32_t earlier; /* an earlier launch's error (args.last_sig[KERN_EXEC_FAILED]), or 0 */
    int32_t pad;
    void *hbar;    /* host: the barrier of a block run by several threads, else NULL */
    char **tab;    /* the reduces' address tables (kern_smem_t.tab, kern_reduce_io) */
} kern_blk_t;

/** A block's shared memory: its constants and its staged ops, descriptors and ids. */
typedef struct {
    kern_blk_t b;
    kern_op_t ops[KERN_STAGE_OPS];
    kern_desc_t descs[KERN_STAGE_DESCS];
    uint32_t ids[KERN_STAGE_IDS];
    char *tab[2 * KERN_IO_MAX]; /* two tables of a reduce's addresses (kern_reduce_io) */
} kern_smem_t;

/** One thread's own state. */
typedef struct {
    const kern_blk_t *b;
    int tid, nth;
    int op;           /* index of the running op in its block, for errors */
    uint32_t op_type; /* its KERN_OP_* */
    uint32_t iter;    /* pipeline iteration */
    uint32_t failed;  /* this thread saw the launch fail: its waits give up at once */
    int fenced;       /* this launch ran the launch fence (kern_args.h, "Launch fence") */
    int answer;       /* this thread found a peer's fence record it must answer */
    uint32_t tabs;    /* reduces run so far (which half of the address table is next) */
} kern_ctx_t;

#define KERN_SYNC(c) KERN_BLOCK_SYNC((c)->b->hbar)

/* ---- errors and bounded waits ------------------------------------------------------------- */

KERN_FN int kern_failed(const kern_ctx_t *c) { return kern_ld_rlx_i32(&c->b->st->err.code) != 0; }

/* a wait's kind (KERN_WAIT_*, 8 bits) and channel (-1 or an id below 2^23) in one argument */
#define KERN_WC(what, chan) (((uint32_t)(what) << 24) | ((uint32_t)(chan)&0xffffffu))
#define KERN_WC_WHAT(wc) ((wc) >> 24)
#define KERN_WC_CHAN(wc) ((int32_t)((wc) << 8) >> 8)

/* Record the launch's first error; later ones are dropped. `psig`: a peer's call signature
 * (KERN_WAIT_MISMATCH), recorded with this launch's, or NULL. */
KERN_BIG_FN void kern_fail_sig(kern_ctx_t *c, int32_t code, uint32_t what, int32_t chan,
                               int32_t peer, uint64_t expected, uint64_t seen,
                               const uint64_t *psig)
{
    const kern_blk_t *b = c->b;
    kern_error_t *e = &b->st->err;
    int k;
    c->failed = 1;
    if (!kern_cas_acqrel_i32(&e->code, 0, code)) return;
    for (k = 0; k < KERN_SIG_WORDS; k++) {
        e->sig[k] = b->a.sig[k]; /* the host reads the rank rotation from it */
        e->peer_sig[k] = psig ? psig[k] : 0;
    }
    /* the launches queued behind this one fail at once (kern_args.h, Errors) */
    if (b->a.last_sig && what != KERN_WAIT_EARLIER)
        kern_st_rlx_u64(&b->a.last_sig[KERN_EXEC_FAILED], (uint64_t)(int64_t)code);
    e->rank = b->a.rank;
    e->block = b->block;
    e->op = c->op;
    e->op_type = (int32_t)c->op_type;
    e->channel = chan;
    e->peer = peer;
    e->iter = c->iter;
    e->flag = b->flag;
    e->what = what;
    e->expected = expected;
    e->seen = seen;
    kern_fence_sys();
    if (b->a.mailbox) {
        /* the host reads this without a device sync: every field, a fence, then the code */
        volatile kern_error_t *m = b->a.mailbox;
        m->rank = e->rank;
        m->block = e->block;
        m->op = e->op;
        m->op_type = e->op_type;
        m->channel = chan;
        m->peer = peer;
        m->iter = e->iter;
        m->flag = e->flag;
        m->what = what;
        m->expected = expected;
        m->seen = seen;
        for (k = 0; k < KERN_SIG_WORDS; k++) {
            m->sig[k] = e->sig[k];
            m->peer_sig[k] = e->peer_sig[k];
        }
        kern_fence_sys();
#if defined(KERN_HOST)
        /* host backend: the host's acquire load of `code` pairs with this release store (a
         * volatile store after a fence is a data race in C11; ThreadSanitizer reported it) */
        __atomic_store_n(&((kern_error_t *)m)->code, code, __ATOMIC_RELEASE);
#else
        m->code = code;
#endif
        kern_fence_sys();
    }
}

/* out of line: its callers pass fewer arguments than kern_fail_sig takes (on GPUs the
 * arguments that do not fit in registers are stored to the stack at every call site) */
KERN_BIG_FN void kern_fail(kern_ctx_t *c, int32_t code, uint32_t wc, int32_t peer,
                           uint64_t expected, uint64_t seen)
{
    kern_fail_sig(c, code, KERN_WC_WHAT(wc), KERN_WC_CHAN(wc), peer, expected, seen,
                  (const uint64_t *)0);
}

/* ---- fence records (kern_args.h, "Launch fence") ------------------------------------------ */

/* My counter slot of fence channel `fid` (memory or port): where the peer writes its records. */
KERN_FN const uint64_t *kern_fence_slot(const kern_ctx_t *c, uint32_t fid)
{
    const kern_plan_t *p = c->b->p;
    const kern_chan_t *ports = (const kern_chan_t *)((const char *)p + p->off_ports);
    if (fid & KERN_FENCE_PORT) return ports[fid & ~KERN_FENCE_PORT].inbound;
    return c->b->chans[fid].inbound;
}

KERN_FN int32_t kern_fence_peer(const kern_ctx_t *c, uint32_t fid)
{
    const kern_plan_t *p = c->b->p;
    const kern_chan_t *ports = (const kern_chan_t *)((const char *)p + p->off_ports);
    if (fid & KERN_FENCE_PORT) return ports[fid & ~KERN_FENCE_PORT].peer;
    return c->b->chans[fid].peer;
}

/*
 * Read the peer's record in `slot` if it is `want` (kind and this launch's flag): 1 and its
 * signature in sig; 0 if it is not there (yet). The writer clears the record word, writes the
 * signature, then the record word: a record word that changed while the signature was read
 * means the slot is being written again, 0 too (the caller polls again). Never "the peer moved
 * on, so it agreed": the same record can be written twice (two answering threads: a fence
 * that took the second one's clear for agreement ran a call its peer had refused), and a
 * record of a later launch says that itself (kern_fence_wait).
 */
KERN_FN int kern_rec_read(const uint64_t *slot, uint64_t want, uint64_t *sig)
{
    int k;
    if (kern_ld_acq_u64(slot + KERN_REC_WORD) != want) return 0;
    for (k = 0; k < KERN_SIG_WORDS; k++) sig[k] = kern_ld_rlx_u64(slot + KERN_REC_SIG + k);
    kern_fence_sys();
    return kern_ld_rlx_u64(slot + KERN_REC_WORD) == want;
}

KERN_FN int kern_sig_differs(const kern_ctx_t *c, const uint64_t *sig)
{
    int k;
    for (k = 0; k < KERN_SIG_CMP; k++)
        if (sig[k] != c->b->a.sig[k]) return 1;
    return 0;
}

/* A peer's record of this launch that asks for an answer (its fence, or its host's setup
 * announcement) in `slot`: 1 and the record word in *rec, its signature in sig. */
KERN_FN int kern_rec_asks(const kern_ctx_t *c, const uint64_t *slot, uint64_t *rec, uint64_t *sig)
{
    *rec = KERN_REC(KERN_REC_FENCE, c->b->flag);
    if (kern_rec_read(slot, *rec, sig) == 1) return 1;
    *rec = KERN_REC(KERN_REC_SETUP, c->b->flag);
    return kern_rec_read(slot, *rec, sig) == 1;
}

/*
 * The side of a disagreement that did not fence (see Launch fence): called by waits as they
 * poll. A peer's record of this launch with another signature fails the launch (c->answer:
 * answer it when the block ends, kern_fence_answer). Returns 1 then.
 */
KERN_FN int kern_fence_poll(kern_ctx_t *c)
{
    const kern_plan_t *p = c->b->p;
    const uint32_t *ids = (const uint32_t *)((const char *)p + p->off_fence);
    uint64_t rec, sig[KERN_SIG_WORDS];
    uint32_t i;
    for (i = 0; i < p->n_fence; i++) {
        if (!kern_rec_asks(c, kern_fence_slot(c, ids[i]), &rec, sig) || !kern_sig_differs(c, sig))
            continue;
        c->answer = 1;
        kern_fail_sig(c, KERN_ERR_INVALID_ARG, KERN_WAIT_MISMATCH, (int32_t)(ids[i] & 1023u),
                      kern_fence_peer(c, ids[i]), c->b->flag, rec, sig);
        return 1;
    }
    return 0;
}

typedef struct {
    uint32_t n;
    uint64_t t0;
    uint64_t slack; /* ns added to the launch's bound (0 in the usual {0, 0} initialiser) */
} kern_spin_t;

#define KERN_SPIN_STOP (~0ull) /* kern_spin_check: the waiter gives up */

/*
 * The slow part of a wait's poll (every KERN_CHECK_EVERY polls), out of line: the wait loops
 * inline only the call. Gives up (KERN_SPIN_STOP) when another block recorded an error, the
 * communicator was aborted (recorded here), a peer's fence record says the ranks disagree on
 * this launch (kern_fence_poll), this rank's proxy failed (a wait on a live peer, say a
 * memory-channel signal from a node-mate, would otherwise sit out the whole timeout while the
 * culprit is the dead peer the proxy names; recorded with channel -1), or the wait that began
 * at t0 passed the timeout (recorded here; a t0 later than now has not: kern_spin_poll passes a
 * wait's start plus its slack). Else returns the wait's start: t0, or now at its first check
 * (t0 0). Takes and returns values, not the kern_spin_t: a pointer would keep every caller's
 * spin state in local memory; and few (on GPUs the arguments past the argument registers are
 * stored to the stack at every call site, inside every wait loop).
 */
KERN_BIG_FN uint64_t kern_spin_check(kern_ctx_t *c, uint64_t t0, uint32_t wc, int32_t peer,
                                     uint64_t expected, uint64_t seen)
{
    const kern_blk_t *b = c->b;
    const uint32_t what = KERN_WC_WHAT(wc);
    const kern_fifo_t *f = b->p->fifo;
    uint64_t now;
    if (kern_failed(c)) {
        c->failed = 1;
        return KERN_SPIN_STOP;
    }
    if (b->a.abort && kern_ld_acq_u64(b->a.abort) != 0) {
        kern_fail(c, KERN_ERR_ABORTED, wc, peer, expected, seen);
        return KERN_SPIN_STOP;
    }
    if (!c->fenced && b->a.last_sig && kern_fence_poll(c)) return KERN_SPIN_STOP;
    if (f && what != KERN_WAIT_PROXY) {
        int32_t e = (int32_t)(int64_t)kern_ld_acq_u64(&f->err);
        if (e != 0) {
            kern_fail(c, e, KERN_WC(KERN_WAIT_PROXY, -1), peer, expected, seen);
            return KERN_SPIN_STOP;
        }
    }
    now = kern_clock_ns(b->a.clock_khz);
    if (t0 == 0) return now == KERN_SPIN_STOP ? 0 : now;
    if (now > t0 && now - t0 > b->a.timeout_ns) {
        kern_fail(c, KERN_ERR_TIMEOUT, wc, peer, expected, seen);
        return KERN_SPIN_STOP;
    }
    return t0;
}

/*
 * Called between two polls of a wait. Returns nonzero when the waiter must give up: this
 * thread saw the launch fail before, or kern_spin_check (its slow checks, now and then) says so.
 */
KERN_FN int kern_spin_poll(kern_ctx_t *c, kern_spin_t *s, uint32_t what, int32_t chan,
                           int32_t peer, uint64_t expected, uint64_t seen)
{
    const kern_blk_t *b = c->b;
    uint32_t n = s->n++;
    if (c->failed) return 1;
    if (KERN_CHECK_EVERY(b->spin, n)) {
        uint64_t t0 = kern_spin_check(c, s->t0 ? s->t0 + s->slack : 0, KERN_WC(what, chan),
                                      peer, expected, seen);
        if (t0 == KERN_SPIN_STOP) return 1;
        if (s->t0 == 0) s->t0 = t0;
    }
    kern_backoff(n, b->spin);
    return 0;
}

/* ---- addressing --------------------------------------------------------------------------- */

/* Address of byte x (payload bytes) of descriptor d; packet images are at twice the offset. */
KERN_FN char *kern_ptr(const kern_ctx_t *c, const kern_desc_t *d, uint64_t x)
{
    const kern_blk_t *b = c->b;
    uint64_t o = d->off + x;
    char *p = d->loc < KERN_LOC_REMOTE    ? b->base[d->loc]
              : d->loc == KERN_LOC_REMOTE ? (char *)b->rbufs[d->idx] + b->roff[d->idx]
                                          : (char *)b->rbufs[d->idx];
    if (d->flags & KERN_DESC_PACKET) o *= 2;
    if (d->flags & KERN_DESC_SCRATCH) o += b->half;
    return p + o;
}

/* Same for member m of a switch descriptor. */
KERN_FN char *kern_member_ptr(const kern_ctx_t *c, const kern_desc_t *d, uint32_t m, uint64_t x)
{
    const kern_blk_t *b = c->b;
    const kern_switch_t *s = &b->sw[d->idx];
    uint64_t o = d->off + x;
    if (d->flags & KERN_DESC_PACKET) o *= 2;
    if (d->flags & KERN_DESC_SCRATCH) o += b->half;
    return (char *)b->members[s->first_member + m] + o;
}

/*
 * The sources or destinations of a data op: descriptors d[0..n), or (sw) the n members of the
 * switch channel of d[0]. kern_io_ptr gives entry k's address at byte x.
 */
typedef struct {
    const kern_desc_t *sd, *dd;
    int ns, nd;
    int ssw, dsw;
} kern_io_t;

/* Do two descriptors address the same bytes? */
KERN_FN int kern_desc_same(const kern_desc_t *a, const kern_desc_t *b)
{
    return a->off == b->off && a->loc == b->loc && a->flags == b->flags &&
           (a->loc < KERN_LOC_REMOTE || a->idx == b->idx);
}

KERN_FN char *kern_io_ptr(const kern_ctx_t *c, const kern_desc_t *d, int sw, int k, uint64_t x)
{
    return sw ? kern_member_ptr(c, d, (uint32_t)k, x) : kern_ptr(c, d + k, x);
}
#define KERN_SRC(c, io, k, x) kern_io_ptr((c), (io).sd, (io).ssw, (k), (x))
#define KERN_DST(c, io, k, x) kern_io_ptr((c), (io).dd, (io).dsw, (k), (x))

/* The sources and destinations of data op `op`: its descriptors, or the members of its switch
 * channels (gstore, gstorepkt: destination 0's; glres: source 0's and destination 0's; glre:
 * source 0's into the plain destination 0). The data functions take the op and build this
 * themselves: passed by value, its words past the argument registers were stored to the stack
 * at every call site. */
KERN_FN kern_io_t kern_op_io(const kern_ctx_t *c, const kern_op_t *op)
{
    const kern_blk_t *b = c->b;
    kern_io_t io;
    io.sd = b->descs + op->desc;
    io.dd = io.sd + op->n_src;
    io.ns = op->n_src;
    io.nd = op->n_dst;
    io.ssw = 0;
    io.dsw = 0;
    switch (op->type) {
    case KERN_OP_GSTORE:
        io.ns = 1;
        /* fall through */
    case KERN_OP_GSTOREPKT:
        io.nd = (int)b->sw[io.dd[0].idx].n_members;
        io.dsw = 1;
        break;
    case KERN_OP_GLRES:
        io.nd = (int)b->sw[io.dd[0].idx].n_members;
        io.dsw = 1;
        /* fall through */
    case KERN_OP_GLRE:
        io.ns = (int)b->sw[io.sd[0].idx].n_members;
        io.ssw = 1;
        if (op->type == KERN_OP_GLRE) io.nd = 1;
        break;
    default: break;
    }
    return io;
}

/* ---- data loops ----------------------------------------------------------------------------- */

/* 16 bytes, the unit of every data loop (one vector load or store on GPUs). */
typedef struct {
    uint64_t w[2];
} __attribute__((aligned(16))) kern_vec_t;

KERN_FN kern_vec_t kern_ldv(const char *p) { return *(const kern_vec_t *)p; }
KERN_FN void kern_stv(char *p, kern_vec_t v) { *(kern_vec_t *)p = v; }

/*
 * n bytes from src to nd (<= KERN_FAST) destinations d[], pointers in registers: one load
 * feeds every store. Where source and every destination agree modulo 16, a byte head brings
 * them to 16-byte alignment; the head and tail bytes go first, then each thread moves
 * KERN_COPY_U vectors per step (all loads, then the stores) with its own pointers stepping by
 * the block's stride (no index arithmetic or counts of the head kept live in the loop); else
 * 4-byte words when they agree modulo 4, else bytes. A destination equal to the source is
 * skipped (a copy onto itself). dst[] may be shared by the block's threads (it is read only).
 */
KERN_FN void kern_copy_to(const kern_ctx_t *c, char *const *dst, int nd, const char *src,
                          uint64_t n)
{
    const uint64_t tid = (uint64_t)c->tid, nth = (uint64_t)c->nth;
    uintptr_t mis = 0;
    uint64_t head, nv, i;
    char *d[KERN_FAST];
    int k;
    KERN_UNROLL for (k = 0; k < KERN_FAST; k++) d[k] = k < nd ? dst[k] : NULL;
    KERN_UNROLL for (k = 0; k < KERN_FAST; k++) if (k < nd) mis |= (uintptr_t)d[k] - (uintptr_t)src;
    if ((mis & 15) == 0) {
        head = (uint64_t)((16 - ((uintptr_t)src & 15)) & 15);
        if (head > n) head = n;
        nv = (n - head) / 16;
        /* head and tail bytes */
        {
            uint64_t tail = n - head - 16 * nv, m;
            for (m = tid; m < head + tail; m += nth) {
                uint64_t e = m < head ? m : m + 16 * nv;
                char v = src[e];
                KERN_UNROLL for (k = 0; k < KERN_FAST; k++) if (k < nd) d[k][e] = v;
            }
        }
        /* vectors tid, tid + nth, ... below nv: pointers step by the block's stride */
        if (tid < nv) {
            const uint64_t st = 16 * nth, off = head + 16 * tid;
            enum { U = KERN_COPY_U };
            uintptr_t s = (uintptr_t)src + off;
            const uintptr_t end = (uintptr_t)src + head + 16 * nv;
            KERN_UNROLL for (k = 0; k < KERN_FAST; k++) if (k < nd) d[k] += off;
            for (; s + (U - 1) * st < end; s += U * st) {
                kern_vec_t v[U];
                int u;
                KERN_UNROLL for (u = 0; u < U; u++) v[u] = kern_ldv((const char *)(s + u * st));
                KERN_UNROLL for (k = 0; k < KERN_FAST; k++) if (k < nd) {
                    KERN_UNROLL for (u = 0; u < U; u++) kern_stv(d[k] + u * st, v[u]);
                    d[k] += U * st;
                }
            }
            for (; s < end; s += st) {
                kern_vec_t v = kern_ldv((const char *)s);
                KERN_UNROLL for (k = 0; k < KERN_FAST; k++) if (k < nd) {
                    kern_stv(d[k], v);
                    d[k] += st;
                }
            }
        }
    } else if ((mis & 3) == 0) {
        uint64_t nw, m;
        head = (uint64_t)((4 - ((uintptr_t)src & 3)) & 3);
        if (head > n) head = n;
        nw = (n - head) / 4;
        for (m = tid; m < n - 4 * nw; m += nth) {
            uint64_t e = m < head ? m : m + 4 * nw;
            char v = src[e];
            KERN_UNROLL for (k = 0; k < KERN_FAST; k++) if (k < nd) d[k][e] = v;
        }
        if (tid < nw) {
            const uint64_t st = 4 * nth, off = head + 4 * tid;
            uintptr_t s = (uintptr_t)src + off;
            const uintptr_t end = (uintptr_t)src + head + 4 * nw;
            KERN_UNROLL for (k = 0; k < KERN_FAST; k++) if (k < nd) d[k] += off;
            for (; s < end; s += st) {
                uint32_t v = *(const uint32_t *)s;
                KERN_UNROLL for (k = 0; k < KERN_FAST; k++) if (k < nd) {
                    *(uint32_t *)d[k] = v;
                    d[k] += st;
                }
            }
        }
    } else {
        for (i = tid; i < n; i += nth) {
            char v = src[i];
            KERN_UNROLL for (k = 0; k < KERN_FAST; k++) if (k < nd) d[k][i] = v;
        }
    }
}

/*
 * A copy op at byte x over n bytes: from its sources to its destinations, parallel lists (entry
 * k from source min(k, ns - 1), P10); gstore: source 0 to every member of the switch channel of
 * destination 0. A run of entries with the same source (a put to several peers) is one pass
 * over it per KERN_FAST destinations: one load feeds every store. A destination that is its
 * source is skipped. Takes the op, not a kern_io_t (on GPUs the arguments that do not fit in
 * registers are stored to the stack at the call site), and keeps only the next destination's
 * index across a pass: the rest is read from the op again, so the pass has the registers.
 */
KERN_BIG_FN void kern_copy_io(const kern_ctx_t *c, const kern_op_t *op, uint64_t x, uint64_t n)
{
    int k0 = 0;
    for (;;) {
        const kern_io_t io = kern_op_io(c, op);
        const char *src;
        char *d[KERN_FAST];
        int k, m = 0;
        if (k0 >= io.nd) return;
        {
            const kern_desc_t *sd = &io.sd[k0 < io.ns ? k0 : io.ns - 1];
            src = kern_ptr(c, sd, x);
            KERN_UNROLL for (k = 0; k < KERN_FAST; k++) d[k] = NULL;
            /* up to KERN_FAST destinations with the source of k0; those that are not the
             * source itself into d[0..m) */
            for (k = 0; k < KERN_FAST && k0 < io.nd; k++, k0++) {
                char *p;
                if (k > 0 && !kern_desc_same(&io.sd[k0 < io.ns ? k0 : io.ns - 1], sd)) break;
                p = KERN_DST(c, io, k0, x);
                if (p != src) {
                    int j;
                    KERN_UNROLL for (j = 0; j < KERN_FAST; j++) if (j == m) d[j] = p;
                    m++;
                }
            }
        }
        if (m > 0) kern_copy_to(c, d, m, src, n);
    }
}

/* ---- reductions (plain) ------------------------------------------------------------------- */

/* vectors of 16 bytes a thread reduces per step: the accumulators stay within KERN_RED_U * 4
 * registers whatever the dtype (float16 is widened to float, 8-bit types to 32 bits) */
#define KERN_VU(ST, AT)                                                                        \
    ((KERN_RED_U * sizeof(ST)) / sizeof(AT) > 0 ? (int)((KERN_RED_U * sizeof(ST)) / sizeof(AT)) \
                                                : 1)

/* whether vector u of a step is in the body (the last step of a thread may hold fewer) */
#define KERN_RED_IN(u) ((u) == 0 || i + (uint64_t)(u)*nth < nv)

/*
 * One step of a vector reduce: vectors i, i + nth, ... (UU of them, those below nv) of every
 * source, reduced in the accumulators and stored to every destination. Each address is read
 * from the block's table (shared memory) when the step needs it: no pointer stays in a
 * register, whatever the number of sources and destinations. All UU loads of a source are
 * issued before its elements are combined. One step serves the whole body (no second loop for
 * a thread's last vectors: half the code to compile per dtype and op).
 */
#define KERN_RED_STEP(ST, AT, LOAD, STORE, OP, UT, UU)                                         \
    {                                                                                          \
        union {                                                                                \
            kern_vec_t v;                                                                      \
            ST e[16 / sizeof(ST)];                                                             \
        } t_[UU];                                                                              \
        AT acc_[UU][16 / sizeof(ST)];                                                          \
        const kern_vec_t z_ = {{0, 0}};                                                        \
        const char *p_ = tab[0] + hb;                                                          \
        int u_, j_, k_;                                                                        \
        KERN_UNROLL for (u_ = 0; u_ < UU; u_++) t_[u_].v =                                     \
            KERN_RED_IN(u_) ? kern_ldv(p_ + 16 * (i + (uint64_t)u_ * nth)) : z_;               \
        KERN_UNROLL for (u_ = 0; u_ < UU; u_++)                                                \
        {                                                                                      \
            KERN_UNROLL for (j_ = 0; j_ < E; j_++) acc_[u_][j_] = LOAD(t_[u_].e[j_]);          \
        }                                                                                      \
        KERN_NOUNROLL for (k_ = 1; k_ < ns; k_++) {                                            \
            p_ = tab[k_] + hb;                                                                 \
            KERN_UNROLL for (u_ = 0; u_ < UU; u_++) t_[u_].v =                                 \
                KERN_RED_IN(u_) ? kern_ldv(p_ + 16 * (i + (uint64_t)u_ * nth)) : z_;           \
            KERN_UNROLL for (u_ = 0; u_ < UU; u_++)                                            \
            {                                                                                  \
                KERN_UNROLL for (j_ = 0; j_ < E; j_++)                                         \
                    acc_[u_][j_] = KERN_RED_OP_##OP(AT, UT, acc_[u_][j_], LOAD(t_[u_].e[j_])); \
            }                                                                                  \
        }                                                                                      \
        KERN_UNROLL for (u_ = 0; u_ < UU; u_++)                                                \
        {                                                                                      \
            KERN_UNROLL for (j_ = 0; j_ < E; j_++) t_[u_].e[j_] = STORE(acc_[u_][j_]);         \
        }                                                                                      \
        KERN_NOUNROLL for (k_ = 0; k_ < nd; k_++) {                                            \
            char *q_ = tab[ns + k_] + hb;                                                      \
            KERN_UNROLL for (u_ = 0; u_ < UU; u_++) if (KERN_RED_IN(u_))                       \
                kern_stv(q_ + 16 * (i + (uint64_t)u_ * nth), t_[u_].v);                        \
        }                                                                                      \
    }

/*
 * tab[ns..ns+nd) <- tab[0] op tab[1] op ... tab[ns-1] over n bytes (whole elements): the
 * addresses of a reduce op at its byte x (kern_reduce_io). A destination may be one of the
 * sources (element by element, every source is read before a destination is written). When
 * every address agrees with the first modulo 16, a head of elements brings them to 16-byte
 * alignment, the body runs in 16-byte vectors (U per thread per step), and the rest is the
 * tail; otherwise every element is done one at a time. Heads and tails (at most 15 elements
 * each per op) run in the same op.
 */
#define KERN_GEN_RED(DT, ST, AT, UT, LOAD, STORE, OP)                                          \
    KERN_BIG_FN void kern_red_##DT##_##OP(char *const *tab, int ns, int nd, uint64_t n,         \
                                          uint64_t tid, uint64_t nth)                          \
    {                                                                                          \
        enum { E = (int)(16 / sizeof(ST)), U = KERN_VU(ST, AT) };                              \
        const uint64_t ne = n / sizeof(ST);                                                    \
        const uintptr_t a0 = (uintptr_t)tab[0];                                                \
        uintptr_t mis = 0;                                                                     \
        uint64_t h, nv, i, hb, m, nt;                                                          \
        int k;                                                                                 \
        for (k = 1; k < ns + nd; k++) mis |= (uintptr_t)tab[k] - a0;                           \
        if ((mis & 15) != 0 || (a0 % sizeof(ST)) != 0) {                                       \
            h = ne;                                                                            \
            nv = 0;                                                                            \
        } else {                                                                               \
            h = (uint64_t)((16 - (a0 & 15)) & 15) / sizeof(ST);                                \
            if (h > ne) h = ne;                                                                \
            nv = (ne - h) / E;                                                                 \
        }                                                                                      \
        hb = h * sizeof(ST);                                                                   \
        for (i = tid; i < nv; i += (uint64_t)U * nth)                                          \
            KERN_RED_STEP(ST, AT, LOAD, STORE, OP, UT, U)                                      \
        /* head and tail elements */                                                           \
        nt = ne - h - nv * E;                                                                  \
        for (m = tid; m < h + nt; m += nth) {                                                  \
            const uint64_t e = m < h ? m : m + nv * E;                                         \
            AT acc = LOAD(((const ST *)tab[0])[e]);                                            \
            ST r;                                                                              \
            for (k = 1; k < ns; k++)                                                           \
                acc = KERN_RED_OP_##OP(AT, UT, acc, LOAD(((const ST *)tab[k])[e]));            \
            r = STORE(acc);                                                                    \
            for (k = 0; k < nd; k++) ((ST *)tab[ns + k])[e] = r;                               \
        }                                                                                      \
    }
#define KERN_GEN_RED_DT(DT, ST, AT, UT, LOAD, STORE) \
    KERN_FOR_OPS(KERN_GEN_RED, DT, ST, AT, UT, LOAD, STORE)
KERN_DTYPE_LIST(KERN_GEN_RED_DT)

/* one call site per op kind (the dispatch is out of line, so kern_exec_op keeps few live values
 * across calls) */
KERN_BIG_FN void kern_reduce(char *const *tab, uint32_t dt, uint32_t op, int ns, int nd,
                             uint64_t n, uint64_t tid, uint64_t nth)
{
    if (n < kern_dtype_size(dt) || ns == 0) return;
    switch (dt * 4 + op) {
#define KERN_CASE_RED(DT, ST, AT, UT, LOAD, STORE, OP)                                         \
    case KERN_DT_##DT * 4 + KERN_RED_##OP: kern_red_##DT##_##OP(tab, ns, nd, n, tid, nth); break;
#define KERN_CASE_RED_DT(DT, ST, AT, UT, LOAD, STORE) \
    KERN_FOR_OPS(KERN_CASE_RED, DT, ST, AT, UT, LOAD, STORE)
        KERN_DTYPE_LIST(KERN_CASE_RED_DT)
#undef KERN_CASE_RED
#undef KERN_CASE_RED_DT
    default: break;
    }
}

/*
 * The addresses of a data op at byte x in the block's table: the block's threads write its
 * io.ns sources then its io.nd destinations into shared memory together (one address per
 * thread), one block sync; returns the table, or NULL (every thread alike) when the op has more
 * entries than a plan may have. The loops then read an address when a step needs it: no
 * descriptor is decoded per element and no pointer stays in a register. Every thread of the
 * block calls this for every op that uses it (the sync): reduces, packet reductions, packet
 * puts and relays. The table has two halves used in turn: a thread still reading the previous
 * op's addresses is never overwritten, as every thread passed this op's sync only after
 * finishing the one before.
 */
KERN_BIG_FN char **kern_io_tab(kern_ctx_t *c, kern_io_t io, uint64_t x)
{
    char **tab = c->b->tab + (c->tabs++ & 1u) * KERN_IO_MAX;
    int k;
    if (io.ns + io.nd > KERN_IO_MAX) {
        /* more than a plan may have (plan.h PLAN_MAX_DESCS, PLAN_MAX_SWITCH_MEMBERS) */
        if (c->tid == 0)
            kern_fail(c, KERN_ERR_INVALID_ARG, KERN_WC(KERN_WAIT_PLAN, -1), -1, KERN_IO_MAX,
                      (uint64_t)(io.ns + io.nd));
        return NULL;
    }
    for (k = c->tid; k < io.ns + io.nd; k += c->nth)
        tab[k] = k < io.ns ? KERN_SRC(c, io, k, x) : KERN_DST(c, io, k - io.ns, x);
    KERN_SYNC(c);
    return tab;
}

/* A reduce op at byte x over n bytes: its addresses in the table, then the loop of its dtype
 * and op. */
KERN_BIG_FN void kern_reduce_io(kern_ctx_t *c, const kern_op_t *op, uint64_t x, uint64_t n)
{
    const kern_io_t io = kern_op_io(c, op);
    char *const *tab = kern_io_tab(c, io, x);
    if (tab)
        kern_reduce(tab, c->b->a.dtype, op->redop, io.ns, io.nd, n, (uint64_t)c->tid,
                    (uint64_t)c->nth);
}

/* ---- LL packets --------------------------------------------------------------------------- */

/* Payload word j (4 bytes, zero padded past n) of plain data at p. A partial word is
 * assembled byte by byte in a register (a copy through memory would put it in local memory). */
KERN_FN uint32_t kern_word(const char *p, uint64_t j, uint64_t n)
{
    union {
        uint32_t w;
        unsigned char b[4];
    } t;
    const uint64_t r = n - 4 * j;
    int k;
    if (r >= 4) return *(const uint32_t *)(p + 4 * j);
    t.w = 0;
    KERN_UNROLL for (k = 0; k < 4; k++) if ((uint64_t)k < r) t.b[k] = (unsigned char)p[4 * j + k];
    return t.w;
}

KERN_FN void kern_store_word(char *p, uint64_t j, uint64_t n, uint32_t w)
{
    union {
        uint32_t w;
        unsigned char b[4];
    } t;
    const uint64_t r = n - 4 * j;
    int k;
    if (r >= 4) {
        *(uint32_t *)(p + 4 * j) = w;
        return;
    }
    t.w = w;
    KERN_UNROLL for (k = 0; k < 4; k++) if ((uint64_t)k < r) p[4 * j + k] = (char)t.b[k];
}

/* Payload words 2g and 2g + 1 (the second 0 unless `both`) of plain data at p, zero padded past
 * n: one 8-byte load where both are whole and aligned. */
KERN_FN void kern_word2(const char *p, uint64_t g, uint64_t n, int both, uint32_t *w)
{
    const char *q = p + 8 * g;
    if (8 * g + 8 <= n && ((uintptr_t)q & 7) == 0) {
        union {
            uint64_t u;
            uint32_t w[2];
        } t;
        t.u = *(const uint64_t *)q;
        w[0] = t.w[0];
        w[1] = t.w[1];
    } else {
        w[0] = kern_word(p, 2 * g, n);
        w[1] = both ? kern_word(p, 2 * g + 1, n) : 0;
    }
}

/* Store words 2g and 2g + 1 (when `both`) of plain data at p, nothing past n. */
KERN_FN void kern_store_word2(char *p, uint64_t g, uint64_t n, int both, const uint32_t *w)
{
    char *q = p + 8 * g;
    if (8 * g + 8 <= n && ((uintptr_t)q & 7) == 0) {
        union {
            uint64_t u;
            uint32_t w[2];
        } t;
        t.w[0] = w[0];
        t.w[1] = w[1];
        *(uint64_t *)q = t.u;
    } else {
        kern_store_word(p, 2 * g, n, w[0]);
        if (both) kern_store_word(p, 2 * g + 1, n, w[1]);
    }
}

KERN_FN uint64_t kern_unit(const kern_ctx_t *c, uint32_t w)
{
    return ((uint64_t)c->b->flag << 32) | (uint64_t)w;
}

/* Rank whose ops write the packets descriptor d reads (the lowering's guess), -1 if none. */
#define KERN_WRITER(d) ((int32_t)(d)->writer - 1)

/* Store units u0 (and u1 when `both`) at unit pointer u: one 16-byte access when aligned. */
KERN_FN void kern_put_units(uint64_t *u, int both, uint64_t u0, uint64_t u1)
{
    if (both && ((uintptr_t)u & 15) == 0) {
        kern_st_pkt2(u, u0, u1);
    } else {
        kern_st_pkt(u, u0);
        if (both) kern_st_pkt(u + 1, u1);
    }
}

/*
 * One look at packet unit u[0] (and u[1] when `both`): nonzero and the payloads when both carry
 * this launch's flag f (a 16-byte aligned pair is read with one access).
 */
KERN_FN int kern_pkt_try2(const uint64_t *u, int both, uint32_t f, uint32_t *w0, uint32_t *w1)
{
    uint64_t a, b = (uint64_t)f << 32;
    if (both && ((uintptr_t)u & 15) == 0) {
        kern_ld_pkt2(u, &a, &b);
    } else {
        a = kern_ld_pkt(u);
        if (both) b = kern_ld_pkt(u + 1);
    }
    *w0 = (uint32_t)a;
    *w1 = (uint32_t)b;
    return (uint32_t)(a >> 32) == f && (uint32_t)(b >> 32) == f;
}

/*
 * Spin until packet unit u[0] (and u[1] when `both`) carries this launch's flag; 0 and the
 * payloads, or 1 on failure. `peer`: the rank expected to write them (KERN_WRITER), recorded if
 * the wait times out. A 16-byte aligned pair is polled with one access.
 */
KERN_FN int kern_pkt_get2(kern_ctx_t *c, const uint64_t *u, int both, uint32_t *w0, uint32_t *w1,
                          int32_t peer)
{
    const uint32_t f = c->b->flag;
    const int al = both && ((uintptr_t)u & 15) == 0;
    uint64_t a, b = (uint64_t)f << 32;
    kern_spin_t s = {0, 0};
    for (;;) {
        if (al) {
            kern_ld_pkt2(u, &a, &b);
        } else {
            a = kern_ld_pkt(u);
            if (both) b = kern_ld_pkt(u + 1);
        }
        if ((uint32_t)(a >> 32) == f && (uint32_t)(b >> 32) == f) break;
        if (kern_spin_poll(c, &s, KERN_WAIT_PACKET, -1, peer, f,
                           (uint32_t)(a >> 32) != f ? a >> 32 : b >> 32))
            return 1;
    }
    *w0 = (uint32_t)a;
    *w1 = (uint32_t)b;
    return 0;
}

/*
 * cpkt / ppkt: n payload bytes of plain sources -> the packet images of the destinations
 * (entry k from source min(k, ns - 1), parallel lists as for copies), 8 payload bytes (two
 * units) per thread step. The addresses come from the block's table; a run of destinations
 * with the same source (a put to several peers) is one pass: each pair of source words is read
 * once for all of them.
 */
KERN_BIG_FN void kern_pkt_put_io(kern_ctx_t *c, const kern_op_t *op, uint64_t x, uint64_t n)
{
    const kern_io_t io = kern_op_io(c, op);
    const uint64_t tid = (uint64_t)c->tid, nth = (uint64_t)c->nth;
    const uint64_t nw = (n + 3) / 4, np = (nw + 1) / 2;
    const int ns = io.ns, nd = io.nd;
    char *const *tab = kern_io_tab(c, io, x);
    int k0, k1, k;
    if (!tab) return;
    for (k0 = 0; k0 < nd; k0 = k1) {
        const char *src = tab[k0 < ns ? k0 : ns - 1];
        uint64_t g;
        for (k1 = k0 + 1; k1 < nd && tab[k1 < ns ? k1 : ns - 1] == src; k1++) {
        }
        for (g = tid; g < np; g += nth) {
            const int both = 2 * g + 1 < nw;
            uint32_t w[2];
            uint64_t u0, u1;
            kern_word2(src, g, n, both, w);
            u0 = kern_unit(c, w[0]);
            u1 = both ? kern_unit(c, w[1]) : 0;
            for (k = k0; k < k1; k++) kern_put_units((uint64_t *)tab[ns + k] + 2 * g, both, u0, u1);
        }
    }
}

/* upkt: packet image img -> n bytes of plain dst. */
KERN_BIG_FN void kern_pkt_unpack(kern_ctx_t *c, char *dst, const char *img, uint64_t n,
                             int32_t peer)
{
    const uint64_t nw = (n + 3) / 4, np = (nw + 1) / 2;
    const uint64_t *u = (const uint64_t *)img;
    uint64_t g;
    for (g = (uint64_t)c->tid; g < np; g += (uint64_t)c->nth) {
        const int both = 2 * g + 1 < nw;
        uint32_t w[2];
        if (kern_pkt_get2(c, u + 2 * g, both, &w[0], &w[1], peer)) return;
        kern_store_word2(dst, g, n, both, w);
    }
}

/* rppkt / gstorepkt: the packets of source 0 (an image), once they arrived, re-sent to every
 * destination of io (addresses from the block's table). */
KERN_BIG_FN void kern_pkt_relay(kern_ctx_t *c, const kern_op_t *op, uint64_t x, uint64_t n)
{
    kern_io_t io = kern_op_io(c, op);
    const uint64_t nw = (n + 3) / 4, np = (nw + 1) / 2;
    const int32_t peer = KERN_WRITER(&io.sd[0]);
    const int nd = io.nd;
    char *const *tab;
    uint64_t g;
    io.ns = 1;
    tab = kern_io_tab(c, io, x);
    if (!tab) return;
    for (g = (uint64_t)c->tid; g < np; g += (uint64_t)c->nth) {
        const int both = 2 * g + 1 < nw;
        uint32_t w0, w1;
        int k;
        if (kern_pkt_get2(c, (const uint64_t *)tab[0] + 2 * g, both, &w0, &w1, peer)) return;
        for (k = 1; k <= nd; k++)
            kern_put_units((uint64_t *)tab[k] + 2 * g, both, kern_unit(c, w0), kern_unit(c, w1));
    }
}

/* a op b for a runtime op, one per dtype (packet reductions: not worth 4 copies each) */
#define KERN_GEN_OPFN(DT, ST, AT, UT, LOAD, STORE)                                             \
    KERN_FN AT kern_op_##DT(uint32_t op, AT a, AT b)                                           \
    {                                                                                          \
        switch (op) {                                                                          \
        case KERN_RED_SUM: return KERN_RED_OP_SUM(AT, UT, a, b);                               \
        case KERN_RED_PROD: return KERN_RED_OP_PROD(AT, UT, a, b);                             \
        case KERN_RED_MIN: return KERN_RED_OP_MIN(AT, UT, a, b);                               \
        default: return KERN_RED_OP_MAX(AT, UT, a, b);                                         \
        }                                                                                      \
    }
KERN_DTYPE_LIST(KERN_GEN_OPFN)

/*
 * KERN_PKT_LOOK: a packet reduction of a 1- or 2-byte type looks at each packet pair once
 * inline and calls the polling wait only when it is not there. ptxas then stores none of the
 * step's state around the wait's slow-path call on every step (sm_90: kern_pred_I8/U8/E4M3/E5M2
 * 36-32 -> 0 spill bytes with the packed integers below); for wider types it moved spills into
 * other functions. Off on AMD: it raised gfx90a's ScratchSize 352 -> 368.
 */
#if defined(KERN_HIP) && !defined(__NVCC__)
#define KERN_PKT_LOOK 0
#else
#define KERN_PKT_LOOK 1
#endif
/* an integer accumulator type (a compile-time constant) */
#define KERN_INT_AT(AT) ((AT)0.5 == (AT)0)

/*
 * Packet reductions (repkt, respkt, recpkt, recspkt), 8 payload bytes (two units) per thread
 * step: the first source is plain, the others packet images (each pair polled with one 16-byte
 * access where aligned); destination k is a packet image when its descriptor has
 * KERN_DESC_PACKET, else plain. The addresses come from the block's table (tab[0..ns) sources,
 * tab[ns..ns+nd) destinations); d: the op's descriptors, sources then destinations (as in
 * the plan: d[ns + k] is destination k), read for the destinations' kind and the writer a
 * timed-out wait names. Returns nonzero if a packet wait failed.
 */
#define KERN_GEN_PRED(DT, ST, AT, UT, LOAD, STORE)                                             \
    KERN_BIG_FN int kern_pred_##DT(kern_ctx_t *c, uint32_t op, char *const *tab,                \
                                   const kern_desc_t *d, int ns, int nd, uint64_t n)           \
    {                                                                                          \
        const uint64_t nw = (n + 3) / 4, np = (nw + 1) / 2;                                    \
        const uint32_t f = c->b->flag;                                                         \
        uint64_t g;                                                                            \
        for (g = (uint64_t)c->tid; g < np; g += (uint64_t)c->nth) {                            \
            typedef union {                                                                    \
                uint32_t w[2];                                                                 \
                ST e[8 / sizeof(ST)];                                                          \
            } kern_pair_t;                                                                     \
            kern_pair_t v, r;                                                                  \
            AT acc[8 / sizeof(ST)];                                                            \
            const int both = 2 * g + 1 < nw;                                                   \
            uint32_t j;                                                                        \
            int k;                                                                             \
            /* whole 8-byte groups: padding past n is reduced too and never stored */          \
            kern_word2(tab[0], g, n, both, r.w);                                               \
            for (j = 0; j < 8 / sizeof(ST); j++) acc[j] = LOAD(r.e[j]);                        \
            for (k = 1; k < ns; k++) {                                                         \
                const uint64_t *u = (const uint64_t *)tab[k] + 2 * g;                          \
                /* 1- and 2-byte types: one look inline, the wait (kern_pkt_get2, whose slow   \
                 * path is a call) only when the packet is not there (KERN_PKT_LOOK) */        \
                if (sizeof(ST) > 2 || !KERN_PKT_LOOK) {                                        \
                    if (kern_pkt_get2(c, u, both, &v.w[0], &v.w[1], KERN_WRITER(&d[k])))       \
                        return 1;                                                              \
                } else if (!kern_pkt_try2(u, both, f, &v.w[0], &v.w[1])) {                     \
                    if (kern_pkt_get2(c, u, both, &v.w[0], &v.w[1], KERN_WRITER(&d[k])))       \
                        return 1;                                                              \
                }                                                                              \
                if (!both) v.w[1] = 0;                                                         \
                if (KERN_INT_AT(AT)) {                                                         \
                    /* integers: the running result stays in its storage type between the      \
                     * sources (two words, not eight accumulators, live across the wait's      \
                     * call); exact, as sums and products wrap and min / max stay in range */  \
                    for (j = 0; j < 8 / sizeof(ST); j++)                                       \
                        r.e[j] = STORE(kern_op_##DT(op, LOAD(r.e[j]), LOAD(v.e[j])));          \
                } else {                                                                       \
                    for (j = 0; j < 8 / sizeof(ST); j++)                                       \
                        acc[j] = kern_op_##DT(op, acc[j], LOAD(v.e[j]));                       \
                }                                                                              \
            }                                                                                  \
            if (!KERN_INT_AT(AT))                                                              \
                for (j = 0; j < 8 / sizeof(ST); j++) r.e[j] = STORE(acc[j]);                   \
            for (k = 0; k < nd; k++) {                                                         \
                char *q = tab[ns + k];                                                         \
                if (d[ns + k].flags & KERN_DESC_PACKET) {                                      \
                    kern_put_units((uint64_t *)q + 2 * g, both, kern_unit(c, r.w[0]),          \
                                   kern_unit(c, r.w[1]));                                      \
                } else {                                                                       \
                    kern_store_word2(q, g, n, both, r.w);                                      \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        return 0;                                                                              \
    }
KERN_DTYPE_LIST(KERN_GEN_PRED)

/* A packet reduction: its addresses in the table, then the loop of its dtype. The op's
 * destination descriptors follow its sources (io.dd == io.sd + io.ns). */
KERN_BIG_FN void kern_preduce(kern_ctx_t *c, const kern_op_t *op, uint64_t x, uint64_t n)
{
    char *const *tab = kern_io_tab(c, kern_op_io(c, op), x);
    /* read from the op again after the call: less to keep across it */
    const kern_io_t io = kern_op_io(c, op);
    if (!tab || io.ns == 0) return;
    switch (c->b->a.dtype) {
#define KERN_CASE_PRED(DT, ST, AT, UT, LOAD, STORE)                                            \
    case KERN_DT_##DT: (void)kern_pred_##DT(c, op->redop, tab, io.sd, io.ns, io.nd, n); break;
        KERN_DTYPE_LIST(KERN_CASE_PRED)
#undef KERN_CASE_PRED
    default: break;
    }
}

/* ---- NVLS multicast (CUDA sm_90+) ------------------------------------------------------- */

/*
 * glres / gstore through the switch channels' multicast pointers: one multimem.ld_reduce (sum
 * of every member's copy, done by the switch) and one multimem.st (to every member) per 16
 * bytes. Used for float32/float16/bfloat16 sums (glres) or any data (gstore) when both
 * multicast pointers exist and addresses and length are 16-byte multiples; returns 0 to let
 * the member-pointer loop do everything else.
 */
KERN_BIG_FN int kern_mc_op(const kern_ctx_t *c, uint32_t type, uint32_t dt, uint32_t op,
                       const kern_desc_t *src, const kern_desc_t *dst, uint64_t x, uint64_t n)
{
#if defined(KERN_CUDA) && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
    const kern_switch_t *ds = &c->b->sw[dst->idx];
    uint64_t i, nv = n / 16;
    char *dp, *sp;
    if (!ds->mc) return 0;
    dp = (char *)ds->mc + dst->off + x + ((dst->flags & KERN_DESC_SCRATCH) ? c->b->half : 0);
    if (type == KERN_OP_GLRES) {
        const kern_switch_t *ss = &c->b->sw[src->idx];
        if (!ss->mc || op != KERN_RED_SUM ||
            (dt != KERN_DT_F32 && dt != KERN_DT_F16 && dt != KERN_DT_BF16))
            return 0;
        sp = (char *)ss->mc + src->off + x + ((src->flags & KERN_DESC_SCRATCH) ? c->b->half : 0);
    } else {
        sp = kern_ptr(c, src, x);
    }
    if ((((uintptr_t)sp | (uintptr_t)dp | n) & 15) != 0) return 0;
    for (i = (uint64_t)c->tid; i < nv; i += (uint64_t)c->nth) {
        const char *s16 = sp + 16 * i;
        char *d16 = dp + 16 * i;
        unsigned r0, r1, r2, r3;
        if (type != KERN_OP_GLRES) {
            const uint4 v = *(const uint4 *)s16;
            r0 = v.x, r1 = v.y, r2 = v.z, r3 = v.w;
        } else if (dt == KERN_DT_F32) {
            asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.f32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                         : "l"(s16)
                         : "memory");
        } else if (dt == KERN_DT_F16) {
            asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.f16x2 {%0,%1,%2,%3}, [%4];"
                         : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                         : "l"(s16)
                         : "memory");
        } else {
            asm volatile(
                "multimem.ld_reduce.relaxed.sys.global.add.v4.bf16x2 {%0,%1,%2,%3}, [%4];"
                : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                : "l"(s16)
                : "memory");
        }
        asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(d16),
                     "f"(__uint_as_float(r0)), "f"(__uint_as_float(r1)),
                     "f"(__uint_as_float(r2)), "f"(__uint_as_float(r3))
                     : "memory");
    }
    return 1;
#else
    (void)c, (void)type, (void)dt, (void)op, (void)src, (void)dst, (void)x, (void)n;
    return 0;
#endif
}

/* ---- synchronisation ops ------------------------------------------------------------------ */

/* wait / rlxwait on memory channels ids[0..n): thread i waits on channel i */
KERN_BIG_FN void kern_wait_chan(kern_ctx_t *c, const uint32_t *ids, uint32_t n, int relaxed)
{
    uint32_t i;
    for (i = (uint32_t)c->tid; i < n; i += (uint32_t)c->nth) {
        const uint32_t id = ids[i];
        const kern_chan_t *ch = &c->b->chans[id];
        uint64_t exp = kern_add_rlx_dev_u64(ch->expected, 1) + 1;
        uint64_t v = relaxed ? kern_ld_rlx_u64(ch->inbound) : kern_ld_acq_u64(ch->inbound);
        kern_spin_t s = {0, 0};
        while (v < exp) {
            if (kern_spin_poll(c, &s, KERN_WAIT_SIGNAL, (int32_t)id, ch->peer, exp, v)) return;
            v = relaxed ? kern_ld_rlx_u64(ch->inbound) : kern_ld_acq_u64(ch->inbound);
        }
    }
}

/* Grid barrier of `nblocks` blocks on a reusable syncer (count + generation). */
KERN_BIG_FN void kern_barrier(kern_ctx_t *c, uint32_t id, uint32_t nblocks)
{
    KERN_SYNC(c);
    if (nblocks > 1 && c->tid == 0 && !kern_failed(c)) {
        kern_syncer_t *s = &c->b->st->barrier[id];
        uint32_t gen = kern_ld_acq_u32(&s->gen);
        uint32_t old = kern_add_acqrel_u32(&s->count, 1);
        if (old + 1 == nblocks) {
            kern_st_rlx_u32(&s->count, 0);
            kern_st_rel_u32(&s->gen, gen + 1);
        } else {
            kern_spin_t sp = {0, 0};
            while (kern_ld_acq_u32(&s->gen) == gen)
                if (kern_spin_poll(c, &sp, KERN_WAIT_BARRIER, (int32_t)id, -1, nblocks, old + 1))
                    break;
        }
    }
    KERN_SYNC(c);
}

/* acquire semaphores ids[0..n): thread i takes semaphore i */
KERN_BIG_FN void kern_sem_acquire(kern_ctx_t *c, const uint32_t *ids, uint32_t n)
{
    uint32_t i;
    for (i = (uint32_t)c->tid; i < n; i += (uint32_t)c->nth) {
        const uint32_t id = ids[i];
        int32_t *p = &c->b->sems[id];
        kern_spin_t s = {0, 0};
        for (;;) {
            int32_t v = kern_ld_acq_i32(p);
            if (v > 0 && kern_cas_acqrel_i32(p, v, v - 1)) break;
            if (v <= 0 &&
                kern_spin_poll(c, &s, KERN_WAIT_SEMAPHORE, (int32_t)id, -1, 1, (uint64_t)v))
                return;
        }
    }
}

/* ---- port channels: triggers into the proxy FIFO ----------------------------------------- */

KERN_FN const kern_plan_t *kern_plan_of(const kern_ctx_t *c) { return c->b->p; }

KERN_FN kern_trigger_t *kern_fifo_slots(kern_fifo_t *f) { return (kern_trigger_t *)(f + 1); }

/* The proxy's error, 0 if none (system scope: the proxy is a host thread). */
KERN_FN int32_t kern_proxy_err(const kern_fifo_t *f)
{
    return (int32_t)(int64_t)kern_ld_acq_u64(&f->err);
}

/*
 * Wait until the proxy's tail passes `pos` (room for a push when pos is a slot to claim minus
 * the FIFO size, a finished flush when pos is the flush's own slot). Gives up on the proxy's
 * error (recorded as this launch's error) or the timeout.
 */
KERN_BIG_FN int kern_port_until(kern_ctx_t *c, uint64_t pos, int32_t chan, int32_t peer)
{
    kern_fifo_t *f = kern_plan_of(c)->fifo;
    kern_spin_t s = {0, 0};
    uint64_t t = kern_ld_acq_u64(&f->tail);
    while (t <= pos) {
        int32_t e = kern_proxy_err(f);
        if (e != 0) {
            kern_fail(c, e, KERN_WC(KERN_WAIT_PROXY, chan), peer, pos + 1, t);
            return 1;
        }
        if (kern_spin_poll(c, &s, KERN_WAIT_PROXY, chan, peer, pos + 1, t)) return 1;
        t = kern_ld_acq_u64(&f->tail);
    }
    /* The proxy passes a trigger it failed on (and drops every later one), and it publishes
     * its error before its tail: a flush whose put failed must fail, not pass. */
    int32_t e = kern_proxy_err(f);
    if (e != 0) {
        kern_fail(c, e, KERN_WC(KERN_WAIT_PROXY, chan), peer, pos + 1, t);
        return 1;
    }
    return 0;
}

/* Push one trigger; returns its FIFO position, or ~0 when the launch gave up. */
KERN_FN uint64_t kern_port_push(kern_ctx_t *c, uint64_t fst, uint64_t snd, int32_t chan,
                                int32_t peer)
{
    const kern_plan_t *p = kern_plan_of(c);
    kern_fifo_t *f = p->fifo;
    uint64_t size = f->size;
    uint64_t pos = kern_add_rlx_dev_u64(p->fifo_head, 1);
    kern_trigger_t *slot;
    if (pos >= size && kern_port_until(c, pos - size, chan, peer)) return ~0ull;
    slot = &kern_fifo_slots(f)[pos & (size - 1)];
    /* the data the proxy will read, and fst, are visible before the valid bit */
    kern_fence_sys();
    kern_st_rlx_u64(&slot->fst, fst);
    kern_fence_sys();
#if defined(KERN_HOST)
    /* host backend: a release store (free on x86), which the proxy's acquire load pairs with;
     * the fence + relaxed store above is as correct in C11, but ThreadSanitizer does not model
     * fences and reported the proxy's read of the source buffer as a race */
    __atomic_store_n(&slot->snd, snd | KERN_TRIG_VALID, __ATOMIC_RELEASE);
#else
    kern_st_rlx_u64(&slot->snd, snd | KERN_TRIG_VALID);
#endif
    return pos;
}

/* Push a data trigger (KERN_TRIG_* `bits`): n bytes at offset so of this rank's registered
 * allocation `loc` to offset o of the peer's remote buffer rbuf, over port channel chan; with
 * KERN_TRIG_FLUSH, wait until the proxy has done it. */
KERN_FN void kern_port_data(kern_ctx_t *c, uint32_t bits, uint32_t chan, int32_t peer,
                            uint32_t rbuf, uint32_t loc, uint64_t so, uint64_t o, uint64_t n)
{
    uint64_t pos =
        kern_port_push(c, (n & 0xffffffffull) | (so << 32),
                       (o & 0xffffffffull) | ((uint64_t)chan << 32) | ((uint64_t)rbuf << 42) |
                           ((uint64_t)loc << 52) | ((uint64_t)bits << 54),
                       (int32_t)chan, peer);
    if (pos != ~0ull && (bits & KERN_TRIG_FLUSH)) kern_port_until(c, pos, (int32_t)chan, peer);
}

/*
 * Entry k of port data op `op`: put n bytes of local source k (the last source past the op's
 * sources) at x to the peer's destination k at x over the op's channel k. Port ppkt / rppkt
 * (spec §2.5): the source is already a packet image (rppkt: packets that arrived in my scratch;
 * ppkt: packets this rank formatted, e.g. by cpkt). The thread that triggers the put first
 * waits until every unit of the image carries this launch's flag, so the proxy never ships a
 * half-arrived image, then one proxy put moves the image's bytes verbatim into the peer's
 * scratch, where the reader polls the flags as for memory-channel packets. The waiting thread
 * scans the whole image itself rather than sharing it with a block sync: a sync inside an op
 * would pair with the wrong barrier on threads that saw a failure and left early. Takes the op
 * and k rather than the entry's fields: kern_port_op's loop keeps fewer values across the call.
 */
KERN_BIG_FN void kern_port_put(kern_ctx_t *c, const kern_op_t *op, int k, uint64_t x, uint64_t n)
{
    const kern_plan_t *p = kern_plan_of(c);
    const kern_desc_t *src = c->b->descs + op->desc + (k < op->n_src ? k : op->n_src - 1);
    const kern_desc_t *dst = c->b->descs + op->desc + op->n_src + k;
    const uint32_t chan = c->b->ids[op->ids + (uint32_t)k], type = op->type;
    const kern_chan_t *ch = (const kern_chan_t *)((const char *)p + p->off_ports) + chan;
    const uint64_t *pb = (const uint64_t *)((const char *)p + p->off_pbufs);
    uint32_t bits = KERN_TRIG_DATA;
    uint64_t so, o;
    if (type == KERN_OP_PPKT || type == KERN_OP_RPPKT) {
        const uint64_t nw = (n + 3) / 4;
        const uint64_t *u = (const uint64_t *)kern_ptr(c, src, x);
        uint64_t j;
        for (j = 0; j < nw; j++) {
            uint32_t w, w1;
            if (kern_pkt_get2(c, u + j, 0, &w, &w1, KERN_WRITER(src))) return;
        }
        n = 8 * nw; /* 8 image bytes per 4 payload bytes; the offsets are doubled below */
    }
    so = (uint64_t)(kern_ptr(c, src, x) - (char *)p->lbase[src->loc]);
    o = dst->off + x;
    if (dst->flags & KERN_DESC_PACKET) o *= 2;
    if (dst->flags & KERN_DESC_SCRATCH) o += c->b->half;
    o += pb[dst->idx];
    if (type == KERN_OP_PWS || type == KERN_OP_PWSF) bits |= KERN_TRIG_SIGNAL;
    if (type == KERN_OP_PWSF) bits |= KERN_TRIG_FLUSH;
    kern_port_data(c, bits, chan, ch->peer, dst->idx, src->loc, so, o, n);
}

/* signal / flush on port channel `chan` */
KERN_BIG_FN void kern_port_ctl(kern_ctx_t *c, uint32_t bits, uint32_t chan)
{
    const kern_plan_t *p = kern_plan_of(c);
    const kern_chan_t *ch = (const kern_chan_t *)((const char *)p + p->off_ports) + chan;
    uint64_t pos = kern_port_push(c, 0, ((uint64_t)chan << 32) | ((uint64_t)bits << 54),
                                  (int32_t)chan, ch->peer);
    if (pos != ~0ull && (bits & KERN_TRIG_FLUSH)) kern_port_until(c, pos, (int32_t)chan, ch->peer);
}

/* wait on port channel `chan`: its inbound counter is set by the peer's proxy */
KERN_BIG_FN void kern_port_wait(kern_ctx_t *c, uint32_t chan)
{
    const kern_plan_t *p = kern_plan_of(c);
    const kern_chan_t *ch = (const kern_chan_t *)((const char *)p + p->off_ports) + chan;
    uint64_t exp = kern_add_rlx_dev_u64(ch->expected, 1) + 1;
    uint64_t v = kern_ld_acq_u64(ch->inbound);
    kern_spin_t s = {0, 0};
    while (v < exp) {
        int32_t e = kern_proxy_err(p->fifo);
        if (e != 0) {
            kern_fail(c, e, KERN_WC(KERN_WAIT_PROXY, chan), ch->peer, exp, v);
            return;
        }
        if (kern_spin_poll(c, &s, KERN_WAIT_PORT, (int32_t)chan, ch->peer, exp, v)) return;
        v = kern_ld_acq_u64(ch->inbound);
    }
}

/* ---- launch fence (kern_args.h, "Launch fence") ------------------------------------------- */

/* Write this launch's record of `kind` into the peer's slot of fence channel `fid`: clear the
 * record word, the signature, then the record word (kern_rec_read's order). */
KERN_FN void kern_rec_write(kern_ctx_t *c, uint32_t fid, uint32_t kind)
{
    uint64_t rec = KERN_REC(kind, c->b->flag);
    int k;
    if (fid & KERN_FENCE_PORT) {
        /* through the proxy: word triggers, stored at the peer in order (transport.h) */
        const kern_plan_t *p = kern_plan_of(c);
        uint32_t id = fid & ~KERN_FENCE_PORT;
        const kern_chan_t *ch = (const kern_chan_t *)((const char *)p + p->off_ports) + id;
        uint64_t snd = ((uint64_t)id << 32) | KERN_TRIG_WORD;
        if (kern_port_push(c, 0, snd | KERN_REC_WORD, (int32_t)id, ch->peer) == ~0ull) return;
        for (k = 0; k < KERN_SIG_WORDS; k++)
            if (kern_port_push(c, c->b->a.sig[k], snd | (uint64_t)(KERN_REC_SIG + k), (int32_t)id,
                               ch->peer) == ~0ull)
                return;
        (void)kern_port_push(c, rec, snd | KERN_REC_WORD, (int32_t)id, ch->peer);
        return;
    }
    {
        uint64_t *slot = c->b->chans[fid].remote;
        kern_st_rlx_u64(slot + KERN_REC_WORD, 0);
        kern_fence_sys();
        for (k = 0; k < KERN_SIG_WORDS; k++) kern_st_rlx_u64(slot + KERN_REC_SIG + k, c->b->a.sig[k]);
        kern_fence_sys();
#if defined(KERN_HOST)
        /* pairs with the reader's acquire load (ThreadSanitizer does not model the fence) */
        __atomic_store_n(slot + KERN_REC_WORD, rec, __ATOMIC_RELEASE);
#else
        kern_st_rlx_u64(slot + KERN_REC_WORD, rec);
#endif
    }
}

/* Wait for the peer's record of this launch on fence channel `fid` and compare signatures. */
KERN_FN void kern_fence_wait(kern_ctx_t *c, uint32_t fid)
{
    const uint64_t *slot = kern_fence_slot(c, fid);
    int32_t peer = kern_fence_peer(c, fid);
    uint32_t flag = c->b->flag;
    uint64_t fence = KERN_REC(KERN_REC_FENCE, flag), answer = KERN_REC(KERN_REC_ANSWER, flag);
    uint64_t sig[KERN_SIG_WORDS], rec = fence;
    kern_spin_t s = {0, 0};
    int got;
    for (;;) {
        uint64_t w;
        got = kern_rec_read(slot, fence, sig);
        if (!got) {
            rec = answer;
            got = kern_rec_read(slot, answer, sig);
        }
        if (got) break;
        rec = fence;
        /*
         * A record of a later launch: the peer got past its fence of this one (it read our
         * record and found the signatures equal) and ended it, then replaced its record before
         * we read it. A rank whose ops never wait for the peer does that: a sender of a
         * point-to-point plan, a broadcast's root. It is at most one launch ahead (its next
         * fence waits for our next record).
         */
        w = kern_ld_acq_u64(slot + KERN_REC_WORD);
        if (w != 0 && (int32_t)((uint32_t)w - flag) > 0) {
            got = 2;
            break;
        }
        if (kern_spin_poll(c, &s, KERN_WAIT_FENCE, (int32_t)(fid & 1023u), peer, fence,
                           kern_ld_rlx_u64(slot + KERN_REC_WORD)))
            return;
    }
    if (got == 1 && kern_sig_differs(c, sig))
        kern_fail_sig(c, KERN_ERR_INVALID_ARG, KERN_WAIT_MISMATCH, (int32_t)(fid & 1023u), peer,
                      flag, rec, sig);
}

/* Alltoallv (kern_args.h): tell the peer of fence channel `fid` where its block goes in my
 * output allocation, before the record that publishes it. */
KERN_FN void kern_vpublish(kern_ctx_t *c, uint32_t fid)
{
    const int32_t q = kern_fence_peer(c, fid);
    const uint64_t w = c->b->a.io_off[1] + c->b->a.vtab[1 + KERN_VTAB_WORDS * q + 2];
    if (fid & KERN_FENCE_PORT) {
        const uint32_t id = fid & ~KERN_FENCE_PORT;
        (void)kern_port_push(c, w, ((uint64_t)id << 32) | KERN_TRIG_WORD | KERN_PORT_VOFF,
                             (int32_t)id, q);
    } else {
        kern_st_rlx_u64(c->b->chans[fid].remote + KERN_SLOT_VOFF, w);
    }
}

KERN_BIG_FN void kern_launch_fence(kern_ctx_t *c)
{
    const kern_plan_t *p = kern_plan_of(c);
    const uint32_t *ids = (const uint32_t *)((const char *)p + p->off_fence);
    const uint32_t *rpub = (const uint32_t *)((const char *)p + p->off_rpub);
    /* first of this launch's two offset words in a counter slot (kern_args.h) */
    const uint32_t par = (c->b->flag & 1u) ? KERN_SLOT_OFF_ODD : KERN_SLOT_OFF_EVEN;
    uint32_t i;
    if (c->b->block == 0) {
        for (i = c->tid; i < p->n_fence && !kern_failed(c); i += c->nth) {
            if (!(ids[i] & KERN_FENCE_PORT)) {
                /* this call's offsets first: the record's store publishes them */
                uint64_t *slot = c->b->chans[ids[i]].remote;
                kern_st_rlx_u64(slot + par, c->b->a.io_off[0]);
                kern_st_rlx_u64(slot + par + 1, c->b->a.io_off[1]);
            }
            if (c->b->a.vtab) kern_vpublish(c, ids[i]);
            kern_rec_write(c, ids[i], KERN_REC_FENCE);
        }
        for (i = c->tid; i < p->n_fence && !kern_failed(c); i += c->nth) kern_fence_wait(c, ids[i]);
        KERN_SYNC(c);
        /* the owners' offsets of this launch, out of this rank's counter slots */
        for (i = c->tid; i < p->n_rbufs && !kern_failed(c); i += c->nth) {
            uint32_t pub = rpub[i];
            if (pub == KERN_RPUB_NONE) continue;
            c->b->roff[i] = kern_ld_acq_u64(c->b->chans[pub & ~KERN_RPUB_OUT].inbound + par +
                                            ((pub & KERN_RPUB_OUT) ? 1u : 0u));
        }
        KERN_SYNC(c);
        if (c->tid == 0) kern_st_rel_u32(&c->b->st->fenced, c->b->flag);
    } else {
        if (c->tid == 0) {
            /* twice block 0's bound: its own wait times out first and names the peer */
            kern_spin_t s = {0, 0, c->b->a.timeout_ns};
            uint32_t v = kern_ld_acq_u32(&c->b->st->fenced);
            while (v != c->b->flag) {
                if (kern_spin_poll(c, &s, KERN_WAIT_FENCE, -1, -1, c->b->flag, v)) break;
                v = kern_ld_acq_u32(&c->b->st->fenced);
            }
        }
        KERN_SYNC(c);
    }
}

/*
 * After a launch that did not fence found a peer's record with another signature: answer
 * every such record with ours, so that those peers fail at once, naming the disagreement.
 * Once per launch: the first thread here answers, the others return (state.answered). Several
 * threads find the record in the same poll (on a GPU every lane of every waiting warp polls at
 * the same count), and two answers written at once (clear, signature, record word) let the
 * peer's fence read one, then the other's clear.
 */
KERN_BIG_FN void kern_fence_answer(kern_ctx_t *c)
{
    const kern_plan_t *p = kern_plan_of(c);
    const uint32_t *ids = (const uint32_t *)((const char *)p + p->off_fence);
    uint64_t rec, sig[KERN_SIG_WORDS];
    int32_t *once = &c->b->st->answered, was = kern_ld_rlx_i32(once);
    uint32_t i;
    if (was == (int32_t)c->b->flag || !kern_cas_acqrel_i32(once, was, (int32_t)c->b->flag)) return;
    for (i = 0; i < p->n_fence; i++)
        if (kern_rec_asks(c, kern_fence_slot(c, ids[i]), &rec, sig))
            kern_rec_write(c, ids[i], KERN_REC_ANSWER);
}

/* kern_fence_needed's answers (kern_blk_t.fence): no fence, a fence the executor asked for
 * (args.fence) on a launch whose signature is the previous launch's, or a fence because the
 * signature differs (only such a launch has a new signature to keep for the next one) */
#define KERN_FENCE_NO 0
#define KERN_FENCE_ASKED 1
#define KERN_FENCE_NEW_SIG 2

/*
 * The executor's words for this launch: *earlier, an earlier launch's error (0: none), and
 * whether this launch fences: KERN_FENCE_NEW_SIG when the previous launch's signature differs,
 * else KERN_FENCE_ASKED when the executor asked (args.fence), else KERN_FENCE_NO. Every word is
 * loaded before any is looked at, so the five loads are one round trip to memory, not five in a
 * row (ncu on an H200, 1-rank 8 B: the launch's prologue is a chain of such trips).
 */
KERN_FN int kern_fence_needed(const kern_args_t *a, int64_t *earlier)
{
    uint64_t w[KERN_EXEC_WORDS];
    int k, differ = 0;
    *earlier = 0;
    if (!a->last_sig) return a->fence ? KERN_FENCE_ASKED : KERN_FENCE_NO;
    KERN_UNROLL for (k = 0; k < KERN_EXEC_WORDS; k++) w[k] = kern_ld_rlx_u64(&a->last_sig[k]);
    *earlier = (int64_t)w[KERN_EXEC_FAILED];
    KERN_UNROLL for (k = 0; k < KERN_SIG_CMP; k++) differ |= w[k] != a->sig[k];
    return differ ? KERN_FENCE_NEW_SIG : a->fence ? KERN_FENCE_ASKED : KERN_FENCE_NO;
}

/* An op's function called by kern_exec_op (kern_putv): out of line where ptxas compiles it
 * (kern_exec_op then keeps fewer values across its calls); inline on AMD, where its own frame
 * (the registers it saves around its calls) added to the kernel's scratch (kern_putv: gfx90a
 * 400 -> 432) */
#if defined(KERN_HIP) && !defined(__NVCC__)
#define KERN_PORT_OP_FN KERN_FN
#else
#define KERN_PORT_OP_FN KERN_BIG_FN
#endif

/* ---- alltoallv (kern_args.h, "Alltoallv") --------------------------------------------------- */

/*
 * KERN_OP_PUTV moves destination k's whole block: peer q (this rank for a local destination)
 * gets vtab[q]'s bytes from args.input + vtab[q][1], at the offset q published in its output
 * allocation (its word in my slot of the channel to q), or for q == this rank at args.output +
 * vtab[q][2]. Every block moved is added to vtab's word 0 unless that is UINT64_MAX. One
 * destination per call, so that the loops over them keep nothing live across the calls.
 */

/* Memory channel or local destination k: the whole block copies. */
KERN_BIG_FN void kern_putv_mem(kern_ctx_t *c, const kern_op_t *op, int k)
{
    const kern_blk_t *b = c->b;
    const kern_desc_t *d = b->descs + op->desc + op->n_src + k;
    uint64_t *cnt = b->a.vtab;
    const uint64_t *row;
    /* source and destination through the block's address table (kern_io_tab's protocol):
     * a pointer array of the thread's own would live in scratch memory on AMD GPUs */
    char **tab = b->tab + (c->tabs++ & 1u) * KERN_IO_MAX;
    int32_t q = b->a.rank;
    char *to;
    if (d->loc == KERN_LOC_REMOTE) {
        const uint32_t *rpub = (const uint32_t *)((const char *)b->p + b->p->off_rpub);
        const kern_chan_t *ch = b->chans + (rpub[d->idx] & ~KERN_RPUB_OUT);
        q = ch->peer;
        to = (char *)b->rbufs[d->idx] + kern_ld_acq_u64(ch->inbound + KERN_SLOT_VOFF);
        row = cnt + 1 + KERN_VTAB_WORDS * q;
    } else {
        row = cnt + 1 + KERN_VTAB_WORDS * q;
        to = b->base[KERN_LOC_OUT] + row[2];
    }
    if (c->tid == 0) tab[0] = to;
    KERN_SYNC(c);
    kern_copy_to(c, tab, 1, b->base[KERN_LOC_IN] + row[1], row[0]);
    if (c->tid == 0 && kern_ld_rlx_u64(cnt) != ~0ull) kern_add_rlx_sys_u64(cnt, row[0]);
}

/* Port channel destination k (one thread): a put of the block with the op's signal and flush
 * bits; a block of 0 bytes sends the signal alone. */
KERN_BIG_FN void kern_putv_port(kern_ctx_t *c, const kern_op_t *op, int k)
{
    const kern_plan_t *p = kern_plan_of(c);
    const uint32_t type = op->pad, chan = c->b->ids[op->ids + (uint32_t)k];
    const uint32_t rbuf = c->b->descs[op->desc + op->n_src + (uint32_t)k].idx;
    const kern_chan_t *ch = (const kern_chan_t *)((const char *)p + p->off_ports) + chan;
    uint64_t *cnt = c->b->a.vtab;
    const uint64_t *row = cnt + 1 + KERN_VTAB_WORDS * ch->peer;
    uint32_t bits = type == KERN_OP_PWSF  ? KERN_TRIG_SIGNAL | KERN_TRIG_FLUSH
                    : type == KERN_OP_PWS ? KERN_TRIG_SIGNAL
                                          : 0u;
    if (row[0] == 0) {
        if (bits) kern_port_ctl(c, bits, chan);
        return;
    }
    kern_port_data(c, bits | KERN_TRIG_DATA, chan, ch->peer, rbuf, KERN_LOC_IN,
                   (uint64_t)(c->b->base[KERN_LOC_IN] + row[1] - (char *)p->lbase[KERN_LOC_IN]),
                   kern_ld_acq_u64(ch->inbound + KERN_PORT_VOFF), row[0]);
    if (kern_ld_rlx_u64(cnt) != ~0ull) kern_add_rlx_sys_u64(cnt, row[0]);
}

KERN_PORT_OP_FN void kern_putv(kern_ctx_t *c, const kern_op_t *op)
{
    int k;
    /* no count table, nothing to move: the executor never launches such a plan without one
     * (executor.c launch refuses) */
    if (!c->b->a.vtab) return;
    if (op->port) {
        if (c->failed) return;
        for (k = c->tid; k < op->n_dst && k < op->n_ids; k += c->nth) kern_putv_port(c, op, k);
        return;
    }
    for (k = 0; k < op->n_dst; k++) kern_putv_mem(c, op, k);
}

/*
 * A port-channel op (spec §2.3, §2.4): thread i serves channel / destination i. x and n: the
 * op's byte offset and length (pipeline-clamped). Inline in kern_exec_op: its loops keep few
 * values across their calls (kern_port_put takes the op and the entry's index). Out of line it
 * had to save 3 of kern_exec_op's caller's registers at sm_90 before its call (12 spill bytes)
 * and its own 8 before kern_port_put's, and added its frame to gfx90a's scratch (400 -> 576).
 */
KERN_FN void kern_port_op(kern_ctx_t *c, const kern_op_t *op, uint64_t x, uint64_t n)
{
    const uint32_t *ids = c->b->ids + op->ids;
    const int tid = c->tid, nth = c->nth;
    int i, k;
    if (c->failed) return;
    switch (op->type) {
    case KERN_OP_SIGNAL:
    case KERN_OP_RLXSIGNAL:
        for (i = tid; i < op->n_ids; i += nth) kern_port_ctl(c, KERN_TRIG_SIGNAL, ids[i]);
        break;
    case KERN_OP_FLUSH:
        for (i = tid; i < op->n_ids; i += nth) kern_port_ctl(c, KERN_TRIG_FLUSH, ids[i]);
        break;
    case KERN_OP_WAIT:
    case KERN_OP_RLXWAIT:
        for (i = tid; i < op->n_ids; i += nth) kern_port_wait(c, ids[i]);
        break;
    case KERN_OP_PPKT:
    case KERN_OP_RPPKT:
        if (n == 0) break;
        /* fall through */
    case KERN_OP_PUT:
    case KERN_OP_PWS:
    case KERN_OP_PWSF:
        if (op->n_src == 0) break;
        for (k = tid; k < op->n_dst && k < op->n_ids; k += nth) kern_port_put(c, op, k, x, n);
        break;
    default: break; /* the lowering refuses other port ops */
    }
}

/* ---- one op ------------------------------------------------------------------------------- */

KERN_BIG_FN void kern_exec_op(kern_ctx_t *c, const kern_op_t *op, uint64_t x, uint64_t unit,
                              int piped)
{
    const kern_blk_t *b = c->b;
    const kern_desc_t *src = b->descs + op->desc;
    const kern_desc_t *dst = src + op->n_src;
    const uint32_t *ids = b->ids + op->ids;
    uint64_t n = op->len;
    int i;
    int tid = c->tid, nth = c->nth;

    c->op_type = op->type;
    if (piped) {
        n = n > x ? n - x : 0; /* clamp at 0 (P14) */
        if (n > unit) n = unit;
    } else {
        x = 0;
    }
    /* block syncs run even after a failure, so that every thread meets the same barriers; no
     * look at the error record here: the waits look (kern_spin_poll), and data ops of a failed
     * launch only move bytes inside the buffers the plan was checked against */
    if (op->type == KERN_OP_NOP) {
        KERN_SYNC(c);
        return;
    }
    if (op->type == KERN_OP_BARRIER) {
        kern_barrier(c, op->barrier_id, op->barrier_nblocks);
        return;
    }
    if (op->type == KERN_OP_PUTV) {
        kern_putv(c, op);
        return;
    }

    if (op->port) {
        kern_port_op(c, op, x, n);
        return;
    }

    switch (op->type) {
    case KERN_OP_SIGNAL:
        for (i = tid; i < op->n_ids; i += nth) kern_add_rel_sys_u64(b->chans[ids[i]].remote, 1);
        break;
    case KERN_OP_RLXSIGNAL:
        for (i = tid; i < op->n_ids; i += nth) kern_add_rlx_sys_u64(b->chans[ids[i]].remote, 1);
        break;
    case KERN_OP_WAIT:
        kern_wait_chan(c, ids, op->n_ids, 0);
        break;
    case KERN_OP_RLXWAIT:
        kern_wait_chan(c, ids, op->n_ids, 1);
        break;
    case KERN_OP_FLUSH:
        /* memory channels: make this block's earlier stores visible system-wide */
        kern_fence_sys();
        break;
    case KERN_OP_SEM_ACQUIRE:
        /* the whole block waits: no thread runs the next op before every semaphore is held */
        kern_sem_acquire(c, ids, op->n_ids);
        KERN_SYNC(c);
        break;
    case KERN_OP_SEM_RELEASE:
        /* every thread's earlier writes, not only the releasing thread's, come before it */
        KERN_SYNC(c);
        for (i = tid; i < op->n_ids; i += nth) kern_add_rel_i32(&b->sems[ids[i]], 1);
        break;
    case KERN_OP_CPKT:
    case KERN_OP_PPKT:
        if (n == 0 || op->n_src == 0) break;
        kern_pkt_put_io(c, op, x, n);
        break;
    case KERN_OP_COPY:
    case KERN_OP_PUT:
    case KERN_OP_PWS:
    case KERN_OP_PWSF:
    case KERN_OP_GET:
        if (n == 0 || op->n_src == 0) break;
        kern_copy_io(c, op, x, n);
        break;
    case KERN_OP_UPKT:
        if (n == 0) break;
        kern_pkt_unpack(c, kern_ptr(c, &dst[0], x), kern_ptr(c, &src[0], x), n,
                        KERN_WRITER(&src[0]));
        break;
    case KERN_OP_RPPKT:
    case KERN_OP_GSTOREPKT:
        if (n == 0 || op->n_src == 0) break;
        kern_pkt_relay(c, op, x, n);
        break;
    case KERN_OP_GSTORE:
        if (n == 0) break;
        if (kern_mc_op(c, op->type, b->a.dtype, op->redop, &src[0], &dst[0], x, n)) break;
        kern_copy_io(c, op, x, n);
        break;
    case KERN_OP_RE:
    case KERN_OP_RES:
    case KERN_OP_RRE:
    case KERN_OP_RRES:
        if (n == 0) break;
        kern_reduce_io(c, op, x, n);
        break;
    case KERN_OP_GLRES:
        if (n == 0) break;
        if (kern_mc_op(c, op->type, b->a.dtype, op->redop, &src[0], &dst[0], x, n)) break;
        kern_reduce_io(c, op, x, n);
        break;
    case KERN_OP_GLRE:
        /* unfused switch reduce: every member's copy of src[0] into the local dst[0], with no
         * multicast store (on the host and without NVLS the members are mapped pointers) */
        if (n == 0) break;
        kern_reduce_io(c, op, x, n);
        break;
    case KERN_OP_REPKT:
    case KERN_OP_RESPKT:
    case KERN_OP_RECPKT:
    case KERN_OP_RECSPKT:
        if (n == 0) break;
        kern_preduce(c, op, x, n);
        break;
    default: break; /* pipeline bodies are run by kern_run_block */
    }
}

/* ---- one block ---------------------------------------------------------------------------- */

/* every size the staging copies in 8-byte words */
typedef char kern_op_words_check[sizeof(kern_op_t) % 8 == 0 ? 1 : -1];
typedef char kern_desc_words_check[sizeof(kern_desc_t) % 8 == 0 ? 1 : -1];
typedef char kern_args_words_check[sizeof(kern_args_t) % 8 == 0 ? 1 : -1];

/*
 * Copy a block's n_ops ops, n_descs descriptors and n_ids ids into its shared memory, the
 * threads together. One loop over all three: where they fit in one word per thread (a small
 * plan's block), each thread loads once and nothing waits on a second load; three loops gave
 * a thread with a word in each three loads, each after the last one's store.
 */
KERN_FN void kern_stage(kern_smem_t *sm, const kern_op_t *ops, const kern_desc_t *descs,
                        const uint32_t *ids, uint32_t n_ops, uint32_t n_descs, uint32_t n_ids,
                        int tid, int nth)
{
    const uint64_t *so = (const uint64_t *)ops, *sd = (const uint64_t *)descs;
    uint64_t *to = (uint64_t *)sm->ops, *td = (uint64_t *)sm->descs;
    const uint32_t wo = n_ops * (uint32_t)(sizeof(kern_op_t) / 8);
    const uint32_t wd = wo + n_descs * (uint32_t)(sizeof(kern_desc_t) / 8);
    uint32_t w;
    for (w = (uint32_t)tid; w < wd + n_ids; w += (uint32_t)nth) {
        if (w < wo) to[w] = so[w];
        else if (w < wd) td[w - wo] = sd[w - wo];
        else sm->ids[w - wd] = ids[w - wd];
    }
}

/*
 * Phase trace (kern_args.h): thread 0's stamps into block `block`'s row of `trace`, out of line
 * and behind `trace != NULL`, so that a launch without a table pays a compare per point and no
 * registers. kern_trace_put stores `now` into word w (and `info`, when not 0, into its
 * KERN_TRACE_INFO word): one store per point, nothing cleared (a word older than the row's
 * entry is an earlier launch's).
 */
KERN_FN void kern_trace_put(uint64_t *trace, int block, uint32_t w, uint64_t now, uint64_t info)
{
    uint64_t *row = trace + (uint64_t)block * KERN_TRACE_WORDS;
    if ((uint32_t)block >= KERN_MAX_BLOCKS) return; /* the table has KERN_MAX_BLOCKS rows */
    row[w] = now;
    if (info) row[w + KERN_TRACE_OPS] = info;
}
KERN_BIG_FN void kern_trace_at(uint64_t *trace, uint32_t clock_khz, int block, uint32_t w)
{
    kern_trace_put(trace, block, w, kern_clock_ns(clock_khz), 0);
}
/* The end of the top-level op (a pipeline: the whole of it) that ends before index `next` of
 * the block's n ops. Found here, from the loop's index after the op, so that the loop keeps no
 * copy of the op's own index across it (that copy took gfx90a two more VGPRs; a stamp in each
 * branch of the loop took sm_90 four more registers). */
KERN_BIG_FN void kern_trace_op(uint64_t *trace, uint32_t clock_khz, int block, const kern_op_t *ops,
                               uint32_t next, uint32_t n)
{
    const uint64_t now = kern_clock_ns(clock_khz);
    uint32_t k = 0, j = 0;
    while (j < next && j < KERN_TRACE_OPS) {
        k = j;
        j += ops[j].type == KERN_OP_PIPELINE ? 1u + ops[j].n_inner : 1u;
    }
    if (j >= next)
        kern_trace_put(trace, block, KERN_TRACE_OP + k, now, KERN_TRACE_INFO_OF(k, ops[k].type, n));
}
#define KERN_TRACE_AT(a, tid, block, w)                                        \
    do {                                                                       \
        if ((a)->trace && (tid) == 0)                                          \
            kern_trace_at((a)->trace, (a)->clock_khz, (block), (uint32_t)(w)); \
    } while (0)

/*
 * Run block `block` of a launch as thread tid of nth. `sm`: the block's shared memory (GPU:
 * __shared__; host: owned by the caller); `hbar`: the host barrier of a block run by several
 * host threads, NULL otherwise. Every thread reads the plan header and its block's entry, the
 * threads copy the block's ops, descriptors and ids into sm together while thread 0 fills the
 * block's constants, then one block sync; from there on every op is decoded from sm.
 */
KERN_FN void kern_run_block(const kern_args_t *a, int block, int nblocks, int tid, int nth,
                            kern_smem_t *sm, void *hbar)
{
    kern_ctx_t c;
    kern_blk_t *b = &sm->b;
    const kern_plan_t *p = a->plan;
    const char *pb = (const char *)p;
    kern_state_t *st = a->state;
    /* Each step's words are all loaded before any is looked at, so that the start of a launch
     * is one round trip to memory (the plan's header, the block's entry and its ops, thread 0's
     * state words), not one per word: ncu on an H200 found the 8 B launch's prologue to be
     * such a chain, the checks' && ordering every load after the last. */
    /* with args.n_blocks the grid's and this block inside it, the block's entry sits at a
     * fixed offset (KERN_PLAN_BLOCKS_OFF) and is loaded with the header, not after it */
    const uint32_t nb = a->n_blocks;
    const int early = nb != 0 && nb == (uint32_t)nblocks && (uint32_t)block < nb;
    /* with the per-block layout too (args.blk_ops), so are the ops, descriptors and ids */
    const uint32_t bo = a->blk_ops, bd = a->blk_descs, bi = a->blk_ids;
    const int laid = early & (bo != 0) & (bo <= KERN_STAGE_OPS) & (bd <= KERN_STAGE_DESCS) &
                     (bi <= KERN_STAGE_IDS) & (nb <= KERN_MAX_BLOCKS);
    const uint32_t at_ops = KERN_LAYOUT_OPS_OFF(nb), at_descs = KERN_LAYOUT_DESCS_OFF(nb, bo),
                   at_ids = KERN_LAYOUT_IDS_OFF(nb, bo, bd);
    kern_block_t bk = {0, 0, 0, 0, 0, 0};
    if (early) bk = ((const kern_block_t *)(pb + KERN_PLAN_BLOCKS_OFF))[block];
    const uint32_t magic = p->magic, pnb = p->n_blocks, off_blocks = p->off_blocks;
    const uint32_t off_ops = p->off_ops, off_descs = p->off_descs, off_ids = p->off_ids;
    uint32_t smagic = 0, sflag = 0, nsems = 0;
    uint32_t off_chans = 0, off_rbufs = 0, off_switch = 0, off_members = 0;
    int64_t earlier = 0;
    int fence = 0;
    KERN_TRACE_AT(a, tid, block, KERN_TRACE_ENTRY);
    if (tid == 0) {
        /* thread 0's words too, in the same round trip: the rest of the header, the executor's
         * words (whether this launch fences) and the state's. Decided after the block sync,
         * these were two more trips with every other thread of the block waiting (ncu on an
         * H200, 1-rank 8 B: the loads of kern_fence_needed after the sync, and the header's
         * table offsets after the staging, were the longest stalls of the prologue). */
        off_chans = p->off_chans;
        off_rbufs = p->off_rbufs;
        off_switch = p->off_switch;
        off_members = p->off_members;
        fence = kern_fence_needed(a, &earlier);
        if (st) {
            smagic = st->magic;
            nsems = st->n_sems;
            sflag = kern_ld_rlx_u32(&st->flags[(uint32_t)block < KERN_MAX_BLOCKS ? block : 0]);
        }
    }
    /* staged before the header is checked: a launch it refuses never reads them (b->bad) */
    if (laid)
        kern_stage(sm, (const kern_op_t *)(pb + at_ops) + (uint32_t)block * bo,
                   (const kern_desc_t *)(pb + at_descs) + (uint32_t)block * bd,
                   (const uint32_t *)(pb + at_ids) + (uint32_t)block * bi, bo, bd, bi, tid, nth);
    /* the plan is where the layout said, and this block inside its share of the arrays */
    const int kept = (off_ops == at_ops) & (off_descs == at_descs) & (off_ids == at_ids) &
                     (bk.first_op == (uint32_t)block * bo) & (bk.n_ops <= bo) &
                     (bk.first_desc == (uint32_t)block * bd) & (bk.n_descs <= bd) &
                     (bk.first_id == (uint32_t)block * bi) & (bk.n_ids <= bi);
    const int ok = (magic == KERN_PLAN_MAGIC) & ((uint32_t)nblocks == pnb) &
                   (pnb <= KERN_MAX_BLOCKS) & (!early | (off_blocks == KERN_PLAN_BLOCKS_OFF)) &
                   (kept | !laid);
    int staged = laid;

    if (ok & !laid) {
        if (!early) bk = ((const kern_block_t *)(pb + off_blocks))[block];
        staged = bk.n_ops <= KERN_STAGE_OPS && bk.n_descs <= KERN_STAGE_DESCS &&
                 bk.n_ids <= KERN_STAGE_IDS;
        if (staged)
            kern_stage(sm, (const kern_op_t *)(pb + off_ops) + bk.first_op,
                       (const kern_desc_t *)(pb + off_descs) + bk.first_desc,
                       (const uint32_t *)(pb + off_ids) + bk.first_id, bk.n_ops, bk.n_descs,
                       bk.n_ids, tid, nth);
    }
    {
        /* the arguments word by word, shared among the threads: a struct copy by thread 0
         * loads every field at once and keeps them live (gfx90a: 16 bytes more scratch) */
        const uint64_t *aw = (const uint64_t *)a;
        uint64_t *bw = (uint64_t *)&b->a;
        uint32_t i;
        for (i = (uint32_t)tid; i < (uint32_t)(sizeof(kern_args_t) / 8); i += (uint32_t)nth)
            bw[i] = aw[i];
    }
    if (tid == 0) {
        uint32_t flag = 1;
        b->st = st;
        b->p = p;
        b->bad = !ok || !st || smagic != KERN_STATE_MAGIC;
        if (!b->bad && sflag != 0) flag = sflag;
        b->flag = flag;
        b->ops = staged ? sm->ops : (const kern_op_t *)(pb + off_ops) + bk.first_op;
        b->descs = staged ? sm->descs : (const kern_desc_t *)(pb + off_descs) + bk.first_desc;
        b->ids = staged ? sm->ids : (const uint32_t *)(pb + off_ids) + bk.first_id;
        b->n_ops = bk.n_ops;
        b->fence = fence;
        b->earlier = (int32_t)earlier;
        b->chans = (const kern_chan_t *)(pb + off_chans);
        b->rbufs = (void *const *)(pb + off_rbufs);
        /* after the semaphores, 8-byte aligned (kern_args.h) */
        b->roff = b->bad ? (uint64_t *)0
                         : (uint64_t *)((char *)(st + 1) + ((nsems * 4u + 7u) & ~7u));
        b->sw = (const kern_switch_t *)(pb + off_switch);
        b->members = (void *const *)(pb + off_members);
        b->sems = (int32_t *)(st + 1);
        b->base[0] = (char *)a->input;
        b->base[1] = (char *)a->output;
        b->base[2] = (char *)a->scratch;
        b->half = (a->double_scratch && !(flag & 1u)) ? a->scratch_half : 0;
#if defined(KERN_HOST)
        b->spin = a->host_spin;
#else
        b->spin = a->dev_spin ? a->dev_spin : BASE_WAIT_DEV_SPIN; /* 0: args not from exec_lower */
#endif
        b->block = block;
        b->hbar = hbar;
        b->tab = sm->tab;
    }
    KERN_BLOCK_SYNC(hbar);
    if (!b->bad) KERN_TRACE_AT(a, tid, block, KERN_TRACE_STAGED);

    c.b = b;
    c.tid = tid;
    c.nth = nth;
    c.op = -1;
    c.op_type = 0;
    c.iter = 0;
    c.failed = 0;
    c.fenced = 0;
    c.answer = 0;
    c.tabs = 0;
    if (b->bad) {
        if (tid == 0)
            kern_fail(&c, KERN_ERR_INVALID_ARG, KERN_WC(KERN_WAIT_PLAN, -1), -1, (uint64_t)nblocks,
                      p->n_blocks);
        return;
    }
    {
        const kern_op_t *ops = b->ops;
        const uint32_t nops = b->n_ops;
        const int32_t earlier = b->earlier;
        uint32_t i = 0;
        if (earlier != 0) {
            /* an earlier launch failed: nothing of this one runs (kern_args.h, Errors) */
            if (tid == 0)
                kern_fail(&c, (int32_t)earlier, KERN_WC(KERN_WAIT_EARLIER, -1), -1, 0,
                          (uint64_t)earlier);
            i = nops;
        }
        c.fenced = earlier == 0 && b->fence;
        if (c.fenced) kern_launch_fence(&c); /* errors: c.op stays -1 */
        KERN_TRACE_AT(a, tid, block, KERN_TRACE_FENCED);
        while (i < nops) {
            const kern_op_t *op = &ops[i];
            if (op->type == KERN_OP_PIPELINE) {
                uint32_t it, j;
                for (it = 0; it < op->n_iter; it++) {
                    c.iter = it;
                    for (j = 1; j <= op->n_inner; j++) {
                        c.op = (int)(i + j);
                        kern_exec_op(&c, &ops[i + j], (uint64_t)it * op->unit, op->unit, 1);
                    }
#if defined(KERN_HOST)
                    /* one thread per block: nobody waits on us (several: all must go on) */
                    if (nth == 1 && kern_failed(&c)) break;
#endif
                }
                c.iter = 0;
                i += 1u + op->n_inner;
            } else {
                c.op = (int)i;
                kern_exec_op(&c, op, 0, 0, 0);
                i++;
            }
            if (a->trace && tid == 0) kern_trace_op(a->trace, a->clock_khz, block, ops, i, nops);
#if defined(KERN_HOST)
            if (nth == 1 && kern_failed(&c)) break;
#endif
        }
    }

    /* a peer's fence record this launch found with another signature: answer it */
    if (c.answer) kern_fence_answer(&c);
    /* this block's flag for the next launch (ordered before it by the launch boundary) */
    KERN_SYNC(&c);
    if (tid == 0) {
        kern_st_rlx_u32(&b->st->flags[block], KERN_FLAG_NEXT(b->flag));
        /* A launch that fenced because its signature differs: its last block to finish
         * keeps this launch's signature for the next launch's fence decision (none after a
         * failure: the next launch fences). Only the last: a block that starts after another
         * ended must still see the previous launch's signature. Every other launch leaves the
         * words as they are: its signature is already there (one that fenced because the
         * executor asks at every launch, as for a plan that reaches the peers' buffers,
         * included), and a failure of it is in last_sig[KERN_EXEC_FAILED] (kern_fail_sig),
         * which fails every later launch until the executor resynchronises and clears the
         * words. Every block of a launch reads the same words (no block of it writes them),
         * so all of them count or none. So the steady state (one call shape in a loop, direct
         * plans too) ends with no counter: an acquire-release atomic at the end of every
         * multi-block launch was a GPU-scope fence, the atomic and an L1 invalidation on the
         * launch's last path (ncu on an H200, 1-rank 8 B on 4 blocks: a fifth of the launch's
         * stall samples). */
        if (a->last_sig && c.fenced && b->fence == KERN_FENCE_NEW_SIG) {
            /* one block is always the last: no counter */
            const int last =
                nblocks == 1 || kern_add_acqrel_u32(&b->st->done, 1) + 1 == (uint32_t)nblocks;
            if (last) {
                int failed = kern_failed(&c), k;
                for (k = 0; k < KERN_SIG_CMP; k++)
                    kern_st_rlx_u64(&a->last_sig[k], failed ? 0 : a->sig[k]);
                if (nblocks > 1) kern_st_rlx_u32(&b->st->done, 0);
            }
        }
        KERN_TRACE_AT(a, tid, block, KERN_TRACE_EXIT);
    }
}

#endif /* MSCCLPP_KERN_INTERP_H */
