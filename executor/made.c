/*
 * Plans made for the job at hand (made.h): the algorithms, written against the plan maker
 * (plan_make.h) the way the DSL programs of plans/ are written, and the assembly of one rank's
 * part with its peers' stubs.
 *
 * Every Simple plan here follows the rules of the default DSL plans: a ready handshake (relaxed
 * signal and wait) on every channel a rank writes through before its first write, so a fast
 * rank never overwrites a scratch slot its peer still reads from the previous launch; a signal
 * after a block-wide sync releases memory-channel puts (port puts carry their own signal); port
 * puts are flushed before the launch ends. Only peers' scratch buffers are addressed.
 */
#include "executor/made.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "executor/plan_make.h"

#define MADE_FLAT_MAX_PEERS 16 /* a block's channel table holds 16 channels of a kind */
#define MADE_INF UINT64_MAX

#define MEM PLAN_CH_MEMORY
#define PORT PLAN_CH_PORT
#define IN PLAN_BUF_INPUT
#define OUT PLAN_BUF_OUTPUT
#define SCR PLAN_BUF_SCRATCH
#define BEFORE PLAN_MK_SYNC_BEFORE
#define AFTER PLAN_MK_SYNC_AFTER

/* ---- topology -------------------------------------------------------------------------------- */

mscclpp_result_t exec_topo_init(exec_topo_t *t, int n, const uint64_t *label)
{
    memset(t, 0, sizeof *t);
    CHECK_ARG(n >= 1 && label != NULL);
    t->n = n;
    t->node = calloc((size_t)n, sizeof(int));
    t->local = calloc((size_t)n, sizeof(int));
    t->off = calloc((size_t)n + 1, sizeof(int));
    t->ranks = calloc((size_t)n, sizeof(int));
    int *first = calloc((size_t)n, sizeof(int)); /* node k's first rank */
    if (!t->node || !t->local || !t->off || !t->ranks || !first) {
        free(first);
        exec_topo_fini(t);
        return ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory for %d ranks", n);
    }
    /* node numbers by first appearance; a label seen before is found through the first rank
     * of each node (O(n x nodes), nodes are few; a sorted index would do for very many) */
    for (int r = 0; r < n; r++) {
        int k = 0;
        while (k < t->nnodes && label[first[k]] != label[r]) k++;
        if (k == t->nnodes) first[t->nnodes++] = r;
        t->node[r] = k;
    }
    free(first);
    for (int r = 0; r < n; r++) t->off[t->node[r] + 1]++;
    for (int k = 0; k < t->nnodes; k++) {
        int l = t->off[k + 1];
        if (l > t->lmax) t->lmax = l;
        t->off[k + 1] += t->off[k];
    }
    int *fill = calloc((size_t)t->nnodes, sizeof(int));
    if (!fill) {
        exec_topo_fini(t);
        return ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory for %d ranks", n);
    }
    for (int r = 0; r < n; r++) {
        int k = t->node[r];
        t->local[r] = fill[k];
        t->ranks[t->off[k] + fill[k]++] = r;
    }
    free(fill);
    return MSCCLPP_OK;
}

void exec_topo_fini(exec_topo_t *t)
{
    if (!t) return;
    free(t->node);
    free(t->local);
    free(t->off);
    free(t->ranks);
    memset(t, 0, sizeof *t);
}

static int nsize(const exec_topo_t *t, int k) { return t->off[k + 1] - t->off[k]; }
static int at(const exec_topo_t *t, int k, int j) { return t->ranks[t->off[k] + j]; }

/* q's partner on node m (m != node(q)): the rank of m with q's local index, modulo m's size.
 * It receives what q sends node m, and aggregates node m's contributions bound for q. */
static int partner(const exec_topo_t *t, int m, int q)
{
    return at(t, m, t->local[q] % nsize(t, m));
}

/* ---- what the algorithms share ------------------------------------------------------------- */

typedef struct {
    const exec_topo_t *t;
    const exec_made_spec_t *s;
    int n, me;
    int focus; /* the rank whose part is made (its peers' stubs serve it), -1: every rank */
} made_ctx_t;

typedef void (*made_gen_fn)(plan_mk_t *mk, const made_ctx_t *c);
/* chunk counts of rank r (per instance): input, output, scratch */
typedef void (*made_dims_fn)(const made_ctx_t *c, int r, uint32_t d[3]);

typedef struct {
    const char *name; /* in plan names and messages */
    made_gen_fn gen;
    made_dims_fn dims;
    int instances;
} made_algo_t;

static plan_mk_desc_t L(int buf, uint32_t index, uint32_t size)
{
    return plan_mk_local(buf, index, size);
}

static plan_mk_desc_t R(int owner, int buf, uint32_t index, uint32_t size)
{
    return plan_mk_remote(owner, buf, index, size);
}

static int ctype_of(const made_ctx_t *c, int a, int b)
{
    return c->t->node[a] == c->t->node[b] ? MEM : PORT;
}

/* Tell every peer this rank is ready (its slots free again) and wait for theirs. */
static void handshake(plan_mk_t *mk, const made_ctx_t *c, int tb, const int *peers, int np)
{
    for (int i = 0; i < np; i++)
        plan_mk_signal(mk, tb, ctype_of(c, c->me, peers[i]), peers[i], true, 0);
    for (int i = 0; i < np; i++)
        plan_mk_wait(mk, tb, ctype_of(c, c->me, peers[i]), peers[i], true, AFTER);
}

/* Release this rank's memory puts to `peers` and wait for theirs (_common.publish_and_wait). */
static void publish_and_wait(plan_mk_t *mk, int tb, const int *peers, int np)
{
    for (int i = 0; i < np; i++) plan_mk_signal(mk, tb, MEM, peers[i], false, BEFORE);
    for (int i = 0; i < np; i++) plan_mk_wait(mk, tb, MEM, peers[i], false, AFTER);
}

static void publish(plan_mk_t *mk, int tb, const int *peers, int np)
{
    for (int i = 0; i < np; i++) plan_mk_signal(mk, tb, MEM, peers[i], false, BEFORE);
}

static void await_all(plan_mk_t *mk, const made_ctx_t *c, int tb, const int *peers, int np)
{
    for (int i = 0; i < np; i++)
        plan_mk_wait(mk, tb, ctype_of(c, c->me, peers[i]), peers[i], false, AFTER);
}

static void flush_all(plan_mk_t *mk, int tb, const int *peers, int np)
{
    for (int i = 0; i < np; i++) plan_mk_flush(mk, tb, peers[i], 0);
}

/* src (mine) into dst (peer's): a memory put, or across nodes a put with signal. */
static void put_to(plan_mk_t *mk, const made_ctx_t *c, int tb, plan_mk_desc_t dst,
                   plan_mk_desc_t src)
{
    int ct = ctype_of(c, c->me, dst.owner);
    plan_mk_xfer(mk, tb, ct == MEM ? PLAN_OP_PUT : PLAN_OP_PWS, ct, dst, src);
}

static int redop(void) { return MSCCLPP_SUM; }

/* The other ranks starting after me (plans/_common.py peers_of). */
static void peers_of(int me, int n, int *out)
{
    for (int k = 1; k < n; k++) out[k - 1] = (me + k) % n;
}

/* ---- one rank ---------------------------------------------------------------------------------- */

static void one_gen(plan_mk_t *mk, const made_ctx_t *c)
{
    (void)c;
    plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, 0, 1), L(IN, 0, 1));
}

static void one_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)c;
    (void)r;
    d[0] = d[1] = 1;
    d[2] = 0;
}

/* ---- one node, all pairs (the DSL programs of plans/) ------------------------------------ */

/* every rank's memory channels, to each other rank in ascending order (_common.memory_channels) */
static int flat_begin(plan_mk_t *mk, const made_ctx_t *c, int *peers)
{
    for (int p = 0; p < c->n; p++)
        if (p != c->me) plan_mk_chan(mk, MEM, p);
    peers_of(c->me, c->n, peers);
    return c->n - 1;
}

static void flat_allreduce_simple(plan_mk_t *mk, const made_ctx_t *c)
{
    int N = c->n, r = c->me, peers[MADE_FLAT_MAX_PEERS + 1];
    int np = flat_begin(mk, c, peers);
    for (int i = 0; i < np; i++)
        plan_mk_xfer(mk, 0, PLAN_OP_PUT, MEM, R(peers[i], SCR, (uint32_t)r, 1),
                     L(IN, (uint32_t)peers[i], 1));
    publish_and_wait(mk, 0, peers, np);
    plan_mk_desc_t others[MADE_FLAT_MAX_PEERS];
    for (int i = 0; i < np; i++) others[i] = L(SCR, (uint32_t)peers[i], 1);
    plan_mk_reduce(mk, 0, false, L(OUT, (uint32_t)r, 1), L(IN, (uint32_t)r, 1), others, np,
                   redop());
    for (int i = 0; i < np; i++)
        plan_mk_xfer(mk, 0, PLAN_OP_PUT, MEM, R(peers[i], SCR, (uint32_t)(N + r), 1),
                     L(OUT, (uint32_t)r, 1));
    publish_and_wait(mk, 0, peers, np);
    for (int i = 0; i < np; i++)
        plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)peers[i], 1),
                     L(SCR, (uint32_t)(N + peers[i]), 1));
}

static void flat_allreduce_pkt(plan_mk_t *mk, const made_ctx_t *c)
{
    int N = c->n, r = c->me, peers[MADE_FLAT_MAX_PEERS + 1];
    int np = flat_begin(mk, c, peers);
    for (int k = 0; k < np; k++)
        plan_mk_xfer(mk, k, PLAN_OP_PPKT, MEM, R(peers[k], SCR, (uint32_t)r, 1),
                     L(IN, (uint32_t)peers[k], 1));
    plan_mk_desc_t others[MADE_FLAT_MAX_PEERS];
    for (int i = 0; i < np; i++) others[i] = L(SCR, (uint32_t)peers[i], 1);
    plan_mk_reduce(mk, 0, true, L(OUT, (uint32_t)r, 1), L(IN, (uint32_t)r, 1), others, np, redop());
    for (int i = 0; i < np; i++)
        plan_mk_xfer(mk, 0, PLAN_OP_PPKT, MEM, R(peers[i], SCR, (uint32_t)(N + r), 1),
                     L(OUT, (uint32_t)r, 1));
    for (int k = 0; k < np; k++)
        plan_mk_copy(mk, k, PLAN_OP_UPKT, L(OUT, (uint32_t)peers[k], 1),
                     L(SCR, (uint32_t)(N + peers[k]), 1));
}

