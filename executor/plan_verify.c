/*
 * mscclpp_plan_verify(): checks beyond load (issue 8 item 8). Loading checks what every launch
 * needs and what is cheap (indices, limits, chunk counts against the collective, scratch bounds,
 * signal/wait counts per channel pair). Verifying runs one launch of every rank abstractly:
 * every block of every rank steps through its ops, signals add to the peer's channel counter,
 * waits consume it, semaphores count, barriers gather their blocks, pipeline bodies run
 * VERIFY_PIPE_ITERS times. No data moves, so this is O(plan size x longest dependency chain)
 * and independent of message sizes. It finds:
 *   - deadlocks whatever their cause (a wait whose signal comes only after a wait of the
 *     signaller, a cycle of waits across ranks, a barrier that fewer blocks reach than it
 *     counts, a semaphore acquired before it is ever released), naming rank, block, op and
 *     the peer or resource waited on;
 *   - state left behind at the end of the launch: channel counters ahead of their waits,
 *     semaphores off their initial value, barriers with blocks still gathered.
 * The data itself (which bytes each op reads and writes, races) is checked by the Python
 * simulator (`python3 -m mscclpp verify`), which knows each collective's expected result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "executor/plan.h"

#define VERIFY_PIPE_ITERS 2 /* pipeline bodies run this often (any count must work) */

typedef struct {
    int pc;          /* next op */
    int pipe_start;  /* first op of the pipeline body being run, -1 outside */
    int pipe_end;    /* last op of that body */
    int pipe_iter;   /* iterations done */
    int barrier_gen; /* generation of the barrier this block waits in, -1 if none */
    bool done;
} vblock_t;

typedef struct {
    int arrived, nblocks, gen;
} vbarrier_t;

typedef struct {
    const struct mscclpp_plan *plan;
    uint64_t **inbound[PLAN_CH__COUNT];  /* [rank][channel]: signals received */
    uint64_t **consumed[PLAN_CH__COUNT]; /* [rank][channel]: waits passed */
    int **pair[PLAN_CH__COUNT];          /* [rank][channel]: the peer's paired channel, or -1 */
    int **pair_type[PLAN_CH__COUNT];
    int64_t **sem;                       /* [rank][semaphore] */
    vbarrier_t **bar;                    /* [rank][barrier id] */
    vblock_t **blk;                      /* [rank][block] */
} verify_t;

static void verify_free(verify_t *v)
{
    const struct mscclpp_plan *plan = v->plan;
    for (int r = 0; r < plan->nranks; r++) {
        for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++) {
            if (v->inbound[t]) free(v->inbound[t][r]);
            if (v->consumed[t]) free(v->consumed[t][r]);
            if (v->pair[t]) free(v->pair[t][r]);
            if (v->pair_type[t]) free(v->pair_type[t][r]);
        }
        if (v->sem) free(v->sem[r]);
        if (v->bar) free(v->bar[r]);
        if (v->blk) free(v->blk[r]);
    }
    for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++) {
        free(v->inbound[t]);
        free(v->consumed[t]);
        free(v->pair[t]);
        free(v->pair_type[t]);
    }
    free(v->sem);
    free(v->bar);
    free(v->blk);
}

#define VALLOC(p, n)                                                                         \
    do {                                                                                     \
        (p) = calloc((size_t)(n) ? (size_t)(n) : 1, sizeof *(p));                            \
        if (!(p)) return ERR(MSCCLPP_ERR_NO_MEMORY, "plan verify: out of memory");           \
    } while (0)

/* Channel pairs (spec §5.2): the i-th channel from A to B, memory then port, is connected to
 * the i-th from B to A. Quadratic in the channels between two ranks only. */
static mscclpp_result_t verify_pairs(verify_t *v, int r)
{
    const struct mscclpp_plan *plan = v->plan;
    const plan_gpu_t *g = &plan->gpus[r];
    for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++) {
        VALLOC(v->pair[t][r], g->n_chan[t]);
        VALLOC(v->pair_type[t][r], g->n_chan[t]);
    }
    int *ord_mine = NULL;
    VALLOC(ord_mine, plan->nranks);
    for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++) {
        for (int c = 0; c < g->n_chan[t]; c++) {
            int p = g->peers[t][c];
            int ord = ord_mine[p]++, seen = 0;
            v->pair[t][r][c] = -1;
            const plan_gpu_t *pg = &plan->gpus[p];
            for (int u = PLAN_CH_MEMORY; u <= PLAN_CH_PORT && v->pair[t][r][c] < 0; u++)
                for (int d = 0; d < pg->n_chan[u]; d++)
                    if (pg->peers[u][d] == r && seen++ == ord) {
                        v->pair[t][r][c] = d;
                        v->pair_type[t][r][c] = u;
                        break;
                    }
        }
    }
    free(ord_mine);
    return MSCCLPP_OK;
}

