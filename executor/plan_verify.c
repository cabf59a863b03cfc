/*
 * mscclpp_plan_verify(): one launch of every rank, simulated chunk by chunk (issue 8 item 8,
 * issue 22 item 2). The semantics are those of python/mscclpp/simulator.py
 * (`python3 -m mscclpp verify`), and tests/python/test_verify_agree.py holds the two to the
 * same verdict on every plan of a shared corpus: change one, change the other.
 *
 * The model:
 *   - Every rank's input, output and scratch is cut into sub-units: chunks times the resolution
 *     R (the lcm of the plan's tbg_size values, times VERIFY_PIPE_ITERS when a pipeline exists,
 *     at most VERIFY_MAX_RES). A value is the set of input sub-units that reached it and the
 *     reduction that combined them: a leaf (one input sub-unit, as it was), a reduction (op and
 *     the sorted ids), or a value known to be wrong (read before written, counted twice, two
 *     reductions mixed). In-place plans alias input into output as the executor does.
 *   - Packets live beside the plain data of each buffer; a packet read waits until every slot
 *     it reads has been written in this launch (an LL read that no op writes deadlocks).
 *   - Thread blocks of all ranks run as sequential programs, round robin in rank and block
 *     order, each as far as it can: a wait needs a pending signal on its channel (the i-th
 *     channel from A to B, memory then port, is paired with the i-th from B to A), a semaphore
 *     acquire a token, a barrier its blocks, a packet read its packets. Pipeline bodies run
 *     VERIFY_PIPE_ITERS times, each on its slice of every descriptor. When nothing moves,
 *     blocks left over deadlock.
 *   - Ordering (when the plan has at most VERIFY_RACE_MAX_BLOCKS blocks): each block carries a
 *     vector clock; nop and barrier make a block's writes visible to its own threads, signal /
 *     sem_release publish what the block has made visible (a port put-with-signal also covers
 *     its own put), wait / sem_acquire import it, packets carry their writer's knowledge. A
 *     read or write of data another block wrote or read, not ordered before it, is a race; so
 *     is an output written, or an input read, by a block that the rank's end does not wait for.
 *   - At the end: channel counters and semaphores back where they started, and every output
 *     sub-unit equal to what the collective must produce (allreduce, allgather, reducescatter,
 *     alltoall, broadcast (the root's input everywhere), reduce (the reduction on the root; other
 *     ranks' outputs are free), sendrecv from rank r-1; "test" and "custom" have no reference
 *     result).
 * The first problem found is the error: it names the rank, thread block, op (JSON path) and the
 * peer, semaphore, barrier or chunk concerned.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "executor/plan.h"

#define VERIFY_PIPE_ITERS 2         /* pipeline bodies run this often (any count must work) */
#define VERIFY_MAX_RES 64           /* sub-units per chunk at most */
#define VERIFY_RACE_MAX_BLOCKS 4096 /* ordering is checked up to this many blocks in all */
#define VERIFY_MAX_UNITS (1u << 26) /* sub-units of all buffers of all ranks at most */

#define VAL_NONE 0u /* never written */
#define OP_LEAF (-1)
#define OP_BAD (-2)
#define NO_BLOCK UINT32_MAX

typedef uint32_t val_t; /* VAL_NONE, 1..n_leaves: input sub-unit id + 1, above: node */

typedef enum { BAD_UNINIT, BAD_TWICE, BAD_MIXED } bad_t;

typedef struct {
    int8_t op;    /* mscclpp_redop_t, or OP_BAD */
    uint8_t bad;  /* bad_t when op == OP_BAD */
    uint32_t n;   /* ids */
    uint64_t off; /* ids at idpool[off .. off + n), sorted, unique */
} vnode_t;

typedef struct {
    uint32_t g;  /* block (global index), NO_BLOCK: none */
    uint32_t e;  /* its epoch */
    uint64_t s;  /* the step that made it */
} stamp_t;

typedef struct {
    stamp_t st;
    uint32_t next; /* 0: end */
} rnode_t;

typedef struct {
    uint32_t *a;
    size_t head, len, cap;
} queue_t;

typedef struct {
    const plan_op_t *op;
    bool piped;
    uint64_t off, unit;    /* the pipeline iteration's slice, in sub-units */
    int top, inner;        /* JSON path: ops[top], or ops[top].ops[inner] when inner >= 0 */
} instr_t;

typedef struct {
    int rank, id;
    uint32_t gidx;
    instr_t *ins;
    int n_ins, pc;
    bool done;
    uint32_t epoch;
    uint32_t *vc, *pending; /* NB entries each when ordering is checked */
    int barrier_gen;        /* generation of the barrier it waits in, -1 if none */
} sblock_t;

typedef struct {
    uint64_t n;       /* sub-units */
    val_t *val;       /* plain data */
    stamp_t *w;       /* last write */
    uint32_t *rhead;  /* reads since the last write (rnode list) */
    val_t *pval;      /* packets */
    uint32_t *pvc;    /* their writer's knowledge (snapshot), 0: none */
    uint8_t *pset;    /* written in this launch */
} sbuf_t;

typedef struct {
    int n, gen;
    uint32_t *arrived; /* blocks (global index) */
    int n_arrived;
} sbarrier_t;

typedef struct {
    const struct mscclpp_plan *plan;
    int N;
    uint64_t R;
    bool race;
    uint32_t NB;
    int8_t coll_op; /* the reduction a reference result uses */
    sblock_t *blocks;
    sbuf_t (*buf)[3];   /* [rank][plan_buf_t] */
    uint64_t *in_base;  /* [rank]: id of the rank's first input sub-unit */
    uint64_t n_leaves;
    vnode_t *nodes;
    size_t n_nodes, cap_nodes;
    uint32_t *ids;
    uint64_t n_ids, cap_ids;
    rnode_t *rnodes;
    uint32_t n_rnodes, cap_rnodes;
    uint32_t *snaps; /* snapshot k (1-based) at snaps[(k - 1) * NB] */
    uint32_t n_snaps, cap_snaps;
    queue_t *inbox[PLAN_CH__COUNT]; /* [type] -> per (rank, channel): flat with chan_base */
    int *chan_base[PLAN_CH__COUNT]; /* [type][rank]: first channel slot of the rank */
    int *pair_rank[PLAN_CH__COUNT]; /* per channel slot: the peer channel (rank, type, index) */
    int *pair_type[PLAN_CH__COUNT];
    int *pair_idx[PLAN_CH__COUNT];
    int64_t **sem;      /* [rank][sem] */
    queue_t **semq;     /* [rank][sem] */
    sbarrier_t **bar;   /* [rank][barrier id] */
    uint64_t seq;
    uint32_t *op_extra; /* knowledge the current op got from packets (NB) */
    uint32_t *tmp_vc;   /* scratch vector clock (NB) */
    bool have_extra;
    uint32_t pkt_snap;  /* the current op's packet snapshot, 0: not made yet */
    bool have_pkt_snap;
    mscclpp_result_t err; /* first error (its message is set) */
} sim_t;

static const char *const buf_names[] = {"input", "output", "scratch"};
static const char *const redop_names[] = {"sum", "prod", "min", "max"};

#define SIM_FAIL(sim, ...)                                                              \
    do {                                                                                \
        if ((sim)->err == MSCCLPP_OK) (sim)->err = ERR(MSCCLPP_ERR_INVALID_PLAN, __VA_ARGS__); \
    } while (0)

static bool sim_nomem(sim_t *sim)
{
    if (sim->err == MSCCLPP_OK)
        sim->err = ERR(MSCCLPP_ERR_NO_MEMORY, "plan verify: out of memory simulating plan '%s'",
                       sim->plan->name);
    return false;
}

