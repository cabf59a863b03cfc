/*
 * Writing a loaded plan back as JSON (docs/plan-format.md), keys in the order the DSL writes
 * them, so that a plan made in C (executor/made.c) can be read by the Python simulator, the
 * plan viewer and the C loader, and compared with the DSL's. A made plan of one rank is written
 * as a partial plan ("rank_subset": [r], the other ranks as stubs), which the loader refuses by
 * design (every rank must be listed); whole plans round-trip.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "executor/plan.h"

typedef struct {
    char *buf;
    size_t len, cap;
    bool oom;
} sb_t;

static void sb_put(sb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_put(sb_t *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->buf ? b->buf + b->len : NULL, b->buf ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if (b->buf && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + (size_t)n + 1) cap *= 2;
        char *p = realloc(b->buf, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->buf = p;
        b->cap = cap;
    }
}

static void sb_str(sb_t *b, const char *s)
{
    sb_put(b, "\"");
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') sb_put(b, "\\%c", c);
        else if (c < 0x20) sb_put(b, "\\u%04x", c);
        else sb_put(b, "%c", c);
    }
    sb_put(b, "\"");
}

static const char *const buf_letter[] = {"i", "o", "s"};
static const char *const chan_name[PLAN_CH__COUNT] = {"none", "memory", "port", "switch"};
static const char *const redop_name[] = {"sum", "prod", "min", "max"};

static bool is_reduce(int t)
{
    return t == PLAN_OP_RE || t == PLAN_OP_REPKT || t == PLAN_OP_RECPKT || t == PLAN_OP_RES ||
           t == PLAN_OP_RESPKT || t == PLAN_OP_RECSPKT || t == PLAN_OP_RRE || t == PLAN_OP_RRES ||
           t == PLAN_OP_GLRES || t == PLAN_OP_GLRE;
}

static void put_descs(sb_t *b, const plan_desc_t *d, int n)
{
    sb_put(b, "[");
    for (int i = 0; i < n; i++) {
        static const char *const key[] = {"type", "buffer_id", "switch_channel_id"};
        sb_put(b, "%s{\"%s\": ", i ? ", " : "", key[d[i].kind]);
        if (d[i].kind == PLAN_DESC_LOCAL) sb_put(b, "\"%s\"", buf_letter[d[i].buf]);
        else sb_put(b, "%u", d[i].ref);
        sb_put(b, ", \"index\": %u, \"size\": %u}", d[i].index, d[i].size);
    }
    sb_put(b, "]");
}

/* Op i of a block (a pipeline writes its body); returns the index of the next op. */
static int put_op(sb_t *b, const plan_block_t *blk, int i)
{
    const plan_op_t *op = &blk->ops[i];
    sb_put(b, "{\"name\": ");
    sb_str(b, plan_op_name((plan_op_type_t)op->type));
    int t = op->type;
    if (t == PLAN_OP_NOP) {
        sb_put(b, "}");
        return i + 1;
    }
    if (t == PLAN_OP_BARRIER) {
        sb_put(b, ", \"barrier_id\": %u, \"num_threadblocks\": %u}", op->barrier_id,
               op->barrier_nblocks);
        return i + 1;
    }
    if (t == PLAN_OP_SEM_ACQUIRE || t == PLAN_OP_SEM_RELEASE) {
        sb_put(b, ", \"semaphore_ids\": [");
        for (int k = 0; k < op->n_sems; k++) sb_put(b, "%s%u", k ? ", " : "", op->sem_ids[k]);
        sb_put(b, "]}");
        return i + 1;
    }
    if (t == PLAN_OP_PIPELINE) {
        sb_put(b, ", \"iter_context\": {\"unit_size\": %llu, \"num_chunks\": %u}, \"ops\": [",
               (unsigned long long)op->unit_size, op->num_chunks);
        int j = i + 1, end = i + 1 + op->n_inner;
        while (j < end) {
            if (j > i + 1) sb_put(b, ", ");
            j = put_op(b, blk, j);
        }
        sb_put(b, "]}");
        return end;
    }
    bool sync = t == PLAN_OP_SIGNAL || t == PLAN_OP_WAIT || t == PLAN_OP_RLXSIGNAL ||
                t == PLAN_OP_RLXWAIT || t == PLAN_OP_FLUSH;
    if (!sync) {
        sb_put(b, ", \"src_buff\": ");
        put_descs(b, op->src, op->n_src);
        sb_put(b, ", \"dst_buff\": ");
        put_descs(b, op->dst, op->n_dst);
    }
    if (op->n_channels) {
        sb_put(b, ", \"channel_ids\": [");
        for (int k = 0; k < op->n_channels; k++)
            sb_put(b, "%s%u", k ? ", " : "", op->channel_ids[k]);
        sb_put(b, "]");
    }
    if (op->channel_type != PLAN_CH_NONE)
        sb_put(b, ", \"channel_type\": \"%s\"", chan_name[op->channel_type]);
    if (is_reduce(t) && op->reduce_op >= 0 && op->reduce_op < 4)
        sb_put(b, ", \"reduce_op\": \"%s\"", redop_name[op->reduce_op]);
    if (op->tbg_size)
        sb_put(b, ", \"tbg_info\": {\"tb_id\": %u, \"tbg_size\": %u}", op->tbg_id, op->tbg_size);
    sb_put(b, "}");
    return i + 1;
}