static mscclpp_result_t verify_init(verify_t *v)
{
    const struct mscclpp_plan *plan = v->plan;
    int n = plan->nranks;
    for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++) {
        VALLOC(v->inbound[t], n);
        VALLOC(v->consumed[t], n);
        VALLOC(v->pair[t], n);
        VALLOC(v->pair_type[t], n);
    }
    VALLOC(v->sem, n);
    VALLOC(v->bar, n);
    VALLOC(v->blk, n);
    for (int r = 0; r < n; r++) {
        const plan_gpu_t *g = &plan->gpus[r];
        for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++) {
            VALLOC(v->inbound[t][r], g->n_chan[t]);
            VALLOC(v->consumed[t][r], g->n_chan[t]);
        }
        CHECK(verify_pairs(v, r));
        VALLOC(v->sem[r], g->n_sems);
        for (int s = 0; s < g->n_sems; s++) v->sem[r][s] = g->sem_init[s];
        VALLOC(v->bar[r], PLAN_MAX_BARRIERS);
        VALLOC(v->blk[r], g->n_blocks);
        for (int b = 0; b < g->n_blocks; b++) {
            v->blk[r][b].pipe_start = -1;
            v->blk[r][b].barrier_gen = -1;
        }
    }
    return MSCCLPP_OK;
}

/* The signal of rank r on its channel (t, c) lands on the paired channel of the peer. */
static void verify_signal(verify_t *v, int r, int t, int c)
{
    const plan_gpu_t *g = &v->plan->gpus[r];
    int d = v->pair[t][r][c];
    if (d < 0) return; /* a padded semaphore nobody waits on: the balance check reports it */
    v->inbound[v->pair_type[t][r][c]][g->peers[t][c]][d]++;
}

typedef enum { STEP_RAN, STEP_BLOCKED, STEP_DONE } step_t;

/* Run one op of block b of rank r if it can run now. */
static step_t verify_step(verify_t *v, int r, int b)
{
    const plan_gpu_t *g = &v->plan->gpus[r];
    const plan_block_t *blk = &g->blocks[b];
    vblock_t *s = &v->blk[r][b];
    if (s->done) return STEP_DONE;
    if (s->pc >= blk->n_ops) {
        s->done = true;
        return STEP_DONE;
    }
    const plan_op_t *op = &blk->ops[s->pc];
    int t = op->channel_type;
    switch (op->type) {
    case PLAN_OP_PIPELINE:
        if (op->n_inner == 0) break;
        s->pipe_start = s->pc + 1;
        s->pipe_end = s->pc + op->n_inner;
        s->pipe_iter = 0;
        break;
    case PLAN_OP_SIGNAL:
    case PLAN_OP_RLXSIGNAL:
        for (int k = 0; k < op->n_channels; k++)
            verify_signal(v, r, t, blk->chan[t][op->channel_ids[k]]);
        break;
    case PLAN_OP_PWS:
    case PLAN_OP_PWSF:
        if (t == PLAN_CH_PORT)
            for (int k = 0; k < op->n_channels; k++)
                verify_signal(v, r, t, blk->chan[t][op->channel_ids[k]]);
        break;
    case PLAN_OP_WAIT:
    case PLAN_OP_RLXWAIT:
        /* All of the op's channels must have a signal; consume them together. */
        for (int k = 0; k < op->n_channels; k++) {
            int c = blk->chan[t][op->channel_ids[k]];
            uint64_t need = v->consumed[t][r][c] + 1;
            for (int j = 0; j < k; j++)
                if (blk->chan[t][op->channel_ids[j]] == c) need++;
            if (v->inbound[t][r][c] < need) return STEP_BLOCKED;
        }
        for (int k = 0; k < op->n_channels; k++)
            v->consumed[t][r][blk->chan[t][op->channel_ids[k]]]++;
        break;
    case PLAN_OP_SEM_ACQUIRE:
        for (int k = 0; k < op->n_sems; k++) {
            int need = 1;
            for (int j = 0; j < k; j++)
                if (op->sem_ids[j] == op->sem_ids[k]) need++;
            if (v->sem[r][op->sem_ids[k]] < need) return STEP_BLOCKED;
        }
        for (int k = 0; k < op->n_sems; k++) v->sem[r][op->sem_ids[k]]--;
        break;
    case PLAN_OP_SEM_RELEASE:
        for (int k = 0; k < op->n_sems; k++) v->sem[r][op->sem_ids[k]]++;
        break;
    case PLAN_OP_BARRIER: {
        if (op->barrier_nblocks <= 1) break;
        vbarrier_t *br = &v->bar[r][op->barrier_id];
        if (s->barrier_gen < 0) {
            if (br->arrived == 0) br->nblocks = op->barrier_nblocks;
            s->barrier_gen = br->gen;
            if (++br->arrived == br->nblocks) {
                br->arrived = 0;
                br->gen++;
            }
        }
        if (br->gen == s->barrier_gen) return STEP_BLOCKED;
        s->barrier_gen = -1;
        break;
    }
    default: break; /* data ops: their ordering is the Python simulator's business */
    }
    s->pc++;
    if (s->pipe_start >= 0 && s->pc > s->pipe_end) {
        if (++s->pipe_iter < VERIFY_PIPE_ITERS) s->pc = s->pipe_start;
        else s->pipe_start = -1;
    }
    return STEP_RAN;
}