/* Grow *p (elements of `size`) to hold at least `need`. */
static bool grow(sim_t *sim, void **p, uint64_t *cap, uint64_t need, size_t size)
{
    if (need <= *cap) return true;
    uint64_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q) return sim_nomem(sim);
    *p = q;
    *cap = c;
    return true;
}

static bool queue_push(sim_t *sim, queue_t *q, uint32_t v)
{
    if (q->head + q->len == q->cap) {
        if (q->head) {
            memmove(q->a, q->a + q->head, q->len * sizeof *q->a);
            q->head = 0;
        }
        if (q->len == q->cap) {
            uint64_t cap = q->cap;
            if (!grow(sim, (void **)&q->a, &cap, q->len + 1, sizeof *q->a)) return false;
            q->cap = (size_t)cap;
        }
    }
    q->a[q->head + q->len++] = v;
    return true;
}

static uint32_t queue_pop(queue_t *q)
{
    uint32_t v = q->a[q->head++];
    q->len--;
    if (!q->len) q->head = 0;
    return v;
}

/* ------------------------------------------------------------------------------------------ */
/* Values */

static bool val_is_leaf(const sim_t *sim, val_t v) { return v && v <= sim->n_leaves; }
static const vnode_t *val_node(const sim_t *sim, val_t v)
{
    return &sim->nodes[v - sim->n_leaves - 1];
}

static val_t node_new(sim_t *sim, int8_t op, uint8_t bad, const uint32_t *ids, uint32_t n)
{
    uint64_t cap = sim->cap_nodes;
    if (!grow(sim, (void **)&sim->nodes, &cap, sim->n_nodes + 1, sizeof *sim->nodes)) return 0;
    sim->cap_nodes = (size_t)cap;
    if (n && !grow(sim, (void **)&sim->ids, &sim->cap_ids, sim->n_ids + n, sizeof *sim->ids))
        return 0;
    vnode_t *nd = &sim->nodes[sim->n_nodes++];
    nd->op = op;
    nd->bad = bad;
    nd->n = n;
    nd->off = sim->n_ids;
    if (n) memcpy(sim->ids + sim->n_ids, ids, n * sizeof *ids);
    sim->n_ids += n;
    return (val_t)(sim->n_leaves + sim->n_nodes);
}

static val_t val_bad(sim_t *sim, bad_t why) { return node_new(sim, OP_BAD, (uint8_t)why, NULL, 0); }

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The reduction `op` of vals[0..n): a node with the union of their ids; wrong when a value was
 * never written, is already wrong, was made by another reduction, or (sum, prod) would count
 * an input twice. */
static val_t val_combine(sim_t *sim, int8_t op, const val_t *vals, int n, uint32_t **tmp,
                         uint64_t *tmp_cap)
{
    uint64_t total = 0;
    for (int k = 0; k < n; k++) {
        val_t v = vals[k];
        if (v == VAL_NONE) return val_bad(sim, BAD_UNINIT);
        if (val_is_leaf(sim, v)) {
            total++;
            continue;
        }
        const vnode_t *nd = val_node(sim, v);
        if (nd->op == OP_BAD) return v;
        if (nd->op != op) return val_bad(sim, BAD_MIXED);
        total += nd->n;
    }
    if (!grow(sim, (void **)tmp, tmp_cap, total ? total : 1, sizeof **tmp)) return 0;
    uint64_t m = 0;
    for (int k = 0; k < n; k++) {
        val_t v = vals[k];
        if (val_is_leaf(sim, v)) {
            (*tmp)[m++] = v - 1;
            continue;
        }
        const vnode_t *nd = val_node(sim, v);
        memcpy(*tmp + m, sim->ids + nd->off, nd->n * sizeof **tmp);
        m += nd->n;
    }
    qsort(*tmp, (size_t)m, sizeof **tmp, cmp_u32);
    uint64_t u = 0;
    bool counts = op == MSCCLPP_SUM || op == MSCCLPP_PROD;
    for (uint64_t i = 0; i < m; i++) {
        if (u && (*tmp)[u - 1] == (*tmp)[i]) {
            if (counts) return val_bad(sim, BAD_TWICE);
            continue;
        }
        (*tmp)[u++] = (*tmp)[i];
    }
    return node_new(sim, op, 0, *tmp, (uint32_t)u);
}

/* Value equality: the same leaf, or the same reduction of the same ids. */
static bool val_eq(const sim_t *sim, val_t a, val_t b)
{
    if (a == b) return true;
    if (a == VAL_NONE || b == VAL_NONE || val_is_leaf(sim, a) || val_is_leaf(sim, b)) return false;
    const vnode_t *x = val_node(sim, a), *y = val_node(sim, b);
    if (x->op == OP_BAD || y->op == OP_BAD || x->op != y->op || x->n != y->n) return false;
    return !memcmp(sim->ids + x->off, sim->ids + y->off, x->n * sizeof *sim->ids);
}

/* "sum of [input chunk 0 of ranks 0, 1; ...]" for error messages. */
static void val_describe(const sim_t *sim, val_t v, char *out, size_t cap)
{
    static const char *const bad_text[] = {"a reduction of data never written",
                                           "a reduction that counts an input twice",
                                           "a mix of reductions"};
    if (v == VAL_NONE) {
        snprintf(out, cap, "nothing (never written)");
        return;
    }
    const uint32_t *ids;
    uint32_t n, leaf;
    const char *op = NULL;
    if (val_is_leaf(sim, v)) {
        leaf = v - 1;
        ids = &leaf;
        n = 1;
    } else {
        const vnode_t *nd = val_node(sim, v);
        if (nd->op == OP_BAD) {
            snprintf(out, cap, "%s", bad_text[nd->bad]);
            return;
        }
        ids = sim->ids + nd->off;
        n = nd->n;
        op = redop_names[nd->op];
    }
    size_t len = (size_t)snprintf(out, cap, "%s%s", op ? op : "", op ? " of [" : "");
    for (uint32_t i = 0; i < n && len < cap; i++) {
        int j = 0;
        while (j + 1 < sim->N && sim->in_base[j + 1] <= ids[i]) j++;
        uint64_t off = ids[i] - sim->in_base[j];
        if (sim->R > 1)
            len += (size_t)snprintf(out + len, cap - len, "%sinput chunk %llu (part %llu/%llu) of "
                                    "rank %d",
                                    i ? "; " : "", (unsigned long long)(off / sim->R),
                                    (unsigned long long)(off % sim->R), (unsigned long long)sim->R,
                                    j);
        else
            len += (size_t)snprintf(out + len, cap - len, "%sinput chunk %llu of rank %d",
                                    i ? "; " : "", (unsigned long long)off, j);
        if (i == 7 && n > 9) {
            len += (size_t)snprintf(out + len, cap - len, "; ... %u in all", n);
            break;
        }
    }
    if (op && len < cap) snprintf(out + len, cap - len, "]");
}

/* ------------------------------------------------------------------------------------------ */
/* Ordering: vector clocks and stamps */

static uint32_t snap_new(sim_t *sim, const uint32_t *vc)
{
    uint64_t cap = sim->cap_snaps;
    if (!grow(sim, (void **)&sim->snaps, &cap, (uint64_t)(sim->n_snaps + 1) * sim->NB,
              sizeof *sim->snaps))
        return 0;
    sim->cap_snaps = (uint32_t)(cap > UINT32_MAX ? UINT32_MAX : cap);
    memcpy(sim->snaps + (uint64_t)sim->n_snaps * sim->NB, vc, sim->NB * sizeof *vc);
    return ++sim->n_snaps;
}

