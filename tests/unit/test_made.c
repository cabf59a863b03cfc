/*
 * Plans made for the job (executor/made.c, executor/plan_make.c):
 *   - on one node of 1 to 8 ranks the made plans are the DSL's default plans of plans/, op for
 *     op (every field the executor reads, names and size ranges aside);
 *   - for every collective and every shape of the list below (1 to 20 ranks on one node, node
 *     layouts 2x1 ... 4x4, 3x2, 5x3, uneven ones, larger rings) the whole made plan, written as
 *     JSON, loads through the plan loader (every index, limit and signal/wait count checked) and
 *     passes mscclpp_plan_verify (no deadlock, counters balanced);
 *   - the part made for one rank is that rank's part of the whole plan, and its peers' stubs
 *     carry their whole channel lists and remote buffers;
 *   - a 1024-rank plan made for one rank has only that rank's blocks.
 * The data each plan computes is checked by the simulator (tests/python/test_made_plans.py) and
 * on the host backend by the conformance suite (tests/conformance/test_made.sh).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor/lower.h"
#include "executor/made.h"
#include "executor/plan.h"

static const char *top_srcdir(void)
{
    const char *d = getenv("MSCCLPP_TOP_SRCDIR");
    return d && d[0] ? d : ".";
}

static const char *const colls[] = {"allreduce", "allgather", "reducescatter",
                                    "alltoall",  "broadcast", "reduce"};
#define NCOLLS 6

/* A shape: node sizes (node-major ranks) or, with `cyclic`, rank r on node r % nodes. */
typedef struct {
    int nodes[16], nnodes;
    bool cyclic;
} shape_t;

static int shape_ranks(const shape_t *s)
{
    int n = 0;
    for (int k = 0; k < s->nnodes; k++) n += s->nodes[k];
    return n;
}

static void shape_labels(const shape_t *s, int *node_of)
{
    int n = shape_ranks(s), r = 0;
    if (s->cyclic) {
        for (r = 0; r < n; r++) node_of[r] = r % s->nnodes;
        return;
    }
    for (int k = 0; k < s->nnodes; k++)
        for (int j = 0; j < s->nodes[k]; j++) node_of[r++] = 100 + k;
}