static const char *chan_name(int t) { return t == PLAN_CH_PORT ? "port" : "memory"; }

/* A stuck block: say what it waits for. */
static mscclpp_result_t report_stuck(verify_t *v, int r, int b)
{
    const struct mscclpp_plan *plan = v->plan;
    const plan_gpu_t *g = &plan->gpus[r];
    const plan_block_t *blk = &g->blocks[b];
    const vblock_t *s = &v->blk[r][b];
    const plan_op_t *op = &blk->ops[s->pc];
    int t = op->channel_type;
    char what[256];
    switch (op->type) {
    case PLAN_OP_WAIT:
    case PLAN_OP_RLXWAIT: {
        int c = -1;
        for (int k = 0; k < op->n_channels && c < 0; k++) {
            int ch = blk->chan[t][op->channel_ids[k]];
            if (v->inbound[t][r][ch] <= v->consumed[t][r][ch]) c = ch;
        }
        if (c < 0) c = blk->chan[t][op->channel_ids[0]];
        snprintf(what, sizeof what, "waits for rank %d on %s channel %d (signal %llu never "
                 "comes)", g->peers[t][c], chan_name(t), c,
                 (unsigned long long)v->consumed[t][r][c] + 1);
        break;
    }
    case PLAN_OP_SEM_ACQUIRE:
        snprintf(what, sizeof what, "acquires semaphore %d, which is never released enough",
                 op->sem_ids[0]);
        break;
    case PLAN_OP_BARRIER:
        snprintf(what, sizeof what, "waits in barrier %d for %d blocks; only %d arrive",
                 op->barrier_id, v->bar[r][op->barrier_id].nblocks,
                 v->bar[r][op->barrier_id].arrived);
        break;
    default: snprintf(what, sizeof what, "cannot proceed"); break;
    }
    return ERR(MSCCLPP_ERR_INVALID_PLAN,
               "plan '%s' deadlocks: gpus[%d].threadblocks[%d].ops[%d] (%s) %s%s", plan->name, r,
               b, s->pc, plan_op_name((plan_op_type_t)op->type), what,
               s->pipe_start >= 0 ? " (in a pipeline body)" : "");
}

/* After the launch: what would be left for the next one. */
static mscclpp_result_t verify_leftovers(verify_t *v)
{
    const struct mscclpp_plan *plan = v->plan;
    for (int r = 0; r < plan->nranks; r++) {
        const plan_gpu_t *g = &plan->gpus[r];
        for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++)
            for (int c = 0; c < g->n_chan[t]; c++)
                if (v->inbound[t][r][c] != v->consumed[t][r][c])
                    return ERR(MSCCLPP_ERR_INVALID_PLAN,
                               "plan '%s': rank %d receives %llu signals from rank %d on %s "
                               "channel %d per launch but waits %llu times: the next launch's "
                               "waits would pass before their data lands",
                               plan->name, r, (unsigned long long)v->inbound[t][r][c],
                               g->peers[t][c], chan_name(t), c,
                               (unsigned long long)v->consumed[t][r][c]);
        for (int s = 0; s < g->n_sems; s++)
            if (v->sem[r][s] != g->sem_init[s])
                return ERR(MSCCLPP_ERR_INVALID_PLAN,
                           "plan '%s': gpus[%d].semaphores[%d] ends a launch at %lld, not at its "
                           "initial value %d (semaphores persist across launches)",
                           plan->name, r, s, (long long)v->sem[r][s], g->sem_init[s]);
        for (int id = 0; id < PLAN_MAX_BARRIERS; id++)
            if (v->bar[r][id].arrived)
                return ERR(MSCCLPP_ERR_INVALID_PLAN,
                           "plan '%s': rank %d ends a launch with %d blocks gathered in barrier "
                           "%d (of %d)",
                           plan->name, r, v->bar[r][id].arrived, id, v->bar[r][id].nblocks);
    }
    return MSCCLPP_OK;
}

mscclpp_result_t plan_verify(const struct mscclpp_plan *plan)
{
    verify_t v = {.plan = plan};
    mscclpp_result_t res = verify_init(&v);
    if (res != MSCCLPP_OK) goto free_state;
    /* Round robin until every block is done or none moves. A block runs as far as it can each
     * turn, so the number of rounds is the longest chain of cross-block dependencies. */
    for (;;) {
        bool moved = false, all_done = true;
        for (int r = 0; r < plan->nranks; r++)
            for (int b = 0; b < plan->gpus[r].n_blocks; b++) {
                step_t st;
                while ((st = verify_step(&v, r, b)) == STEP_RAN) moved = true;
                if (st != STEP_DONE) all_done = false;
            }
        if (all_done) break;
        if (!moved) {
            for (int r = 0; r < plan->nranks; r++)
                for (int b = 0; b < plan->gpus[r].n_blocks; b++)
                    if (!v.blk[r][b].done) {
                        res = report_stuck(&v, r, b);
                        goto free_state;
                    }
        }
    }
    res = verify_leftovers(&v);
free_state:
    verify_free(&v);
    return res;
}