static void flat_allreduce_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    d[0] = d[1] = (uint32_t)c->n;
    d[2] = 2 * (uint32_t)c->n;
}

static void flat_allgather(plan_mk_t *mk, const made_ctx_t *c)
{
    int r = c->me, peers[MADE_FLAT_MAX_PEERS + 1];
    int np = flat_begin(mk, c, peers);
    handshake(mk, c, 0, peers, np);
    for (int i = 0; i < np; i++)
        plan_mk_xfer(mk, 0, PLAN_OP_PUT, MEM, R(peers[i], SCR, (uint32_t)r, 1), L(IN, 0, 1));
    plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)r, 1), L(IN, 0, 1));
    publish_and_wait(mk, 0, peers, np);
    for (int i = 0; i < np; i++)
        plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)peers[i], 1),
                     L(SCR, (uint32_t)peers[i], 1));
}

static void flat_allgather_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    d[0] = 1;
    d[1] = d[2] = (uint32_t)c->n;
}

static void flat_reducescatter(plan_mk_t *mk, const made_ctx_t *c)
{
    int r = c->me, peers[MADE_FLAT_MAX_PEERS + 1];
    int np = flat_begin(mk, c, peers);
    handshake(mk, c, 0, peers, np);
    for (int i = 0; i < np; i++)
        plan_mk_xfer(mk, 0, PLAN_OP_PUT, MEM, R(peers[i], SCR, (uint32_t)r, 1),
                     L(IN, (uint32_t)peers[i], 1));
    publish_and_wait(mk, 0, peers, np);
    plan_mk_desc_t others[MADE_FLAT_MAX_PEERS];
    for (int i = 0; i < np; i++) others[i] = L(SCR, (uint32_t)peers[i], 1);
    plan_mk_reduce(mk, 0, false, L(OUT, 0, 1), L(IN, (uint32_t)r, 1), others, np, redop());
}

static void flat_reducescatter_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    d[0] = d[2] = (uint32_t)c->n;
    d[1] = 1;
}

static void flat_alltoall(plan_mk_t *mk, const made_ctx_t *c)
{
    int r = c->me, peers[MADE_FLAT_MAX_PEERS + 1];
    int np = flat_begin(mk, c, peers);
    handshake(mk, c, 0, peers, np);
    for (int i = 0; i < np; i++)
        plan_mk_xfer(mk, 0, PLAN_OP_PUT, MEM, R(peers[i], SCR, (uint32_t)r, 1),
                     L(IN, (uint32_t)peers[i], 1));
    plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)r, 1), L(IN, (uint32_t)r, 1));
    publish_and_wait(mk, 0, peers, np);
    for (int i = 0; i < np; i++)
        plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)peers[i], 1),
                     L(SCR, (uint32_t)peers[i], 1));
}

static void flat_alltoall_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    d[0] = d[1] = d[2] = (uint32_t)c->n;
}

/* plans/broadcast.py with any root: peers tell the root they are ready, the root puts its input
 * into their scratch and signals, each copies out */
static void flat_broadcast(plan_mk_t *mk, const made_ctx_t *c)
{
    int N = c->n, root = c->s->root, me = c->me;
    if (me == root) {
        int peers[MADE_FLAT_MAX_PEERS + 1], np = 0;
        for (int p = 0; p < N; p++)
            if (p != root) {
                plan_mk_chan(mk, MEM, p);
                peers[np++] = p;
            }
        for (int i = 0; i < np; i++) plan_mk_wait(mk, 0, MEM, peers[i], true, AFTER);
        for (int i = 0; i < np; i++)
            plan_mk_xfer(mk, 0, PLAN_OP_PUT, MEM, R(peers[i], SCR, 0, 1), L(IN, 0, 1));
        plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, 0, 1), L(IN, 0, 1));
        publish(mk, 0, peers, np);
        return;
    }
    plan_mk_signal(mk, 0, MEM, root, true, 0);
    plan_mk_wait(mk, 0, MEM, root, false, AFTER);
    plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, 0, 1), L(SCR, 0, 1));
}

static void rooted_dims_one(const made_ctx_t *c, int r, uint32_t d[3])
{
    d[0] = d[1] = 1;
    d[2] = r == c->s->root ? 0 : 1;
}

/* Reduce to the root: the root tells each peer its slot is free, each peer puts its input into
 * the root's scratch slot (its rank) and signals, the root reduces. */
static void flat_reduce(plan_mk_t *mk, const made_ctx_t *c)
{
    int N = c->n, root = c->s->root, me = c->me;
    if (me == root) {
        int peers[MADE_FLAT_MAX_PEERS + 1], np = 0;
        for (int p = 0; p < N; p++)
            if (p != root) {
                plan_mk_chan(mk, MEM, p);
                peers[np++] = p;
            }
        for (int i = 0; i < np; i++) plan_mk_signal(mk, 0, MEM, peers[i], true, 0);
        for (int i = 0; i < np; i++) plan_mk_wait(mk, 0, MEM, peers[i], false, AFTER);
        plan_mk_desc_t others[MADE_FLAT_MAX_PEERS];
        for (int i = 0; i < np; i++) others[i] = L(SCR, (uint32_t)peers[i], 1);
        plan_mk_reduce(mk, 0, false, L(OUT, 0, 1), L(IN, 0, 1), others, np, redop());
        return;
    }
    plan_mk_wait(mk, 0, MEM, root, true, AFTER);
    plan_mk_xfer(mk, 0, PLAN_OP_PUT, MEM, R(root, SCR, (uint32_t)me, 1), L(IN, 0, 1));
    plan_mk_signal(mk, 0, MEM, root, false, BEFORE);
}

static void flat_reduce_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    d[0] = d[1] = 1;
    d[2] = r == c->s->root ? (uint32_t)c->n : 0;
}

/* ---- several nodes: hierarchical --------------------------------------------------------------
 *
 * Rank x on node n (L_n ranks) pairs with one rank of every other node m, its partner
 * partner(m, x) = the rank of m with x's local index modulo L_m. Both directions of every
 * cross-node transfer follow this rule, so the ranks that send to x from node m are the ranks
 * q of m with partner(n, q) == x: local indices l(x), l(x) + L_n, ... below L_m ("senders").
 * Q_x, the blocks x aggregates, is x itself and its senders of every other node, ordered by
 * node then local index; pos_x(q) is q's position in it. With equal node sizes this is the
 * DSL's hierarchy (plans/multinode.py): partners are the ranks with the same local index.
 */

/* The senders of node m (!= node of x) to x: local indices l0, l0 + step, ... < L_m. */
static int senders_count(const exec_topo_t *t, int m, int x)
{
    int lm = nsize(t, m), lx = nsize(t, t->node[x]), l0 = t->local[x];
    return lm > l0 ? (lm - l0 + lx - 1) / lx : 0;
}

/* pos_x(q) for q == x or a sender of x; |Q_x| when q is neither (q == -1). */
static int qpos(const exec_topo_t *t, int x, int q)
{
    int nx = t->node[x], pos = 0;
    for (int m = 0; m < t->nnodes; m++) {
        if (q >= 0 && t->node[q] == m) {
            if (m == nx) return pos;
            return pos + (t->local[q] - t->local[x]) / nsize(t, nx);
        }
        pos += m == nx ? 1 : senders_count(t, m, x);
    }
    return pos;
}

/* Q_x in order: x and its senders. Returns the count (<= cap). */
static int qset(const exec_topo_t *t, int x, int *out, int cap)
{
    int nx = t->node[x], lx = nsize(t, nx), k = 0;
    for (int m = 0; m < t->nnodes; m++) {
        if (m == nx) {
            if (k < cap) out[k] = x;
            k++;
            continue;
        }
        for (int l = t->local[x]; l < nsize(t, m); l += lx) {
            if (k < cap) out[k] = at(t, m, l);
            k++;
        }
    }
    return k;
}

/* My local peers (starting after me) and cross-node peers (partners and senders, each once,
 * by node). */
typedef struct {
    int loc[MADE_FLAT_MAX_PEERS + 1], nloc;
    int rem[MADE_FLAT_MAX_PEERS * 4], nrem;   /* partners and senders (one list, no repeats) */
    int part[MADE_FLAT_MAX_PEERS * 4], npart; /* my partner on each other node, by node */
} hier_peers_t;

static void add_unique(int *list, int *n, int cap, int v)
{
    for (int i = 0; i < *n; i++)
        if (list[i] == v) return;
    if (*n < cap) list[(*n)++] = v;
}

static void hier_peers(const made_ctx_t *c, int x, hier_peers_t *hp)
{
    const exec_topo_t *t = c->t;
    int n = t->node[x], l = t->local[x], ln = nsize(t, n);
    memset(hp, 0, sizeof *hp);
    for (int k = 1; k < ln && hp->nloc < MADE_FLAT_MAX_PEERS + 1; k++)
        hp->loc[hp->nloc++] = at(t, n, (l + k) % ln);
    /* other nodes starting after mine (plans/multinode.py node_peers) */
    for (int k = 1; k < t->nnodes; k++) {
        int m = (n + k) % t->nnodes;
        int p = partner(t, m, x);
        hp->part[hp->npart++] = p;
        add_unique(hp->rem, &hp->nrem, (int)(sizeof hp->rem / sizeof hp->rem[0]), p);
        for (int j = l; j < nsize(t, m); j += ln)
            add_unique(hp->rem, &hp->nrem, (int)(sizeof hp->rem / sizeof hp->rem[0]), at(t, m, j));
    }
}

/* The cross-node senders to x (every other node), into out; returns the count. */
static int senders_of(const exec_topo_t *t, int x, int *out, int cap)
{
    int nx = t->node[x], lx = nsize(t, nx), k = 0;
    for (int d = 1; d < t->nnodes; d++) {
        int m = (nx + d) % t->nnodes;
        for (int l = t->local[x]; l < nsize(t, m); l += lx)
            if (k < cap) out[k++] = at(t, m, l);
    }
    return k;
}

