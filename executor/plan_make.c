/*
 * Plan making: one rank's part of a plan recorded like a DSL program and emitted as the
 * loaded-plan structs (plan_make.h). The passes mirror python/mscclpp/language/internal/
 * passes.py rule for rule (plan-format §7.4-7.7), so that a program written here and the same
 * program written in the DSL give the same plan; tests compare the two where both exist.
 */
#include "executor/plan_make.h"

#include <stdlib.h>
#include <string.h>

#include "base/debug.h"

#define MK_NO_REDOP (-1)

/* An op as recorded: descriptors in the maker's pool, channels as global indices. */
typedef struct {
    uint8_t type, ctype, sync;
    int8_t reduce_op; /* MK_NO_REDOP for ops that do not reduce */
    uint8_t n_chans;
    uint16_t n_src, n_dst;
    uint32_t src, dst; /* first descriptor of each list in mk->descs */
    int32_t chans[PLAN_MAX_CHANNELS_PER_OP];
} mk_op_t;

typedef struct {
    mk_op_t *ops;
    int n, cap;
} mk_ops_t;

/* peer (or owner * 4 + buffer) -> index, open addressing */
typedef struct {
    int64_t *keys; /* -1: empty */
    int *vals;
    uint32_t cap, n;
} mk_map_t;

struct plan_mk {
    int nranks, rank, instances;
    bool stub;
    uint32_t chunks[3];
    int *peers[PLAN_CH__COUNT]; /* memory, port: global channel -> peer */
    int n_chan[PLAN_CH__COUNT], cap_chan[PLAN_CH__COUNT];
    /* peer -> global channel + 1 (0: none), nranks entries made on first use: a direct index,
     * as a peer's stub in a large alltoall declares a channel to every rank (a hash map's
     * inserts were most of a 1024-rank alltoall's make) */
    int *chan_ix[PLAN_CH__COUNT];
    plan_rbuf_t *rbufs;
    int n_rbufs, cap_rbufs;
    mk_map_t rbuf_of;
    mk_ops_t *blocks;
    int n_blocks, cap_blocks;
    plan_mk_desc_t *descs;
    uint32_t n_descs, cap_descs;
    /* stub: the focus's chunks its packet puts write (per instance, as recorded) */
    int focus;
    plan_mk_desc_t *pkt_writes;
    int n_pkt_writes, cap_pkt_writes;
    mscclpp_result_t err;
};

/* ---- small containers ------------------------------------------------------------------- */

static void mk_fail(plan_mk_t *mk, mscclpp_result_t r)
{
    if (mk->err == MSCCLPP_OK) mk->err = r;
}

static bool grow(plan_mk_t *mk, void **arr, int *cap, int need, size_t size)
{
    if (need <= *cap) return true;
    int c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    void *p = realloc(*arr, (size_t)c * size);
    if (!p) {
        mk_fail(mk, ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory"));
        return false;
    }
    *arr = p;
    *cap = c;
    return true;
}

/* Fibonacci hashing: the top log2(cap) bits of key x 2^64/phi (cap a power of two). */
static uint32_t slot_of(int64_t k, uint32_t cap)
{
    uint64_t x = (uint64_t)k * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(x >> (64 - __builtin_ctz(cap)));
}

static int map_get(const mk_map_t *m, int64_t key)
{
    if (!m->cap) return -1;
    for (uint32_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) return m->vals[i];
        if (m->keys[i] < 0) return -1;
    }
}