static const uint32_t *snap_get(const sim_t *sim, uint32_t k)
{
    return sim->snaps + (uint64_t)(k - 1) * sim->NB;
}

static void vc_max(uint32_t *dst, const uint32_t *src, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (src[i] > dst[i]) dst[i] = src[i];
}

static bool visible(const sim_t *sim, const stamp_t *st, const sblock_t *b)
{
    if (st->g == NO_BLOCK) return true;
    if (sim->have_extra && sim->op_extra[st->g] > st->e) return true;
    if (st->g == b->gidx) return st->s == sim->seq || b->epoch > st->e;
    return b->vc[st->g] > st->e;
}

static void op_path(const sim_t *sim, const sblock_t *b, const instr_t *in, char *out, size_t cap)
{
    (void)sim;
    if (in->inner >= 0)
        snprintf(out, cap, "gpus[%d].threadblocks[%d].ops[%d].ops[%d]", b->rank, b->id, in->top,
                 in->inner);
    else
        snprintf(out, cap, "gpus[%d].threadblocks[%d].ops[%d]", b->rank, b->id, in->top);
}

static void race(sim_t *sim, const char *kind, const sblock_t *b, int r, int t, uint64_t x,
                 const stamp_t *st)
{
    char path[160];
    op_path(sim, b, &b->ins[b->pc], path, sizeof path);
    const sblock_t *o = &sim->blocks[st->g];
    SIM_FAIL(sim,
             "plan '%s': %s race at %s: rank %d block %d and rank %d block %d both touch rank "
             "%d's %s[%llu] without synchronisation (a signal/wait, barrier or nop is missing "
             "between them)",
             sim->plan->name, kind, path, b->rank, b->id, o->rank, o->id, r, buf_names[t],
             (unsigned long long)(x / sim->R));
}

/* In-place plans alias input and output as the executor does (plan-format §3.3). */
static void phys(const sim_t *sim, int r, int *t, uint64_t *x)
{
    if (!sim->plan->inplace) return;
    const char *c = sim->plan->collective;
    sbuf_t *b = sim->buf[r];
    uint64_t y;
    if (!strcmp(c, "allgather")) {
        if (*t != PLAN_BUF_INPUT) return;
        y = (uint64_t)r * b[PLAN_BUF_INPUT].n + *x;
        if (y >= b[PLAN_BUF_OUTPUT].n) return;
        *t = PLAN_BUF_OUTPUT;
        *x = y;
    } else if (!strcmp(c, "reducescatter")) {
        if (*t != PLAN_BUF_OUTPUT) return;
        y = (uint64_t)r * b[PLAN_BUF_OUTPUT].n + *x;
        if (y >= b[PLAN_BUF_INPUT].n) return;
        *t = PLAN_BUF_INPUT;
        *x = y;
    } else if (*t == PLAN_BUF_INPUT && b[PLAN_BUF_INPUT].n == b[PLAN_BUF_OUTPUT].n) {
        *t = PLAN_BUF_OUTPUT;
    }
}

static val_t sim_read(sim_t *sim, sblock_t *b, int r, int t, uint64_t x)
{
    phys(sim, r, &t, &x);
    sbuf_t *bf = &sim->buf[r][t];
    if (sim->race) {
        if (!visible(sim, &bf->w[x], b)) race(sim, "read-after-write", b, r, t, x, &bf->w[x]);
        uint64_t cap = sim->cap_rnodes;
        if (!grow(sim, (void **)&sim->rnodes, &cap, (uint64_t)sim->n_rnodes + 2,
                  sizeof *sim->rnodes))
            return VAL_NONE;
        sim->cap_rnodes = (uint32_t)cap;
        uint32_t k = ++sim->n_rnodes; /* node 0 is the list end */
        sim->rnodes[k] = (rnode_t){{b->gidx, b->epoch, sim->seq}, bf->rhead[x]};
        bf->rhead[x] = k;
    }
    return bf->val[x];
}

static void sim_write(sim_t *sim, sblock_t *b, int r, int t, uint64_t x, val_t v)
{
    phys(sim, r, &t, &x);
    sbuf_t *bf = &sim->buf[r][t];
    if (sim->race) {
        if (!visible(sim, &bf->w[x], b)) race(sim, "write-after-write", b, r, t, x, &bf->w[x]);
        /* the most recent unordered read is the one reported (any will do) */
        for (uint32_t k = bf->rhead[x]; k; k = sim->rnodes[k].next)
            if (!visible(sim, &sim->rnodes[k].st, b)) {
                race(sim, "write-after-read", b, r, t, x, &sim->rnodes[k].st);
                break;
            }
        bf->rhead[x] = 0;
        bf->w[x] = (stamp_t){b->gidx, b->epoch, sim->seq};
    }
    bf->val[x] = v;
}

static void sync_threads(sim_t *sim, sblock_t *b)
{
    b->epoch++;
    if (sim->race) {
        b->pending[b->gidx] = b->epoch;
        memcpy(b->vc, b->pending, sim->NB * sizeof *b->vc);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Set-up */

static uint64_t resolution(const struct mscclpp_plan *plan)
{
    uint64_t R = 1;
    bool pipe = false;
    for (int r = 0; r < plan->nranks; r++)
        for (int b = 0; b < plan->gpus[r].n_blocks; b++) {
            const plan_block_t *blk = &plan->gpus[r].blocks[b];
            for (int i = 0; i < blk->n_ops; i++) {
                const plan_op_t *op = &blk->ops[i];
                pipe |= op->type == PLAN_OP_PIPELINE;
                /* R = lcm(R, tbg_size), or anything above the cap once it is passed */
                uint64_t m = R;
                while (op->tbg_size > 1 && m % op->tbg_size && m <= VERIFY_MAX_RES) m += R;
                R = m;
            }
        }
    if (pipe) R *= VERIFY_PIPE_ITERS;
    return R > VERIFY_MAX_RES ? VERIFY_MAX_RES : R;
}

/* Each block's ops with pipeline bodies unrolled VERIFY_PIPE_ITERS times. */
static bool build_instrs(sim_t *sim, sblock_t *sb, const plan_block_t *blk)
{
    int n = 0;
    for (int i = 0; i < blk->n_ops; i++) {
        const plan_op_t *op = &blk->ops[i];
        if (op->type == PLAN_OP_PIPELINE) {
            n += VERIFY_PIPE_ITERS * op->n_inner;
            i += op->n_inner;
        } else {
            n++;
        }
    }
    sb->ins = calloc(n ? (size_t)n : 1, sizeof *sb->ins);
    if (!sb->ins) return sim_nomem(sim);
    int k = 0, top = 0;
    for (int i = 0; i < blk->n_ops; i++, top++) {
        const plan_op_t *op = &blk->ops[i];
        if (op->type != PLAN_OP_PIPELINE) {
            sb->ins[k++] = (instr_t){op, false, 0, 0, top, -1};
            continue;
        }
        uint64_t unit = ((uint64_t)op->num_chunks * sim->R + VERIFY_PIPE_ITERS - 1) /
                        VERIFY_PIPE_ITERS;
        for (int it = 0; it < VERIFY_PIPE_ITERS; it++)
            for (int j = 1; j <= op->n_inner; j++)
                sb->ins[k++] = (instr_t){&blk->ops[i + j], true, (uint64_t)it * unit, unit, top,
                                         j - 1};
        i += op->n_inner;
    }
    sb->n_ins = k;
    return true;
}

/* Channel pairs (spec §5.2): the i-th channel from A to B, memory then port, is connected to
 * the i-th from B to A. */
static bool build_pairs(sim_t *sim)
{
    const struct mscclpp_plan *plan = sim->plan;
    int N = sim->N;
    int *ord = calloc((size_t)N, sizeof *ord);
    if (!ord) return sim_nomem(sim);
    for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++) {
        sim->chan_base[t] = calloc((size_t)N + 1, sizeof **sim->chan_base);
        if (!sim->chan_base[t]) goto nomem;
        for (int r = 0; r < N; r++)
            sim->chan_base[t][r + 1] = sim->chan_base[t][r] + plan->gpus[r].n_chan[t];
        int total = sim->chan_base[t][N];
        sim->inbox[t] = calloc(total ? (size_t)total : 1, sizeof **sim->inbox);
        sim->pair_rank[t] = calloc(total ? (size_t)total : 1, sizeof **sim->pair_rank);
        sim->pair_type[t] = calloc(total ? (size_t)total : 1, sizeof **sim->pair_type);
        sim->pair_idx[t] = calloc(total ? (size_t)total : 1, sizeof **sim->pair_idx);
        if (!sim->inbox[t] || !sim->pair_rank[t] || !sim->pair_type[t] || !sim->pair_idx[t])
            goto nomem;
    }
    for (int r = 0; r < N; r++) {
        const plan_gpu_t *g = &plan->gpus[r];
        memset(ord, 0, (size_t)N * sizeof *ord);
        for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++)
            for (int c = 0; c < g->n_chan[t]; c++) {
                int p = g->peers[t][c], want = ord[p]++, seen = 0;
                int slot = sim->chan_base[t][r] + c;
                sim->pair_rank[t][slot] = -1;
                const plan_gpu_t *pg = &plan->gpus[p];
                for (int u = PLAN_CH_MEMORY; u <= PLAN_CH_PORT && sim->pair_rank[t][slot] < 0; u++)
                    for (int d = 0; d < pg->n_chan[u]; d++)
                        if (pg->peers[u][d] == r && seen++ == want) {
                            sim->pair_rank[t][slot] = p;
                            sim->pair_type[t][slot] = u;
                            sim->pair_idx[t][slot] = d;
                            break;
                        }
            }
    }
    free(ord);
    return true;
nomem:
    free(ord);
    return sim_nomem(sim);
}