static char *to_json(const mscclpp_plan_t *p)
{
    size_t len = 0;
    ck_assert_int_eq(mscclpp_plan_to_json(p, NULL, 0, &len), MSCCLPP_OK);
    char *buf = malloc(len + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(mscclpp_plan_to_json(p, buf, len + 1, &len), MSCCLPP_OK);
    ck_assert_uint_eq(strlen(buf), len);
    return buf;
}

/* ---- comparing two loaded plans ------------------------------------------------------------- */

static char diff[512];

#define DIFF(...) (snprintf(diff, sizeof diff, __VA_ARGS__), false)

static bool same_desc(const plan_desc_t *a, const plan_desc_t *b)
{
    return a->kind == b->kind && a->buf == b->buf && a->ref == b->ref && a->index == b->index &&
           a->size == b->size;
}

static bool same_op(const plan_op_t *a, const plan_op_t *b, const char *where)
{
    if (a->type != b->type || a->channel_type != b->channel_type || a->reduce_op != b->reduce_op ||
        a->n_src != b->n_src || a->n_dst != b->n_dst || a->n_channels != b->n_channels ||
        a->tbg_size != b->tbg_size)
        return DIFF("%s: op %s/%s, channel type %d/%d, reduce %d/%d, descs %d+%d/%d+%d, "
                    "channels %d/%d",
                    where, plan_op_name(a->type), plan_op_name(b->type), a->channel_type,
                    b->channel_type, a->reduce_op, b->reduce_op, a->n_src, a->n_dst, b->n_src,
                    b->n_dst, a->n_channels, b->n_channels);
    for (int k = 0; k < a->n_channels; k++)
        if (a->channel_ids[k] != b->channel_ids[k]) return DIFF("%s: channel_ids[%d]", where, k);
    for (int k = 0; k < a->n_src; k++)
        if (!same_desc(&a->src[k], &b->src[k]))
            return DIFF("%s: src[%d] %d/%d %u+%u vs %d/%d %u+%u", where, k, a->src[k].kind,
                        a->src[k].buf, a->src[k].index, a->src[k].size, b->src[k].kind,
                        b->src[k].buf, b->src[k].index, b->src[k].size);
    for (int k = 0; k < a->n_dst; k++)
        if (!same_desc(&a->dst[k], &b->dst[k]))
            return DIFF("%s: dst[%d] %d/%d %u+%u vs %d/%d %u+%u", where, k, a->dst[k].kind,
                        a->dst[k].buf, a->dst[k].index, a->dst[k].size, b->dst[k].kind,
                        b->dst[k].buf, b->dst[k].index, b->dst[k].size);
    return true;
}

/* Remote buffers of gpu entries; owner >= 0: a stub's (a) against the whole plan's (b), which
 * keeps those of that owner only (the rank its part was made for), in the same order. */
static bool same_rbufs(const plan_gpu_t *a, const plan_gpu_t *b, int r, int owner)
{
    int k = 0;
    for (int q = 0; q < b->n_rbufs; q++) {
        const plan_rbuf_t *y = &b->rbufs[q];
        if (owner >= 0 && y->owner != owner) continue;
        if (k >= a->n_rbufs) return DIFF("rank %d: %d remote buffers, more expected", r, k);
        const plan_rbuf_t *x = &a->rbufs[k++];
        if (x->owner != y->owner || x->buf != y->buf || x->access != y->access)
            return DIFF("rank %d: remote buffer %d", r, k - 1);
    }
    if (k != a->n_rbufs) return DIFF("rank %d: %d vs %d remote buffers", r, a->n_rbufs, k);
    return true;
}

/* Resources of gpu entries: chunk counts, channels, remote buffers (owner: same_rbufs). */
static bool same_resources(const plan_gpu_t *a, const plan_gpu_t *b, int r, int owner)
{
    if (a->input_chunks != b->input_chunks || a->output_chunks != b->output_chunks ||
        a->scratch_chunks != b->scratch_chunks)
        return DIFF("rank %d: chunks %u/%u/%u vs %u/%u/%u", r, a->input_chunks, a->output_chunks,
                    a->scratch_chunks, b->input_chunks, b->output_chunks, b->scratch_chunks);
    for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++) {
        if (a->n_chan[t] != b->n_chan[t])
            return DIFF("rank %d: %d vs %d channels of type %d", r, a->n_chan[t], b->n_chan[t], t);
        for (int i = 0; i < a->n_chan[t]; i++)
            if (a->peers[t][i] != b->peers[t][i])
                return DIFF("rank %d: channel %d of type %d goes to %d vs %d", r, i, t,
                            a->peers[t][i], b->peers[t][i]);
    }
    return same_rbufs(a, b, r, owner);
}

static bool same_gpu(const plan_gpu_t *a, const plan_gpu_t *b, int r)
{
    if (!same_resources(a, b, r, -1)) return false;
    if (a->n_blocks != b->n_blocks)
        return DIFF("rank %d: %d vs %d thread blocks", r, a->n_blocks, b->n_blocks);
    for (int k = 0; k < a->n_blocks; k++) {
        const plan_block_t *x = &a->blocks[k], *y = &b->blocks[k];
        if (x->n_ops != y->n_ops)
            return DIFF("rank %d block %d: %d vs %d ops", r, k, x->n_ops, y->n_ops);
        for (int t = 0; t < PLAN_CH__COUNT; t++) {
            if (x->n_chan[t] != y->n_chan[t] || x->n_rbuf[t] != y->n_rbuf[t] ||
                memcmp(x->chan[t], y->chan[t], sizeof(uint16_t) * x->n_chan[t]) ||
                memcmp(x->rbuf[t], y->rbuf[t], sizeof(uint16_t) * x->n_rbuf[t]))
                return DIFF("rank %d block %d: tables of channel type %d", r, k, t);
        }
        for (int i = 0; i < x->n_ops; i++) {
            char where[64];
            snprintf(where, sizeof where, "rank %d block %d op %d", r, k, i);
            if (!same_op(&x->ops[i], &y->ops[i], where)) return false;
        }
    }
    return true;
}

