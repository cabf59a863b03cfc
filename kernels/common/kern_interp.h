/*
 * The plan interpreter: one source for the host (gcc, C11), CUDA (nvcc) and HIP (hipcc).
 * Included once by each backend's entry file (kernels/host/kern_host.c,
 * kernels/cuda/kern_cuda.cu, kernels/hip/kern_hip.hip), which calls kern_run_block().
 *
 * C subset valid as C11 and CUDA/HIP C++: no templates, no function pointers, no flexible
 * arrays; the per-(dtype, op) reduce loops are generated with the X-macros of kern_dtype.h.
 * Semantics: plan-format §2 with the intended behaviour of plan-format §10; layout of
 * the arguments and packets: kern_args.h.
 */
#ifndef MSCCLPP_KERN_INTERP_H
#define MSCCLPP_KERN_INTERP_H

#include "kernels/common/kern_args.h"
#include "kernels/common/kern_port.h"
#include "kernels/common/kern_dtype.h"

#define KERN_ERR_INVALID_ARG (-1) /* MSCCLPP_ERR_INVALID_ARG */
#define KERN_ERR_TIMEOUT (-6)     /* MSCCLPP_ERR_TIMEOUT */
#define KERN_ERR_ABORTED (-9)     /* MSCCLPP_ERR_ABORTED */

typedef struct {
    const kern_args_t *a;
    kern_state_t *st;
    const kern_desc_t *descs;
    const uint32_t *ids;
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
    int block, tid, nth;
    int op;           /* index of the running op in its block, for errors */
    uint32_t op_type; /* its KERN_OP_* */
    uint32_t iter;    /* pipeline iteration */
    int fenced;       /* this launch ran the launch fence (kern_args.h, "Launch fence") */
    int answer;       /* this thread found a peer's fence record it must answer */
} kern_ctx_t;

/* ---- errors and bounded waits ------------------------------------------------------------- */

KERN_FN int kern_failed(const kern_ctx_t *c) { return kern_ld_rlx_i32(&c->st->err.code) != 0; }

/* Record the launch's first error; later ones are dropped. `psig`: a peer's call signature
 * (KERN_WAIT_MISMATCH), recorded with this launch's, or NULL. */