/* Feasibility: every rank's local peers and cross-node peers fit a block's channel table. */
static bool hier_fits(const exec_topo_t *t)
{
    /* every rank has a partner on each other node, and its local peers */
    if (t->lmax - 1 > MADE_FLAT_MAX_PEERS || t->nnodes - 1 > MADE_FLAT_MAX_PEERS) return false;
    made_ctx_t c = {.t = t, .n = t->n};
    for (int x = 0; x < t->n; x++) {
        hier_peers_t hp;
        hier_peers(&c, x, &hp);
        if (hp.nrem > MADE_FLAT_MAX_PEERS) return false;
        int q = qpos(t, x, -1);
        if (q * nsize(t, t->node[x]) > 1 << 20) return false;
    }
    return true;
}

/* Scratch regions of the hierarchical plans, the same on every rank (the largest need). */
typedef struct {
    uint32_t qmax; /* largest |Q_x| */
    uint32_t a;    /* intra reduce-scatter slots: |Q| x L each */
    uint32_t p;    /* partial sums: |Q| */
    uint32_t b;    /* partials from other nodes: one per node */
    uint32_t cc;   /* allgather slots: one per rank */
} hier_layout_t;

static void hier_layout(const exec_topo_t *t, hier_layout_t *h)
{
    memset(h, 0, sizeof *h);
    uint32_t amax = 0;
    for (int x = 0; x < t->n; x++) {
        uint32_t q = (uint32_t)qpos(t, x, -1);
        uint32_t a = q * (uint32_t)nsize(t, t->node[x]);
        if (q > h->qmax) h->qmax = q;
        if (a > amax) amax = a;
    }
    h->a = 0;
    h->p = amax;
    h->b = h->p + h->qmax;
    h->cc = h->b + (uint32_t)t->nnodes;
}

/*
 * Hierarchical reduce-scatter of the blocks of every rank: block q of my input (input chunk
 * `ibase + q`) summed over all ranks lands at `dst` on rank q.
 *  1. inside my node: every block of Q_y to local peer y (scratch A at pos_y(q) x L + my local
 *     index); I reduce each block of Q_x with what my local peers sent (partials, scratch P);
 *  2. across nodes: the partial of block q (q a sender of mine) to q (scratch B at my node);
 *     I reduce my partial with what the aggregators of the other nodes sent into `dst`.
 */
static void hier_rs(plan_mk_t *mk, const made_ctx_t *c, const hier_peers_t *hp,
                    const hier_layout_t *h, plan_mk_desc_t dst)
{
    const exec_topo_t *t = c->t;
    int x = c->me, n = t->node[x], ln = nsize(t, n), lx = t->local[x];
    int q[MADE_FLAT_MAX_PEERS * 4 + 2];
    /* 1. intra-node: my input blocks bound for each local peer's aggregation */
    for (int i = 0; i < hp->nloc; i++) {
        int y = hp->loc[i];
        int nq = qset(t, y, q, (int)(sizeof q / sizeof q[0]));
        for (int k = 0; k < nq; k++)
            plan_mk_xfer(mk, 0, PLAN_OP_PUT, MEM, R(y, SCR, h->a + (uint32_t)(k * ln + lx), 1),
                         L(IN, (uint32_t)q[k], 1));
    }
    publish_and_wait(mk, 0, hp->loc, hp->nloc);
    int nq = qset(t, x, q, (int)(sizeof q / sizeof q[0]));
    plan_mk_desc_t part[MADE_FLAT_MAX_PEERS * 4 + 2];
    for (int k = 0; k < nq; k++) {
        if (ln == 1) {
            part[k] = L(IN, (uint32_t)q[k], 1);
            continue;
        }
        plan_mk_desc_t others[MADE_FLAT_MAX_PEERS];
        int no = 0;
        for (int j = 0; j < ln; j++)
            if (j != lx) others[no++] = L(SCR, h->a + (uint32_t)(k * ln + j), 1);
        part[k] = L(SCR, h->p + (uint32_t)k, 1);
        plan_mk_reduce(mk, 0, false, part[k], L(IN, (uint32_t)q[k], 1), others, no, redop());
    }
    /* 2. across nodes */
    int mine = -1;
    for (int k = 0; k < nq; k++) {
        if (q[k] == x) {
            mine = k;
            continue;
        }
        plan_mk_xfer(mk, 0, PLAN_OP_PWS, PORT, R(q[k], SCR, h->b + (uint32_t)n, 1), part[k]);
    }
    plan_mk_desc_t others[MADE_FLAT_MAX_PEERS * 4];
    int no = 0;
    for (int i = 0; i < hp->npart; i++) {
        int p = hp->part[i];
        plan_mk_wait(mk, 0, PORT, p, false, AFTER);
        others[no++] = L(SCR, h->b + (uint32_t)t->node[p], 1);
    }
    plan_mk_reduce(mk, 0, false, dst, part[mine], others, no, redop());
}

/*
 * Hierarchical allgather of one block per rank: `src` of rank q lands in output chunk
 * `obase + q` of every rank. 1. my block to my partner on every other node (scratch C at my
 * rank); I wait for my senders'. 2. my block and my senders' to every local peer (scratch C);
 * then every block that is not mine is copied out.
 */
static void hier_ag(plan_mk_t *mk, const made_ctx_t *c, const hier_peers_t *hp,
                    const hier_layout_t *h, plan_mk_desc_t src, bool copy_mine)
{
    const exec_topo_t *t = c->t;
    int x = c->me;
    for (int i = 0; i < hp->npart; i++)
        plan_mk_xfer(mk, 0, PLAN_OP_PWS, PORT, R(hp->part[i], SCR, h->cc + (uint32_t)x, 1), src);
    int snd[MADE_FLAT_MAX_PEERS * 4];
    int ns = senders_of(t, x, snd, (int)(sizeof snd / sizeof snd[0]));
    for (int i = 0; i < ns; i++) plan_mk_wait(mk, 0, PORT, snd[i], false, AFTER);
    /* one source to every local peer in a row: emitting fuses them into one put whose source
     * the interpreter loads once for all the peers (peer by peer, it loaded every source once
     * per peer) */
    for (int i = 0; i < hp->nloc; i++)
        plan_mk_xfer(mk, 0, PLAN_OP_PUT, MEM, R(hp->loc[i], SCR, h->cc + (uint32_t)x, 1), src);
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < hp->nloc; i++)
            plan_mk_xfer(mk, 0, PLAN_OP_PUT, MEM, R(hp->loc[i], SCR, h->cc + (uint32_t)snd[k], 1),
                         L(SCR, h->cc + (uint32_t)snd[k], 1));
    publish(mk, 0, hp->loc, hp->nloc);
    if (copy_mine) plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)x, 1), src);
    for (int k = 0; k < ns; k++)
        plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)snd[k], 1),
                     L(SCR, h->cc + (uint32_t)snd[k], 1));
    for (int i = 0; i < hp->nloc; i++) plan_mk_wait(mk, 0, MEM, hp->loc[i], false, AFTER);
    for (int i = 0; i < hp->nloc; i++) {
        int y = hp->loc[i];
        int ys[MADE_FLAT_MAX_PEERS * 4];
        int nys = senders_of(t, y, ys, (int)(sizeof ys / sizeof ys[0]));
        plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)y, 1), L(SCR, h->cc + (uint32_t)y, 1));
        for (int k = 0; k < nys; k++)
            plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)ys[k], 1),
                         L(SCR, h->cc + (uint32_t)ys[k], 1));
    }
}

/* channels in a fixed order: local peers, then cross-node peers */
static void hier_begin(plan_mk_t *mk, const made_ctx_t *c, hier_peers_t *hp)
{
    hier_peers(c, c->me, hp);
    int all[MADE_FLAT_MAX_PEERS * 5 + 1], na = 0;
    for (int i = 0; i < hp->nloc; i++) {
        plan_mk_chan(mk, MEM, hp->loc[i]);
        all[na++] = hp->loc[i];
    }
    for (int i = 0; i < hp->nrem; i++) {
        plan_mk_chan(mk, PORT, hp->rem[i]);
        all[na++] = hp->rem[i];
    }
    handshake(mk, c, 0, all, na);
}

/*
 * Two nodes of one rank: one exchange of the whole input and a local reduce
 * (plans/multinode.py _pair_allreduce): the hierarchy would send the same bytes in two
 * dependent network steps (reduce-scatter, then allgather across the pair).
 */
static void pair_allreduce(plan_mk_t *mk, const made_ctx_t *c)
{
    int N = c->n, p = 1 - c->me;
    plan_mk_chan(mk, PORT, p);
    handshake(mk, c, 0, &p, 1);
    plan_mk_xfer(mk, 0, PLAN_OP_PWSF, PORT, R(p, SCR, 0, (uint32_t)N), L(IN, 0, (uint32_t)N));
    plan_mk_wait(mk, 0, PORT, p, false, AFTER);
    plan_mk_desc_t other = L(SCR, 0, (uint32_t)N);
    plan_mk_reduce(mk, 0, false, L(OUT, 0, (uint32_t)N), L(IN, 0, (uint32_t)N), &other, 1,
                   redop());
}

static void pair_allreduce_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    d[0] = d[1] = d[2] = (uint32_t)c->n;
}

static void hier_allreduce(plan_mk_t *mk, const made_ctx_t *c)
{
    hier_peers_t hp;
    hier_layout_t h;
    hier_layout(c->t, &h);
    hier_begin(mk, c, &hp);
    plan_mk_desc_t mine = L(OUT, (uint32_t)c->me, 1);
    hier_rs(mk, c, &hp, &h, mine);
    hier_ag(mk, c, &hp, &h, mine, false);
    flush_all(mk, 0, hp.rem, hp.nrem);
}

static void hier_allreduce_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    hier_layout_t h;
    hier_layout(c->t, &h);
    d[0] = d[1] = (uint32_t)c->n;
    d[2] = h.cc + (uint32_t)c->n;
}

static void hier_reducescatter(plan_mk_t *mk, const made_ctx_t *c)
{
    hier_peers_t hp;
    hier_layout_t h;
    hier_layout(c->t, &h);
    hier_begin(mk, c, &hp);
    hier_rs(mk, c, &hp, &h, L(OUT, 0, 1));
    flush_all(mk, 0, hp.rem, hp.nrem);
}