static bool same_plan(const struct mscclpp_plan *a, const struct mscclpp_plan *b)
{
    if (strcmp(a->collective, b->collective) || a->nranks != b->nranks ||
        a->packet_protocol != b->packet_protocol || a->inplace != b->inplace ||
        a->double_scratch != b->double_scratch || a->alignment != b->alignment)
        return DIFF("header differs");
    for (int r = 0; r < a->nranks; r++)
        if (!same_gpu(&a->gpus[r], &b->gpus[r], r)) return false;
    return true;
}

/* ---- on one node: the DSL's plans ------------------------------------------------------------ */

static mscclpp_plan_t *load_shipped(const char *rel)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/plans/%s", top_srcdir(), rel);
    mscclpp_plan_t *p = NULL;
    ck_assert_msg(mscclpp_plan_load_file(path, &p) == MSCCLPP_OK, "%s: %s", path,
                  mscclpp_last_error());
    return p;
}

static mscclpp_plan_t *make_whole(const char *coll, exec_made_proto_t proto, int n,
                                  const int *node_of, int root, const char *backend)
{
    uint64_t lab[1024];
    for (int r = 0; r < n; r++) lab[r] = node_of ? (uint64_t)node_of[r] : 0;
    exec_topo_t t;
    ck_assert_int_eq(exec_topo_init(&t, n, lab), MSCCLPP_OK);
    exec_made_spec_t s = {.collective = coll,
                          .proto = proto,
                          .root = root,
                          .instances = exec_made_instances(backend, coll, proto)};
    struct mscclpp_plan *p = NULL;
    mscclpp_result_t r = exec_made_plan(&t, &s, -1, &p);
    ck_assert_msg(r == MSCCLPP_OK, "%s on %d ranks: %s", coll, n, mscclpp_last_error());
    exec_topo_fini(&t);
    return p;
}

START_TEST(t_flat_is_the_dsl)
{
    int n = _i + 1; /* 1..8 */
    for (int c = 0; c < NCOLLS + 2; c++) {
        const char *coll = c < NCOLLS ? colls[c] : "allreduce";
        if (!strcmp(coll, "reduce")) continue; /* no DSL program: checked by the simulator */
        exec_made_proto_t proto = c == NCOLLS ? EXEC_MADE_PACKET : EXEC_MADE_SIMPLE;
        const char *backend = c == NCOLLS + 1 ? "host" : NULL;
        if (n == 1 && (proto == EXEC_MADE_PACKET || backend)) continue;
        char rel[128];
        if (n == 1) snprintf(rel, sizeof rel, "%s_1.json", coll);
        else if (!strcmp(coll, "allreduce"))
            snprintf(rel, sizeof rel, "%sallreduce_%s_%d.json", backend ? "host/" : "",
                     proto == EXEC_MADE_PACKET ? "pkt" : "simple", n);
        else snprintf(rel, sizeof rel, "%s_%d.json", coll, n);
        mscclpp_plan_t *dsl = load_shipped(rel);
        mscclpp_plan_t *made = make_whole(coll, proto, n, NULL, 0, backend);
        ck_assert_msg(same_plan(made, dsl), "made %s vs plans/%s: %s", mscclpp_plan_name(made), rel,
                      diff);
        /* and through JSON: the loader reads what we write */
        char *json = to_json(made);
        mscclpp_plan_t *back = NULL;
        ck_assert_msg(mscclpp_plan_load_string(json, strlen(json), &back) == MSCCLPP_OK, "%s",
                      mscclpp_last_error());
        ck_assert_msg(same_plan(back, dsl), "made %s through JSON: %s", rel, diff);
        free(json);
        mscclpp_plan_destroy(back);
        mscclpp_plan_destroy(made);
        mscclpp_plan_destroy(dsl);
    }
}
END_TEST

/* ---- every shape: loads, verifies, one rank's part is its part ------------------------------ */