KERN_FN void kern_fail_sig(kern_ctx_t *c, int32_t code, uint32_t what, int32_t chan, int32_t peer,
                           uint64_t expected, uint64_t seen, const uint64_t *psig)
{
    kern_error_t *e = &c->st->err;
    int k;
    if (!kern_cas_acqrel_i32(&e->code, 0, code)) return;
    for (k = 0; k < KERN_SIG_WORDS; k++) {
        e->sig[k] = c->a->sig[k]; /* the host reads the rank rotation from it */
        e->peer_sig[k] = psig ? psig[k] : 0;
    }
    /* the launches queued behind this one fail at once (kern_args.h, Errors) */
    if (c->a->last_sig && what != KERN_WAIT_EARLIER)
        kern_st_rlx_u64(&c->a->last_sig[KERN_EXEC_FAILED], (uint64_t)(int64_t)code);
    e->rank = c->a->rank;
    e->block = c->block;
    e->op = c->op;
    e->op_type = (int32_t)c->op_type;
    e->channel = chan;
    e->peer = peer;
    e->iter = c->iter;
    e->flag = c->flag;
    e->what = what;
    e->expected = expected;
    e->seen = seen;
    kern_fence_sys();
    if (c->a->mailbox) {
        /* the host reads this without a device sync: every field, a fence, then the code */
        volatile kern_error_t *m = c->a->mailbox;
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

KERN_FN void kern_fail(kern_ctx_t *c, int32_t code, uint32_t what, int32_t chan, int32_t peer,
                       uint64_t expected, uint64_t seen)
{
    kern_fail_sig(c, code, what, chan, peer, expected, seen, (const uint64_t *)0);
}

/* ---- fence records (kern_args.h, "Launch fence") ------------------------------------------ */

/* My counter slot of fence channel `fid` (memory or port): where the peer writes its records. */
KERN_FN const uint64_t *kern_fence_slot(const kern_ctx_t *c, uint32_t fid)
{
    const kern_plan_t *p = c->a->plan;
    const kern_chan_t *ports = (const kern_chan_t *)((const char *)p + p->off_ports);
    if (fid & KERN_FENCE_PORT) return ports[fid & ~KERN_FENCE_PORT].inbound;
    return c->chans[fid].inbound;
}

KERN_FN int32_t kern_fence_peer(const kern_ctx_t *c, uint32_t fid)
{
    const kern_plan_t *p = c->a->plan;
    const kern_chan_t *ports = (const kern_chan_t *)((const char *)p + p->off_ports);
    if (fid & KERN_FENCE_PORT) return ports[fid & ~KERN_FENCE_PORT].peer;
    return c->chans[fid].peer;
}

/*
 * Read the peer's record in `slot` if it is `want` (kind and this launch's flag): 1 and its
 * signature in sig; 0 if it is not there (yet). The writer clears the record word, writes the
 * signature, then the record word: a record word that changed while the signature was read
 * means the peer has moved on to a later record, 2: it got past its fence of this launch, so
 * it found our signatures equal (a rank whose launch failed writes no more records).
 */
KERN_FN int kern_rec_read(const uint64_t *slot, uint64_t want, uint64_t *sig)
{
    int k;
    if (kern_ld_acq_u64(slot + KERN_REC_WORD) != want) return 0;
    for (k = 0; k < KERN_SIG_WORDS; k++) sig[k] = kern_ld_rlx_u64(slot + KERN_REC_SIG + k);
    kern_fence_sys();
    return kern_ld_rlx_u64(slot + KERN_REC_WORD) == want ? 1 : 2;
}

KERN_FN int kern_sig_differs(const kern_ctx_t *c, const uint64_t *sig)
{
    int k;
    for (k = 0; k < KERN_SIG_CMP; k++)
        if (sig[k] != c->a->sig[k]) return 1;
    return 0;
}

/* A peer's record of this launch that asks for an answer (its fence, or its host's setup
 * announcement) in `slot`: 1 and the record word in *rec, its signature in sig. */
KERN_FN int kern_rec_asks(const kern_ctx_t *c, const uint64_t *slot, uint64_t *rec, uint64_t *sig)
{
    *rec = KERN_REC(KERN_REC_FENCE, c->flag);
    if (kern_rec_read(slot, *rec, sig) == 1) return 1;
    *rec = KERN_REC(KERN_REC_SETUP, c->flag);
    return kern_rec_read(slot, *rec, sig) == 1;
}

/*
 * The side of a disagreement that did not fence (see Launch fence): called by waits as they
 * poll. A peer's record of this launch with another signature fails the launch (c->answer:
 * answer it when the block ends, kern_fence_answer). Returns 1 then.
 */
KERN_FN int kern_fence_poll(kern_ctx_t *c)
{
    const kern_plan_t *p = c->a->plan;
    const uint32_t *ids = (const uint32_t *)((const char *)p + p->off_fence);
    uint64_t rec, sig[KERN_SIG_WORDS];
    uint32_t i;
    for (i = 0; i < p->n_fence; i++) {
        if (!kern_rec_asks(c, kern_fence_slot(c, ids[i]), &rec, sig) || !kern_sig_differs(c, sig))
            continue;
        c->answer = 1;
        kern_fail_sig(c, KERN_ERR_INVALID_ARG, KERN_WAIT_MISMATCH, (int32_t)(ids[i] & 1023u),
                      kern_fence_peer(c, ids[i]), c->flag, rec, sig);
        return 1;
    }
    return 0;
}

typedef struct {
    uint32_t n;
    uint64_t t0;
    uint64_t slack; /* ns added to the launch's bound (0 in the usual {0, 0} initialiser) */
} kern_spin_t;

/*
 * Called between two polls of a wait. Returns nonzero when the waiter must give up: another
 * block recorded an error, the communicator was aborted (recorded here), this rank's proxy
 * failed (a wait on a live peer, say a memory-channel
 * signal from a node-mate, would otherwise sit out the whole timeout while the culprit is the
 * dead peer the proxy names; recorded with channel -1), or this wait passed the timeout
 * (recorded here).
 */
KERN_FN int kern_spin_poll(kern_ctx_t *c, kern_spin_t *s, uint32_t what, int32_t chan,
                           int32_t peer, uint64_t expected, uint64_t seen)
{
    uint32_t n = s->n++;
    if (KERN_CHECK_EVERY(c->spin, n)) {
        uint64_t now;
        const kern_fifo_t *f = c->a->plan->fifo;
        if (kern_failed(c)) return 1;
        if (c->a->abort && kern_ld_acq_u64(c->a->abort) != 0) {
            kern_fail(c, KERN_ERR_ABORTED, what, chan, peer, expected, seen);
            return 1;
        }
        if (!c->fenced && c->a->last_sig && kern_fence_poll(c)) return 1;
        if (f && what != KERN_WAIT_PROXY) {
            int32_t e = (int32_t)(int64_t)kern_ld_acq_u64(&f->err);
            if (e != 0) {
                kern_fail(c, e, KERN_WAIT_PROXY, -1, peer, expected, seen);
                return 1;
            }
        }
        now = kern_clock_ns(c->a->clock_khz);
        if (s->t0 == 0) {
            s->t0 = now;
        } else if (now - s->t0 > c->a->timeout_ns + s->slack) {
            kern_fail(c, KERN_ERR_TIMEOUT, what, chan, peer, expected, seen);
            return 1;
        }
    }
    kern_backoff(n, c->spin);
    return 0;
}

/* ---- addressing --------------------------------------------------------------------------- */

/* Address of byte x (payload bytes) of descriptor d; packet images are at twice the offset. */
KERN_FN char *kern_ptr(const kern_ctx_t *c, const kern_desc_t *d, uint64_t x)
{
    uint64_t o = d->off + x;
    char *b = d->loc < KERN_LOC_REMOTE    ? c->base[d->loc]
              : d->loc == KERN_LOC_REMOTE ? (char *)c->rbufs[d->idx] + c->roff[d->idx]
                                          : (char *)c->rbufs[d->idx];
    if (d->flags & KERN_DESC_PACKET) o *= 2;
    if (d->flags & KERN_DESC_SCRATCH) o += c->half;
    return b + o;
}

/* Same for member m of a switch descriptor. */
KERN_FN char *kern_member_ptr(const kern_ctx_t *c, const kern_desc_t *d, uint32_t m, uint64_t x)
{
    const kern_switch_t *s = &c->sw[d->idx];
    uint64_t o = d->off + x;
    if (d->flags & KERN_DESC_PACKET) o *= 2;
    if (d->flags & KERN_DESC_SCRATCH) o += c->half;
    return (char *)c->members[s->first_member + m] + o;
}

/* ---- plain copies ------------------------------------------------------------------------- */

#if !defined(KERN_HOST)
typedef struct {
    uint64_t x, y;
} __attribute__((aligned(16))) kern_v16_t;
#endif

KERN_FN void kern_copy(const kern_ctx_t *c, char *dst, const char *src, uint64_t n)
{
    if (n == 0 || dst == src) return;
#if defined(KERN_HOST)
    (void)c;
    memmove(dst, src, (size_t)n);
#else
    {
        uint64_t i, done = 0;
        if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
            uint64_t nv = n / 16;
            const kern_v16_t *s = (const kern_v16_t *)src;
            kern_v16_t *d = (kern_v16_t *)dst;
            for (i = (uint64_t)c->tid; i < nv; i += (uint64_t)c->nth) d[i] = s[i];
            done = nv * 16;
        } else if ((((uintptr_t)dst | (uintptr_t)src) & 3) == 0) {
            uint64_t nw = n / 4;
            const uint32_t *s = (const uint32_t *)src;
            uint32_t *d = (uint32_t *)dst;
            for (i = (uint64_t)c->tid; i < nw; i += (uint64_t)c->nth) d[i] = s[i];
            done = nw * 4;
        }
        for (i = done + (uint64_t)c->tid; i < n; i += (uint64_t)c->nth) dst[i] = src[i];
    }
#endif
}

/* ---- reductions (plain) ------------------------------------------------------------------- */

/* dst[0..nd) <- src[0] op src[1] op ... over ne elements; dst may alias a source. */
#define KERN_GEN_RED(DT, ST, AT, UT, LOAD, STORE, OP)                                          \
    KERN_BIG_FN void kern_red_##DT##_##OP(char *const *src, int ns, char *const *dst, int nd,      \
                                      uint64_t ne, int tid, int nth)                           \
    {                                                                                          \
        uint64_t base;                                                                         \
        for (base = (uint64_t)tid * KERN_TILE; base < ne; base += (uint64_t)nth * KERN_TILE) { \
            AT acc[KERN_TILE];                                                                 \
            uint32_t m = ne - base < KERN_TILE ? (uint32_t)(ne - base) : KERN_TILE;            \
            uint32_t j;                                                                        \
            int k;                                                                             \
            const ST *s = (const ST *)src[0] + base;                                           \
            for (j = 0; j < m; j++) acc[j] = LOAD(s[j]);                                       \
            for (k = 1; k < ns; k++) {                                                         \
                s = (const ST *)src[k] + base;                                                 \
                for (j = 0; j < m; j++) acc[j] = KERN_RED_OP_##OP(AT, UT, acc[j], LOAD(s[j])); \
            }                                                                                  \
            for (k = 0; k < nd; k++) {                                                         \
                ST *d = (ST *)dst[k] + base;                                                   \
                for (j = 0; j < m; j++) d[j] = STORE(acc[j]);                                  \
            }                                                                                  \
        }                                                                                      \
    }