static void hier_reducescatter_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    hier_layout_t h;
    hier_layout(c->t, &h);
    d[0] = (uint32_t)c->n;
    d[1] = 1;
    d[2] = h.cc;
}

static void hier_allgather(plan_mk_t *mk, const made_ctx_t *c)
{
    hier_peers_t hp;
    hier_layout_t h;
    hier_layout(c->t, &h);
    hier_begin(mk, c, &hp);
    hier_ag(mk, c, &hp, &h, L(IN, 0, 1), true);
    flush_all(mk, 0, hp.rem, hp.nrem);
}

static void hier_allgather_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    hier_layout_t h;
    hier_layout(c->t, &h);
    d[0] = 1;
    d[1] = (uint32_t)c->n;
    d[2] = h.cc + (uint32_t)c->n;
}

/*
 * Alltoall: 1. to my partner on every other node, the blocks for that node's ranks (scratch A:
 * per sender at pos(sender) x L + destination's local index); 2. to every local peer y, my block
 * for y and, from each of my senders, its block for y (scratch C at the source rank); copy out.
 */
static void hier_alltoall(plan_mk_t *mk, const made_ctx_t *c)
{
    const exec_topo_t *t = c->t;
    hier_peers_t hp;
    hier_layout_t h;
    hier_layout(t, &h);
    hier_begin(mk, c, &hp);
    int x = c->me, n = t->node[x], ln = nsize(t, n);
    for (int i = 0; i < hp.npart; i++) {
        int p = hp.part[i], m = t->node[p], lm = nsize(t, m);
        uint32_t base = h.a + (uint32_t)(qpos(t, p, x) * lm);
        /* one put per run of consecutive destination ranks (one run when ranks are laid out
         * node-major); the last one signals (a port channel keeps its transfers in order) */
        for (int j = 0; j < lm;) {
            int j2 = j + 1;
            while (j2 < lm && at(t, m, j2) == at(t, m, j) + (j2 - j)) j2++;
            plan_mk_xfer(mk, 0, j2 == lm ? PLAN_OP_PWS : PLAN_OP_PUT, PORT,
                         R(p, SCR, base + (uint32_t)j, (uint32_t)(j2 - j)),
                         L(IN, (uint32_t)at(t, m, j), (uint32_t)(j2 - j)));
            j = j2;
        }
    }
    int snd[MADE_FLAT_MAX_PEERS * 4];
    int ns = senders_of(t, x, snd, (int)(sizeof snd / sizeof snd[0]));
    for (int i = 0; i < ns; i++) plan_mk_wait(mk, 0, PORT, snd[i], false, AFTER);
    for (int i = 0; i < hp.nloc; i++) {
        int y = hp.loc[i], ly = t->local[y];
        plan_mk_xfer(mk, 0, PLAN_OP_PUT, MEM, R(y, SCR, h.cc + (uint32_t)x, 1),
                     L(IN, (uint32_t)y, 1));
        for (int k = 0; k < ns; k++)
            plan_mk_xfer(mk, 0, PLAN_OP_PUT, MEM, R(y, SCR, h.cc + (uint32_t)snd[k], 1),
                         L(SCR, h.a + (uint32_t)(qpos(t, x, snd[k]) * ln + ly), 1));
    }
    publish(mk, 0, hp.loc, hp.nloc);
    plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)x, 1), L(IN, (uint32_t)x, 1));
    for (int k = 0; k < ns; k++)
        plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)snd[k], 1),
                     L(SCR, h.a + (uint32_t)(qpos(t, x, snd[k]) * ln + t->local[x]), 1));
    for (int i = 0; i < hp.nloc; i++) plan_mk_wait(mk, 0, MEM, hp.loc[i], false, AFTER);
    for (int i = 0; i < hp.nloc; i++) {
        int y = hp.loc[i];
        int ys[MADE_FLAT_MAX_PEERS * 4];
        int nys = senders_of(t, y, ys, (int)(sizeof ys / sizeof ys[0]));
        plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)y, 1), L(SCR, h.cc + (uint32_t)y, 1));
        for (int k = 0; k < nys; k++)
            plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)ys[k], 1),
                         L(SCR, h.cc + (uint32_t)ys[k], 1));
    }
    flush_all(mk, 0, hp.rem, hp.nrem);
}

static void hier_alltoall_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    hier_layout_t h;
    hier_layout(c->t, &h);
    d[0] = d[1] = (uint32_t)c->n;
    d[2] = h.cc + (uint32_t)c->n;
}

/* Who forwards the root's data on node m: the root on its own node, else its partner there. */
static int node_leader(const exec_topo_t *t, int m, int root)
{
    return t->node[root] == m ? root : partner(t, m, root);
}

/*
 * Broadcast: the root sends to the leader of every other node (port) and to its local peers;
 * a leader sends to its local peers. Each receiver first tells its source it is ready.
 */
static void hier_broadcast(plan_mk_t *mk, const made_ctx_t *c)
{
    const exec_topo_t *t = c->t;
    int x = c->me, root = c->s->root, n = t->node[x], ln = nsize(t, n);
    int lead = node_leader(t, n, root);
    int src = x == root ? -1 : x == lead ? root : lead;
    int tg[MADE_FLAT_MAX_PEERS * 2 + 2], ntg = 0;
    if (x == lead)
        for (int k = 1; k < ln; k++) tg[ntg++] = at(t, n, (t->local[x] + k) % ln);
    if (x == root)
        for (int k = 1; k < t->nnodes; k++) tg[ntg++] = node_leader(t, (n + k) % t->nnodes, root);
    if (src >= 0) plan_mk_chan(mk, ctype_of(c, x, src), src);
    for (int i = 0; i < ntg; i++) plan_mk_chan(mk, ctype_of(c, x, tg[i]), tg[i]);
    if (src >= 0) plan_mk_signal(mk, 0, ctype_of(c, x, src), src, true, 0);
    for (int i = 0; i < ntg; i++) plan_mk_wait(mk, 0, ctype_of(c, x, tg[i]), tg[i], true, AFTER);
    plan_mk_desc_t data = x == root ? L(IN, 0, 1) : L(SCR, 0, 1);
    if (src >= 0) plan_mk_wait(mk, 0, ctype_of(c, x, src), src, false, AFTER);
    for (int i = 0; i < ntg; i++) put_to(mk, c, 0, R(tg[i], SCR, 0, 1), data);
    for (int i = 0; i < ntg; i++)
        if (ctype_of(c, x, tg[i]) == MEM) plan_mk_signal(mk, 0, MEM, tg[i], false, BEFORE);
    plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, 0, 1), data);
    for (int i = 0; i < ntg; i++)
        if (ctype_of(c, x, tg[i]) == PORT) plan_mk_flush(mk, 0, tg[i], 0);
}

/*
 * Reduce to the root: every rank puts its input into its node leader's scratch (slot: its local
 * index); a leader reduces its node's inputs and puts the partial into the root's scratch (slot
 * lmax + its node); the root reduces its node's partial with the others. Each receiver first
 * tells its senders their slots are free.
 */
static void hier_reduce(plan_mk_t *mk, const made_ctx_t *c)
{
    const exec_topo_t *t = c->t;
    int x = c->me, root = c->s->root, n = t->node[x], ln = nsize(t, n);
    uint32_t P = (uint32_t)t->lmax, B = P + 1;
    int lead = node_leader(t, n, root);
    int loc[MADE_FLAT_MAX_PEERS + 1], nloc = 0, rem[MADE_FLAT_MAX_PEERS * 2], nrem = 0;
    if (x == lead)
        for (int k = 1; k < ln; k++) loc[nloc++] = at(t, n, (t->local[x] + k) % ln);
    if (x == root)
        for (int k = 1; k < t->nnodes; k++) rem[nrem++] = node_leader(t, (n + k) % t->nnodes, root);
    int up = x == root ? -1 : x == lead ? root : lead; /* whom I send to */
    if (up >= 0) plan_mk_chan(mk, ctype_of(c, x, up), up);
    for (int i = 0; i < nloc; i++) plan_mk_chan(mk, MEM, loc[i]);
    for (int i = 0; i < nrem; i++) plan_mk_chan(mk, PORT, rem[i]);
    for (int i = 0; i < nloc; i++) plan_mk_signal(mk, 0, MEM, loc[i], true, 0);
    for (int i = 0; i < nrem; i++) plan_mk_signal(mk, 0, PORT, rem[i], true, 0);
    if (up >= 0) plan_mk_wait(mk, 0, ctype_of(c, x, up), up, true, AFTER);
    if (x != lead) {
        plan_mk_xfer(mk, 0, PLAN_OP_PUT, MEM, R(up, SCR, (uint32_t)t->local[x], 1), L(IN, 0, 1));
        plan_mk_signal(mk, 0, MEM, up, false, BEFORE);
        return;
    }
    plan_mk_desc_t part = L(IN, 0, 1);
    if (nloc) {
        for (int i = 0; i < nloc; i++) plan_mk_wait(mk, 0, MEM, loc[i], false, AFTER);
        plan_mk_desc_t others[MADE_FLAT_MAX_PEERS];
        for (int i = 0; i < nloc; i++) others[i] = L(SCR, (uint32_t)t->local[loc[i]], 1);
        part = x == root && !nrem ? L(OUT, 0, 1) : L(SCR, P, 1);
        plan_mk_reduce(mk, 0, false, part, L(IN, 0, 1), others, nloc, redop());
    }
    if (x != root) {
        plan_mk_xfer(mk, 0, PLAN_OP_PWS, PORT, R(up, SCR, B + (uint32_t)n, 1), part);
        plan_mk_flush(mk, 0, up, 0);
        return;
    }
    if (!nrem) {
        if (!nloc) plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, 0, 1), part);
        return;
    }
    plan_mk_desc_t others[MADE_FLAT_MAX_PEERS * 2];
    for (int i = 0; i < nrem; i++) {
        plan_mk_wait(mk, 0, PORT, rem[i], false, AFTER);
        others[i] = L(SCR, B + (uint32_t)t->node[rem[i]], 1);
    }
    plan_mk_reduce(mk, 0, false, L(OUT, 0, 1), part, others, nrem, redop());
}