static void put_block(sb_t *b, const plan_block_t *blk, int id)
{
    sb_put(b, "{\"id\": %d, \"ops\": [", id);
    for (int i = 0; i < blk->n_ops;) {
        if (i) sb_put(b, ", ");
        i = put_op(b, blk, i);
    }
    sb_put(b, "], \"channels\": [");
    bool first = true;
    for (int t = PLAN_CH_MEMORY; t < PLAN_CH__COUNT; t++) {
        if (!blk->n_chan[t]) continue;
        sb_put(b, "%s{\"channel_type\": \"%s\", \"channel_ids\": [", first ? "" : ", ",
               chan_name[t]);
        for (int k = 0; k < blk->n_chan[t]; k++) sb_put(b, "%s%u", k ? ", " : "", blk->chan[t][k]);
        sb_put(b, "]}");
        first = false;
    }
    sb_put(b, "], \"remote_buffer_refs\": [");
    first = true;
    for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++) {
        if (!blk->n_rbuf[t]) continue;
        sb_put(b, "%s{\"access_channel_type\": \"%s\", \"remote_buffer_ids\": [", first ? "" : ", ",
               chan_name[t]);
        for (int k = 0; k < blk->n_rbuf[t]; k++) sb_put(b, "%s%u", k ? ", " : "", blk->rbuf[t][k]);
        sb_put(b, "]}");
        first = false;
    }
    sb_put(b, "]}");
}