#define KERN_GEN_RED_DT(DT, ST, AT, UT, LOAD, STORE) \
    KERN_FOR_OPS(KERN_GEN_RED, DT, ST, AT, UT, LOAD, STORE)
KERN_DTYPE_LIST(KERN_GEN_RED_DT)

KERN_FN void kern_reduce(const kern_ctx_t *c, uint32_t dt, uint32_t op, char *const *src, int ns,
                         char *const *dst, int nd, uint64_t n)
{
    uint64_t ne = n / kern_dtype_size(dt);
    if (ne == 0 || ns == 0) return;
    switch (dt * 4 + op) {
#define KERN_CASE_RED(DT, ST, AT, UT, LOAD, STORE, OP)                                         \
    case KERN_DT_##DT * 4 + KERN_RED_##OP:                                                     \
        kern_red_##DT##_##OP(src, ns, dst, nd, ne, c->tid, c->nth);                            \
        break;
#define KERN_CASE_RED_DT(DT, ST, AT, UT, LOAD, STORE) \
    KERN_FOR_OPS(KERN_CASE_RED, DT, ST, AT, UT, LOAD, STORE)
        KERN_DTYPE_LIST(KERN_CASE_RED_DT)
#undef KERN_CASE_RED
#undef KERN_CASE_RED_DT
    default: break;
    }
}

/* ---- LL packets --------------------------------------------------------------------------- */

/* Payload word j (4 bytes, zero padded past n) of plain data at p. */
KERN_FN uint32_t kern_word(const char *p, uint64_t j, uint64_t n)
{
    uint32_t w = 0;
    if (4 * j + 4 <= n)
        w = *(const uint32_t *)(p + 4 * j);
    else
        kern_memcpy(&w, p + 4 * j, n - 4 * j);
    return w;
}

KERN_FN void kern_store_word(char *p, uint64_t j, uint64_t n, uint32_t w)
{
    if (4 * j + 4 <= n)
        *(uint32_t *)(p + 4 * j) = w;
    else
        kern_memcpy(p + 4 * j, &w, n - 4 * j);
}

KERN_FN uint64_t kern_unit(const kern_ctx_t *c, uint32_t w)
{
    return ((uint64_t)c->flag << 32) | (uint64_t)w;
}

/* Rank whose ops write the packets descriptor d reads (the lowering's guess), -1 if none. */
#define KERN_WRITER(d) ((int32_t)(d)->writer - 1)

/* Spin until packet unit u carries this launch's flag; 0 and its payload, or 1 on failure.
 * `peer`: the rank expected to write it (KERN_WRITER), recorded if the wait times out. */
KERN_FN int kern_pkt_get(kern_ctx_t *c, const uint64_t *u, uint32_t *w, int32_t peer)
{
    uint64_t v = kern_ld_pkt(u);
    if ((uint32_t)(v >> 32) != c->flag) {
        kern_spin_t s = {0, 0};
        do {
            if (kern_spin_poll(c, &s, KERN_WAIT_PACKET, -1, peer, c->flag, v >> 32)) return 1;
            v = kern_ld_pkt(u);
        } while ((uint32_t)(v >> 32) != c->flag);
    }
    *w = (uint32_t)v;
    return 0;
}

/* cpkt / ppkt: n payload bytes of plain src -> packet image img. */
KERN_FN void kern_pkt_put(const kern_ctx_t *c, char *img, const char *src, uint64_t n)
{
    uint64_t nw = (n + 3) / 4, j;
    uint64_t *u = (uint64_t *)img;
    for (j = (uint64_t)c->tid; j < nw; j += (uint64_t)c->nth)
        kern_st_pkt(u + j, kern_unit(c, kern_word(src, j, n)));
}

/* upkt: packet image img -> n bytes of plain dst. */
KERN_FN void kern_pkt_unpack(kern_ctx_t *c, char *dst, const char *img, uint64_t n,
                             int32_t peer)
{
    uint64_t nw = (n + 3) / 4, j;
    const uint64_t *u = (const uint64_t *)img;
    for (j = (uint64_t)c->tid; j < nw; j += (uint64_t)c->nth) {
        uint32_t w;
        if (kern_pkt_get(c, u + j, &w, peer)) return;
        kern_store_word(dst, j, n, w);
    }
}