static void hier_reduce_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    d[0] = d[1] = 1;
    d[2] = (uint32_t)(c->t->lmax + 1 + c->t->nnodes);
}

/* ---- several nodes, LL packets (plans/multinode.py's packet plans, any layout) ------------
 *
 * Every byte travels as packets that carry the launch's flag: no handshake, signal or flush; a
 * call costs one network one-way latency. A port channel relays packets already formatted in
 * the sender's scratch (port ppkt moves whole scratch slots and waits for every flag of the
 * slot), so every image that crosses a port is formatted from a PLAIN scratch copy: padding
 * included, flags in every unit. Plain slots start at 2 x the packet slots (a packet slot c
 * takes bytes [2c, 2c + 2) x the chunk size). Each rank also declares a channel to every rank
 * that sends to it, so both ends of a pair set it up (unused channels cost a connection).
 *
 * Their size cap (made_pkt_cap): every port put of a packet image stays at most 16 KiB, under
 * UCX's eager/rendezvous switch (plans/multinode.py PKT_IMAGE_MAX, docs/multinode.md).
 */
#define MADE_PKT_IMAGE_MAX (16u * 1024u)

/* Packet slot layout of the packet allreduce (chunks): A intra slots (|Q| x L), F my formatted
 * partials (|Q|), R partials from the other nodes (nodes x |Q|), G allgather slots (one per
 * rank); plain from 2M: T my partials (|Q|). */
typedef struct {
    uint32_t qmax, a, f, r, g, m, t;
} pkt_layout_t;

static void pkt_layout(const exec_topo_t *t, pkt_layout_t *h)
{
    hier_layout_t hl;
    hier_layout(t, &hl);
    h->qmax = hl.qmax;
    h->a = 0;
    h->f = hl.p; /* the largest |Q| x L */
    h->r = h->f + h->qmax;
    h->g = h->r + (uint32_t)t->nnodes * h->qmax;
    h->m = h->g + (uint32_t)t->n;
    h->t = 2 * h->m;
}

/*
 * Allreduce, one block per rank, blocks aggregated as in hier_rs (Q_x):
 *  1. inside the node, the blocks of each local peer's Q as packets into its slots A;
 *  2. I reduce my blocks' node partials (plain, T) and format them (F);
 *  3. each partial to the aggregators of the same block on every other node (port ppkt: one
 *     put per run of slots, the whole of Q_x when nodes are equal);
 *  4. I reduce my partials with the others' into the output;
 *  5. inside the node, my blocks as packets to every local peer (G), and I unpack theirs.
 * With equal nodes this is plans/multinode.py _pkt_allreduce (the partial stripe to every node
 * peer, each node peer reducing the stripe).
 */
/* The other aggregators of my blocks (each block's aggregator on every other node): they and I
 * exchange partials, so the relation is symmetric. Returns the count (<= cap). */
static int pkt_peers(const exec_topo_t *t, int x, int *out, int cap)
{
    int q[MADE_FLAT_MAX_PEERS * 4 + 2], n = t->node[x], np = 0;
    int nq = qset(t, x, q, (int)(sizeof q / sizeof q[0]));
    for (int d = 1; d < t->nnodes; d++)
        for (int k = 0; k < nq; k++)
            add_unique(out, &np, cap, partner(t, (n + d) % t->nnodes, q[k]));
    return np;
}

static void pkt_allreduce(plan_mk_t *mk, const made_ctx_t *c)
{
    const exec_topo_t *t = c->t;
    pkt_layout_t h;
    pkt_layout(t, &h);
    hier_peers_t hp;
    int x = c->me, n = t->node[x], ln = nsize(t, n), lx = t->local[x];
    hier_peers(c, x, &hp);
    int rem[MADE_FLAT_MAX_PEERS * 4];
    int nrem = pkt_peers(t, x, rem, (int)(sizeof rem / sizeof rem[0]));
    for (int i = 0; i < hp.nloc; i++) plan_mk_chan(mk, MEM, hp.loc[i]);
    for (int i = 0; i < nrem; i++) plan_mk_chan(mk, PORT, rem[i]);
    int q[MADE_FLAT_MAX_PEERS * 4 + 2], yq[MADE_FLAT_MAX_PEERS * 4 + 2];
    int nq = qset(t, x, q, (int)(sizeof q / sizeof q[0]));
    /* 1. */
    for (int i = 0; i < hp.nloc; i++) {
        int y = hp.loc[i];
        int ny = qset(t, y, yq, (int)(sizeof yq / sizeof yq[0]));
        for (int k = 0; k < ny; k++)
            plan_mk_xfer(mk, 0, PLAN_OP_PPKT, MEM, R(y, SCR, h.a + (uint32_t)(k * ln + lx), 1),
                         L(IN, (uint32_t)yq[k], 1));
    }
    /* 2. (a sync between the reduces and the formatting: a reduce fused with its cpkt formats
     * only the data's bytes, not the whole slot the port put moves) */
    for (int k = 0; k < nq; k++) {
        plan_mk_desc_t others[MADE_FLAT_MAX_PEERS];
        int no = 0;
        for (int j = 0; j < ln; j++)
            if (j != lx) others[no++] = L(SCR, h.a + (uint32_t)(k * ln + j), 1);
        if (no)
            plan_mk_reduce(mk, 0, true, L(SCR, h.t + (uint32_t)k, 1), L(IN, (uint32_t)q[k], 1),
                           others, no, redop());
        else
            plan_mk_copy(mk, 0, PLAN_OP_COPY, L(SCR, h.t + (uint32_t)k, 1),
                         L(IN, (uint32_t)q[k], 1));
    }
    plan_mk_nop(mk, 0);
    for (int k = 0; k < nq; k++)
        plan_mk_copy(mk, 0, PLAN_OP_CPKT, L(SCR, h.f + (uint32_t)k, 1),
                     L(SCR, h.t + (uint32_t)k, 1));
    /* 3. runs of my partials bound for one aggregator at consecutive slots */
    for (int d = 1; d < t->nnodes; d++) {
        int m = (n + d) % t->nnodes;
        for (int k = 0; k < nq;) {
            int y = partner(t, m, q[k]), slot = qpos(t, y, q[k]);
            int k2 = k + 1;
            while (k2 < nq && partner(t, m, q[k2]) == y && qpos(t, y, q[k2]) == slot + (k2 - k))
                k2++;
            uint32_t len = (uint32_t)(k2 - k);
            plan_mk_xfer(mk, 0, PLAN_OP_PPKT, PORT,
                         R(y, SCR, h.r + (uint32_t)n * h.qmax + (uint32_t)slot, len),
                         L(SCR, h.f + (uint32_t)k, len));
            k = k2;
        }
    }
    /* 4. */
    for (int k = 0; k < nq; k++) {
        plan_mk_desc_t others[MADE_FLAT_MAX_PEERS];
        int no = 0;
        for (int d = 1; d < t->nnodes; d++) {
            int m = (n + d) % t->nnodes;
            others[no++] = L(SCR, h.r + (uint32_t)m * h.qmax + (uint32_t)k, 1);
        }
        plan_mk_reduce(mk, 0, true, L(OUT, (uint32_t)q[k], 1), L(SCR, h.t + (uint32_t)k, 1),
                       others, no, redop());
    }
    /* 5. */
    for (int i = 0; i < hp.nloc; i++)
        for (int k = 0; k < nq; k++)
            plan_mk_xfer(mk, 0, PLAN_OP_PPKT, MEM, R(hp.loc[i], SCR, h.g + (uint32_t)q[k], 1),
                         L(OUT, (uint32_t)q[k], 1));
    for (int i = 0; i < hp.nloc; i++) {
        int ny = qset(t, hp.loc[i], yq, (int)(sizeof yq / sizeof yq[0]));
        for (int k = 0; k < ny; k++)
            plan_mk_copy(mk, 0, PLAN_OP_UPKT, L(OUT, (uint32_t)yq[k], 1),
                         L(SCR, h.g + (uint32_t)yq[k], 1));
    }
}

static void pkt_allreduce_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    pkt_layout_t h;
    pkt_layout(c->t, &h);
    d[0] = d[1] = (uint32_t)c->n;
    d[2] = h.t + h.qmax;
}

/*
 * Allgather: my input, formatted once (from a plain copy), to my partner on every other node
 * (port ppkt) and as packets to every local peer (memory ppkt); what my senders send me I relay
 * to my local peers as it lands (memory rppkt). Packet slot q holds rank q's input; plain, from
 * 2N: mine. plans/multinode.py _pkt_allgather with any node sizes.
 */
static void pkt_allgather(plan_mk_t *mk, const made_ctx_t *c)
{
    const exec_topo_t *t = c->t;
    hier_peers_t hp;
    int x = c->me, N = c->n;
    uint32_t P = 2 * (uint32_t)N;
    hier_peers(c, x, &hp);
    for (int i = 0; i < hp.nloc; i++) plan_mk_chan(mk, MEM, hp.loc[i]);
    for (int i = 0; i < hp.nrem; i++) plan_mk_chan(mk, PORT, hp.rem[i]);
    plan_mk_copy(mk, 0, PLAN_OP_COPY, L(SCR, P, 1), L(IN, 0, 1));
    plan_mk_copy(mk, 0, PLAN_OP_CPKT, L(SCR, (uint32_t)x, 1), L(SCR, P, 1));
    for (int i = 0; i < hp.npart; i++)
        plan_mk_xfer(mk, 0, PLAN_OP_PPKT, PORT, R(hp.part[i], SCR, (uint32_t)x, 1),
                     L(SCR, (uint32_t)x, 1));
    for (int i = 0; i < hp.nloc; i++)
        plan_mk_xfer(mk, 0, PLAN_OP_PPKT, MEM, R(hp.loc[i], SCR, (uint32_t)x, 1), L(IN, 0, 1));
    plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)x, 1), L(IN, 0, 1));
    int snd[MADE_FLAT_MAX_PEERS * 4];
    int ns = senders_of(t, x, snd, (int)(sizeof snd / sizeof snd[0]));
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < hp.nloc; i++)
            plan_mk_xfer(mk, 0, PLAN_OP_RPPKT, MEM, R(hp.loc[i], SCR, (uint32_t)snd[k], 1),
                         L(SCR, (uint32_t)snd[k], 1));
    for (int k = 1; k < N; k++) {
        int qr = (x + k) % N;
        plan_mk_copy(mk, 0, PLAN_OP_UPKT, L(OUT, (uint32_t)qr, 1), L(SCR, (uint32_t)qr, 1));
    }
}