static bool sim_init(sim_t *sim)
{
    const struct mscclpp_plan *plan = sim->plan;
    int N = sim->N = plan->nranks;
    sim->R = resolution(plan);
    uint64_t units = 0, leaves = 0;
    uint32_t nb = 0;
    for (int r = 0; r < N; r++) {
        const plan_gpu_t *g = &plan->gpus[r];
        units += ((uint64_t)g->input_chunks + g->output_chunks + g->scratch_chunks) * sim->R;
        leaves += (uint64_t)g->input_chunks * sim->R;
        nb += (uint32_t)g->n_blocks;
    }
    if (units > VERIFY_MAX_UNITS || leaves >= UINT32_MAX / 2) {
        SIM_FAIL(sim,
                 "plan '%s' is too large to verify: %llu sub-chunks of buffers in all (chunks x "
                 "%llu), the limit is %u",
                 plan->name, (unsigned long long)units, (unsigned long long)sim->R,
                 VERIFY_MAX_UNITS);
        return false;
    }
    sim->n_leaves = leaves;
    sim->NB = nb;
    sim->race = nb <= VERIFY_RACE_MAX_BLOCKS;
    /* the reduction of the reference result: the plan's one reduce_op, else sum */
    int found = -1;
    bool several = false;
    for (int r = 0; r < N; r++)
        for (int b = 0; b < plan->gpus[r].n_blocks; b++) {
            const plan_block_t *blk = &plan->gpus[r].blocks[b];
            for (int i = 0; i < blk->n_ops; i++) {
                int op = blk->ops[i].reduce_op;
                if (op == MSCCLPP_REDOP_PLAN) continue;
                if (found >= 0 && found != op) several = true;
                found = op;
            }
        }
    sim->coll_op = (int8_t)(found < 0 || several ? MSCCLPP_SUM : found);

    sim->in_base = calloc((size_t)N + 1, sizeof *sim->in_base);
    sim->buf = calloc((size_t)N, sizeof *sim->buf);
    sim->blocks = calloc(nb ? nb : 1, sizeof *sim->blocks);
    sim->sem = calloc((size_t)N, sizeof *sim->sem);
    sim->semq = calloc((size_t)N, sizeof *sim->semq);
    sim->bar = calloc((size_t)N, sizeof *sim->bar);
    sim->op_extra = calloc(nb ? nb : 1, sizeof *sim->op_extra);
    sim->tmp_vc = calloc(nb ? nb : 1, sizeof *sim->tmp_vc);
    if (!sim->in_base || !sim->buf || !sim->blocks || !sim->sem || !sim->semq || !sim->bar ||
        !sim->op_extra || !sim->tmp_vc)
        return sim_nomem(sim);
    uint64_t base = 0;
    uint32_t gi = 0;
    for (int r = 0; r < N; r++) {
        const plan_gpu_t *g = &plan->gpus[r];
        sim->in_base[r] = base;
        base += (uint64_t)g->input_chunks * sim->R;
        uint32_t chunks[3] = {g->input_chunks, g->output_chunks, g->scratch_chunks};
        for (int t = 0; t < 3; t++) {
            sbuf_t *bf = &sim->buf[r][t];
            size_t n = (size_t)(chunks[t] * sim->R), alloc = n ? n : 1;
            bf->n = n;
            bf->val = calloc(alloc, sizeof *bf->val);
            bf->w = malloc(alloc * sizeof *bf->w);
            bf->rhead = calloc(alloc, sizeof *bf->rhead);
            bf->pval = calloc(alloc, sizeof *bf->pval);
            bf->pvc = calloc(alloc, sizeof *bf->pvc);
            bf->pset = calloc(alloc, sizeof *bf->pset);
            if (!bf->val || !bf->w || !bf->rhead || !bf->pval || !bf->pvc || !bf->pset)
                return sim_nomem(sim);
            for (size_t x = 0; x < n; x++) bf->w[x] = (stamp_t){NO_BLOCK, 0, 0};
        }
        sim->sem[r] = calloc(g->n_sems ? (size_t)g->n_sems : 1, sizeof **sim->sem);
        sim->semq[r] = calloc(g->n_sems ? (size_t)g->n_sems : 1, sizeof **sim->semq);
        sim->bar[r] = calloc(PLAN_MAX_BARRIERS, sizeof **sim->bar);
        if (!sim->sem[r] || !sim->semq[r] || !sim->bar[r]) return sim_nomem(sim);
        for (int s = 0; s < g->n_sems; s++) sim->sem[r][s] = g->sem_init[s];
        for (int b = 0; b < g->n_blocks; b++, gi++) {
            sblock_t *sb = &sim->blocks[gi];
            sb->rank = r;
            sb->id = b;
            sb->gidx = gi;
            sb->barrier_gen = -1;
            if (!build_instrs(sim, sb, &g->blocks[b])) return false;
            if (sim->race) {
                sb->vc = calloc(nb, sizeof *sb->vc);
                sb->pending = calloc(nb, sizeof *sb->pending);
                if (!sb->vc || !sb->pending) return sim_nomem(sim);
            }
        }
    }
    sim->in_base[N] = base;
    /* every input sub-unit holds itself (aliased into the output for in-place plans) */
    for (int r = 0; r < N; r++)
        for (uint64_t x = 0; x < sim->buf[r][PLAN_BUF_INPUT].n; x++) {
            int t = PLAN_BUF_INPUT;
            uint64_t y = x;
            phys(sim, r, &t, &y);
            sim->buf[r][t].val[y] = (val_t)(sim->in_base[r] + x + 1);
        }
    return build_pairs(sim);
}