/* rppkt / gstorepkt: packets of img, once they arrived, re-sent to every destination image. */
KERN_FN void kern_pkt_relay(kern_ctx_t *c, const char *img, char *const *dst, int nd, uint64_t n,
                            int32_t peer)
{
    uint64_t nw = (n + 3) / 4, j;
    const uint64_t *u = (const uint64_t *)img;
    for (j = (uint64_t)c->tid; j < nw; j += (uint64_t)c->nth) {
        uint32_t w;
        int k;
        if (kern_pkt_get(c, u + j, &w, peer)) return;
        for (k = 0; k < nd; k++) kern_st_pkt((uint64_t *)dst[k] + j, kern_unit(c, w));
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
 * Packet reductions (repkt, respkt, recpkt, recspkt), 8 payload bytes (two units) at a time:
 * src[0] is plain, src[1..ns) packet images; destination k is a packet image when
 * dd[k].flags has KERN_DESC_PACKET, else plain (flags, not a bit mask: a reduce may have more
 * than 32 destinations). Returns nonzero if a packet wait failed.
 */
#define KERN_GEN_PRED(DT, ST, AT, UT, LOAD, STORE)                                             \
    KERN_BIG_FN int kern_pred_##DT(kern_ctx_t *c, uint32_t op, char *const *src, int ns,       \
                                   const kern_desc_t *sd, char *const *dst, int nd,            \
                                   const kern_desc_t *dd, uint64_t n)                          \
    {                                                                                          \
        uint64_t ng = (n + 7) / 8, g;                                                          \
        for (g = (uint64_t)c->tid; g < ng; g += (uint64_t)c->nth) {                            \
            union {                                                                            \
                uint32_t w[2];                                                                 \
                ST e[8 / sizeof(ST)];                                                          \
            } v;                                                                               \
            AT acc[8 / sizeof(ST)];                                                            \
            uint64_t rest = n - 8 * g;                                                         \
            uint32_t nb = rest < 8 ? (uint32_t)rest : 8;                                       \
            uint32_t nw = (nb + 3) / 4, j;                                                     \
            int k;                                                                             \
            /* whole 8-byte groups: padding past n is reduced too and never stored */          \
            for (j = 0; j < 2; j++) v.w[j] = j < nw ? kern_word(src[0], 2 * g + j, n) : 0;     \
            for (j = 0; j < 8 / sizeof(ST); j++) acc[j] = LOAD(v.e[j]);                        \
            for (k = 1; k < ns; k++) {                                                         \
                const uint64_t *u = (const uint64_t *)src[k] + 2 * g;                          \
                v.w[1] = 0;                                                                    \
                for (j = 0; j < nw; j++)                                                       \
                    if (kern_pkt_get(c, u + j, &v.w[j], KERN_WRITER(&sd[k]))) return 1;        \
                for (j = 0; j < 8 / sizeof(ST); j++)                                           \
                    acc[j] = kern_op_##DT(op, acc[j], LOAD(v.e[j]));                           \
            }                                                                                  \
            for (j = 0; j < 8 / sizeof(ST); j++) v.e[j] = STORE(acc[j]);                       \
            for (k = 0; k < nd; k++) {                                                         \
                if (dd[k].flags & KERN_DESC_PACKET) {                                          \
                    uint64_t *u = (uint64_t *)dst[k] + 2 * g;                                  \
                    for (j = 0; j < nw; j++) kern_st_pkt(u + j, kern_unit(c, v.w[j]));         \
                } else {                                                                       \
                    for (j = 0; j < nw; j++) kern_store_word(dst[k], 2 * g + j, n, v.w[j]);    \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        return 0;                                                                              \
    }
KERN_DTYPE_LIST(KERN_GEN_PRED)

KERN_FN void kern_preduce(kern_ctx_t *c, uint32_t dt, uint32_t op, char *const *src, int ns,
                          const kern_desc_t *sd, char *const *dst, int nd, const kern_desc_t *dd,
                          uint64_t n)
{
    if (n == 0) return;
    switch (dt) {
#define KERN_CASE_PRED(DT, ST, AT, UT, LOAD, STORE)                                            \
    case KERN_DT_##DT: (void)kern_pred_##DT(c, op, src, ns, sd, dst, nd, dd, n); break;
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
KERN_FN int kern_mc_op(const kern_ctx_t *c, uint32_t type, uint32_t dt, uint32_t op,
                       const kern_desc_t *src, const kern_desc_t *dst, uint64_t x, uint64_t n)
{
#if defined(KERN_CUDA) && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
    const kern_switch_t *ds = &c->sw[dst->idx];
    uint64_t i, nv = n / 16;
    char *dp, *sp;
    if (!ds->mc) return 0;
    dp = (char *)ds->mc + dst->off + x + ((dst->flags & KERN_DESC_SCRATCH) ? c->half : 0);
    if (type == KERN_OP_GLRES) {
        const kern_switch_t *ss = &c->sw[src->idx];
        if (!ss->mc || op != KERN_RED_SUM ||
            (dt != KERN_DT_F32 && dt != KERN_DT_F16 && dt != KERN_DT_BF16))
            return 0;
        sp = (char *)ss->mc + src->off + x + ((src->flags & KERN_DESC_SCRATCH) ? c->half : 0);
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

KERN_FN void kern_wait_chan(kern_ctx_t *c, uint32_t id, int relaxed)
{
    const kern_chan_t *ch = &c->chans[id];
    uint64_t exp = kern_add_rlx_dev_u64(ch->expected, 1) + 1;
    uint64_t v = relaxed ? kern_ld_rlx_u64(ch->inbound) : kern_ld_acq_u64(ch->inbound);
    kern_spin_t s = {0, 0};
    while (v < exp) {
        if (kern_spin_poll(c, &s, KERN_WAIT_SIGNAL, (int32_t)id, ch->peer, exp, v)) return;
        v = relaxed ? kern_ld_rlx_u64(ch->inbound) : kern_ld_acq_u64(ch->inbound);
    }
}

/* Grid barrier of `nblocks` blocks on a reusable syncer (count + generation). */
KERN_FN void kern_barrier(kern_ctx_t *c, uint32_t id, uint32_t nblocks)
{
    KERN_SYNC();
    if (nblocks > 1 && c->tid == 0 && !kern_failed(c)) {
        kern_syncer_t *s = &c->st->barrier[id];
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
    KERN_SYNC();
}

KERN_FN void kern_sem_acquire(kern_ctx_t *c, uint32_t id)
{
    int32_t *p = &c->sems[id];
    kern_spin_t s = {0, 0};
    for (;;) {
        int32_t v = kern_ld_acq_i32(p);
        if (v > 0 && kern_cas_acqrel_i32(p, v, v - 1)) return;
        if (v <= 0 && kern_spin_poll(c, &s, KERN_WAIT_SEMAPHORE, (int32_t)id, -1, 1, (uint64_t)v))
            return;
    }
}

/* ---- port channels: triggers into the proxy FIFO ----------------------------------------- */

KERN_FN const kern_plan_t *kern_plan_of(const kern_ctx_t *c) { return c->a->plan; }

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
KERN_FN int kern_port_until(kern_ctx_t *c, uint64_t pos, int32_t chan, int32_t peer)
{
    kern_fifo_t *f = kern_plan_of(c)->fifo;
    kern_spin_t s = {0, 0};
    uint64_t t = kern_ld_acq_u64(&f->tail);
    while (t <= pos) {
        int32_t e = kern_proxy_err(f);
        if (e != 0) {
            kern_fail(c, e, KERN_WAIT_PROXY, chan, peer, pos + 1, t);
            return 1;
        }
        if (kern_spin_poll(c, &s, KERN_WAIT_PROXY, chan, peer, pos + 1, t)) return 1;
        t = kern_ld_acq_u64(&f->tail);
    }
    /* The proxy passes a trigger it failed on (and drops every later one), and it publishes
     * its error before its tail: a flush whose put failed must fail, not pass. */
    int32_t e = kern_proxy_err(f);
    if (e != 0) {
        kern_fail(c, e, KERN_WAIT_PROXY, chan, peer, pos + 1, t);
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

/* One port data op entry: put `n` bytes of local src (at x) to the peer's dst (at x). */
KERN_FN void kern_port_put(kern_ctx_t *c, uint32_t type, uint32_t chan, const kern_desc_t *src,
                           const kern_desc_t *dst, uint64_t x, uint64_t n)
{
    const kern_plan_t *p = kern_plan_of(c);
    const kern_chan_t *ch = (const kern_chan_t *)((const char *)p + p->off_ports) + chan;
    const uint64_t *pb = (const uint64_t *)((const char *)p + p->off_pbufs);
    uint32_t bits = KERN_TRIG_DATA;
    uint64_t so = (uint64_t)(kern_ptr(c, src, x) - (char *)p->lbase[src->loc]);
    uint64_t o = dst->off + x, pos;
    if (dst->flags & KERN_DESC_PACKET) o *= 2;
    if (dst->flags & KERN_DESC_SCRATCH) o += c->half;
    o += pb[dst->idx];
    if (type == KERN_OP_PWS || type == KERN_OP_PWSF) bits |= KERN_TRIG_SIGNAL;
    if (type == KERN_OP_PWSF) bits |= KERN_TRIG_FLUSH;
    pos = kern_port_push(c, (n & 0xffffffffull) | (so << 32),
                         (o & 0xffffffffull) | ((uint64_t)chan << 32) |
                             ((uint64_t)dst->idx << 42) | ((uint64_t)src->loc << 52) |
                             ((uint64_t)bits << 54),
                         (int32_t)chan, ch->peer);
    if (pos != ~0ull && (bits & KERN_TRIG_FLUSH)) kern_port_until(c, pos, (int32_t)chan, ch->peer);
}

/*
 * Port ppkt / rppkt (spec §2.5): the source is already a packet image (rppkt: packets that
 * arrived in my scratch; ppkt: packets this rank formatted, e.g. by cpkt). The thread that
 * triggers the put first waits until every unit of the image carries this launch's flag, so the
 * proxy never ships a half-arrived image, then one proxy put moves the image's bytes verbatim
 * into the peer's scratch, where the reader polls the flags as for memory-channel packets. The
 * waiting thread scans the whole image itself rather than sharing it with a block sync: a sync
 * inside an op would pair with the wrong barrier on threads that saw a failure and left early.
 */
KERN_FN void kern_port_pkt(kern_ctx_t *c, uint32_t chan, const kern_desc_t *src,
                           const kern_desc_t *dst, uint64_t x, uint64_t n)
{
    uint64_t nw = (n + 3) / 4, j;
    const uint64_t *u = (const uint64_t *)kern_ptr(c, src, x);
    for (j = 0; j < nw; j++) {
        uint32_t w;
        if (kern_pkt_get(c, u + j, &w, KERN_WRITER(src))) return;
    }
    /* 8 image bytes per 4 payload bytes: kern_port_put doubles the packet offsets itself */
    kern_port_put(c, KERN_OP_PUT, chan, src, dst, x, 8 * nw);
}

/* signal / flush on port channel `chan` */
KERN_FN void kern_port_ctl(kern_ctx_t *c, uint32_t bits, uint32_t chan)
{
    const kern_plan_t *p = kern_plan_of(c);
    const kern_chan_t *ch = (const kern_chan_t *)((const char *)p + p->off_ports) + chan;
    uint64_t pos = kern_port_push(c, 0, ((uint64_t)chan << 32) | ((uint64_t)bits << 54),
                                  (int32_t)chan, ch->peer);
    if (pos != ~0ull && (bits & KERN_TRIG_FLUSH)) kern_port_until(c, pos, (int32_t)chan, ch->peer);
}

/* wait on port channel `chan`: its inbound counter is set by the peer's proxy */
KERN_FN void kern_port_wait(kern_ctx_t *c, uint32_t chan)
{
    const kern_plan_t *p = kern_plan_of(c);
    const kern_chan_t *ch = (const kern_chan_t *)((const char *)p + p->off_ports) + chan;
    uint64_t exp = kern_add_rlx_dev_u64(ch->expected, 1) + 1;
    uint64_t v = kern_ld_acq_u64(ch->inbound);
    kern_spin_t s = {0, 0};
    while (v < exp) {
        int32_t e = kern_proxy_err(p->fifo);
        if (e != 0) {
            kern_fail(c, e, KERN_WAIT_PROXY, (int32_t)chan, ch->peer, exp, v);
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
    uint64_t rec = KERN_REC(kind, c->flag);
    int k;
    if (fid & KERN_FENCE_PORT) {
        /* through the proxy: word triggers, stored at the peer in order (transport.h) */
        const kern_plan_t *p = kern_plan_of(c);
        uint32_t id = fid & ~KERN_FENCE_PORT;
        const kern_chan_t *ch = (const kern_chan_t *)((const char *)p + p->off_ports) + id;
        uint64_t snd = ((uint64_t)id << 32) | KERN_TRIG_WORD;
        if (kern_port_push(c, 0, snd | KERN_REC_WORD, (int32_t)id, ch->peer) == ~0ull) return;
        for (k = 0; k < KERN_SIG_WORDS; k++)
            if (kern_port_push(c, c->a->sig[k], snd | (uint64_t)(KERN_REC_SIG + k), (int32_t)id,
                               ch->peer) == ~0ull)
                return;
        (void)kern_port_push(c, rec, snd | KERN_REC_WORD, (int32_t)id, ch->peer);
        return;
    }
    {
        uint64_t *slot = c->chans[fid].remote;
        kern_st_rlx_u64(slot + KERN_REC_WORD, 0);
        kern_fence_sys();
        for (k = 0; k < KERN_SIG_WORDS; k++) kern_st_rlx_u64(slot + KERN_REC_SIG + k, c->a->sig[k]);
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
    uint64_t fence = KERN_REC(KERN_REC_FENCE, c->flag), answer = KERN_REC(KERN_REC_ANSWER, c->flag);
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
        if (w != 0 && (int32_t)((uint32_t)w - c->flag) > 0) {
            got = 2;
            break;
        }
        if (kern_spin_poll(c, &s, KERN_WAIT_FENCE, (int32_t)(fid & 1023u), peer, fence,
                           kern_ld_rlx_u64(slot + KERN_REC_WORD)))
            return;
    }
    if (got == 1 && kern_sig_differs(c, sig))
        kern_fail_sig(c, KERN_ERR_INVALID_ARG, KERN_WAIT_MISMATCH, (int32_t)(fid & 1023u), peer,
                      c->flag, rec, sig);
}

KERN_FN void kern_launch_fence(kern_ctx_t *c)
{
    const kern_plan_t *p = kern_plan_of(c);
    const uint32_t *ids = (const uint32_t *)((const char *)p + p->off_fence);
    const uint32_t *rpub = (const uint32_t *)((const char *)p + p->off_rpub);
    /* first of this launch's two offset words in a counter slot (kern_args.h) */
    const uint32_t par = (c->flag & 1u) ? KERN_SLOT_OFF_ODD : KERN_SLOT_OFF_EVEN;
    uint32_t i;
    if (c->block == 0) {
        for (i = c->tid; i < p->n_fence && !kern_failed(c); i += c->nth) {
            if (!(ids[i] & KERN_FENCE_PORT)) {
                /* this call's offsets first: the record's store publishes them */
                uint64_t *slot = c->chans[ids[i]].remote;
                kern_st_rlx_u64(slot + par, c->a->io_off[0]);
                kern_st_rlx_u64(slot + par + 1, c->a->io_off[1]);
            }
            kern_rec_write(c, ids[i], KERN_REC_FENCE);
        }
        for (i = c->tid; i < p->n_fence && !kern_failed(c); i += c->nth) kern_fence_wait(c, ids[i]);
        KERN_SYNC();
        /* the owners' offsets of this launch, out of this rank's counter slots */
        for (i = c->tid; i < p->n_rbufs && !kern_failed(c); i += c->nth) {
            uint32_t pub = rpub[i];
            if (pub == KERN_RPUB_NONE) continue;
            c->roff[i] = kern_ld_acq_u64(c->chans[pub & ~KERN_RPUB_OUT].inbound + par +
                                         ((pub & KERN_RPUB_OUT) ? 1u : 0u));
        }
        KERN_SYNC();
        if (c->tid == 0) kern_st_rel_u32(&c->st->fenced, c->flag);
    } else {
        if (c->tid == 0) {
            /* twice block 0's bound: its own wait times out first and names the peer */
            kern_spin_t s = {0, 0, c->a->timeout_ns};
            uint32_t v = kern_ld_acq_u32(&c->st->fenced);
            while (v != c->flag) {
                if (kern_spin_poll(c, &s, KERN_WAIT_FENCE, -1, -1, c->flag, v)) break;
                v = kern_ld_acq_u32(&c->st->fenced);
            }
        }
        KERN_SYNC();
    }
}

/* After a launch that did not fence found a peer's record with another signature: answer
 * every such record with ours, so that those peers fail at once, naming the disagreement. */
KERN_FN void kern_fence_answer(kern_ctx_t *c)
{
    const kern_plan_t *p = kern_plan_of(c);
    const uint32_t *ids = (const uint32_t *)((const char *)p + p->off_fence);
    uint64_t rec, sig[KERN_SIG_WORDS];
    uint32_t i;
    for (i = 0; i < p->n_fence; i++)
        if (kern_rec_asks(c, kern_fence_slot(c, ids[i]), &rec, sig))
            kern_rec_write(c, ids[i], KERN_REC_ANSWER);
}

/* Whether this launch fences: forced, or its signature differs from the previous launch's. */
KERN_FN int kern_fence_needed(const kern_args_t *a)
{
    int k;
    if (a->fence) return 1;
    if (!a->last_sig) return 0;
    for (k = 0; k < KERN_SIG_CMP; k++)
        if (kern_ld_rlx_u64(&a->last_sig[k]) != a->sig[k]) return 1;
    return 0;
}

/* ---- one op ------------------------------------------------------------------------------- */

KERN_BIG_FN void kern_exec_op(kern_ctx_t *c, const kern_op_t *op, uint64_t x, uint64_t unit,
                          int piped)
{
    const kern_desc_t *src = c->descs + op->desc;
    const kern_desc_t *dst = src + op->n_src;
    const uint32_t *ids = c->ids + op->ids;
    uint64_t n = op->len;
    int i, k;
    int tid = c->tid, nth = c->nth;

    c->op_type = op->type;
    if (piped) {
        n = n > x ? n - x : 0; /* clamp at 0 (P14) */
        if (n > unit) n = unit;
    } else {
        x = 0;
    }
    /* block syncs run even after a failure, so that every thread meets the same barriers */
    if (op->type == KERN_OP_NOP) {
        KERN_SYNC();
        return;
    }
    if (op->type == KERN_OP_BARRIER) {
        kern_barrier(c, op->barrier_id, op->barrier_nblocks);
        return;
    }
    if (kern_failed(c)) return;

    if (op->port) {
        /* port channels (spec §2.3, §2.4): thread i serves channel / destination i */
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
        case KERN_OP_PUT:
        case KERN_OP_PWS:
        case KERN_OP_PWSF:
            if (op->n_src == 0) break;
            for (k = tid; k < op->n_dst && k < op->n_ids; k += nth)
                kern_port_put(c, op->type, ids[k], &src[k < op->n_src ? k : op->n_src - 1],
                              &dst[k], x, n);
            break;
        case KERN_OP_PPKT:
        case KERN_OP_RPPKT:
            if (op->n_src == 0 || n == 0) break;
            for (k = tid; k < op->n_dst && k < op->n_ids; k += nth)
                kern_port_pkt(c, ids[k], &src[k < op->n_src ? k : op->n_src - 1], &dst[k], x, n);
            break;
        default: break; /* the lowering refuses other port ops */
        }
        return;
    }

    switch (op->type) {
    case KERN_OP_SIGNAL:
        for (i = tid; i < op->n_ids; i += nth) kern_add_rel_sys_u64(c->chans[ids[i]].remote, 1);
        break;
    case KERN_OP_RLXSIGNAL:
        for (i = tid; i < op->n_ids; i += nth) kern_add_rlx_sys_u64(c->chans[ids[i]].remote, 1);
        break;
    case KERN_OP_WAIT:
        for (i = tid; i < op->n_ids; i += nth) kern_wait_chan(c, ids[i], 0);
        break;
    case KERN_OP_RLXWAIT:
        for (i = tid; i < op->n_ids; i += nth) kern_wait_chan(c, ids[i], 1);
        break;
    case KERN_OP_FLUSH:
        /* memory channels: make this block's earlier stores visible system-wide */
        kern_fence_sys();
        break;
    case KERN_OP_SEM_ACQUIRE:
        for (i = tid; i < op->n_ids; i += nth) kern_sem_acquire(c, ids[i]);
        break;
    case KERN_OP_SEM_RELEASE:
        for (i = tid; i < op->n_ids; i += nth) kern_add_rel_i32(&c->sems[ids[i]], 1);
        break;
    case KERN_OP_COPY:
    case KERN_OP_PUT:
    case KERN_OP_PWS:
    case KERN_OP_PWSF:
    case KERN_OP_GET:
        /* parallel src/dst lists; each entry uses its own buffer (P10 fixed) */
        if (n == 0 || op->n_src == 0) break;
        for (k = 0; k < op->n_dst; k++) {
            const kern_desc_t *s = &src[k < op->n_src ? k : op->n_src - 1];
            kern_copy(c, kern_ptr(c, &dst[k], x), kern_ptr(c, s, x), n);
        }
        break;
    case KERN_OP_CPKT:
    case KERN_OP_PPKT:
        if (n == 0 || op->n_src == 0) break;
        for (k = 0; k < op->n_dst; k++) {
            const kern_desc_t *s = &src[k < op->n_src ? k : op->n_src - 1];
            kern_pkt_put(c, kern_ptr(c, &dst[k], x), kern_ptr(c, s, x), n);
        }
        break;
    case KERN_OP_UPKT:
        if (n == 0) break;
        kern_pkt_unpack(c, kern_ptr(c, &dst[0], x), kern_ptr(c, &src[0], x), n,
                        KERN_WRITER(&src[0]));
        break;
    case KERN_OP_RPPKT: {
        char *d[KERN_MAX_PTRS];
        if (n == 0) break;
        for (k = 0; k < op->n_dst; k++) d[k] = kern_ptr(c, &dst[k], x);
        kern_pkt_relay(c, kern_ptr(c, &src[0], x), d, op->n_dst, n, KERN_WRITER(&src[0]));
        break;
    }
    case KERN_OP_GSTOREPKT: {
        char *d[KERN_MAX_PTRS];
        uint32_t m, nm = c->sw[dst[0].idx].n_members;
        if (n == 0) break;
        for (m = 0; m < nm; m++) d[m] = kern_member_ptr(c, &dst[0], m, x);
        kern_pkt_relay(c, kern_ptr(c, &src[0], x), d, (int)nm, n, KERN_WRITER(&src[0]));
        break;
    }
    case KERN_OP_GSTORE: {
        uint32_t m, nm = c->sw[dst[0].idx].n_members;
        const char *s = kern_ptr(c, &src[0], x);
        if (kern_mc_op(c, op->type, c->a->dtype, op->redop, &src[0], &dst[0], x, n)) break;
        for (m = 0; m < nm && n; m++) kern_copy(c, kern_member_ptr(c, &dst[0], m, x), s, n);
        break;
    }
    case KERN_OP_RE:
    case KERN_OP_RES:
    case KERN_OP_RRE:
    case KERN_OP_RRES: {
        char *s[KERN_MAX_PTRS], *d[KERN_MAX_PTRS];
        if (n == 0) break;
        for (k = 0; k < op->n_src; k++) s[k] = kern_ptr(c, &src[k], x);
        for (k = 0; k < op->n_dst; k++) d[k] = kern_ptr(c, &dst[k], x);
        kern_reduce(c, c->a->dtype, op->redop, s, op->n_src, d, op->n_dst, n);
        break;
    }
    case KERN_OP_GLRES: {
        char *s[KERN_MAX_PTRS], *d[KERN_MAX_PTRS];
        uint32_t m, ns = c->sw[src[0].idx].n_members, nd = c->sw[dst[0].idx].n_members;
        if (n == 0) break;
        if (kern_mc_op(c, op->type, c->a->dtype, op->redop, &src[0], &dst[0], x, n)) break;
        for (m = 0; m < ns; m++) s[m] = kern_member_ptr(c, &src[0], m, x);
        for (m = 0; m < nd; m++) d[m] = kern_member_ptr(c, &dst[0], m, x);
        kern_reduce(c, c->a->dtype, op->redop, s, (int)ns, d, (int)nd, n);
        break;
    }
    case KERN_OP_GLRE: {
        /* unfused switch reduce: every member's copy of src[0] into the local dst[0], with no
         * multicast store (on the host and without NVLS the members are mapped pointers) */
        char *s[KERN_MAX_PTRS], *d[1];
        uint32_t m, ns = c->sw[src[0].idx].n_members;
        if (n == 0) break;
        for (m = 0; m < ns; m++) s[m] = kern_member_ptr(c, &src[0], m, x);
        d[0] = kern_ptr(c, &dst[0], x);
        kern_reduce(c, c->a->dtype, op->redop, s, (int)ns, d, 1, n);
        break;
    }
    case KERN_OP_REPKT:
    case KERN_OP_RESPKT:
    case KERN_OP_RECPKT:
    case KERN_OP_RECSPKT: {
        char *s[KERN_MAX_PTRS], *d[KERN_MAX_PTRS];
        if (n == 0) break;
        for (k = 0; k < op->n_src; k++) s[k] = kern_ptr(c, &src[k], x);
        for (k = 0; k < op->n_dst; k++) d[k] = kern_ptr(c, &dst[k], x);
        kern_preduce(c, c->a->dtype, op->redop, s, op->n_src, src, d, op->n_dst, dst, n);
        break;
    }
    default: break; /* pipeline bodies are run by kern_run_block */
    }
}

/* ---- one block ---------------------------------------------------------------------------- */

KERN_FN void kern_run_block(const kern_args_t *a, int block, int nblocks, int tid, int nth)
{
    kern_ctx_t c;
    const kern_plan_t *p = a->plan;
    const char *pb = (const char *)p;

    c.a = a;
    c.st = a->state;
    c.descs = (const kern_desc_t *)(pb + p->off_descs);
    c.ids = (const uint32_t *)(pb + p->off_ids);
    c.chans = (const kern_chan_t *)(pb + p->off_chans);
    c.rbufs = (void *const *)(pb + p->off_rbufs);
    c.roff = (uint64_t *)((char *)(a->state + 1) + ((a->state->n_sems * 4u + 7u) & ~7u));
    c.sw = (const kern_switch_t *)(pb + p->off_switch);
    c.members = (void *const *)(pb + p->off_members);
    c.sems = (int32_t *)(c.st + 1);
    c.base[0] = (char *)a->input;
    c.base[1] = (char *)a->output;
    c.base[2] = (char *)a->scratch;
    c.flag = kern_ld_acq_u32(&c.st->flag);
    c.half = (a->double_scratch && !(c.flag & 1u)) ? a->scratch_half : 0;
#if defined(KERN_HOST)
    c.spin = a->host_spin;
#else
    c.spin = a->dev_spin ? a->dev_spin : BASE_WAIT_DEV_SPIN; /* 0: args not from exec_lower */
#endif
    c.block = block;
    c.tid = tid;
    c.nth = nth;
    c.op = -1;
    c.op_type = 0;
    c.iter = 0;
    c.fenced = 0;
    c.answer = 0;

    if (p->magic != KERN_PLAN_MAGIC || c.st->magic != KERN_STATE_MAGIC ||
        (uint32_t)nblocks != p->n_blocks) {
        if (tid == 0)
            kern_fail(&c, KERN_ERR_INVALID_ARG, KERN_WAIT_PLAN, -1, -1, (uint64_t)nblocks,
                      p->n_blocks);
    } else {
        const kern_block_t *b = (const kern_block_t *)(pb + p->off_blocks) + block;
        const kern_op_t *ops = (const kern_op_t *)(pb + p->off_ops) + b->first_op;
        uint32_t i = 0;
        int64_t earlier =
            a->last_sig ? (int64_t)kern_ld_rlx_u64(&a->last_sig[KERN_EXEC_FAILED]) : 0;
        if (earlier != 0) {
            /* an earlier launch failed: nothing of this one runs (kern_args.h, Errors) */
            if (tid == 0)
                kern_fail(&c, (int32_t)earlier, KERN_WAIT_EARLIER, -1, -1, 0, (uint64_t)earlier);
            i = b->n_ops;
        }
        c.fenced = earlier == 0 && kern_fence_needed(a);
        if (c.fenced) kern_launch_fence(&c); /* errors: c.op stays -1 */
        while (i < b->n_ops) {
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
                    if (kern_failed(&c)) break;
#endif
                }
                c.iter = 0;
                i += 1u + op->n_inner;
            } else {
                c.op = (int)i;
                kern_exec_op(&c, op, 0, 0, 0);
                i++;
            }
#if defined(KERN_HOST)
            if (kern_failed(&c)) break; /* one thread per block: nobody waits on us */
#endif
        }
    }

    /* a peer's fence record this launch found with another signature: answer it */
    if (c.answer) kern_fence_answer(&c);
    /* the last block to finish advances the context's flag for the next launch, and keeps
     * this launch's signature for the next launch's fence decision (none after a failure:
     * the next launch fences) */
    KERN_SYNC();
    if (tid == 0) {
        uint32_t old = kern_add_acqrel_u32(&c.st->done, 1);
        if (old + 1 == (uint32_t)nblocks) {
            uint32_t f = c.flag + 1;
            int failed = kern_failed(&c), k;
            if (f == 0) f = 1;
            if (a->last_sig && (c.fenced || failed))
                for (k = 0; k < KERN_SIG_CMP; k++)
                    kern_st_rlx_u64(&a->last_sig[k], failed ? 0 : a->sig[k]);
            kern_st_rlx_u32(&c.st->done, 0);
            kern_st_rel_u32(&c.st->flag, f);
        }
    }
}

#endif /* MSCCLPP_KERN_INTERP_H */