static void pkt_allgather_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    d[0] = 1;
    d[1] = (uint32_t)c->n;
    d[2] = 2 * (uint32_t)c->n + 1;
}

/*
 * Reducescatter, all pairs in one hop: chunk q of my input to rank q, as packets over memory
 * inside the node, across nodes copied to plain scratch, formatted and relayed (port ppkt).
 * Packet slots: [0, N) what rank q sent me, [N, 2N) my chunks for other nodes' ranks; plain
 * from 4N. plans/multinode.py _pkt_reducescatter.
 */
static void pkt_reducescatter(plan_mk_t *mk, const made_ctx_t *c)
{
    int x = c->me, N = c->n;
    uint32_t P = 4 * (uint32_t)N;
    for (int k = 1; k < N; k++) {
        int qr = (x + k) % N;
        plan_mk_chan(mk, ctype_of(c, x, qr), qr);
    }
    plan_mk_desc_t others[PLAN_MAX_DESCS];
    int no = 0;
    for (int k = 1; k < N; k++) {
        int qr = (x + k) % N;
        uint32_t uq = (uint32_t)qr;
        if (ctype_of(c, x, qr) == MEM) {
            plan_mk_xfer(mk, 0, PLAN_OP_PPKT, MEM, R(qr, SCR, (uint32_t)x, 1), L(IN, uq, 1));
        } else {
            plan_mk_copy(mk, 0, PLAN_OP_COPY, L(SCR, P + uq, 1), L(IN, uq, 1));
            plan_mk_copy(mk, 0, PLAN_OP_CPKT, L(SCR, (uint32_t)N + uq, 1), L(SCR, P + uq, 1));
            plan_mk_xfer(mk, 0, PLAN_OP_PPKT, PORT, R(qr, SCR, (uint32_t)x, 1),
                         L(SCR, (uint32_t)N + uq, 1));
        }
        others[no++] = L(SCR, uq, 1);
    }
    plan_mk_reduce(mk, 0, true, L(OUT, 0, 1), L(IN, (uint32_t)x, 1), others, no, redop());
}

static void pkt_reducescatter_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    d[0] = (uint32_t)c->n;
    d[1] = 1;
    d[2] = 5 * (uint32_t)c->n;
}

/* Largest message of a packet plan across nodes: every port put at most MADE_PKT_IMAGE_MAX
 * bytes of packets (twice its data). Port puts: allreduce, runs of at most |Q| blocks of
 * msg / N; allgather, one block (the input, msg / N); reducescatter, one chunk (msg / N). */
uint64_t exec_made_pkt_cap(const exec_topo_t *t, const char *collective)
{
    uint64_t per = MADE_PKT_IMAGE_MAX / 2 * (uint64_t)t->n;
    if (!strcmp(collective, "allreduce")) {
        hier_layout_t hl;
        hier_layout(t, &hl);
        return per / (hl.qmax ? hl.qmax : 1);
    }
    return per;
}

/* Do the packet plans across nodes fit (hierarchical peers for allreduce and allgather, all
 * pairs for reducescatter, within a block's channel tables and a reduce's operands)? */
static bool pkt_fits(const exec_topo_t *t, int k)
{
    if (t->nnodes < 2 || !hier_fits(t)) return false;
    if (k == 1) return true;
    if (k == 2) { /* reducescatter: all pairs; the remote peers of each node */
        for (int m = 0; m < t->nnodes; m++)
            if (t->n - nsize(t, m) > MADE_FLAT_MAX_PEERS || t->n > PLAN_MAX_DESCS) return false;
        return true;
    }
    for (int x = 0; x < t->n; x++) { /* allreduce: every rank's aggregator peers */
        int peers[MADE_FLAT_MAX_PEERS * 4];
        if (pkt_peers(t, x, peers, (int)(sizeof peers / sizeof peers[0])) > MADE_FLAT_MAX_PEERS)
            return false;
    }
    return true;
}

/* ---- rings over every rank (node order), for shapes the all-pairs plans do not fit ---------- */

/* Ring position of rank r: ranks by node (topo order). */
typedef struct {
    int pos, next, prev, n;
} ring_t;

static void ring_of(const made_ctx_t *c, int x, ring_t *rg)
{
    const exec_topo_t *t = c->t;
    rg->n = t->n;
    rg->pos = t->off[t->node[x]] + t->local[x];
    rg->next = t->ranks[(rg->pos + 1) % t->n];
    rg->prev = t->ranks[(rg->pos + t->n - 1) % t->n];
}

static int ring_rank(const made_ctx_t *c, int pos)
{
    return c->t->ranks[(pos % c->n + c->n) % c->n];
}

static void ring_begin(plan_mk_t *mk, const made_ctx_t *c, ring_t *rg)
{
    ring_of(c, c->me, rg);
    int peers[2] = {rg->next, rg->prev};
    int np = rg->next == rg->prev ? 1 : 2;
    for (int i = 0; i < np; i++) plan_mk_chan(mk, ctype_of(c, c->me, peers[i]), peers[i]);
    handshake(mk, c, 0, peers, np);
}

/* One ring step: `src` to next's scratch slot `slot`, then wait for prev's into mine. */
static void ring_step(plan_mk_t *mk, const made_ctx_t *c, const ring_t *rg, uint32_t slot,
                      plan_mk_desc_t src)
{
    put_to(mk, c, 0, R(rg->next, SCR, slot, src.size), src);
    if (ctype_of(c, c->me, rg->next) == MEM) plan_mk_signal(mk, 0, MEM, rg->next, false, BEFORE);
    plan_mk_wait(mk, 0, ctype_of(c, c->me, rg->prev), rg->prev, false, AFTER);
}

/* Ring reduce-scatter: the block of ring position j (chunk ring_rank(j) of the input) summed
 * over every rank lands at `final` on position j. Scratch: N-1 receive slots, then N-2
 * partial sums. */
static void ring_rs(plan_mk_t *mk, const made_ctx_t *c, const ring_t *rg, plan_mk_desc_t final)
{
    int N = rg->n, i = rg->pos;
    plan_mk_desc_t acc = L(IN, (uint32_t)ring_rank(c, i - 1), 1);
    for (int s = 0; s < N - 1; s++) {
        ring_step(mk, c, rg, (uint32_t)s, acc);
        int blk = ring_rank(c, i - 2 - s);
        plan_mk_desc_t dst = s == N - 2 ? final : L(SCR, (uint32_t)(N - 1 + s), 1);
        plan_mk_desc_t rcv = L(SCR, (uint32_t)s, 1);
        plan_mk_reduce(mk, 0, false, dst, L(IN, (uint32_t)blk, 1), &rcv, 1, redop());
        acc = dst;
    }
}

/* Ring allgather of output chunks: position i holds chunk ring_rank(i) (in `own`); after N-1
 * steps every output chunk is in place. Scratch slots from `base`. */
static void ring_ag(plan_mk_t *mk, const made_ctx_t *c, const ring_t *rg, uint32_t base,
                    plan_mk_desc_t own)
{
    int N = rg->n, i = rg->pos;
    plan_mk_desc_t cur = own;
    for (int s = 0; s < N - 1; s++) {
        ring_step(mk, c, rg, base + (uint32_t)s, cur);
        int blk = ring_rank(c, i - 1 - s);
        plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)blk, 1), L(SCR, base + (uint32_t)s, 1));
        cur = L(SCR, base + (uint32_t)s, 1);
    }
}

static void ring_end(plan_mk_t *mk, const made_ctx_t *c, const ring_t *rg)
{
    if (ctype_of(c, c->me, rg->next) == PORT) plan_mk_flush(mk, 0, rg->next, 0);
}

static void ring_allreduce(plan_mk_t *mk, const made_ctx_t *c)
{
    ring_t rg;
    ring_begin(mk, c, &rg);
    plan_mk_desc_t mine = L(OUT, (uint32_t)c->me, 1);
    ring_rs(mk, c, &rg, mine);
    ring_ag(mk, c, &rg, (uint32_t)(2 * c->n - 3), mine);
    ring_end(mk, c, &rg);
}

static void ring_allreduce_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    d[0] = d[1] = (uint32_t)c->n;
    d[2] = 3 * (uint32_t)c->n;
}

static void ring_reducescatter(plan_mk_t *mk, const made_ctx_t *c)
{
    ring_t rg;
    ring_begin(mk, c, &rg);
    ring_rs(mk, c, &rg, L(OUT, 0, 1));
    ring_end(mk, c, &rg);
}

static void ring_reducescatter_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    d[0] = (uint32_t)c->n;
    d[1] = 1;
    d[2] = 2 * (uint32_t)c->n;
}

static void ring_allgather(plan_mk_t *mk, const made_ctx_t *c)
{
    ring_t rg;
    ring_begin(mk, c, &rg);
    plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)c->me, 1), L(IN, 0, 1));
    ring_ag(mk, c, &rg, 0, L(IN, 0, 1));
    ring_end(mk, c, &rg);
}

static void ring_allgather_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    d[0] = 1;
    d[1] = d[2] = (uint32_t)c->n;
}

/* Broadcast along the ring from the root (a chain of N-1 hops). */
static void ring_broadcast(plan_mk_t *mk, const made_ctx_t *c)
{
    ring_t rg;
    ring_of(c, c->me, &rg);
    int root = c->s->root, x = c->me;
    bool last = rg.next == root, first = x == root;
    if (!first) plan_mk_chan(mk, ctype_of(c, x, rg.prev), rg.prev);
    if (!last) plan_mk_chan(mk, ctype_of(c, x, rg.next), rg.next);
    if (!first) plan_mk_signal(mk, 0, ctype_of(c, x, rg.prev), rg.prev, true, 0);
    if (!last) plan_mk_wait(mk, 0, ctype_of(c, x, rg.next), rg.next, true, AFTER);
    plan_mk_desc_t data = first ? L(IN, 0, 1) : L(SCR, 0, 1);
    if (!first) plan_mk_wait(mk, 0, ctype_of(c, x, rg.prev), rg.prev, false, AFTER);
    if (!last) {
        put_to(mk, c, 0, R(rg.next, SCR, 0, 1), data);
        if (ctype_of(c, x, rg.next) == MEM) plan_mk_signal(mk, 0, MEM, rg.next, false, BEFORE);
    }
    plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, 0, 1), data);
    if (!last && ctype_of(c, x, rg.next) == PORT) plan_mk_flush(mk, 0, rg.next, 0);
}