static const shape_t shapes[] = {
    {{1}, 1, false},
    {{2}, 1, false},
    {{3}, 1, false},
    {{5}, 1, false},
    {{9}, 1, false},
    {{12}, 1, false},
    {{16}, 1, false},
    {{17}, 1, false},
    {{18}, 1, false},
    {{20}, 1, false},
    {{1, 1}, 2, false},
    {{2, 2}, 2, false},
    {{3, 3}, 2, false},
    {{4, 4}, 2, false},
    {{1, 1, 1}, 3, false},
    {{2, 2, 2}, 3, false},
    {{3, 3, 3}, 3, false},
    {{4, 4, 4}, 3, false},
    {{1, 1, 1, 1}, 4, false},
    {{2, 2, 2, 2}, 4, false},
    {{3, 3, 3, 3}, 4, false},
    {{4, 4, 4, 4}, 4, false},
    {{3, 3, 3, 3, 3}, 5, false},
    {{2, 3, 1}, 3, false},
    {{1, 4}, 2, false},
    {{5, 2, 3}, 3, false},
    {{3, 1, 1, 2}, 4, false},
    {{8, 8, 8, 8, 8, 8, 8, 8}, 8, false},
    {{3, 3}, 2, true},
    {{2, 2, 2}, 3, true},
    {{17, 2}, 2, false},
    {{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 16, false},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

/* Who writes the packets of rank me's chunks (lower.c, what a timed-out packet wait names):
 * the part made for me names the same ranks as the whole plan, though its peers are stubs
 * without ops. Returns the chunks a peer writes. */
static int check_writers(const mscclpp_plan_t *whole, const mscclpp_plan_t *part, int me)
{
    const plan_gpu_t *g = &whole->gpus[me];
    uint32_t n[3] = {g->input_chunks, g->output_chunks, g->scratch_chunks};
    uint16_t *a[3], *b[3];
    int peers = 0;
    for (int t = 0; t < 3; t++) {
        a[t] = calloc(n[t] + 1, sizeof(uint16_t));
        b[t] = calloc(n[t] + 1, sizeof(uint16_t));
        ck_assert(a[t] && b[t]);
    }
    ck_assert_int_eq(exec_packet_writers(whole, me, a), MSCCLPP_OK);
    ck_assert_int_eq(exec_packet_writers(part, me, b), MSCCLPP_OK);
    for (int t = 0; t < 3; t++) {
        for (uint32_t c = 0; c < n[t]; c++) {
            ck_assert_msg(a[t][c] == b[t][c],
                          "%s rank %d: buffer %d chunk %u: packets written by rank %d in the "
                          "whole plan, by %d in the rank's part",
                          mscclpp_plan_name(whole), me, t, c, a[t][c] - 1, b[t][c] - 1);
            peers += a[t][c] && a[t][c] != me + 1;
        }
        free(a[t]);
        free(b[t]);
    }
    return peers;
}

static void check_one(const char *coll, exec_made_proto_t proto, const shape_t *sh, int root)
{
    int n = shape_ranks(sh), node_of[1024];
    shape_labels(sh, node_of);
    mscclpp_plan_t *p = NULL;
    mscclpp_result_t r = mscclpp_plan_make(coll, proto ? "LL" : "Simple", n, node_of, root, -1, &p);
    if (proto == EXEC_MADE_PACKET && r == MSCCLPP_ERR_UNSUPPORTED) return;
    ck_assert_msg(r == MSCCLPP_OK, "%s on %d ranks: %s", coll, n, mscclpp_last_error());
    char *json = to_json(p);
    mscclpp_plan_t *back = NULL;
    ck_assert_msg(mscclpp_plan_load_string(json, strlen(json), &back) == MSCCLPP_OK,
                  "%s (%d ranks, %d nodes, root %d): %s", mscclpp_plan_name(p), n, sh->nnodes, root,
                  mscclpp_last_error());
    ck_assert_msg(mscclpp_plan_verify(back) == MSCCLPP_OK, "%s (%d nodes, root %d): %s",
                  mscclpp_plan_name(p), sh->nnodes, root, mscclpp_last_error());
    ck_assert_msg(same_plan(back, p), "%s through JSON: %s", mscclpp_plan_name(p), diff);
    /* each rank's own part, as an executor makes it */
    for (int me = 0; me < n; me++) {
        mscclpp_plan_t *part = NULL;
        ck_assert_int_eq(
            mscclpp_plan_make(coll, proto ? "LL" : "Simple", n, node_of, root, me, &part),
            MSCCLPP_OK);
        ck_assert(part->partial && part->part_rank == me);
        ck_assert_msg(same_gpu(&part->gpus[me], &p->gpus[me], me), "%s rank %d's part: %s",
                      mscclpp_plan_name(p), me, diff);
        int written = check_writers(p, part, me);
        /* a packet plan's ranks read their peers' packets */
        if (proto == EXEC_MADE_PACKET && n > 1)
            ck_assert_msg(written > 0, "%s rank %d: no chunk written by a peer",
                          mscclpp_plan_name(p), me);
        for (int v = 0; v < n; v++) {
            if (v == me) continue;
            const plan_gpu_t *g = &part->gpus[v];
            ck_assert_int_eq(g->n_blocks, 0);
            ck_assert_int_eq(g->id, v);
            bool peer = g->n_chan[PLAN_CH_MEMORY] + g->n_chan[PLAN_CH_PORT] > 0;
            /* a peer that talks to me carries its channels and my buffers it addresses; anyone
             * else its chunk counts */
            bool talks = false;
            for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++)
                for (int i = 0; i < p->gpus[me].n_chan[t]; i++)
                    talks |= p->gpus[me].peers[t][i] == v;
            ck_assert_msg(talks == peer, "%s rank %d's part: stub of rank %d", mscclpp_plan_name(p),
                          me, v);
            if (peer)
                ck_assert_msg(same_resources(g, &p->gpus[v], v, me),
                              "%s rank %d's stub of %d: %s",
                              mscclpp_plan_name(p), me, v, diff);
            else
                ck_assert(g->input_chunks == p->gpus[v].input_chunks &&
                          g->output_chunks == p->gpus[v].output_chunks &&
                          g->scratch_chunks == p->gpus[v].scratch_chunks);
        }
        mscclpp_plan_destroy(part);
    }
    free(json);
    mscclpp_plan_destroy(back);
    mscclpp_plan_destroy(p);
}

START_TEST(t_shapes)
{
    const shape_t *sh = &shapes[_i];
    int n = shape_ranks(sh);
    for (int c = 0; c < NCOLLS; c++) {
        bool rooted = !strcmp(colls[c], "broadcast") || !strcmp(colls[c], "reduce");
        int roots[3] = {0, n - 1, n / 2}, nroots = rooted ? 3 : 1;
        for (int k = 0; k < nroots; k++) check_one(colls[c], EXEC_MADE_SIMPLE, sh, roots[k]);
    }
    for (int c = 0; c < 3; c++) check_one(colls[c], EXEC_MADE_PACKET, sh, 0);
}
END_TEST

/* The count-exact alltoallv plan (executor/alltoallv.c) of every shape: as a chunk plan it is
 * an alltoall (each block straight into its peer's output), which the verifier simulates; each
 * rank's part is its part of the whole, and its stubs carry what setup needs. */
START_TEST(t_alltoallv_plans)
{
    const shape_t *sh = &shapes[_i];
    int n = shape_ranks(sh), node_of[1024];
    shape_labels(sh, node_of);
    uint64_t lab[1024];
    for (int r = 0; r < n; r++) lab[r] = (uint64_t)node_of[r];
    exec_topo_t t;
    ck_assert_int_eq(exec_topo_init(&t, n, lab), MSCCLPP_OK);
    struct mscclpp_plan *p = NULL;
    ck_assert_msg(exec_made_alltoallv(&t, -1, &p) == MSCCLPP_OK, "%d ranks: %s", n,
                  mscclpp_last_error());
    ck_assert(p->per_peer && !strcmp(p->collective, "alltoall"));
    ck_assert_ptr_nonnull(strstr(mscclpp_plan_name(p), "made_alltoallv_"));
    char *json = to_json(p);
    mscclpp_plan_t *back = NULL;
    ck_assert_msg(mscclpp_plan_load_string(json, strlen(json), &back) == MSCCLPP_OK, "%s: %s",
                  mscclpp_plan_name(p), mscclpp_last_error());
    ck_assert_msg(mscclpp_plan_verify(back) == MSCCLPP_OK, "%s: %s", mscclpp_plan_name(p),
                  mscclpp_last_error());
    ck_assert_msg(same_plan(back, p), "%s through JSON: %s", mscclpp_plan_name(p), diff);
    for (int me = 0; me < n; me++) {
        struct mscclpp_plan *part = NULL;
        ck_assert_int_eq(exec_made_alltoallv(&t, me, &part), MSCCLPP_OK);
        ck_assert(part->partial && part->part_rank == me && part->per_peer);
        ck_assert_msg(same_gpu(&part->gpus[me], &p->gpus[me], me), "%s rank %d's part: %s",
                      mscclpp_plan_name(p), me, diff);
        for (int v = 0; v < n; v++)
            if (v != me)
                ck_assert_msg(same_resources(&part->gpus[v], &p->gpus[v], v, me),
                              "%s rank %d's stub of %d: %s", mscclpp_plan_name(p), me, v, diff);
        mscclpp_plan_destroy(part);
    }
    free(json);
    mscclpp_plan_destroy(back);
    mscclpp_plan_destroy(p);
    exec_topo_fini(&t);
}
END_TEST

START_TEST(t_refusals)
{
    mscclpp_plan_t *p = NULL;
    ck_assert_int_eq(mscclpp_plan_make("sendrecv", NULL, 4, NULL, 0, -1, &p),
                     MSCCLPP_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(mscclpp_last_error(), "allreduce, allgather"));
    ck_assert_int_eq(mscclpp_plan_make("broadcast", NULL, 4, NULL, 4, -1, &p),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_plan_make("allreduce", "LL", 1, NULL, 0, -1, &p),
                     MSCCLPP_ERR_UNSUPPORTED);
    ck_assert_int_eq(mscclpp_plan_make("allreduce", "XL", 4, NULL, 0, -1, &p),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_plan_make("allreduce", NULL, 0, NULL, 0, -1, &p),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_ptr_null(p);
}
END_TEST

/* A 1024-rank job: one rank's part holds only its own blocks (the benchmark of the time it
 * takes is tools/mscclpp-info --make-plan; docs/performance.md). */
START_TEST(t_large_partial)
{
    static const int layouts[][2] = {{1, 1024}, {8, 128}, {128, 8}, {16, 64}};
    for (int k = 0; k < 4; k++) {
        int nodes = layouts[k][0], per = layouts[k][1], n = nodes * per;
        int *node_of = malloc(sizeof(int) * (size_t)n);
        for (int r = 0; r < n; r++) node_of[r] = r / per;
        for (int c = 0; c < NCOLLS; c++) {
            mscclpp_plan_t *p = NULL;
            int me = n / 2 + 3;
            ck_assert_msg(mscclpp_plan_make(colls[c], NULL, n, node_of, 0, me, &p) == MSCCLPP_OK,
                          "%s %dx%d: %s", colls[c], nodes, per, mscclpp_last_error());
            int with_blocks = 0;
            for (int r = 0; r < n; r++) with_blocks += p->gpus[r].n_blocks > 0;
            ck_assert_int_eq(with_blocks, 1);
            ck_assert_int_gt(p->gpus[me].n_blocks, 0);
            mscclpp_plan_destroy(p);
        }
        free(node_of);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("made");
    TCase *tc = tcase_create("made");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, t_flat_is_the_dsl, 0, 8);
    tcase_add_loop_test(tc, t_shapes, 0, NSHAPES);
    tcase_add_loop_test(tc, t_alltoallv_plans, 0, NSHAPES);
    tcase_add_test(tc, t_refusals);
    tcase_add_test(tc, t_large_partial);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