static bool map_put(plan_mk_t *mk, mk_map_t *m, int64_t key, int val)
{
    if ((m->n + 1) * 2 > m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 16;
        int64_t *keys = malloc(cap * sizeof *keys);
        int *vals = malloc(cap * sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            mk_fail(mk, ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory"));
            return false;
        }
        for (uint32_t i = 0; i < cap; i++) keys[i] = -1;
        for (uint32_t i = 0; i < m->cap; i++) {
            if (m->keys[i] < 0) continue;
            uint32_t j = slot_of(m->keys[i], cap);
            while (keys[j] >= 0) j = (j + 1) & (cap - 1);
            keys[j] = m->keys[i];
            vals[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = cap;
    }
    uint32_t i = slot_of(key, m->cap);
    while (m->keys[i] >= 0) i = (i + 1) & (m->cap - 1);
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
    return true;
}

static void map_free(mk_map_t *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- maker ---------------------------------------------------------------------------------- */

plan_mk_t *plan_mk_new(int nranks, int rank, int instances, bool stub)
{
    if (nranks < 1 || rank < 0 || rank >= nranks || instances < 1) return NULL;
    plan_mk_t *mk = calloc(1, sizeof *mk);
    if (!mk) return NULL;
    mk->nranks = nranks;
    mk->rank = rank;
    mk->instances = instances;
    mk->stub = stub;
    mk->focus = -1;
    return mk;
}

void plan_mk_free(plan_mk_t *mk)
{
    if (!mk) return;
    for (int t = 0; t < PLAN_CH__COUNT; t++) {
        free(mk->peers[t]);
        free(mk->chan_ix[t]);
    }
    free(mk->rbufs);
    map_free(&mk->rbuf_of);
    for (int b = 0; b < mk->n_blocks; b++) free(mk->blocks[b].ops);
    free(mk->blocks);
    free(mk->descs);
    free(mk->pkt_writes);
    free(mk);
}

int plan_mk_rank(const plan_mk_t *mk) { return mk->rank; }
bool plan_mk_is_stub(const plan_mk_t *mk) { return mk->stub; }
void plan_mk_stub_focus(plan_mk_t *mk, int focus) { mk->focus = focus; }

void plan_mk_dims(plan_mk_t *mk, uint32_t input_chunks, uint32_t output_chunks,
                  uint32_t scratch_chunks)
{
    mk->chunks[PLAN_BUF_INPUT] = input_chunks;
    mk->chunks[PLAN_BUF_OUTPUT] = output_chunks;
    mk->chunks[PLAN_BUF_SCRATCH] = scratch_chunks;
}

int plan_mk_chan(plan_mk_t *mk, int ctype, int peer)
{
    if ((ctype != PLAN_CH_MEMORY && ctype != PLAN_CH_PORT) || peer < 0 || peer >= mk->nranks ||
        peer == mk->rank) {
        mk_fail(mk, ERR(MSCCLPP_ERR_INTERNAL,
                        "plan making: rank %d: channel of type %d to "
                        "rank %d",
                        mk->rank, ctype, peer));
        return 0;
    }
    if (!mk->chan_ix[ctype] && !(mk->chan_ix[ctype] = calloc((size_t)mk->nranks, sizeof(int)))) {
        mk_fail(mk, ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory"));
        return 0;
    }
    if (mk->chan_ix[ctype][peer]) return mk->chan_ix[ctype][peer] - 1;
    int g = mk->n_chan[ctype];
    if (!grow(mk, (void **)&mk->peers[ctype], &mk->cap_chan[ctype], g + 1, sizeof(int)))
        return 0;
    mk->chan_ix[ctype][peer] = g + 1;
    mk->peers[ctype][g] = peer;
    mk->n_chan[ctype]++;
    return g;
}

static int has_chan(const plan_mk_t *mk, int ctype, int peer)
{
    return mk->chan_ix[ctype] && mk->chan_ix[ctype][peer];
}

int plan_mk_peers(const plan_mk_t *mk, int *peers, int cap)
{
    int n = 0;
    /* ascending merge of the two channel lists (each peer once) */
    for (int p = 0, k = 0;
         p < mk->nranks && k < mk->n_chan[PLAN_CH_MEMORY] + mk->n_chan[PLAN_CH_PORT]; p++) {
        int m = has_chan(mk, PLAN_CH_MEMORY, p), q = has_chan(mk, PLAN_CH_PORT, p);
        if (!m && !q) continue;
        k += m + q;
        if (n < cap) peers[n] = p;
        n++;
    }
    return n;
}

/* The remote buffer (owner, buf) this rank addresses, with access `ctype` added. */
static void use_rbuf(plan_mk_t *mk, int owner, int buf, int ctype);

void plan_mk_rbuf(plan_mk_t *mk, int ctype, int owner, int buf)
{
    plan_mk_chan(mk, ctype, owner);
    use_rbuf(mk, owner, buf, ctype);
}

static void use_rbuf(plan_mk_t *mk, int owner, int buf, int ctype)
{
    int64_t key = (int64_t)owner * 4 + buf;
    int q = map_get(&mk->rbuf_of, key);
    if (q < 0) {
        q = mk->n_rbufs;
        if (!grow(mk, (void **)&mk->rbufs, &mk->cap_rbufs, q + 1, sizeof *mk->rbufs) ||
            !map_put(mk, &mk->rbuf_of, key, q))
            return;
        mk->rbufs[q] = (plan_rbuf_t){.owner = owner, .buf = (uint8_t)buf, .access = 0};
        mk->n_rbufs++;
    }
    mk->rbufs[q].access |= (uint8_t)(1u << ctype);
}

static uint32_t push_descs(plan_mk_t *mk, const plan_mk_desc_t *d, int n)
{
    uint32_t at = mk->n_descs;
    if (mk->n_descs + (uint32_t)n > mk->cap_descs) {
        uint32_t cap = mk->cap_descs ? mk->cap_descs : 64;
        while (cap < mk->n_descs + (uint32_t)n) cap *= 2;
        plan_mk_desc_t *p = realloc(mk->descs, cap * sizeof *p);
        if (!p) {
            mk_fail(mk, ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory"));
            return 0;
        }
        mk->descs = p;
        mk->cap_descs = cap;
    }
    if (n) memcpy(mk->descs + at, d, (size_t)n * sizeof *d);
    mk->n_descs += (uint32_t)n;
    return at;
}

static mk_ops_t *block(plan_mk_t *mk, int tb)
{
    if (tb < 0 || tb >= PLAN_MAX_BLOCKS) {
        mk_fail(mk, ERR(MSCCLPP_ERR_INTERNAL, "plan making: thread block %d", tb));
        return NULL;
    }
    if (tb >= mk->n_blocks) {
        if (!grow(mk, (void **)&mk->blocks, &mk->cap_blocks, tb + 1, sizeof *mk->blocks))
            return NULL;
        memset(mk->blocks + mk->n_blocks, 0, (size_t)(tb + 1 - mk->n_blocks) * sizeof *mk->blocks);
        mk->n_blocks = tb + 1;
    }
    return &mk->blocks[tb];
}

static void record(plan_mk_t *mk, int tb, const mk_op_t *op)
{
    if (mk->stub) return;
    mk_ops_t *b = block(mk, tb);
    if (!b || !grow(mk, (void **)&b->ops, &b->cap, b->n + 1, sizeof *b->ops)) return;
    b->ops[b->n++] = *op;
}

static mk_op_t op_new(int type, int ctype)
{
    mk_op_t op;
    memset(&op, 0, sizeof op);
    op.type = (uint8_t)type;
    op.ctype = (uint8_t)ctype;
    op.reduce_op = MK_NO_REDOP;
    return op;
}

static void sync_op(plan_mk_t *mk, int tb, int type, int ctype, int peer, unsigned sync)
{
    mk_op_t op = op_new(type, ctype);
    op.sync = (uint8_t)sync;
    op.n_chans = 1;
    op.chans[0] = plan_mk_chan(mk, ctype, peer);
    record(mk, tb, &op);
}

void plan_mk_signal(plan_mk_t *mk, int tb, int ctype, int peer, bool relaxed, unsigned sync)
{
    sync_op(mk, tb, relaxed ? PLAN_OP_RLXSIGNAL : PLAN_OP_SIGNAL, ctype, peer, sync);
}

void plan_mk_wait(plan_mk_t *mk, int tb, int ctype, int peer, bool relaxed, unsigned sync)
{
    sync_op(mk, tb, relaxed ? PLAN_OP_RLXWAIT : PLAN_OP_WAIT, ctype, peer, sync);
}

void plan_mk_flush(plan_mk_t *mk, int tb, int peer, unsigned sync)
{
    sync_op(mk, tb, PLAN_OP_FLUSH, PLAN_CH_PORT, peer, sync);
}

void plan_mk_nop(plan_mk_t *mk, int tb)
{
    mk_op_t op = op_new(PLAN_OP_NOP, PLAN_CH_NONE);
    record(mk, tb, &op);
}

static void check_desc(plan_mk_t *mk, plan_mk_desc_t d, bool remote)
{
    if ((d.owner >= 0) != remote || d.owner >= mk->nranks || d.owner == mk->rank ||
        d.buf > PLAN_BUF_SCRATCH || d.size == 0)
        mk_fail(mk, ERR(MSCCLPP_ERR_INTERNAL,
                        "plan making: rank %d: bad %s descriptor (owner "
                        "%d, buffer %d, chunks %u+%u)",
                        mk->rank, remote ? "remote" : "local", d.owner, d.buf, d.index, d.size));
}

void plan_mk_xfer(plan_mk_t *mk, int tb, int type, int ctype, plan_mk_desc_t dst,
                  plan_mk_desc_t src)
{
    bool get = type == PLAN_OP_GET;
    plan_mk_desc_t rem = get ? src : dst;
    check_desc(mk, get ? dst : src, false);
    check_desc(mk, rem, true);
    if (mk->err) return;
    mk_op_t op = op_new(type, ctype);
    op.n_chans = 1;
    op.chans[0] = plan_mk_chan(mk, ctype, rem.owner);
    use_rbuf(mk, rem.owner, rem.buf, ctype);
    if (mk->stub) {
        /* a stub keeps no ops, but who writes a peer's packets names the culprit of that
         * peer's packet waits (lower.c find_writers) */
        if ((type == PLAN_OP_PPKT || type == PLAN_OP_RPPKT) && rem.owner == mk->focus &&
            grow(mk, (void **)&mk->pkt_writes, &mk->cap_pkt_writes, mk->n_pkt_writes + 1,
                 sizeof *mk->pkt_writes))
            mk->pkt_writes[mk->n_pkt_writes++] = dst;
        return;
    }
    op.n_src = op.n_dst = 1;
    op.src = push_descs(mk, &src, 1);
    op.dst = push_descs(mk, &dst, 1);
    record(mk, tb, &op);
}

void plan_mk_copy(plan_mk_t *mk, int tb, int type, plan_mk_desc_t dst, plan_mk_desc_t src)
{
    if (mk->stub) return;
    check_desc(mk, dst, false);
    check_desc(mk, src, false);
    mk_op_t op = op_new(type, PLAN_CH_NONE);
    op.n_src = op.n_dst = 1;
    op.src = push_descs(mk, &src, 1);
    op.dst = push_descs(mk, &dst, 1);
    record(mk, tb, &op);
}

void plan_mk_reduce(plan_mk_t *mk, int tb, bool packet, plan_mk_desc_t dst, plan_mk_desc_t src,
                    const plan_mk_desc_t *others, int n_others, int reduce_op)
{
    if (mk->stub) return;
    if (n_others < 1 || n_others + 1 > PLAN_MAX_DESCS) {
        mk_fail(mk,
                ERR(MSCCLPP_ERR_INTERNAL, "plan making: a reduce of %d operands", n_others + 1));
        return;
    }
    check_desc(mk, dst, false);
    check_desc(mk, src, false);
    for (int i = 0; i < n_others; i++) check_desc(mk, others[i], false);
    mk_op_t op = op_new(packet ? PLAN_OP_REPKT : PLAN_OP_RE, PLAN_CH_NONE);
    op.reduce_op = (int8_t)reduce_op;
    op.n_src = (uint16_t)(n_others + 1);
    op.n_dst = 1;
    op.src = push_descs(mk, &src, 1);
    push_descs(mk, others, n_others);
    op.dst = push_descs(mk, &dst, 1);
    record(mk, tb, &op);
}

/* ---- the passes (python/mscclpp/language/internal/passes.py) ------------------------------ */

static bool is_sync_carrying(int t)
{
    return t == PLAN_OP_SIGNAL || t == PLAN_OP_RLXSIGNAL || t == PLAN_OP_WAIT ||
           t == PLAN_OP_RLXWAIT || t == PLAN_OP_FLUSH || t == PLAN_OP_SEM_ACQUIRE ||
           t == PLAN_OP_SEM_RELEASE;
}

static bool is_signal_wait(int t)
{
    return t == PLAN_OP_SIGNAL || t == PLAN_OP_RLXSIGNAL || t == PLAN_OP_WAIT ||
           t == PLAN_OP_RLXWAIT;
}

static bool is_put_like(int t)
{
    return t == PLAN_OP_PUT || t == PLAN_OP_PPKT || t == PLAN_OP_PWS || t == PLAN_OP_PWSF;
}

static bool is_packet_reduce(int t)
{
    return t == PLAN_OP_REPKT || t == PLAN_OP_RECPKT || t == PLAN_OP_RESPKT || t == PLAN_OP_RECSPKT;
}

static bool is_reduce(int t)
{
    return t == PLAN_OP_RE || t == PLAN_OP_RES || t == PLAN_OP_RRE || t == PLAN_OP_RRES ||
           is_packet_reduce(t) || t == PLAN_OP_GLRE || t == PLAN_OP_GLRES;
}

static bool desc_eq(plan_mk_desc_t a, plan_mk_desc_t b)
{
    return a.owner == b.owner && a.buf == b.buf && a.index == b.index && a.size == b.size;
}

static const plan_mk_desc_t *src_of(const plan_mk_t *mk, const mk_op_t *o)
{
    return mk->descs + o->src;
}

static const plan_mk_desc_t *dst_of(const plan_mk_t *mk, const mk_op_t *o)
{
    return mk->descs + o->dst;
}

static int n_remote(const plan_mk_desc_t *d, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++) k += d[i].owner >= 0;
    return k;
}

static bool chans_disjoint(const mk_op_t *a, const mk_op_t *b)
{
    for (int i = 0; i < a->n_chans; i++)
        for (int j = 0; j < b->n_chans; j++)
            if (a->chans[i] == b->chans[j]) return false;
    return true;
}

/* A fused op from `a` and `b`: descriptor lists a.src + b.src[from_src:], and so on. */
static mk_op_t fused(plan_mk_t *mk, const mk_op_t *a, const mk_op_t *b, int type, int ctype,
                     int skip_b_src, bool b_src, bool b_dst)
{
    mk_op_t o = *a;
    o.type = (uint8_t)type;
    o.ctype = (uint8_t)ctype;
    o.n_chans = 0;
    for (int i = 0; i < a->n_chans; i++) o.chans[o.n_chans++] = a->chans[i];
    for (int i = 0; i < b->n_chans && o.n_chans < PLAN_MAX_CHANNELS_PER_OP; i++)
        o.chans[o.n_chans++] = b->chans[i];
    int ns = a->n_src + (b_src ? b->n_src - skip_b_src : 0);
    int nd = a->n_dst + (b_dst ? b->n_dst : 0);
    plan_mk_desc_t tmp[2 * PLAN_MAX_DESCS];
    int k = 0;
    for (int i = 0; i < a->n_src; i++) tmp[k++] = src_of(mk, a)[i];
    if (b_src)
        for (int i = skip_b_src; i < b->n_src; i++) tmp[k++] = src_of(mk, b)[i];
    o.src = push_descs(mk, tmp, ns);
    k = 0;
    for (int i = 0; i < a->n_dst; i++) tmp[k++] = dst_of(mk, a)[i];
    if (b_dst)
        for (int i = 0; i < b->n_dst; i++) tmp[k++] = dst_of(mk, b)[i];
    o.dst = push_descs(mk, tmp, nd);
    o.n_src = (uint16_t)ns;
    o.n_dst = (uint16_t)nd;
    return o;
}

/* passes.py _overlap_local: local descriptors a and b touch a common chunk of one buffer. */
static bool overlap_local(plan_mk_desc_t a, plan_mk_desc_t b)
{
    return a.owner < 0 && b.owner < 0 && a.buf == b.buf && a.index < b.index + b.size &&
           b.index < a.index + a.size;
}

/*
 * passes.py _put_with_copy: a memory put and a copy of the same block as one put whose extra,
 * local, destination is the copy's (plan-format §2.4: one load of the source feeds the peers'
 * stores and this rank's own), when the copy reads the put's source `next_to` and neither op's
 * local write meets the other's local reads or writes. copy_first: the copy came first, and its
 * entry stays first.
 */
static bool put_with_copy(plan_mk_t *mk, const mk_op_t *put, const mk_op_t *cp,
                          plan_mk_desc_t next_to, bool copy_first, mk_op_t *out)
{
    if (put->ctype != PLAN_CH_MEMORY || put->n_dst + 1 > PLAN_MK_FUSE_DESCS ||
        cp->n_src != 1 || cp->n_dst != 1)
        return false;
    const plan_mk_desc_t *ps = src_of(mk, put), *pd = dst_of(mk, put);
    const plan_mk_desc_t cs = src_of(mk, cp)[0], cd = dst_of(mk, cp)[0];
    if (!desc_eq(cs, next_to) || overlap_local(cd, cs)) return false;
    for (int i = 0; i < put->n_src; i++)
        if (overlap_local(cd, ps[i])) return false;
    for (int i = 0; i < put->n_dst; i++)
        if (overlap_local(cd, pd[i]) || overlap_local(cs, pd[i])) return false;
    /* the descriptor lists in recorded order; the op stays the put's */
    *out = copy_first ? fused(mk, cp, put, PLAN_OP_PUT, PLAN_CH_MEMORY, 0, true, true)
                      : fused(mk, put, cp, PLAN_OP_PUT, PLAN_CH_MEMORY, 0, true, true);
    out->sync = put->sync;
    out->reduce_op = put->reduce_op;
    return true;
}

/* passes.py try_fuse: the fusion of adjacent ops a, b of one block, into *out. */
static bool try_fuse(plan_mk_t *mk, const mk_op_t *a, const mk_op_t *b, mk_op_t *out)
{
    int ta = a->type, tb = b->type;
    if (ta == PLAN_OP_NOP) {
        if (tb == PLAN_OP_NOP || tb == PLAN_OP_BARRIER) {
            *out = *b;
            return true;
        }
        return false;
    }
    if (tb == PLAN_OP_NOP) {
        if (ta == PLAN_OP_BARRIER) {
            *out = *a;
            return true;
        }
        return false;
    }
    if (is_signal_wait(ta) && ta == tb) {
        if (a->ctype != b->ctype || !chans_disjoint(a, b) ||
            a->n_chans + b->n_chans > PLAN_MK_FUSE_CHANNELS)
            return false;
        *out = *a;
        for (int i = 0; i < b->n_chans; i++) out->chans[out->n_chans++] = b->chans[i];
        out->sync = a->sync | b->sync;
        return true;
    }
    if (ta == PLAN_OP_FLUSH && tb == PLAN_OP_FLUSH) {
        if (a->ctype != b->ctype) return false;
        mk_op_t o = *a;
        for (int i = 0; i < b->n_chans; i++) {
            bool have = false;
            for (int j = 0; j < o.n_chans; j++) have |= o.chans[j] == b->chans[i];
            if (have) continue;
            if (o.n_chans == PLAN_MK_FUSE_CHANNELS) return false;
            o.chans[o.n_chans++] = b->chans[i];
        }
        o.sync = a->sync | b->sync;
        *out = o;
        return true;
    }
    if (is_sync_carrying(ta) || is_sync_carrying(tb) || ta == PLAN_OP_BARRIER ||
        tb == PLAN_OP_BARRIER || ta == PLAN_OP_PIPELINE || tb == PLAN_OP_PIPELINE)
        return false;
    const plan_mk_desc_t *as = src_of(mk, a), *ad = dst_of(mk, a);
    const plan_mk_desc_t *bs = src_of(mk, b), *bd = dst_of(mk, b);
    if (ta == tb && (is_put_like(ta) || ta == PLAN_OP_GET)) {
        if (a->ctype != b->ctype || a->n_dst + b->n_dst > PLAN_MK_FUSE_CHANNELS) return false;
        uint32_t size = as[0].size;
        for (int i = 0; i < a->n_src; i++)
            if (as[i].size != size) return false;
        for (int i = 0; i < b->n_src; i++)
            if (bs[i].size != size) return false;
        /* P10: one buffer kind for all sources of a put, all destinations of a get */
        const plan_mk_desc_t *x = ta == PLAN_OP_GET ? ad : as, *y = ta == PLAN_OP_GET ? bd : bs;
        int nx = ta == PLAN_OP_GET ? a->n_dst : a->n_src,
            ny = ta == PLAN_OP_GET ? b->n_dst : b->n_src;
        for (int i = 0; i < nx; i++)
            if ((x[i].owner >= 0) != (x[0].owner >= 0) ||
                (x[i].owner >= 0 ? x[i].owner != x[0].owner : x[i].buf != x[0].buf))
                return false;
        for (int i = 0; i < ny; i++)
            if ((y[i].owner >= 0) != (x[0].owner >= 0) ||
                (y[i].owner >= 0 ? y[i].owner != x[0].owner : y[i].buf != x[0].buf))
                return false;
        *out = fused(mk, a, b, ta, a->ctype, 0, true, true);
        return true;
    }
    /* a copy beside a memory put: one more destination of the put (made plans run on our
     * executor, the DSL's native target) */
    if (ta == PLAN_OP_PUT && tb == PLAN_OP_COPY)
        return put_with_copy(mk, a, b, as[a->n_src - 1], false, out);
    if (ta == PLAN_OP_COPY && tb == PLAN_OP_PUT) return put_with_copy(mk, b, a, bs[0], true, out);
    if (ta == PLAN_OP_RPPKT && tb == PLAN_OP_RPPKT) {
        if (a->ctype != b->ctype || a->n_src != b->n_src ||
            a->n_dst + b->n_dst > PLAN_MK_FUSE_CHANNELS)
            return false;
        for (int i = 0; i < a->n_src; i++)
            if (!desc_eq(as[i], bs[i])) return false;
        *out = fused(mk, a, b, ta, a->ctype, 0, false, true);
        return true;
    }
    if ((ta == PLAN_OP_RE || ta == PLAN_OP_REPKT || ta == PLAN_OP_RRE) && ta == tb) {
        if (a->ctype != b->ctype || a->reduce_op != b->reduce_op || !desc_eq(bd[0], ad[0]) ||
            !desc_eq(bs[0], ad[0]) || a->n_src + b->n_src - 1 > PLAN_MK_FUSE_DESCS ||
            n_remote(as, a->n_src) + n_remote(bs, b->n_src) > PLAN_MK_FUSE_CHANNELS)
            return false;
        mk_op_t o = fused(mk, a, b, ta, a->ctype, 1, true, false);
        *out = o;
        return true;
    }
    bool b_srcs_are_a_dst0 = b->n_src > 0;
    for (int i = 0; i < b->n_src; i++) b_srcs_are_a_dst0 &= desc_eq(bs[i], ad[0]);
    if ((ta == PLAN_OP_RE || ta == PLAN_OP_RES || ta == PLAN_OP_RRE || ta == PLAN_OP_RRES) &&
        tb == PLAN_OP_PUT && b->ctype == PLAN_CH_MEMORY) {
        if (!b_srcs_are_a_dst0 || (a->ctype != PLAN_CH_NONE && a->ctype != PLAN_CH_MEMORY) ||
            a->n_dst + b->n_dst > PLAN_MK_FUSE_DESCS ||
            n_remote(ad, a->n_dst) + b->n_dst > PLAN_MK_FUSE_CHANNELS)
            return false;
        int t = ta == PLAN_OP_RE || ta == PLAN_OP_RES ? PLAN_OP_RES : PLAN_OP_RRES;
        *out = fused(mk, a, b, t, PLAN_CH_MEMORY, 0, false, true);
        return true;
    }
    if ((ta == PLAN_OP_REPKT || ta == PLAN_OP_RESPKT) && tb == PLAN_OP_PPKT &&
        b->ctype == PLAN_CH_MEMORY) {
        if (!b_srcs_are_a_dst0 || a->n_dst + b->n_dst > PLAN_MK_FUSE_DESCS ||
            n_remote(ad, a->n_dst) + b->n_dst > PLAN_MK_FUSE_CHANNELS)
            return false;
        *out = fused(mk, a, b, PLAN_OP_RESPKT, PLAN_CH_MEMORY, 0, false, true);
        return true;
    }
    if (ta == PLAN_OP_REPKT && tb == PLAN_OP_CPKT) {
        if (!desc_eq(bs[0], ad[0])) return false;
        mk_op_t o = *a;
        o.type = PLAN_OP_RECPKT;
        plan_mk_desc_t d2[2] = {ad[0], bd[0]};
        o.dst = push_descs(mk, d2, 2);
        o.n_dst = 2;
        *out = o;
        return true;
    }
    if ((ta == PLAN_OP_RECPKT || ta == PLAN_OP_RECSPKT) && b->ctype == PLAN_CH_MEMORY &&
        ((tb == PLAN_OP_PPKT && b_srcs_are_a_dst0) ||
         (tb == PLAN_OP_RPPKT && a->n_dst > 1 && desc_eq(bs[0], ad[1])))) {
        if (a->n_dst + b->n_dst > PLAN_MK_FUSE_DESCS ||
            n_remote(ad, a->n_dst) + b->n_dst > PLAN_MK_FUSE_CHANNELS)
            return false;
        *out = fused(mk, a, b, PLAN_OP_RECSPKT, PLAN_CH_MEMORY, 0, false, true);
        return true;
    }
    return false;
}

static bool ops_push(plan_mk_t *mk, mk_ops_t *l, const mk_op_t *op)
{
    if (!grow(mk, (void **)&l->ops, &l->cap, l->n + 1, sizeof *l->ops)) return false;
    l->ops[l->n++] = *op;
    return true;
}

static void pass_fuse(plan_mk_t *mk, const mk_ops_t *in, mk_ops_t *out)
{
    if (!in->n) return;
    mk_op_t cur = in->ops[0];
    for (int i = 1; i < in->n; i++) {
        mk_op_t f;
        if (try_fuse(mk, &cur, &in->ops[i], &f)) {
            cur = f;
        } else {
            ops_push(mk, out, &cur);
            cur = in->ops[i];
        }
    }
    ops_push(mk, out, &cur);
}

static void pass_data_sync(plan_mk_t *mk, const mk_ops_t *in, mk_ops_t *out)
{
    mk_op_t nop = op_new(PLAN_OP_NOP, PLAN_CH_NONE);
    for (int i = 0; i < in->n; i++) {
        const mk_op_t *op = &in->ops[i];
        bool carry = is_sync_carrying(op->type) && op->sync;
        if (carry && (op->sync & PLAN_MK_SYNC_BEFORE)) ops_push(mk, out, &nop);
        ops_push(mk, out, op);
        if (carry && (op->sync & PLAN_MK_SYNC_AFTER)) ops_push(mk, out, &nop);
    }
}

/* Chunk ranges of this rank a block touched since its last sync (ops.py local_accesses). */
typedef struct {
    uint8_t buf;
    uint32_t s, e;
} mk_range_t;

typedef struct {
    mk_range_t *r;
    int n, cap;
} mk_ranges_t;

static void add_local(plan_mk_t *mk, mk_ranges_t *l, plan_mk_desc_t d)
{
    if (d.owner >= 0) return;
    if (!grow(mk, (void **)&l->r, &l->cap, l->n + 1, sizeof *l->r)) return;
    l->r[l->n++] = (mk_range_t){d.buf, d.index, d.index + d.size};
}

static void accesses(plan_mk_t *mk, const mk_op_t *op, mk_ranges_t *rd, mk_ranges_t *wr)
{
    rd->n = wr->n = 0;
    const plan_mk_desc_t *s = src_of(mk, op), *d = dst_of(mk, op);
    int t = op->type;
    if (t == PLAN_OP_COPY) {
        add_local(mk, rd, s[0]);
        add_local(mk, wr, d[0]);
    } else if (t == PLAN_OP_CPKT) {
        add_local(mk, rd, s[0]);
    } else if (t == PLAN_OP_UPKT) {
        add_local(mk, wr, d[0]);
    } else if (is_put_like(t)) {
        if (!(t == PLAN_OP_PPKT && op->ctype == PLAN_CH_PORT))
            for (int i = 0; i < op->n_src; i++) add_local(mk, rd, s[i]);
    } else if (t == PLAN_OP_GET) {
        for (int i = 0; i < op->n_dst; i++) add_local(mk, wr, d[i]);
    } else if (t == PLAN_OP_RE || t == PLAN_OP_RES) {
        for (int i = 0; i < op->n_src; i++) add_local(mk, rd, s[i]);
        add_local(mk, wr, d[0]);
    } else if (is_packet_reduce(t) || t == PLAN_OP_RRE || t == PLAN_OP_RRES) {
        add_local(mk, rd, s[0]);
        add_local(mk, wr, d[0]);
    }
}

static bool overlaps(const mk_ranges_t *l, const mk_range_t *x)
{
    for (int i = 0; i < l->n; i++)
        if (l->r[i].buf == x->buf && x->s < l->r[i].e && l->r[i].s < x->e) return true;
    return false;
}

static void append_ranges(plan_mk_t *mk, mk_ranges_t *to, const mk_ranges_t *from)
{
    for (int i = 0; i < from->n; i++) {
        if (!grow(mk, (void **)&to->r, &to->cap, to->n + 1, sizeof *to->r)) return;
        to->r[to->n++] = from->r[i];
    }
}

static void pass_dependency(plan_mk_t *mk, const mk_ops_t *in, mk_ops_t *out)
{
    mk_ranges_t reads = {0}, writes = {0}, rd = {0}, wr = {0};
    mk_op_t nop = op_new(PLAN_OP_NOP, PLAN_CH_NONE);
    for (int i = 0; i < in->n; i++) {
        const mk_op_t *op = &in->ops[i];
        if (op->type == PLAN_OP_NOP || op->type == PLAN_OP_BARRIER) {
            reads.n = writes.n = 0;
            ops_push(mk, out, op);
            continue;
        }
        accesses(mk, op, &rd, &wr);
        bool conflict = false;
        for (int k = 0; k < wr.n && !conflict; k++)
            conflict = overlaps(&writes, &wr.r[k]) || overlaps(&reads, &wr.r[k]);
        for (int k = 0; k < rd.n && !conflict; k++) conflict = overlaps(&writes, &rd.r[k]);
        if (conflict) {
            ops_push(mk, out, &nop);
            reads.n = writes.n = 0;
        }
        append_ranges(mk, &reads, &rd);
        append_ranges(mk, &writes, &wr);
        ops_push(mk, out, op);
    }
    free(reads.r);
    free(writes.r);
    free(rd.r);
    free(wr.r);
}

static void pass_collapse(plan_mk_t *mk, const mk_ops_t *in, mk_ops_t *out)
{
    for (int i = 0; i < in->n; i++) {
        const mk_op_t *op = &in->ops[i];
        if (out->n) {
            mk_op_t *prev = &out->ops[out->n - 1];
            if (op->type == PLAN_OP_NOP &&
                (prev->type == PLAN_OP_NOP || prev->type == PLAN_OP_BARRIER))
                continue;
            if (prev->type == PLAN_OP_NOP && op->type == PLAN_OP_BARRIER) {
                *prev = *op;
                continue;
            }
        }
        ops_push(mk, out, op);
    }
    int lo = 0, hi = out->n;
    while (lo < hi && out->ops[lo].type == PLAN_OP_NOP) lo++;
    while (hi > lo && out->ops[hi - 1].type == PLAN_OP_NOP) hi--;
    if (lo) memmove(out->ops, out->ops + lo, (size_t)(hi - lo) * sizeof *out->ops);
    out->n = hi - lo;
}

/* process_block: fuse, data sync, dependency syncs, collapse. */
static void process_block(plan_mk_t *mk, const mk_ops_t *in, mk_ops_t *out)
{
    mk_ops_t a = {0}, b = {0}, c = {0};
    pass_fuse(mk, in, &a);
    pass_data_sync(mk, &a, &b);
    pass_dependency(mk, &b, &c);
    pass_collapse(mk, &c, out);
    free(a.ops);
    free(b.ops);
    free(c.ops);
}

/* ---- emitting -------------------------------------------------------------------------------- */

typedef struct {
    int n;
    uint16_t id[PLAN_MAX_CHANNELS_PER_BLOCK + 1];
} mk_table_t;

/* Position of `v` in table `t`, added on first use; -1 past the limit. */
static int table_ref(mk_table_t *t, int v)
{
    for (int i = 0; i < t->n; i++)
        if (t->id[i] == v) return i;
    if (t->n == PLAN_MAX_CHANNELS_PER_BLOCK) return -1;
    t->id[t->n] = (uint16_t)v;
    return t->n++;
}

static mscclpp_result_t emit_block(plan_mk_t *mk, plan_arena_t *arena, const mk_ops_t *ops,
                                   int inst, plan_block_t *out)
{
    const int n = mk->instances;
    mk_table_t chans[PLAN_CH__COUNT], rbufs[PLAN_CH__COUNT];
    memset(chans, 0, sizeof chans);
    memset(rbufs, 0, sizeof rbufs);
    out->n_ops = ops->n;
    out->ops = plan_arena_alloc(arena, (size_t)(ops->n ? ops->n : 1), sizeof *out->ops);
    if (!out->ops) return ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory");
    for (int i = 0; i < ops->n; i++) {
        const mk_op_t *o = &ops->ops[i];
        plan_op_t *p = &out->ops[i];
        p->type = o->type;
        p->channel_type = o->ctype;
        p->reduce_op = is_reduce(o->type) ? o->reduce_op : (int8_t)MSCCLPP_REDOP_PLAN;
        int ct = o->ctype;
        int local[PLAN_MAX_CHANNELS_PER_OP];
        for (int k = 0; k < o->n_chans; k++) {
            local[k] = ct == PLAN_CH_NONE ? -1 : table_ref(&chans[ct], o->chans[k] * n + inst);
            if (ct != PLAN_CH_NONE && local[k] < 0)
                return ERR(MSCCLPP_ERR_INTERNAL,
                           "plan making: rank %d: a thread block uses "
                           "more than %d %s channels",
                           mk->rank, PLAN_MAX_CHANNELS_PER_BLOCK,
                           ct == PLAN_CH_MEMORY ? "memory" : "port");
        }
        /* channel_ids as the DSL writes them: sync ops and port data ops */
        bool ids = is_signal_wait(o->type) || o->type == PLAN_OP_FLUSH ||
                   (ct == PLAN_CH_PORT && (o->n_src || o->n_dst));
        if (ids) {
            p->n_channels = o->n_chans;
            for (int k = 0; k < o->n_chans; k++) p->channel_ids[k] = (uint8_t)local[k];
        }
        p->n_src = (uint8_t)o->n_src;
        p->n_dst = (uint8_t)o->n_dst;
        for (int side = 0; side < 2; side++) {
            int cnt = side ? o->n_dst : o->n_src;
            if (!cnt) continue;
            const plan_mk_desc_t *d = side ? dst_of(mk, o) : src_of(mk, o);
            plan_desc_t *arr = plan_arena_alloc(arena, (size_t)cnt, sizeof *arr);
            if (!arr) return ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory");
            for (int k = 0; k < cnt; k++) {
                arr[k].buf = d[k].buf;
                /* interleaved replication (plan-format §7.7): index v of size s -> v*n + i*s */
                arr[k].index = d[k].index * (uint32_t)n + (uint32_t)inst * d[k].size;
                arr[k].size = d[k].size;
                if (d[k].owner < 0) {
                    arr[k].kind = PLAN_DESC_LOCAL;
                    continue;
                }
                arr[k].kind = PLAN_DESC_REMOTE;
                int q = map_get(&mk->rbuf_of, (int64_t)d[k].owner * 4 + d[k].buf);
                int ref = ct == PLAN_CH_NONE ? -1 : table_ref(&rbufs[ct], q);
                if (ref < 0)
                    return ERR(MSCCLPP_ERR_INTERNAL,
                               "plan making: rank %d: a thread block "
                               "addresses more than %d remote buffers",
                               mk->rank, PLAN_MAX_RBUFS_PER_BLOCK);
                arr[k].ref = (uint16_t)ref;
            }
            if (side) p->dst = arr;
            else p->src = arr;
        }
    }
    for (int t = 0; t < PLAN_CH__COUNT; t++) {
        out->n_chan[t] = (uint8_t)chans[t].n;
        memcpy(out->chan[t], chans[t].id, sizeof(uint16_t) * (size_t)chans[t].n);
        out->n_rbuf[t] = (uint8_t)rbufs[t].n;
        memcpy(out->rbuf[t], rbufs[t].id, sizeof(uint16_t) * (size_t)rbufs[t].n);
    }
    return MSCCLPP_OK;
}

mscclpp_result_t plan_mk_emit(plan_mk_t *mk, plan_arena_t *arena, plan_gpu_t *g)
{
    if (mk->err) return mk->err;
    const int n = mk->instances;
    memset(g, 0, sizeof *g);
    g->id = mk->rank;
    g->input_chunks = mk->chunks[PLAN_BUF_INPUT] * (uint32_t)n;
    g->output_chunks = mk->chunks[PLAN_BUF_OUTPUT] * (uint32_t)n;
    g->scratch_chunks = mk->chunks[PLAN_BUF_SCRATCH] * (uint32_t)n;
    for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++) {
        int count = mk->n_chan[t] * n;
        if (count > 65535)
            return ERR(MSCCLPP_ERR_INTERNAL, "plan making: rank %d has %d channels", mk->rank,
                       count);
        g->n_chan[t] = count;
        if (!count) continue;
        g->peers[t] = plan_arena_alloc(arena, (size_t)count, sizeof(int));
        if (!g->peers[t]) return ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory");
        for (int c = 0; c < mk->n_chan[t]; c++)
            for (int i = 0; i < n; i++) g->peers[t][c * n + i] = mk->peers[t][c];
    }
    g->n_rbufs = mk->n_rbufs;
    if (mk->n_rbufs) {
        g->rbufs = plan_arena_alloc(arena, (size_t)mk->n_rbufs, sizeof *g->rbufs);
        if (!g->rbufs) return ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory");
        memcpy(g->rbufs, mk->rbufs, (size_t)mk->n_rbufs * sizeof *g->rbufs);
    }
    if (mk->n_pkt_writes) {
        /* replicated as emit_block replicates the descriptors (plan-format §7.7) */
        g->pkt_writes =
            plan_arena_alloc(arena, (size_t)mk->n_pkt_writes * (size_t)n, sizeof *g->pkt_writes);
        if (!g->pkt_writes) return ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory");
        for (int k = 0; k < mk->n_pkt_writes; k++)
            for (int i = 0; i < n; i++) {
                const plan_mk_desc_t *d = &mk->pkt_writes[k];
                g->pkt_writes[g->n_pkt_writes++] =
                    (plan_pkt_write_t){d->owner, d->buf, d->index * (uint32_t)n + (uint32_t)i * d->size,
                                       d->size};
            }
    }
    if (mk->stub || !mk->n_blocks) return MSCCLPP_OK;
    if (mk->n_blocks * n > PLAN_MAX_BLOCKS)
        return ERR(MSCCLPP_ERR_INTERNAL, "plan making: rank %d has %d thread blocks", mk->rank,
                   mk->n_blocks * n);
    g->n_blocks = mk->n_blocks * n;
    g->blocks = plan_arena_alloc(arena, (size_t)g->n_blocks, sizeof *g->blocks);
    if (!g->blocks) return ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory");
    mscclpp_result_t r = MSCCLPP_OK;
    for (int b = 0; b < mk->n_blocks && r == MSCCLPP_OK; b++) {
        mk_ops_t done = {0};
        process_block(mk, &mk->blocks[b], &done);
        if (mk->err) r = mk->err;
        for (int i = 0; i < n && r == MSCCLPP_OK; i++)
            r = emit_block(mk, arena, &done, i, &g->blocks[b * n + i]);
        free(done.ops);
    }
    return r;
}