/* Reduce along the ring into the root: the chain starts after the root, each adds its input. */
static void ring_reduce(plan_mk_t *mk, const made_ctx_t *c)
{
    ring_t rg;
    ring_of(c, c->me, &rg);
    int root = c->s->root, x = c->me;
    bool first = rg.prev == root, last = x == root; /* data flows prev -> next, ends at root */
    if (!first) plan_mk_chan(mk, ctype_of(c, x, rg.prev), rg.prev);
    if (!last) plan_mk_chan(mk, ctype_of(c, x, rg.next), rg.next);
    if (!first) plan_mk_signal(mk, 0, ctype_of(c, x, rg.prev), rg.prev, true, 0);
    if (!last) plan_mk_wait(mk, 0, ctype_of(c, x, rg.next), rg.next, true, AFTER);
    plan_mk_desc_t acc = L(IN, 0, 1);
    if (!first) {
        plan_mk_wait(mk, 0, ctype_of(c, x, rg.prev), rg.prev, false, AFTER);
        plan_mk_desc_t rcv = L(SCR, 0, 1);
        acc = last ? L(OUT, 0, 1) : L(SCR, 1, 1);
        plan_mk_reduce(mk, 0, false, acc, L(IN, 0, 1), &rcv, 1, redop());
    }
    if (!last) {
        put_to(mk, c, 0, R(rg.next, SCR, 0, 1), acc);
        if (ctype_of(c, x, rg.next) == MEM) plan_mk_signal(mk, 0, MEM, rg.next, false, BEFORE);
        else plan_mk_flush(mk, 0, rg.next, 0);
    } else if (first) {
        plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, 0, 1), acc);
    }
}

static void ring_rooted_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)c;
    (void)r;
    d[0] = d[1] = 1;
    d[2] = 2;
}

/*
 * Alltoall as pairwise exchanges spread over thread blocks of up to 16 peers each: a ready
 * handshake, each block into the peer's scratch, then copied out (pairs_alltoall); or, for
 * the count-exact alltoallv (executor/alltoallv.c), each block straight into the peer's output
 * (`to_output`), one op per peer that the lowering turns into KERN_OP_PUTV (the call's counts
 * and offsets, not these chunks). Either way a signal to every peer and a wait for every peer
 * follow: with `to_output`, a peer's next launch (whose fence publishes new offsets) starts
 * only after its block from this rank landed, and no handshake is needed since a plan that
 * reaches the peers' outputs fences every launch.
 */
static void pairs_any(plan_mk_t *mk, const made_ctx_t *c, bool to_output)
{
    int N = c->n, r = c->me, into = to_output ? OUT : SCR;
    for (int k = 1; k < N; k++) {
        int p = (r + k) % N;
        plan_mk_chan(mk, ctype_of(c, r, p), p);
    }
    if (plan_mk_is_stub(mk)) {
        /* a peer's resources as the focus rank's setup needs them (make_gpu): its channels
         * (above: their count and order name the counter slots) and the focus's buffer */
        plan_mk_rbuf(mk, ctype_of(c, r, c->focus), c->focus, into);
        return;
    }
    plan_mk_copy(mk, 0, PLAN_OP_COPY, L(OUT, (uint32_t)r, 1), L(IN, (uint32_t)r, 1));
    for (int k0 = 1, tb = 0; k0 < N; k0 += MADE_FLAT_MAX_PEERS, tb++) {
        int peers[MADE_FLAT_MAX_PEERS], np = 0, mem[MADE_FLAT_MAX_PEERS], nm = 0;
        for (int k = k0; k < N && k < k0 + MADE_FLAT_MAX_PEERS; k++) peers[np++] = (r + k) % N;
        for (int i = 0; i < np && !to_output; i++)
            plan_mk_signal(mk, tb, ctype_of(c, r, peers[i]), peers[i], true, 0);
        for (int i = 0; i < np && !to_output; i++)
            plan_mk_wait(mk, tb, ctype_of(c, r, peers[i]), peers[i], true, AFTER);
        for (int i = 0; i < np; i++) {
            put_to(mk, c, tb, R(peers[i], into, (uint32_t)r, 1), L(IN, (uint32_t)peers[i], 1));
            if (ctype_of(c, r, peers[i]) == MEM) mem[nm++] = peers[i];
        }
        publish(mk, tb, mem, nm);
        await_all(mk, c, tb, peers, np);
        for (int i = 0; i < np && !to_output; i++)
            plan_mk_copy(mk, tb, PLAN_OP_COPY, L(OUT, (uint32_t)peers[i], 1),
                         L(SCR, (uint32_t)peers[i], 1));
        for (int i = 0; i < np; i++)
            if (ctype_of(c, r, peers[i]) == PORT) plan_mk_flush(mk, tb, peers[i], 0);
    }
}

static void pairs_alltoall(plan_mk_t *mk, const made_ctx_t *c) { pairs_any(mk, c, false); }

static void v_alltoall(plan_mk_t *mk, const made_ctx_t *c) { pairs_any(mk, c, true); }

static void v_alltoall_dims(const made_ctx_t *c, int r, uint32_t d[3])
{
    (void)r;
    d[0] = d[1] = (uint32_t)c->n;
    d[2] = 0;
}

/* ---- choosing an algorithm ------------------------------------------------------------------- */

static const made_algo_t algo_one = {"one_rank", one_gen, one_dims, 4};

static bool flat_fits(const exec_topo_t *t)
{
    return t->nnodes == 1 && t->n - 1 <= MADE_FLAT_MAX_PEERS;
}

/* The algorithm of `spec` on `t`, or NULL with *why set. */
static const made_algo_t *choose(const exec_topo_t *t, const exec_made_spec_t *s, const char **why)
{
    static const made_algo_t flat[] = {
        {"allreduce_simple", flat_allreduce_simple, flat_allreduce_dims, 0},
        {"allreduce_pkt", flat_allreduce_pkt, flat_allreduce_dims, 0},
        {"allgather", flat_allgather, flat_allgather_dims, 0},
        {"reducescatter", flat_reducescatter, flat_reducescatter_dims, 0},
        {"alltoall", flat_alltoall, flat_alltoall_dims, 0},
        {"broadcast", flat_broadcast, rooted_dims_one, 0},
        {"reduce", flat_reduce, flat_reduce_dims, 0},
    };
    static const made_algo_t hier[] = {
        {"allreduce_hier", hier_allreduce, hier_allreduce_dims, 1},
        {"allgather_hier", hier_allgather, hier_allgather_dims, 1},
        {"reducescatter_hier", hier_reducescatter, hier_reducescatter_dims, 1},
        {"alltoall_hier", hier_alltoall, hier_alltoall_dims, 1},
        {"broadcast_hier", hier_broadcast, rooted_dims_one, 1},
        {"reduce_hier", hier_reduce, hier_reduce_dims, 1},
    };
    static const made_algo_t ring[] = {
        {"allreduce_ring", ring_allreduce, ring_allreduce_dims, 1},
        {"allgather_ring", ring_allgather, ring_allgather_dims, 1},
        {"reducescatter_ring", ring_reducescatter, ring_reducescatter_dims, 1},
        {"alltoall_pairs", pairs_alltoall, flat_alltoall_dims, 1},
        {"broadcast_ring", ring_broadcast, ring_rooted_dims, 1},
        {"reduce_ring", ring_reduce, ring_rooted_dims, 1},
    };
    int k = -1;
    for (int i = 0; i < EXEC_MADE_NCOLL; i++)
        if (!strcmp(s->collective, exec_made_collectives[i])) k = i;
    if (k < 0) {
        *why = "plans are made for allreduce, allgather, reducescatter, alltoall, broadcast and "
               "reduce";
        return NULL;
    }
    static const made_algo_t pkt[] = {
        {"allreduce_pkt", pkt_allreduce, pkt_allreduce_dims, 1},
        {"allgather_pkt", pkt_allgather, pkt_allgather_dims, 1},
        {"reducescatter_pkt", pkt_reducescatter, pkt_reducescatter_dims, 1},
    };
    if (s->proto == EXEC_MADE_PACKET) {
        if (k == 0 && t->n > 1 && flat_fits(t)) return &flat[1];
        if (k <= 2 && pkt_fits(t, k)) return &pkt[k];
        *why = t->n == 1 ? "one rank needs no packets"
             : k > 2     ? "packet plans are made for allreduce, allgather and reducescatter"
             : t->nnodes == 1
                 ? (k ? "packet plans on one node are made for allreduce only"
                      : "packet plans are made for one node of 2 to 17 ranks")
                 : "this layout's ranks have too many peers for a packet plan";
        return NULL;
    }
    if (t->n == 1) return &algo_one;
    if (flat_fits(t)) return k == 0 ? &flat[0] : &flat[k + 1];
    static const made_algo_t pair = {"allreduce_pair", pair_allreduce, pair_allreduce_dims, 1};
    if (k == 0 && t->n == 2 && t->nnodes == 2) return &pair;
    if (t->nnodes > 1 && hier_fits(t)) return &hier[k];
    return &ring[k];
}

const char *const exec_made_collectives[EXEC_MADE_NCOLL] = {
    "allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce"};

bool exec_made_collective(const char *c)
{
    for (int i = 0; c && i < EXEC_MADE_NCOLL; i++)
        if (!strcmp(c, exec_made_collectives[i])) return true;
    return false;
}

const char *exec_made_algorithm(const exec_topo_t *t, const exec_made_spec_t *s)
{
    const char *why = NULL;
    const made_algo_t *a = choose(t, s, &why);
    return a ? a->name : NULL;
}

/* ---- assembly ---------------------------------------------------------------------------------- */