static void sim_free(sim_t *sim)
{
    for (int r = 0; sim->buf && r < sim->N; r++)
        for (int t = 0; t < 3; t++) {
            sbuf_t *bf = &sim->buf[r][t];
            free(bf->val);
            free(bf->w);
            free(bf->rhead);
            free(bf->pval);
            free(bf->pvc);
            free(bf->pset);
        }
    for (uint32_t i = 0; sim->blocks && i < sim->NB; i++) {
        free(sim->blocks[i].ins);
        free(sim->blocks[i].vc);
        free(sim->blocks[i].pending);
    }
    for (int r = 0; r < sim->N; r++) {
        if (sim->sem) free(sim->sem[r]);
        if (sim->semq && sim->semq[r]) {
            for (int s = 0; s < sim->plan->gpus[r].n_sems; s++) free(sim->semq[r][s].a);
            free(sim->semq[r]);
        }
        if (sim->bar && sim->bar[r]) {
            for (int i = 0; i < PLAN_MAX_BARRIERS; i++) free(sim->bar[r][i].arrived);
            free(sim->bar[r]);
        }
    }
    for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++) {
        if (sim->inbox[t] && sim->chan_base[t])
            for (int k = 0; k < sim->chan_base[t][sim->N]; k++) free(sim->inbox[t][k].a);
        free(sim->inbox[t]);
        free(sim->chan_base[t]);
        free(sim->pair_rank[t]);
        free(sim->pair_type[t]);
        free(sim->pair_idx[t]);
    }
    free(sim->sem);
    free(sim->semq);
    free(sim->bar);
    free(sim->buf);
    free(sim->blocks);
    free(sim->in_base);
    free(sim->nodes);
    free(sim->ids);
    free(sim->rnodes);
    free(sim->snaps);
    free(sim->op_extra);
    free(sim->tmp_vc);
}

/* ------------------------------------------------------------------------------------------ */
/* Sync ops */

static const char *chan_name(int t) { return t == PLAN_CH_PORT ? "port" : "memory"; }

/* A signal from block b on its channel (type t, block-local k) lands on the peer's paired
 * channel, carrying `snap` (0: no knowledge). */
static bool send_signal(sim_t *sim, sblock_t *b, int t, int k, uint32_t snap)
{
    const plan_block_t *blk = &sim->plan->gpus[b->rank].blocks[b->id];
    int c = blk->chan[t][k];
    int slot = sim->chan_base[t][b->rank] + c;
    if (sim->pair_rank[t][slot] < 0) {
        char path[160];
        op_path(sim, b, &b->ins[b->pc], path, sizeof path);
        SIM_FAIL(sim,
                 "plan '%s': %s (%s) signals on %s channel %d of rank %d, which has no matching "
                 "channel on rank %d",
                 sim->plan->name, path, plan_op_name((plan_op_type_t)b->ins[b->pc].op->type),
                 chan_name(t), c, b->rank, sim->plan->gpus[b->rank].peers[t][c]);
        return false;
    }
    int u = sim->pair_type[t][slot];
    int dst = sim->chan_base[u][sim->pair_rank[t][slot]] + sim->pair_idx[t][slot];
    return queue_push(sim, &sim->inbox[u][dst], snap);
}

static uint32_t snap_of_pending(sim_t *sim, sblock_t *b, bool own_next)
{
    if (!sim->race) return 0;
    if (!own_next) return snap_new(sim, b->pending);
    uint32_t keep = b->pending[b->gidx];
    if (b->epoch + 1 > keep) b->pending[b->gidx] = b->epoch + 1;
    uint32_t k = snap_new(sim, b->pending);
    b->pending[b->gidx] = keep;
    return k;
}