static void put_gpu(sb_t *b, const plan_gpu_t *g, int r, bool full)
{
    sb_put(b,
           "{\"id\": %d, \"input_chunks\": %u, \"output_chunks\": %u, \"scratch_chunks\": %u, "
           "\"threadblocks\": [",
           r, g->input_chunks, g->output_chunks, g->scratch_chunks);
    for (int k = 0; full && k < g->n_blocks; k++) {
        sb_put(b, "%s\n    ", k ? "," : "");
        put_block(b, &g->blocks[k], k);
    }
    sb_put(b, "], \"channels\": [");
    bool first = true;
    for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++) {
        if (!g->n_chan[t]) continue;
        sb_put(b, "%s{\"channel_type\": \"%s\", \"connected_to\": [", first ? "" : ", ",
               chan_name[t]);
        for (int k = 0; k < g->n_chan[t]; k++) sb_put(b, "%s%d", k ? ", " : "", g->peers[t][k]);
        sb_put(b, "]}");
        first = false;
    }
    for (int s = 0; s < g->n_chan[PLAN_CH_SWITCH]; s++) {
        const plan_switch_t *sw = &g->switches[s];
        sb_put(b,
               "%s{\"channel_type\": \"switch\", \"buffer_type\": \"%s\", \"rank_groups\": "
               "[{\"size\": %d, \"ranks\": [",
               first ? "" : ", ", buf_letter[sw->buf], sw->n_ranks);
        for (int m = 0; m < sw->n_ranks; m++) sb_put(b, "%s%d", m ? ", " : "", sw->ranks[m]);
        sb_put(b, "]}]}");
        first = false;
    }
    sb_put(b, "], \"remote_buffers\": [");
    for (int q = 0; q < g->n_rbufs; q++) {
        const plan_rbuf_t *rb = &g->rbufs[q];
        sb_put(b, "%s{\"rank\": %d, \"type\": \"%s\", \"access_channel_types\": [", q ? ", " : "",
               rb->owner, buf_letter[rb->buf]);
        bool f = true;
        for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++)
            if (rb->access & (1u << t)) {
                sb_put(b, "%s\"%s\"", f ? "" : ", ", chan_name[t]);
                f = false;
            }
        sb_put(b, "]}");
    }
    sb_put(b, "], \"semaphores\": [");
    for (int s = 0; full && s < g->n_sems; s++)
        sb_put(b, "%s{\"init_value\": %d}", s ? ", " : "", g->sem_init[s]);
    sb_put(b, "]}");
}

MSCCLPP_API mscclpp_result_t mscclpp_plan_to_json(const mscclpp_plan_t *plan, char *buf, size_t cap,
                                                  size_t *len)
{
    CHECK_ARG(plan != NULL);
    CHECK_ARG(len != NULL);
    CHECK_ARG(buf != NULL || cap == 0);
    sb_t b = {0};
    sb_put(&b, "{\"format\": \"mscclpp-plan/1\", \"name\": ");
    sb_str(&b, plan->name);
    sb_put(&b, ", \"collective\": ");
    sb_str(&b, plan->collective);
    sb_put(&b, ", \"protocol\": \"%s\", \"inplace\": %s, \"reuse_resources\": %s,\n \"gpus\": [",
           plan->packet_protocol ? "LL" : "Simple", plan->inplace ? "true" : "false",
           plan->reuse_resources ? "true" : "false");
    for (int r = 0; r < plan->nranks; r++) {
        sb_put(&b, "%s\n  ", r ? "," : "");
        put_gpu(&b, &plan->gpus[r], r, !plan->partial || r == plan->part_rank);
    }
    sb_put(&b,
           "],\n \"num_threads_per_block\": %u, \"use_double_scratch_buffer\": %s, "
           "\"buffer_alignment\": %u, \"min_message_size\": %llu, \"max_message_size\": %llu",
           plan->threads_per_block, plan->double_scratch ? "true" : "false", plan->alignment,
           (unsigned long long)plan->min_message_size, (unsigned long long)plan->max_message_size);
    if (plan->collective &&
        (!strcmp(plan->collective, "broadcast") || !strcmp(plan->collective, "reduce")))
        sb_put(&b, ", \"root\": %d", plan->root);
    if (plan->partial) sb_put(&b, ", \"rank_subset\": [%d]", plan->part_rank);
    sb_put(&b, "}\n");
    if (b.oom) {
        free(b.buf);
        return ERR(MSCCLPP_ERR_NO_MEMORY, "plan '%s': out of memory writing JSON", plan->name);
    }
    *len = b.len;
    mscclpp_result_t r = MSCCLPP_OK;
    if (buf) {
        if (cap > b.len) memcpy(buf, b.buf, b.len + 1);
        else
            r = ERR_ARG("plan '%s': its JSON needs %zu bytes and a terminating NUL, the buffer "
                        "has %zu",
                        plan->name, b.len, cap);
    }
    free(b.buf);
    return r;
}