/* "9", "3x2" (equal nodes) or "2+3+1" (cut short with "+..." past 64 characters) */
static void shape_name(const exec_topo_t *t, char *buf, size_t cap)
{
    if (t->nnodes == 1) {
        snprintf(buf, cap, "%d", t->n);
        return;
    }
    bool even = true;
    for (int k = 1; k < t->nnodes; k++) even &= nsize(t, k) == nsize(t, 0);
    if (even) {
        snprintf(buf, cap, "%dx%d", t->nnodes, nsize(t, 0));
        return;
    }
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < t->nnodes; k++) {
        if (len + 16 > cap || len > 64) {
            snprintf(buf + len, cap - len, "+...");
            return;
        }
        len += (size_t)snprintf(buf + len, cap - len, "%s%d", k ? "+" : "", nsize(t, k));
    }
}

static char *arena_strdup(plan_arena_t *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = plan_arena_alloc(a, n, 1);
    if (d) memcpy(d, s, n);
    return d;
}

/* Make rank r's gpu entry (full, or a stub). */
static mscclpp_result_t make_gpu(const made_ctx_t *base, const made_algo_t *a, int r, bool stub,
                                 plan_arena_t *arena, plan_gpu_t *g)
{
    made_ctx_t c = *base;
    c.me = r;
    int inst = a->instances ? a->instances : (base->s->instances > 0 ? base->s->instances : 1);
    plan_mk_t *mk = plan_mk_new(c.n, r, inst, stub);
    if (!mk) return ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory");
    if (stub) plan_mk_stub_focus(mk, c.focus);
    uint32_t d[3];
    a->dims(&c, r, d);
    plan_mk_dims(mk, d[0], d[1], d[2]);
    a->gen(mk, &c);
    mscclpp_result_t res = plan_mk_emit(mk, arena, g);
    plan_mk_free(mk);
    /* a stub keeps the focus rank's buffers only: setup with the focus exchanges those, and a
     * peer's accesses to third ranks would make the focus's setup scan O(ranks^2) entries
     * (a 1024-rank alltoall: a million) for nothing */
    if (res == MSCCLPP_OK && stub) {
        int k = 0;
        for (int q = 0; q < g->n_rbufs; q++)
            if (g->rbufs[q].owner == c.focus) g->rbufs[k++] = g->rbufs[q];
        g->n_rbufs = k;
        if (!k) g->rbufs = NULL;
    }
    return res;
}

static mscclpp_result_t assemble(const exec_topo_t *t, const exec_made_spec_t *s,
                                 const made_algo_t *a, int rank, struct mscclpp_plan **out);

mscclpp_result_t exec_made_plan(const exec_topo_t *t, const exec_made_spec_t *s, int rank,
                                struct mscclpp_plan **out)
{
    CHECK_ARG(t != NULL && s != NULL && s->collective != NULL && out != NULL);
    CHECK_ARG(rank >= -1 && rank < t->n);
    *out = NULL;
    bool rooted = !strcmp(s->collective, "broadcast") || !strcmp(s->collective, "reduce");
    if (rooted && (s->root < 0 || s->root >= t->n))
        return ERR_ARG("plan making: root %d is not a rank of %d", s->root, t->n);
    const char *why = NULL;
    const made_algo_t *a = choose(t, s, &why);
    if (!a)
        return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED,
                                "no %s plan is made for %s with %d "
                                "ranks on %d node(s): %s",
                                s->proto ? "packet" : "Simple", s->collective, t->n, t->nnodes,
                                why);
    return assemble(t, s, a, rank, out);
}

mscclpp_result_t exec_made_alltoallv(const exec_topo_t *t, int rank, struct mscclpp_plan **out)
{
    CHECK_ARG(t != NULL && out != NULL);
    CHECK_ARG(rank >= -1 && rank < t->n);
    *out = NULL;
    static const made_algo_t v = {"alltoallv", v_alltoall, v_alltoall_dims, 1};
    exec_made_spec_t s = {.collective = "alltoall", .proto = EXEC_MADE_SIMPLE, .instances = 1};
    CHECK(assemble(t, &s, &v, rank, out));
    (*out)->per_peer = true;
    return MSCCLPP_OK;
}

/* The plan of algorithm `a` for `s` (exec_made_plan). */
static mscclpp_result_t assemble(const exec_topo_t *t, const exec_made_spec_t *s,
                                 const made_algo_t *a, int rank, struct mscclpp_plan **out)
{
    bool rooted = !strcmp(s->collective, "broadcast") || !strcmp(s->collective, "reduce");
    plan_arena_t *arena = plan_arena_new();
    if (!arena) return ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory");
    mscclpp_result_t res = MSCCLPP_OK;
    struct mscclpp_plan *p = plan_arena_alloc(arena, 1, sizeof *p);
    plan_gpu_t *gpus = plan_arena_alloc(arena, (size_t)t->n, sizeof *gpus);
    char name[160], shape[96];
    shape_name(t, shape, sizeof shape);
    if (rooted && s->root)
        snprintf(name, sizeof name, "made_%s_%s_root%d", a->name, shape, s->root);
    else snprintf(name, sizeof name, "made_%s_%s", a->name, shape);
    if (!p || !gpus || !(p->name = arena_strdup(arena, name)) ||
        !(p->collective = arena_strdup(arena, s->collective))) {
        res = ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory");
        goto fail;
    }
    p->arena = arena;
    p->format_version = 1;
    p->packet_protocol = s->proto == EXEC_MADE_PACKET;
    p->double_scratch = p->packet_protocol;
    p->alignment = 16;
    p->threads_per_block = 1024;
    p->min_message_size = s->min_bytes;
    p->max_message_size = s->max_bytes ? s->max_bytes : MADE_INF;
    p->nranks = t->n;
    p->root = rooted ? s->root : 0;
    p->partial = rank >= 0;
    p->part_rank = rank;
    p->gpus = gpus;
    made_ctx_t c = {.t = t, .s = s, .n = t->n, .me = 0, .focus = rank};
    if (rank < 0) {
        for (int r = 0; r < t->n && res == MSCCLPP_OK; r++)
            res = make_gpu(&c, a, r, false, arena, &gpus[r]);
        if (res != MSCCLPP_OK) goto fail;
        *out = p;
        return MSCCLPP_OK;
    }
    CHECK_GOTO(make_gpu(&c, a, rank, false, arena, &gpus[rank]), res, fail);
    /* the peers I talk to: their channels and remote buffers (what setup pairs with mine) */
    int cap = gpus[rank].n_chan[MEM] + gpus[rank].n_chan[PORT] + 1;
    int *peers = calloc((size_t)cap, sizeof *peers);
    if (!peers) {
        res = ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory");
        goto fail;
    }
    int np = 0;
    for (int ty = MEM; ty <= PORT; ty++)
        for (int i = 0; i < gpus[rank].n_chan[ty]; i++)
            add_unique(peers, &np, cap, gpus[rank].peers[ty][i]);
    for (int i = 0; i < np && res == MSCCLPP_OK; i++)
        res = make_gpu(&c, a, peers[i], true, arena, &gpus[peers[i]]);
    free(peers);
    if (res != MSCCLPP_OK) goto fail;
    /* everyone else: chunk counts (scratch bounds and double-scratch halves use them) */
    for (int r = 0; r < t->n; r++) {
        if (gpus[r].id == r && (r == rank || gpus[r].n_chan[MEM] || gpus[r].n_chan[PORT])) continue;
        uint32_t d[3];
        c.me = r;
        a->dims(&c, r, d);
        int inst = a->instances ? a->instances : (s->instances > 0 ? s->instances : 1);
        gpus[r].id = r;
        gpus[r].input_chunks = d[0] * (uint32_t)inst;
        gpus[r].output_chunks = d[1] * (uint32_t)inst;
        gpus[r].scratch_chunks = d[2] * (uint32_t)inst;
    }
    *out = p;
    return MSCCLPP_OK;
fail:
    plan_arena_destroy(arena);
    return res;
}

/* ---- for tools and tests ----------------------------------------------------------------------- */

int exec_made_instances(const char *backend, const char *collective, exec_made_proto_t proto)
{
    /* as the default plans of plans/ (plans/_common.py): the packet allreduce one block per
     * peer, the host's Simple allreduce one block per rank, the rest 4 */
    if (proto == EXEC_MADE_PACKET) return 1;
    if (backend && !strcmp(backend, "host") && collective && !strcmp(collective, "allreduce"))
        return 1;
    return 4;
}

MSCCLPP_API mscclpp_result_t mscclpp_plan_make(const char *collective, const char *protocol,
                                               int nranks, const int *node_of, int root, int rank,
                                               mscclpp_plan_t **plan)
{
    CHECK_ARG(collective != NULL);
    CHECK_ARG(plan != NULL);
    CHECK_ARG(nranks >= 1 && nranks <= (1 << 20));
    CHECK_ARG(rank >= -1 && rank < nranks);
    *plan = NULL;
    exec_made_proto_t proto = EXEC_MADE_SIMPLE;
    if (protocol && !strcmp(protocol, "LL")) proto = EXEC_MADE_PACKET;
    else if (protocol && strcmp(protocol, "Simple"))
        return ERR_ARG("plan making: protocol \"%s\" (\"Simple\" or \"LL\")", protocol);
    if (!exec_made_collective(collective))
        return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED,
                                "plan making: no plans are made for "
                                "\"%s\" (allreduce, allgather, reducescatter, alltoall, "
                                "broadcast, reduce)",
                                collective);
    uint64_t *labels = calloc((size_t)nranks, sizeof *labels);
    if (!labels) return ERR(MSCCLPP_ERR_NO_MEMORY, "plan making: out of memory");
    for (int r = 0; node_of && r < nranks; r++) labels[r] = (uint64_t)(int64_t)node_of[r];
    exec_topo_t t;
    mscclpp_result_t res = exec_topo_init(&t, nranks, labels);
    free(labels);
    CHECK(res);
    exec_made_spec_t s = {.collective = collective,
                          .proto = proto,
                          .root = root,
                          .instances = exec_made_instances(NULL, collective, proto)};
    res = exec_made_plan(&t, &s, rank, plan);
    exec_topo_fini(&t);
    return res;
}