/* Returns false when the block cannot run the op now (blocked) or an error was found. */
static bool step_sync(sim_t *sim, sblock_t *b, const plan_op_t *op, bool *handled)
{
    const plan_gpu_t *g = &sim->plan->gpus[b->rank];
    const plan_block_t *blk = &g->blocks[b->id];
    int t = op->channel_type;
    *handled = true;
    switch (op->type) {
    case PLAN_OP_NOP: sync_threads(sim, b); return true;
    case PLAN_OP_SIGNAL:
    case PLAN_OP_RLXSIGNAL:
        for (int k = 0; k < op->n_channels; k++) {
            uint32_t snap = snap_of_pending(sim, b, false);
            if ((sim->race && !snap) || !send_signal(sim, b, t, op->channel_ids[k], snap))
                return false;
        }
        return true;
    case PLAN_OP_WAIT:
    case PLAN_OP_RLXWAIT:
        /* every channel of the op needs its signals (a channel named twice needs two) */
        for (int k = 0; k < op->n_channels; k++) {
            int c = blk->chan[t][op->channel_ids[k]];
            size_t need = 1;
            for (int j = 0; j < k; j++)
                if (blk->chan[t][op->channel_ids[j]] == c) need++;
            if (sim->inbox[t][sim->chan_base[t][b->rank] + c].len < need) return false;
        }
        for (int k = 0; k < op->n_channels; k++) {
            int c = blk->chan[t][op->channel_ids[k]];
            uint32_t snap = queue_pop(&sim->inbox[t][sim->chan_base[t][b->rank] + c]);
            if (snap && sim->race) vc_max(b->pending, snap_get(sim, snap), sim->NB);
        }
        return true;
    case PLAN_OP_FLUSH: return true;
    case PLAN_OP_SEM_RELEASE:
        for (int k = 0; k < op->n_sems; k++) {
            int s = op->sem_ids[k];
            sim->sem[b->rank][s]++;
            uint32_t snap = snap_of_pending(sim, b, false);
            if ((sim->race && !snap) || !queue_push(sim, &sim->semq[b->rank][s], snap))
                return false;
        }
        return true;
    case PLAN_OP_SEM_ACQUIRE:
        for (int k = 0; k < op->n_sems; k++) {
            int need = 1;
            for (int j = 0; j < k; j++)
                if (op->sem_ids[j] == op->sem_ids[k]) need++;
            if (sim->sem[b->rank][op->sem_ids[k]] < need) return false;
        }
        for (int k = 0; k < op->n_sems; k++) {
            int s = op->sem_ids[k];
            sim->sem[b->rank][s]--;
            queue_t *q = &sim->semq[b->rank][s];
            uint32_t snap = q->len ? queue_pop(q) : 0;
            if (snap && sim->race) vc_max(b->pending, snap_get(sim, snap), sim->NB);
        }
        return true;
    case PLAN_OP_BARRIER: {
        sbarrier_t *br = &sim->bar[b->rank][op->barrier_id];
        if (!br->arrived) {
            br->n = op->barrier_nblocks;
            br->arrived = calloc((size_t)br->n, sizeof *br->arrived);
            if (!br->arrived) return sim_nomem(sim);
        }
        if (b->barrier_gen < 0) {
            sync_threads(sim, b);
            b->barrier_gen = br->gen;
            br->arrived[br->n_arrived++] = b->gidx;
            if (br->n_arrived == br->n) {
                if (sim->race) {
                    uint32_t *merged = sim->tmp_vc;
                    memset(merged, 0, sim->NB * sizeof *merged);
                    for (int i = 0; i < br->n; i++)
                        vc_max(merged, sim->blocks[br->arrived[i]].pending, sim->NB);
                    for (int i = 0; i < br->n; i++) {
                        sblock_t *o = &sim->blocks[br->arrived[i]];
                        memcpy(o->pending, merged, sim->NB * sizeof *merged);
                        memcpy(o->vc, merged, sim->NB * sizeof *merged);
                    }
                }
                br->n_arrived = 0;
                br->gen++;
            }
        }
        if (br->gen > b->barrier_gen) {
            b->barrier_gen = -1;
            return true;
        }
        return false;
    }
    default: *handled = false; return true;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Data ops */

typedef struct {
    int owners[PLAN_MAX_SWITCH_MEMBERS];
    int n_owners;
    int t;
    uint64_t start, len;
} range_t;

static void resolve(const sim_t *sim, const sblock_t *b, const instr_t *in, const plan_desc_t *d,
                    range_t *rg)
{
    const plan_gpu_t *g = &sim->plan->gpus[b->rank];
    const plan_block_t *blk = &g->blocks[b->id];
    const plan_op_t *op = in->op;
    rg->t = d->buf;
    if (d->kind == PLAN_DESC_LOCAL) {
        rg->owners[0] = b->rank;
        rg->n_owners = 1;
    } else if (d->kind == PLAN_DESC_REMOTE) {
        rg->owners[0] = g->rbufs[blk->rbuf[op->channel_type][d->ref]].owner;
        rg->n_owners = 1;
    } else {
        const plan_switch_t *sw = &g->switches[blk->chan[PLAN_CH_SWITCH][d->ref]];
        rg->n_owners = sw->n_ranks;
        memcpy(rg->owners, sw->ranks, (size_t)sw->n_ranks * sizeof *sw->ranks);
    }
    rg->start = (uint64_t)d->index * sim->R;
    rg->len = (uint64_t)d->size * sim->R;
    if (op->tbg_size > 1) {
        uint64_t n = op->tbg_size, j = op->tbg_id, q = rg->len / n, rem = rg->len % n;
        rg->start += j * q + (j < rem ? j : rem);
        rg->len = q + (j < rem);
    }
    if (in->piped) {
        uint64_t l = rg->len > in->off ? rg->len - in->off : 0;
        rg->len = l < in->unit ? l : in->unit;
        rg->start += in->off;
    }
}

static bool pkts_ready(const sim_t *sim, const range_t *rg)
{
    for (int o = 0; o < rg->n_owners; o++) {
        const sbuf_t *bf = &sim->buf[rg->owners[o]][rg->t];
        for (uint64_t x = rg->start; x < rg->start + rg->len; x++)
            if (!bf->pset[x]) return false;
    }
    return true;
}

/* vals[0..len) <- plain data of the first owner */
static void read_plain(sim_t *sim, sblock_t *b, const range_t *rg, val_t *vals)
{
    for (uint64_t i = 0; i < rg->len; i++)
        vals[i] = sim_read(sim, b, rg->owners[0], rg->t, rg->start + i);
}

/* Packets carry their writer's knowledge to the reader, for the rest of the op. */
static void read_pkt(sim_t *sim, const range_t *rg, val_t *vals)
{
    const sbuf_t *bf = &sim->buf[rg->owners[0]][rg->t];
    for (uint64_t i = 0; i < rg->len; i++) {
        uint64_t x = rg->start + i;
        vals[i] = bf->pval[x];
        if (sim->race && bf->pvc[x]) {
            vc_max(sim->op_extra, snap_get(sim, bf->pvc[x]), sim->NB);
            sim->have_extra = true;
        }
    }
}

static void write_plain(sim_t *sim, sblock_t *b, const range_t *rg, const val_t *vals)
{
    for (int o = 0; o < rg->n_owners; o++)
        for (uint64_t i = 0; i < rg->len; i++)
            sim_write(sim, b, rg->owners[o], rg->t, rg->start + i, vals[i]);
}

static bool write_pkt(sim_t *sim, sblock_t *b, const range_t *rg, const val_t *vals)
{
    uint32_t snap = 0;
    if (sim->race) {
        if (!sim->have_pkt_snap) {
            /* what the writer knows (packets read by this op included) and its own writes up
             * to this op; made once per op */
            uint32_t *vc = sim->tmp_vc;
            memcpy(vc, b->pending, sim->NB * sizeof *vc);
            if (sim->have_extra) vc_max(vc, sim->op_extra, sim->NB);
            if (vc[b->gidx] < b->epoch + 1) vc[b->gidx] = b->epoch + 1;
            sim->pkt_snap = snap_new(sim, vc);
            if (!sim->pkt_snap) return false;
            sim->have_pkt_snap = true;
        }
        snap = sim->pkt_snap;
    }
    for (int o = 0; o < rg->n_owners; o++) {
        sbuf_t *bf = &sim->buf[rg->owners[o]][rg->t];
        for (uint64_t i = 0; i < rg->len; i++) {
            uint64_t x = rg->start + i;
            bf->pval[x] = vals[i];
            bf->pvc[x] = snap;
            bf->pset[x] = 1;
        }
    }
    return true;
}

/* Returns false when blocked on packets or an error was found. */
static bool step_data(sim_t *sim, sblock_t *b, const instr_t *in, val_t **buf, uint64_t *cap,
                      uint32_t **tmp, uint64_t *tmp_cap)
{
    const plan_op_t *op = in->op;
    range_t src[PLAN_MAX_DESCS], dst[PLAN_MAX_DESCS];
    for (int k = 0; k < op->n_src; k++) resolve(sim, b, in, &op->src[k], &src[k]);
    for (int k = 0; k < op->n_dst; k++) resolve(sim, b, in, &op->dst[k], &dst[k]);
    uint64_t len = op->n_src ? src[0].len : 0;
    int nsrc = op->type == PLAN_OP_GLRES || op->type == PLAN_OP_GLRE ? src[0].n_owners : op->n_src;
    if (!grow(sim, (void **)buf, cap, (uint64_t)(nsrc + 1) * (len ? len : 1), sizeof **buf))
        return false;
    val_t *vals = *buf, *acc = *buf + (uint64_t)nsrc * len;
    sim->have_extra = false;
    sim->have_pkt_snap = false;
    if (sim->race) memset(sim->op_extra, 0, sim->NB * sizeof *sim->op_extra);
    int8_t red = op->reduce_op == MSCCLPP_REDOP_PLAN ? MSCCLPP_SUM : op->reduce_op;
    int first_pkt_src; /* sources from here on are packets */
    switch (op->type) {
    case PLAN_OP_COPY:
        read_plain(sim, b, &src[0], vals);
        write_plain(sim, b, &dst[0], vals);
        return true;
    case PLAN_OP_CPKT:
        read_plain(sim, b, &src[0], vals);
        return write_pkt(sim, b, &dst[0], vals);
    case PLAN_OP_UPKT:
        if (!pkts_ready(sim, &src[0])) return false;
        read_pkt(sim, &src[0], vals);
        write_plain(sim, b, &dst[0], vals);
        return true;
    case PLAN_OP_PUT:
    case PLAN_OP_PWS:
    case PLAN_OP_PWSF:
    case PLAN_OP_GET:
        for (int k = 0; k < op->n_src; k++) {
            read_plain(sim, b, &src[k], vals);
            write_plain(sim, b, &dst[k], vals);
        }
        /* a port put-with-signal signals once its data has landed: the signal covers the put
         * (on memory channels pws/pwsf are plain puts, plan-format P9) */
        if ((op->type == PLAN_OP_PWS || op->type == PLAN_OP_PWSF) &&
            op->channel_type == PLAN_CH_PORT)
            for (int k = 0; k < op->n_channels; k++) {
                uint32_t snap = snap_of_pending(sim, b, true);
                if ((sim->race && !snap) ||
                    !send_signal(sim, b, PLAN_CH_PORT, op->channel_ids[k], snap))
                    return false;
            }
        return true;
    case PLAN_OP_PPKT:
        if (op->channel_type == PLAN_CH_MEMORY) {
            for (int k = 0; k < op->n_src; k++) {
                read_plain(sim, b, &src[k], vals);
                if (!write_pkt(sim, b, &dst[k], vals)) return false;
            }
            return true;
        }
        /* port: the proxy relays packets */
        for (int k = 0; k < op->n_src; k++)
            if (!pkts_ready(sim, &src[k])) return false;
        for (int k = 0; k < op->n_src; k++) {
            read_pkt(sim, &src[k], vals);
            if (!write_pkt(sim, b, &dst[k], vals)) return false;
        }
        return true;
    case PLAN_OP_RPPKT:
        if (!pkts_ready(sim, &src[0])) return false;
        read_pkt(sim, &src[0], vals);
        for (int k = 0; k < op->n_dst; k++)
            if (!write_pkt(sim, b, &dst[k], vals)) return false;
        return true;
    case PLAN_OP_GSTORE:
        read_plain(sim, b, &src[0], vals);
        write_plain(sim, b, &dst[0], vals);
        return true;
    case PLAN_OP_GSTOREPKT:
        if (!pkts_ready(sim, &src[0])) return false;
        read_pkt(sim, &src[0], vals);
        return write_pkt(sim, b, &dst[0], vals);
    case PLAN_OP_RE:
    case PLAN_OP_RES:
    case PLAN_OP_RRE:
    case PLAN_OP_RRES: first_pkt_src = op->n_src; break;
    case PLAN_OP_REPKT:
    case PLAN_OP_RECPKT:
    case PLAN_OP_RESPKT:
    case PLAN_OP_RECSPKT:
        for (int k = 1; k < op->n_src; k++)
            if (!pkts_ready(sim, &src[k])) return false;
        first_pkt_src = 1;
        break;
    case PLAN_OP_GLRES:
    case PLAN_OP_GLRE: {
        /* every member's copy of the switch buffer */
        range_t one = src[0];
        one.n_owners = 1;
        for (int o = 0; o < src[0].n_owners; o++) {
            one.owners[0] = src[0].owners[o];
            read_plain(sim, b, &one, vals + (uint64_t)o * len);
        }
        first_pkt_src = nsrc;
        break;
    }
    default:
        SIM_FAIL(sim, "plan '%s': op %s cannot be simulated", sim->plan->name,
                 plan_op_name((plan_op_type_t)op->type));
        return false;
    }
    /* reductions: sources read in order (plain, then packets), element-wise reduced */
    if (op->type != PLAN_OP_GLRES && op->type != PLAN_OP_GLRE)
        for (int k = 0; k < nsrc; k++) {
            if (k < first_pkt_src) read_plain(sim, b, &src[k], vals + (uint64_t)k * len);
            else read_pkt(sim, &src[k], vals + (uint64_t)k * len);
        }
    val_t col[PLAN_MAX_DESCS > PLAN_MAX_SWITCH_MEMBERS ? PLAN_MAX_DESCS : PLAN_MAX_SWITCH_MEMBERS];
    for (uint64_t i = 0; i < len; i++) {
        for (int k = 0; k < nsrc; k++) col[k] = vals[(uint64_t)k * len + i];
        acc[i] = val_combine(sim, red, col, nsrc, tmp, tmp_cap);
        if (!acc[i]) return false;
    }
    write_plain(sim, b, &dst[0], acc);
    int k = 1;
    bool pkt_rest = op->type == PLAN_OP_REPKT || op->type == PLAN_OP_RECPKT ||
                    op->type == PLAN_OP_RESPKT || op->type == PLAN_OP_RECSPKT;
    for (; k < op->n_dst; k++) {
        if (pkt_rest) {
            if (!write_pkt(sim, b, &dst[k], acc)) return false;
        } else {
            write_plain(sim, b, &dst[k], acc);
        }
    }
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* The run and the end-of-launch checks */

static void report_stuck(sim_t *sim, const sblock_t *b)
{
    const struct mscclpp_plan *plan = sim->plan;
    const instr_t *in = &b->ins[b->pc];
    const plan_op_t *op = in->op;
    const plan_block_t *blk = &plan->gpus[b->rank].blocks[b->id];
    int t = op->channel_type;
    char what[256], path[160];
    op_path(sim, b, in, path, sizeof path);
    switch (op->type) {
    case PLAN_OP_WAIT:
    case PLAN_OP_RLXWAIT: {
        int c = blk->chan[t][op->channel_ids[0]];
        for (int k = 0; k < op->n_channels; k++) {
            int ch = blk->chan[t][op->channel_ids[k]];
            if (!sim->inbox[t][sim->chan_base[t][b->rank] + ch].len) {
                c = ch;
                break;
            }
        }
        snprintf(what, sizeof what, "waits for a signal from rank %d on %s channel %d that never "
                 "comes", plan->gpus[b->rank].peers[t][c], chan_name(t), c);
        break;
    }
    case PLAN_OP_SEM_ACQUIRE:
        snprintf(what, sizeof what, "acquires semaphore %d, which is never released enough",
                 op->sem_ids[0]);
        break;
    case PLAN_OP_BARRIER: {
        const sbarrier_t *br = &sim->bar[b->rank][op->barrier_id];
        snprintf(what, sizeof what, "waits in barrier %d for %d blocks; only %d arrive",
                 op->barrier_id, br->n, br->n_arrived);
        break;
    }
    default: {
        /* a packet read: name the first packet never written */
        snprintf(what, sizeof what, "reads packets that no op writes");
        for (int k = 0; k < op->n_src; k++) {
            range_t rg;
            resolve(sim, b, in, &op->src[k], &rg);
            for (int o = 0; o < rg.n_owners; o++)
                for (uint64_t x = rg.start; x < rg.start + rg.len; x++)
                    if (!sim->buf[rg.owners[o]][rg.t].pset[x]) {
                        snprintf(what, sizeof what, "reads packets of rank %d's %s[%llu] (src_buff[%d]) that no op writes",
                                 rg.owners[o], buf_names[rg.t],
                                 (unsigned long long)(x / sim->R), k);
                        goto found;
                    }
        }
    found:
        break;
    }
    }
    SIM_FAIL(sim, "plan '%s' deadlocks: %s (%s) %s%s", plan->name, path,
             plan_op_name((plan_op_type_t)op->type), what, in->piped ? " (in a pipeline body)" : "");
}

static bool sim_run(sim_t *sim)
{
    val_t *buf = NULL;
    uint64_t cap = 0, tmp_cap = 0;
    uint32_t *tmp = NULL;
    bool progress = true;
    while (progress && sim->err == MSCCLPP_OK) {
        progress = false;
        for (uint32_t i = 0; i < sim->NB && sim->err == MSCCLPP_OK; i++) {
            sblock_t *b = &sim->blocks[i];
            while (!b->done && sim->err == MSCCLPP_OK) {
                if (b->pc >= b->n_ins) {
                    b->done = true;
                    break;
                }
                const instr_t *in = &b->ins[b->pc];
                sim->seq++;
                bool handled, ran = step_sync(sim, b, in->op, &handled);
                if (!handled) ran = step_data(sim, b, in, &buf, &cap, &tmp, &tmp_cap);
                if (!ran) break;
                b->pc++;
                progress = true;
            }
        }
    }
    free(buf);
    free(tmp);
    if (sim->err != MSCCLPP_OK) return false;
    for (uint32_t i = 0; i < sim->NB; i++)
        if (!sim->blocks[i].done) {
            report_stuck(sim, &sim->blocks[i]);
            return false;
        }
    return true;
}

static bool check_counters(sim_t *sim)
{
    const struct mscclpp_plan *plan = sim->plan;
    for (int r = 0; r < sim->N; r++) {
        const plan_gpu_t *g = &plan->gpus[r];
        for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++)
            for (int c = 0; c < g->n_chan[t]; c++) {
                size_t left = sim->inbox[t][sim->chan_base[t][r] + c].len;
                if (left) {
                    SIM_FAIL(sim,
                             "plan '%s': rank %d ends a launch with %zu signal%s from rank %d on "
                             "its %s channel %d not waited for: the next launch's waits would "
                             "pass before their data lands",
                             plan->name, r, left, left == 1 ? "" : "s", g->peers[t][c],
                             chan_name(t), c);
                    return false;
                }
            }
        for (int s = 0; s < g->n_sems; s++)
            if (sim->sem[r][s] != g->sem_init[s]) {
                SIM_FAIL(sim,
                         "plan '%s': gpus[%d].semaphores[%d] ends a launch at %lld, not at its "
                         "initial value %d (semaphores persist across launches)",
                         plan->name, r, s, (long long)sim->sem[r][s], g->sem_init[s]);
                return false;
            }
    }
    return true;
}

/* When a rank's kernel ends its caller reads the output and reuses the input: every write to
 * its output and every read of its input must be ordered before the end of every block of the
 * rank. */
static bool check_end_of_launch(sim_t *sim)
{
    uint32_t *end = calloc(sim->NB ? sim->NB : 1, sizeof *end);
    if (!end) return sim_nomem(sim);
    bool ok = true;
    for (int r = 0; r < sim->N && ok; r++) {
        memset(end, 0, sim->NB * sizeof *end);
        for (uint32_t i = 0; i < sim->NB; i++) {
            const sblock_t *b = &sim->blocks[i];
            if (b->rank != r) continue;
            vc_max(end, b->pending, sim->NB);
            if (end[b->gidx] < b->epoch + 1) end[b->gidx] = b->epoch + 1;
        }
        for (int pass = 0; pass < 2 && ok; pass++) {
            int t = pass == 0 ? PLAN_BUF_OUTPUT : PLAN_BUF_INPUT;
            const sbuf_t *bf = &sim->buf[r][t];
            for (uint64_t x = 0; x < bf->n && ok; x++) {
                const stamp_t *bad = NULL;
                if (pass == 0) {
                    if (bf->w[x].g != NO_BLOCK && end[bf->w[x].g] <= bf->w[x].e) bad = &bf->w[x];
                } else {
                    for (uint32_t k = bf->rhead[x]; k && !bad; k = sim->rnodes[k].next) {
                        const stamp_t *st = &sim->rnodes[k].st;
                        if (end[st->g] <= st->e) bad = st;
                    }
                }
                if (!bad) continue;
                const sblock_t *o = &sim->blocks[bad->g];
                SIM_FAIL(sim,
                         "plan '%s': end-of-launch race: rank %d's %s[%llu] is %s by rank %d "
                         "block %d, but rank %d can finish before that is known to be complete "
                         "(a signal after a block-wide sync and a matching wait are missing)",
                         sim->plan->name, r, buf_names[t], (unsigned long long)(x / sim->R),
                         pass == 0 ? "written" : "read", o->rank, o->id, r);
                ok = false;
            }
        }
    }
    free(end);
    return ok;
}

/* The value output sub-unit x of rank r must hold; VAL_NONE when the collective has no
 * reference result. `ids` is scratch for up to N ids. */
static val_t expected(sim_t *sim, int r, uint64_t x, uint32_t *ids)
{
    const struct mscclpp_plan *plan = sim->plan;
    const char *col = plan->collective;
    int N = sim->N;
    uint64_t R = sim->R, c = x / R, u = x % R;
    const plan_gpu_t *g0 = &plan->gpus[0];
#define LEAF(j, ch) ((val_t)(sim->in_base[(j)] + (ch) * R + u + 1))
    if (!strcmp(col, "allgather")) {
        uint64_t cf = g0->input_chunks;
        return cf ? LEAF(c / cf, c % cf) : VAL_NONE;
    }
    if (!strcmp(col, "reduce") && r != plan->root) return VAL_NONE;
    if (!strcmp(col, "allreduce") || !strcmp(col, "reducescatter") || !strcmp(col, "reduce")) {
        uint64_t ch = c;
        if (!strcmp(col, "reducescatter")) ch += (uint64_t)r * plan->gpus[r].output_chunks;
        if (N == 1) return LEAF(0, ch);
        int n = 0;
        for (int j = 0; j < N; j++) ids[n++] = (uint32_t)(sim->in_base[j] + ch * R + u);
        qsort(ids, (size_t)n, sizeof *ids, cmp_u32);
        int m = 0;
        for (int i = 0; i < n; i++)
            if (!m || ids[m - 1] != ids[i]) ids[m++] = ids[i];
        return node_new(sim, sim->coll_op, 0, ids, (uint32_t)m);
    }
    if (!strcmp(col, "alltoall")) {
        uint64_t cf = g0->input_chunks / (uint64_t)N;
        return cf ? LEAF(c / cf, (uint64_t)r * cf + c % cf) : VAL_NONE;
    }
    if (!strcmp(col, "sendrecv")) return LEAF((r + N - 1) % N, c);
    if (!strcmp(col, "broadcast")) return LEAF(plan->root, c);
#undef LEAF
    return VAL_NONE;
}

static bool check_result(sim_t *sim)
{
    uint32_t *ids = calloc(sim->N > 0 ? (size_t)sim->N : 1, sizeof *ids);
    if (!ids) return sim_nomem(sim);
    uint64_t wrong = 0;
    int fr = -1;
    uint64_t fx = 0;
    val_t fgot = 0, fexp = 0;
    for (int r = 0; r < sim->N && sim->err == MSCCLPP_OK; r++) {
        uint64_t n = sim->buf[r][PLAN_BUF_OUTPUT].n;
        for (uint64_t x = 0; x < n; x++) {
            size_t mark = sim->n_nodes;
            uint64_t mark_ids = sim->n_ids;
            val_t exp = expected(sim, r, x, ids);
            if (exp == VAL_NONE) {
                if (sim->err != MSCCLPP_OK) break;
                continue;
            }
            int t = PLAN_BUF_OUTPUT;
            uint64_t y = x;
            phys(sim, r, &t, &y);
            val_t got = sim->buf[r][t].val[y];
            if (val_eq(sim, got, exp)) {
                /* drop the node made for the comparison */
                sim->n_nodes = mark;
                sim->n_ids = mark_ids;
                continue;
            }
            if (!wrong++) {
                fr = r;
                fx = x;
                fgot = got;
                fexp = exp;
            } else {
                sim->n_nodes = mark;
                sim->n_ids = mark_ids;
            }
        }
    }
    free(ids);
    if (sim->err != MSCCLPP_OK) return false;
    if (!wrong) return true;
    char got[384], exp[384];
    val_describe(sim, fgot, got, sizeof got);
    val_describe(sim, fexp, exp, sizeof exp);
    SIM_FAIL(sim,
             "plan '%s' computes a wrong %s: rank %d output chunk %llu holds %s, expected %s "
             "(%llu wrong sub-chunk%s in all)",
             sim->plan->name, sim->plan->collective, fr, (unsigned long long)(fx / sim->R), got,
             exp, (unsigned long long)wrong, wrong == 1 ? "" : "s");
    return false;
}

mscclpp_result_t plan_verify(const struct mscclpp_plan *plan)
{
    sim_t sim = {.plan = plan, .err = MSCCLPP_OK};
    if (sim_init(&sim) && sim_run(&sim) && check_counters(&sim) &&
        (!sim.race || check_end_of_launch(&sim)))
        check_result(&sim);
    mscclpp_result_t res = sim.err;
    sim_free(&sim);
    return res;
}
