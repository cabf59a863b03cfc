/*
 * Plan loading and validation (executor/plan_load.c, executor/plan_api.c) through the public
 * API, with the loaded structs of executor/plan.h inspected directly:
 *   - every malformed plan of tests/plans-bad (one test per EXPECTED line) fails with
 *     MSCCLPP_ERR_INVALID_PLAN and the expected message;
 *   - the reference plans load and parse to the right structure;
 *   - a 2-rank plan using every op kind, pipelines, defaults, strings, argument checks.
 * JSON in this file is written with single quotes for readability; jq() turns them into '"'.
 */
#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor/plan.h"
#include "mscclpp/mscclpp.h"

static const char *top_srcdir(void)
{
    const char *d = getenv("MSCCLPP_TOP_SRCDIR");
    return d && d[0] ? d : ".";
}

/* A JSON text from a single-quoted literal. Returns a static buffer (one at a time). */
static const char *jq(const char *s)
{
    static char buf[65536];
    size_t n = strlen(s);
    ck_assert_uint_lt(n, sizeof buf);
    for (size_t i = 0; i <= n; i++) buf[i] = s[i] == '\'' ? '"' : s[i];
    return buf;
}

static mscclpp_plan_t *load_ok(const char *json)
{
    mscclpp_plan_t *p = NULL;
    mscclpp_result_t r = mscclpp_plan_load_string(json, strlen(json), &p);
    ck_assert_msg(r == MSCCLPP_OK, "load failed: %s: %s", mscclpp_result_string(r),
                  mscclpp_last_error());
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Load must fail as an invalid plan with `expect` in the message. */
static void load_bad(const char *json, const char *expect)
{
    mscclpp_plan_t *p = (mscclpp_plan_t *)(uintptr_t)1;
    mscclpp_result_t r = mscclpp_plan_load_string(json, strlen(json), &p);
    ck_assert_msg(r == MSCCLPP_ERR_INVALID_PLAN, "expected INVALID_PLAN, got %s (%s)",
                  mscclpp_result_string(r), mscclpp_last_error());
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(mscclpp_last_error(), expect), "message \"%s\" lacks \"%s\"",
                  mscclpp_last_error(), expect);
}

/* ------------------------------------------------------------------------------------------ */
/* The malformed corpus */

#define MAX_BAD 512
typedef struct {
    char file[128];
    char expect[512];
} manifest_t;
static manifest_t bad[MAX_BAD];
static int nbad;
/* tests/plans-bad/verify: plans that load, then must fail mscclpp_plan_verify() */
static manifest_t vbad[64];
static int nvbad;

/* <file><TAB><expected substring> lines of `rel` (under the source tree); '#' comments */
static int read_manifest(const char *rel, manifest_t *m, int max, int *n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", top_srcdir(), rel);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || line[0] == '#') continue;
        char *tab = strchr(line, '\t');
        if (!tab || *n == max) {
            fprintf(stderr, "bad manifest line: %s\n", line);
            fclose(f);
            return -1;
        }
        *tab = '\0';
        snprintf(m[*n].file, sizeof m[*n].file, "%.127s", line);
        snprintf(m[*n].expect, sizeof m[*n].expect, "%.511s", tab + 1);
        (*n)++;
    }
    fclose(f);
    return 0;
}

START_TEST(test_bad_plan)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/plans-bad/%s", top_srcdir(), bad[_i].file);
    mscclpp_plan_t *p = (mscclpp_plan_t *)(uintptr_t)1;
    mscclpp_result_t r = mscclpp_plan_load_file(path, &p);
    ck_assert_msg(r == MSCCLPP_ERR_INVALID_PLAN, "%s: expected INVALID_PLAN, got %s (%s)",
                  bad[_i].file, mscclpp_result_string(r), mscclpp_last_error());
    ck_assert_ptr_null(p);
    const char *msg = mscclpp_last_error();
    ck_assert_msg(strstr(msg, bad[_i].expect), "%s: message \"%s\" lacks \"%s\"", bad[_i].file,
                  msg, bad[_i].expect);
    ck_assert_msg(strstr(msg, bad[_i].file), "%s: message \"%s\" does not name the file",
                  bad[_i].file, msg);
}
END_TEST

/* The manifest lists every file of the corpus, and the corpus is not trivially small. */
START_TEST(test_bad_manifest_complete)
{
    ck_assert_int_ge(nbad, 40);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "ls '%s/tests/plans-bad'", top_srcdir());
    FILE *ls = popen(cmd, "r");
    ck_assert_ptr_nonnull(ls);
    char name[256];
    int njson = 0;
    while (fgets(name, sizeof name, ls)) {
        name[strcspn(name, "\n")] = '\0';
        size_t n = strlen(name);
        if (n < 5 || strcmp(name + n - 5, ".json")) continue;
        njson++;
        int found = 0;
        for (int i = 0; i < nbad; i++) found |= !strcmp(bad[i].file, name);
        ck_assert_msg(found, "%s is not listed in EXPECTED", name);
    }
    pclose(ls);
    ck_assert_int_eq(njson, nbad);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Reference plans */

/* A plan file of the source tree: `dir` (tests/plans-reference, plans) / `file`. */
static mscclpp_plan_t *load_tree(const char *dir, const char *file)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%s", top_srcdir(), dir, file);
    mscclpp_plan_t *p = NULL;
    mscclpp_result_t r = mscclpp_plan_load_file(path, &p);
    ck_assert_msg(r == MSCCLPP_OK, "%s: %s", file, mscclpp_last_error());
    return p;
}

static mscclpp_plan_t *load_ref(const char *file)
{
    return load_tree("tests/plans-reference", file);
}

static void check_common_ref(const mscclpp_plan_t *p)
{
    ck_assert_int_eq(p->nranks, 4);
    ck_assert_int_eq(mscclpp_plan_world_size(p), 4);
    ck_assert_int_eq(mscclpp_plan_is_inplace(p), 1);
    ck_assert_uint_eq(mscclpp_plan_min_message_size(p), 0);
    ck_assert(mscclpp_plan_max_message_size(p) == UINT64_MAX);
    ck_assert_uint_eq(p->alignment, 16);
    ck_assert_int_eq(p->format_version, 0);
    for (int r = 0; r < 4; r++) ck_assert_int_eq(p->gpus[r].id, r);
}

START_TEST(test_ref_allreduce)
{
    mscclpp_plan_t *p = load_ref("allreduce_4.json");
    check_common_ref(p);
    /* "name": null takes the file name. */
    ck_assert_str_eq(mscclpp_plan_name(p), "allreduce_4");
    ck_assert_str_eq(mscclpp_plan_collective(p), "allreduce");
    ck_assert(!p->packet_protocol && !p->double_scratch && !p->reuse_resources);
    ck_assert_uint_eq(p->threads_per_block, 1024);
    const plan_gpu_t *g = &p->gpus[0];
    ck_assert_uint_eq(g->input_chunks, 32);
    ck_assert_uint_eq(g->output_chunks, 32);
    ck_assert_uint_eq(g->scratch_chunks, 0);
    ck_assert_int_eq(g->n_chan[PLAN_CH_MEMORY], 24);
    ck_assert_int_eq(g->n_chan[PLAN_CH_PORT], 0);
    ck_assert_int_eq(g->n_chan[PLAN_CH_SWITCH], 0);
    for (int c = 0; c < 24; c++) ck_assert_int_eq(g->peers[PLAN_CH_MEMORY][c], 1 + c % 3);
    ck_assert_int_eq(g->n_rbufs, 3);
    ck_assert_int_eq(g->rbufs[2].owner, 3);
    ck_assert_uint_eq(g->rbufs[2].buf, PLAN_BUF_INPUT);
    ck_assert_uint_eq(g->rbufs[2].access, 1u << PLAN_CH_MEMORY);
    ck_assert_int_eq(g->n_sems, 0);
    ck_assert_int_eq(g->n_blocks, 8);
    int total = 0;
    for (int b = 0; b < 8; b++) total += g->blocks[b].n_ops;
    ck_assert_int_eq(total, 88);
    const plan_block_t *blk = &g->blocks[0];
    ck_assert_int_eq(blk->n_ops, 11);
    ck_assert_uint_eq(blk->n_chan[PLAN_CH_MEMORY], 3);
    ck_assert_uint_eq(blk->chan[PLAN_CH_MEMORY][2], 2);
    ck_assert_uint_eq(blk->n_rbuf[PLAN_CH_MEMORY], 3);
    const plan_op_t *op = &blk->ops[5];
    ck_assert_uint_eq(op->type, PLAN_OP_RRES);
    ck_assert_uint_eq(op->channel_type, PLAN_CH_MEMORY);
    ck_assert_int_eq(op->reduce_op, MSCCLPP_SUM);
    ck_assert_uint_eq(op->n_src, 4);
    ck_assert_uint_eq(op->n_dst, 4);
    ck_assert_uint_eq(op->src[0].kind, PLAN_DESC_LOCAL);
    ck_assert_uint_eq(op->src[0].buf, PLAN_BUF_INPUT);
    ck_assert_uint_eq(op->src[2].kind, PLAN_DESC_REMOTE);
    ck_assert_uint_eq(op->src[2].ref, 1);
    ck_assert_uint_eq(op->src[2].buf, PLAN_BUF_INPUT);
    ck_assert_uint_eq(blk->ops[1].type, PLAN_OP_RLXSIGNAL);
    ck_assert_uint_eq(blk->ops[1].n_channels, 3);
    ck_assert_uint_eq(blk->ops[1].channel_ids[2], 2);
    ck_assert_uint_eq(blk->ops[0].type, PLAN_OP_NOP);
    ck_assert_int_eq(blk->ops[0].reduce_op, MSCCLPP_REDOP_PLAN);
    mscclpp_plan_destroy(p);
}
END_TEST

START_TEST(test_ref_allreduce_pkt)
{
    mscclpp_plan_t *p = load_ref("allreduce_pkt_4.json");
    check_common_ref(p);
    ck_assert(p->packet_protocol);
    const plan_gpu_t *g = &p->gpus[1];
    ck_assert_uint_eq(g->scratch_chunks, 24);
    ck_assert_int_eq(g->n_blocks, 4);
    ck_assert_int_eq(g->peers[PLAN_CH_MEMORY][0], 0);
    ck_assert_int_eq(g->peers[PLAN_CH_MEMORY][1], 2);
    const plan_block_t *blk = &g->blocks[1];
    ck_assert_uint_eq(blk->chan[PLAN_CH_MEMORY][0], 1);
    ck_assert_uint_eq(blk->rbuf[PLAN_CH_MEMORY][0], 1); /* gpu remote buffer 1 = rank 2's s */
    const plan_op_t *op = &blk->ops[1];
    ck_assert_uint_eq(op->type, PLAN_OP_RESPKT);
    ck_assert_uint_eq(op->n_src, 4);
    ck_assert_uint_eq(op->src[1].kind, PLAN_DESC_LOCAL);
    ck_assert_uint_eq(op->src[1].buf, PLAN_BUF_SCRATCH);
    ck_assert_uint_eq(op->dst[1].kind, PLAN_DESC_REMOTE);
    ck_assert_uint_eq(op->dst[1].ref, 1);
    ck_assert_uint_eq(op->dst[1].buf, PLAN_BUF_SCRATCH);
    ck_assert_uint_eq(op->dst[1].index, 13);
    ck_assert_uint_eq(blk->ops[0].type, PLAN_OP_PPKT);
    ck_assert_uint_eq(blk->ops[0].src[0].size, 4);
    ck_assert_int_eq(blk->n_ops, 2);
    ck_assert_uint_eq(g->blocks[0].ops[2].type, PLAN_OP_UPKT);
    ck_assert_uint_eq(g->blocks[0].ops[2].src[0].buf, PLAN_BUF_SCRATCH);
    ck_assert_uint_eq(g->blocks[0].ops[2].src[0].index, 12);
    mscclpp_plan_destroy(p);
}
END_TEST

START_TEST(test_ref_allgather_pkt)
{
    mscclpp_plan_t *p = load_ref("allgather_pkt_rppkt_4.json");
    check_common_ref(p);
    ck_assert_str_eq(mscclpp_plan_collective(p), "allgather");
    ck_assert(p->packet_protocol && p->double_scratch);
    const plan_gpu_t *g = &p->gpus[0];
    ck_assert_uint_eq(g->input_chunks, 1);
    ck_assert_uint_eq(g->output_chunks, 4);
    ck_assert_uint_eq(g->scratch_chunks, 8);
    ck_assert_int_eq(g->n_blocks, 1);
    const plan_block_t *blk = &g->blocks[0];
    ck_assert_int_eq(blk->n_ops, 5);
    const plan_op_t *op = &blk->ops[1];
    ck_assert_uint_eq(op->type, PLAN_OP_RPPKT);
    ck_assert_uint_eq(op->n_channels, 0); /* memory rppkt carries no channel ids */
    ck_assert_uint_eq(op->n_dst, 3);
    ck_assert_uint_eq(op->dst[2].ref, 2);
    ck_assert_uint_eq(op->dst[2].buf, PLAN_BUF_SCRATCH);
    ck_assert_uint_eq(blk->ops[0].type, PLAN_OP_CPKT);
    ck_assert_uint_eq(blk->ops[0].dst[0].index, 4);
    mscclpp_plan_destroy(p);
}
END_TEST

START_TEST(test_ref_allgather_nvls)
{
    mscclpp_plan_t *p = load_ref("allgather_nvls_zero_copy_4.json");
    check_common_ref(p);
    ck_assert_uint_eq(p->threads_per_block, 256);
    const plan_gpu_t *g = &p->gpus[2];
    ck_assert_int_eq(g->n_chan[PLAN_CH_MEMORY], 24);
    ck_assert_int_eq(g->n_chan[PLAN_CH_SWITCH], 8);
    for (int s = 0; s < 8; s++) {
        ck_assert_uint_eq(g->switches[s].buf, PLAN_BUF_OUTPUT);
        ck_assert_int_eq(g->switches[s].n_ranks, 4);
        for (int m = 0; m < 4; m++) ck_assert_int_eq(g->switches[s].ranks[m], m);
    }
    const plan_block_t *blk = &p->gpus[0].blocks[0];
    ck_assert_uint_eq(blk->n_chan[PLAN_CH_MEMORY], 3);
    ck_assert_uint_eq(blk->chan[PLAN_CH_MEMORY][1], 8);
    ck_assert_uint_eq(blk->chan[PLAN_CH_MEMORY][2], 16);
    ck_assert_uint_eq(blk->n_chan[PLAN_CH_SWITCH], 1);
    const plan_op_t *op = &blk->ops[5];
    ck_assert_uint_eq(op->type, PLAN_OP_GSTORE);
    ck_assert_uint_eq(op->channel_type, PLAN_CH_SWITCH);
    ck_assert_uint_eq(op->src[0].kind, PLAN_DESC_LOCAL);
    ck_assert_uint_eq(op->src[0].buf, PLAN_BUF_OUTPUT);
    ck_assert_uint_eq(op->dst[0].kind, PLAN_DESC_SWITCH);
    ck_assert_uint_eq(op->dst[0].ref, 0);
    ck_assert_uint_eq(op->dst[0].buf, PLAN_BUF_OUTPUT);
    mscclpp_plan_destroy(p);
}
END_TEST

START_TEST(test_ref_alltoall)
{
    mscclpp_plan_t *p = load_ref("alltoall_4.json");
    check_common_ref(p);
    const plan_gpu_t *g = &p->gpus[1];
    ck_assert_int_eq(g->n_blocks, 6);
    int total = 0;
    for (int b = 0; b < 6; b++) total += g->blocks[b].n_ops;
    ck_assert_int_eq(total, 66);
    ck_assert_int_eq(g->n_chan[PLAN_CH_MEMORY], 6);
    ck_assert_int_eq(g->peers[PLAN_CH_MEMORY][3], 2);
    const plan_block_t *blk = &g->blocks[1];
    ck_assert_uint_eq(blk->chan[PLAN_CH_MEMORY][0], 1);
    ck_assert_uint_eq(blk->ops[5].type, PLAN_OP_PUT);
    ck_assert_uint_eq(blk->ops[5].dst[0].kind, PLAN_DESC_REMOTE);
    ck_assert_uint_eq(blk->ops[5].dst[0].buf, PLAN_BUF_SCRATCH);
    ck_assert_uint_eq(blk->ops[10].type, PLAN_OP_COPY);
    ck_assert_uint_eq(blk->ops[10].src[0].buf, PLAN_BUF_SCRATCH);
    ck_assert_uint_eq(blk->ops[10].dst[0].buf, PLAN_BUF_INPUT);
    mscclpp_plan_destroy(p);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* A 2-rank plan that uses every op kind. Rank r's peer is 1-r; the %d are r, p, p, ... */

static const char *all_ops_gpu =
    "{'id': %d, 'input_chunks': 2, 'output_chunks': 4, 'scratch_chunks': 4,"
    " 'channels': [{'channel_type': 'memory', 'connected_to': [%d, %d]},"
    "              {'channel_type': 'port', 'connected_to': [%d]},"
    "              {'channel_type': 'switch', 'buffer_type': 'o',"
    "               'rank_groups': [{'size': 2, 'ranks': [0, 1]}]}],"
    " 'remote_buffers': [{'rank': %d, 'type': 'o', 'access_channel_types': ['memory', 'port']},"
    "                    {'rank': %d, 'type': 's', 'access_channel_types': ['memory']},"
    "                    {'rank': %d, 'type': 'i', 'access_channel_types': ['memory']}],"
    " 'semaphores': [{'init_value': 1}, {'init_value': 0}],"
    " 'threadblocks': [{'id': 0,"
    "  'channels': [{'channel_type': 'memory', 'channel_ids': [1, 0]},"
    "               {'channel_type': 'port', 'channel_ids': [0]},"
    "               {'channel_type': 'switch', 'channel_ids': [0]}],"
    "  'remote_buffer_refs': [{'access_channel_type': 'memory', 'remote_buffer_ids': [0, 1, 2]},"
    "                         {'access_channel_type': 'port', 'remote_buffer_ids': [0]}],"
    "  'ops': ["
    /* 0 */ "{'name': 'nop'},"
    /* 1 */ "{'name': 'barrier', 'barrier_id': 3, 'num_threadblocks': 2},"
    /* 2 */ "{'name': 'put', 'channel_type': 'memory', 'src_buff': [{'type': 'i', 'index': 0, "
        "'size': 1}],"
    "       'dst_buff': [{'buffer_id': 0, 'index': 3, 'size': 1}]},"
    /* 3 */ "{'name': 'ppkt', 'channel_type': 'memory', 'src_buff': [{'type': 'i', 'index': 1, "
        "'size': 1}],"
    "       'dst_buff': [{'buffer_id': 1, 'index': 0, 'size': 1}]},"
    /* 4 */ "{'name': 'rppkt', 'channel_type': 'port', 'channel_ids': [0],"
    "       'src_buff': [{'type': 's', 'index': 0, 'size': 1}],"
    "       'dst_buff': [{'buffer_id': 0, 'index': 1, 'size': 1}]},"
    /* 5 */ "{'name': 'pws', 'channel_type': 'port', 'channel_ids': [0],"
    "       'src_buff': [{'type': 'o', 'index': 2, 'size': 2}],"
    "       'dst_buff': [{'buffer_id': 0, 'index': 2, 'size': 2}]},"
    /* 6 */ "{'name': 'pwsf', 'channel_type': 'port', 'channel_ids': [0],"
    "       'src_buff': [{'type': 'i', 'index': 0, 'size': 2}],"
    "       'dst_buff': [{'buffer_id': 0, 'index': 0, 'size': 2}]},"
    /* 7 */ "{'name': 'get', 'channel_type': 'memory', 'src_buff': [{'buffer_id': 2, 'index': "
        "1, 'size': 1}],"
    "       'dst_buff': [{'type': 'o', 'index': 1, 'size': 1}], 'tbg_info': {'tb_id': 0, "
        "'tbg_size': 1}},"
    /* 8 */ "{'name': 'copy', 'src_buff': [{'type': 'i', 'index': 0, 'size': 2}],"
    "       'dst_buff': [{'type': 'o', 'index': 0, 'size': 2}], 'tbg_info': {'tb_id': 1, "
        "'tbg_size': 2}},"
    /* 9 */ "{'name': 'cpkt', 'src_buff': [{'type': 'i', 'index': 0, 'size': 1}],"
    "       'dst_buff': [{'type': 's', 'index': 2, 'size': 1}]},"
    /* 10 */ "{'name': 'upkt', 'src_buff': [{'type': 's', 'index': 2, 'size': 1}],"
    "        'dst_buff': [{'type': 'o', 'index': 0, 'size': 1}]},"
    /* 11 */ "{'name': 'signal', 'channel_type': 'memory', 'channel_ids': [0, 1]},"
    /* 12 */ "{'name': 'wait', 'channel_type': 'memory', 'channel_ids': [1, 0]},"
    /* 13 */ "{'name': 'flush', 'channel_type': 'port', 'channel_ids': [0]},"
    /* 14 */ "{'name': 're', 'reduce_op': 'max', 'src_buff': [{'type': 'i', 'index': 0, 'size': 1},"
    "        {'type': 'i', 'index': 1, 'size': 1}], 'dst_buff': [{'type': 'o', 'index': 0, "
        "'size': 1}]},"
    /* 15 */ "{'name': 'repkt', 'src_buff': [{'type': 'i', 'index': 0, 'size': 1},"
    "        {'type': 's', 'index': 1, 'size': 1}], 'dst_buff': [{'type': 'o', 'index': 1, "
        "'size': 1}]},"
    /* 16 */ "{'name': 'recpkt', 'src_buff': [{'type': 'i', 'index': 0, 'size': 1},"
    "        {'type': 's', 'index': 1, 'size': 1}], 'dst_buff': [{'type': 'o', 'index': 1, "
        "'size': 1},"
    "        {'type': 's', 'index': 3, 'size': 1}]},"
    /* 17 */ "{'name': 'res', 'channel_type': 'memory', 'reduce_op': 'prod',"
    "        'src_buff': [{'type': 'i', 'index': 0, 'size': 1}, {'type': 'i', 'index': 1, "
        "'size': 1}],"
    "        'dst_buff': [{'type': 'o', 'index': 0, 'size': 1}, {'buffer_id': 0, 'index': 0, "
        "'size': 1}]},"
    /* 18 */ "{'name': 'respkt', 'channel_type': 'memory', 'src_buff': [{'type': 'i', 'index': "
        "0, 'size': 1},"
    "        {'type': 's', 'index': 0, 'size': 1}], 'dst_buff': [{'type': 'o', 'index': 0, "
        "'size': 1},"
    "        {'buffer_id': 1, 'index': 0, 'size': 1}]},"
    /* 19 */ "{'name': 'recspkt', 'channel_type': 'memory', 'src_buff': [{'type': 'i', 'index': "
        "0, 'size': 1},"
    "        {'type': 's', 'index': 0, 'size': 1}], 'dst_buff': [{'type': 'o', 'index': 0, "
        "'size': 1},"
    "        {'type': 's', 'index': 1, 'size': 1}, {'buffer_id': 1, 'index': 2, 'size': 1}]},"
    /* 20 */ "{'name': 'rre', 'channel_type': 'memory', 'reduce_op': 'min',"
    "        'src_buff': [{'type': 'i', 'index': 0, 'size': 1}, {'buffer_id': 2, 'index': 0, "
        "'size': 1}],"
    "        'dst_buff': [{'type': 'o', 'index': 0, 'size': 1}]},"
    /* 21: no channel_type: reduce-send ops default to memory */
    "{'name': 'rres', 'src_buff': [{'type': 'i', 'index': 0, 'size': 1},"
    "        {'buffer_id': 2, 'index': 0, 'size': 1}], 'dst_buff': [{'type': 'i', 'index': 0, "
        "'size': 1},"
    "        {'buffer_id': 0, 'index': 3, 'size': 1}]},"
    /* 22 */ "{'name': 'glres', 'channel_type': 'switch',"
    "        'src_buff': [{'switch_channel_id': 0, 'index': 0, 'size': 4}],"
    "        'dst_buff': [{'switch_channel_id': 0, 'index': 0, 'size': 4}]},"
    /* 23 */ "{'name': 'rlxsignal', 'channel_type': 'port', 'channel_ids': [0]},"
    /* 24 */ "{'name': 'rlxwait', 'channel_type': 'port', 'channel_ids': [0, 0, 0]},"
    /* 25 */ "{'name': 'pipeline', 'iter_context': {'unit_size': 4096, 'num_chunks': 2}, 'ops': ["
    /* 26 */ "  {'name': 'copy', 'src_buff': [{'type': 'i', 'index': 0, 'size': 2}],"
    "         'dst_buff': [{'type': 'o', 'index': 2, 'size': 2}]},"
    /* 27 */ "  {'name': 'nop'}]},"
    /* 28 */ "{'name': 'sem_release', 'semaphore_ids': [0]},"
    /* 29 */ "{'name': 'sem_acquire', 'semaphore_ids': [1, 0]},"
    /* 30 */ "{'name': 'gstore', 'channel_type': 'switch', 'src_buff': [{'rank': 0, 'type': "
        "'o', 'index': 1, 'size': 1}],"
    "        'dst_buff': [{'switch_channel_id': 0, 'index': 1, 'size': 1}]},"
    /* 31 */ "{'name': 'gstorepkt', 'src_buff': [{'type': 's', 'index': 0, 'size': 1}],"
    "        'dst_buff': [{'switch_channel_id': 0, 'index': 0, 'size': 1}]},"
    /* 32 */ "{'name': 'glre', 'src_buff': [{'switch_channel_id': 0, 'index': 1, 'size': 1}],"
    "        'dst_buff': [{'type': 's', 'index': 3, 'size': 1}]}"
    "  ]},"
    "  {'id': 1, 'channels': [], 'ops': [{'name': 'barrier', 'barrier_id': 3, "
        "'num_threadblocks': 2},"
    "   {'name': 'copy', 'src_buff': [{'type': 'i', 'index': 0, 'size': 2}],"
    "    'dst_buff': [{'type': 'o', 'index': 0, 'size': 2}], 'tbg_info': {'tb_id': 0, "
        "'tbg_size': 2}},"
    /* semaphore 1 is acquired by block 0: balanced per launch */
    "   {'name': 'sem_release', 'semaphore_ids': [1]}]}"
    " ]}";

static char *all_ops_plan(void)
{
    static char text[65536];
    char g0[24576], g1[24576];
    snprintf(g0, sizeof g0, all_ops_gpu, 0, 1, 1, 1, 1, 1, 1);
    snprintf(g1, sizeof g1, all_ops_gpu, 1, 0, 0, 0, 0, 0, 0);
    int n = snprintf(text, sizeof text,
                     "{'name': 'all_ops', 'collective': 'custom', 'protocol': 'LL', 'inplace': "
                     "false, 'format': 'mscclpp-plan/1', 'buffer_alignment': 64, "
                     "'num_threads_per_block': 512, 'reuse_resources': true, "
                     "'use_double_scratch_buffer': true, 'min_message_size': 1024, "
                     "'max_message_size': 18446744073709551615, "
                     "'gpus': [%s, %s]}",
                     g0, g1);
    ck_assert_int_lt(n, (int)sizeof text);
    return text;
}

START_TEST(test_all_ops)
{
    mscclpp_plan_t *p = load_ok(jq(all_ops_plan()));
    ck_assert_str_eq(p->name, "all_ops");
    ck_assert_int_eq(p->format_version, 1);
    ck_assert(p->packet_protocol && p->reuse_resources && p->double_scratch && !p->inplace);
    ck_assert_uint_eq(p->alignment, 64);
    ck_assert_uint_eq(p->threads_per_block, 512);
    ck_assert_uint_eq(p->min_message_size, 1024);
    ck_assert(p->max_message_size == UINT64_MAX);

    static const plan_op_type_t want[] = {
        PLAN_OP_NOP,      PLAN_OP_BARRIER,  PLAN_OP_PUT,         PLAN_OP_PPKT,
        PLAN_OP_RPPKT,    PLAN_OP_PWS,      PLAN_OP_PWSF,        PLAN_OP_GET,
        PLAN_OP_COPY,     PLAN_OP_CPKT,     PLAN_OP_UPKT,        PLAN_OP_SIGNAL,
        PLAN_OP_WAIT,     PLAN_OP_FLUSH,    PLAN_OP_RE,          PLAN_OP_REPKT,
        PLAN_OP_RECPKT,   PLAN_OP_RES,      PLAN_OP_RESPKT,      PLAN_OP_RECSPKT,
        PLAN_OP_RRE,      PLAN_OP_RRES,     PLAN_OP_GLRES,       PLAN_OP_RLXSIGNAL,
        PLAN_OP_RLXWAIT,  PLAN_OP_PIPELINE, PLAN_OP_COPY,        PLAN_OP_NOP,
        PLAN_OP_SEM_RELEASE, PLAN_OP_SEM_ACQUIRE, PLAN_OP_GSTORE, PLAN_OP_GSTOREPKT,
        PLAN_OP_GLRE,
    };
    const int nwant = (int)(sizeof want / sizeof want[0]);
    /* Every op kind appears. */
    int seen[PLAN_OP__COUNT] = {0};
    for (int i = 0; i < nwant; i++) seen[want[i]] = 1;
    for (int t = 0; t < PLAN_OP__COUNT; t++) ck_assert_msg(seen[t], "op kind %d not covered", t);

    for (int r = 0; r < 2; r++) {
        const plan_gpu_t *g = &p->gpus[r];
        ck_assert_int_eq(g->n_chan[PLAN_CH_MEMORY], 2);
        ck_assert_int_eq(g->n_chan[PLAN_CH_PORT], 1);
        ck_assert_int_eq(g->n_chan[PLAN_CH_SWITCH], 1);
        ck_assert_int_eq(g->peers[PLAN_CH_PORT][0], 1 - r);
        ck_assert_int_eq(g->n_sems, 2);
        ck_assert_int_eq(g->sem_init[0], 1);
        ck_assert_int_eq(g->sem_init[1], 0);
        ck_assert_uint_eq(g->rbufs[0].access, (1u << PLAN_CH_MEMORY) | (1u << PLAN_CH_PORT));
        ck_assert_uint_eq(g->rbufs[1].access, 1u << PLAN_CH_MEMORY);
        ck_assert_int_eq(g->n_blocks, 2);
        const plan_block_t *blk = &g->blocks[0];
        ck_assert_int_eq(blk->n_ops, nwant);
        for (int i = 0; i < nwant; i++)
            ck_assert_msg(blk->ops[i].type == want[i], "rank %d op %d: type %d, want %d", r, i,
                          blk->ops[i].type, want[i]);
        ck_assert_uint_eq(blk->chan[PLAN_CH_MEMORY][0], 1);
        ck_assert_uint_eq(blk->chan[PLAN_CH_MEMORY][1], 0);
        ck_assert_uint_eq(blk->n_rbuf[PLAN_CH_MEMORY], 3);
        ck_assert_uint_eq(blk->n_rbuf[PLAN_CH_PORT], 1);
        const plan_op_t *o = blk->ops;
        ck_assert_uint_eq(o[1].barrier_id, 3);
        ck_assert_uint_eq(o[1].barrier_nblocks, 2);
        ck_assert_uint_eq(o[2].dst[0].kind, PLAN_DESC_REMOTE);
        ck_assert_uint_eq(o[2].dst[0].buf, PLAN_BUF_OUTPUT);
        ck_assert_uint_eq(o[2].dst[0].index, 3);
        ck_assert_uint_eq(o[3].dst[0].buf, PLAN_BUF_SCRATCH);
        ck_assert_uint_eq(o[4].channel_type, PLAN_CH_PORT);
        ck_assert_uint_eq(o[4].n_channels, 1);
        ck_assert_uint_eq(o[4].dst[0].buf, PLAN_BUF_OUTPUT); /* port ref 0 -> rbuf 0 (o) */
        ck_assert_uint_eq(o[5].src[0].size, 2);
        ck_assert_uint_eq(o[7].src[0].kind, PLAN_DESC_REMOTE);
        ck_assert_uint_eq(o[7].src[0].buf, PLAN_BUF_INPUT);
        ck_assert_uint_eq(o[7].dst[0].kind, PLAN_DESC_LOCAL);
        ck_assert_uint_eq(o[7].tbg_size, 1);
        ck_assert_uint_eq(o[8].tbg_id, 1);
        ck_assert_uint_eq(o[8].tbg_size, 2);
        ck_assert_uint_eq(o[9].tbg_size, 0); /* absent */
        ck_assert_uint_eq(o[11].n_channels, 2);
        ck_assert_uint_eq(o[12].channel_ids[0], 1);
        ck_assert_uint_eq(o[13].channel_type, PLAN_CH_PORT);
        ck_assert_int_eq(o[14].reduce_op, MSCCLPP_MAX);
        ck_assert_int_eq(o[15].reduce_op, MSCCLPP_REDOP_PLAN);
        ck_assert_uint_eq(o[16].n_dst, 2);
        ck_assert_int_eq(o[17].reduce_op, MSCCLPP_PROD);
        ck_assert_uint_eq(o[17].dst[1].kind, PLAN_DESC_REMOTE);
        ck_assert_uint_eq(o[19].dst[2].buf, PLAN_BUF_SCRATCH);
        ck_assert_uint_eq(o[19].dst[2].index, 2);
        ck_assert_int_eq(o[20].reduce_op, MSCCLPP_MIN);
        ck_assert_uint_eq(o[21].channel_type, PLAN_CH_MEMORY);
        ck_assert_uint_eq(o[21].dst[1].buf, PLAN_BUF_OUTPUT);
        ck_assert_uint_eq(o[22].src[0].kind, PLAN_DESC_SWITCH);
        ck_assert_uint_eq(o[22].src[0].buf, PLAN_BUF_OUTPUT);
        ck_assert_uint_eq(o[22].src[0].size, 4);
        ck_assert_uint_eq(o[23].channel_type, PLAN_CH_PORT);
        ck_assert_uint_eq(o[25].n_inner, 2);
        ck_assert_uint_eq(o[25].unit_size, 4096);
        ck_assert_uint_eq(o[25].num_chunks, 2);
        ck_assert_uint_eq(o[26].dst[0].index, 2);
        ck_assert_uint_eq(o[28].n_sems, 1);
        ck_assert_uint_eq(o[29].n_sems, 2);
        ck_assert_uint_eq(o[29].sem_ids[0], 1);
        ck_assert_uint_eq(o[30].dst[0].kind, PLAN_DESC_SWITCH);
        ck_assert_uint_eq(o[31].channel_type, PLAN_CH_SWITCH); /* defaulted */
        ck_assert_uint_eq(o[32].channel_type, PLAN_CH_SWITCH); /* defaulted */
        ck_assert_uint_eq(o[32].src[0].kind, PLAN_DESC_SWITCH);
        ck_assert_uint_eq(o[32].dst[0].kind, PLAN_DESC_LOCAL);
        ck_assert_uint_eq(o[32].dst[0].index, 3);
        ck_assert_int_eq(g->blocks[1].n_ops, 3);
        ck_assert_uint_eq(g->blocks[1].ops[1].tbg_id, 0);
    }
    mscclpp_plan_destroy(p);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Small plans built around one block of ops on a 2-rank skeleton. */

static const char *skeleton(const char *top, const char *gpu_extra, const char *ops0)
{
    static char text[16384];
    char g[2][6144];
    for (int r = 0; r < 2; r++)
        snprintf(g[r], sizeof g[r],
                 "{'id': %d, 'input_chunks': 4, 'output_chunks': 8, 'scratch_chunks': 0,"
                 " 'channels': [{'channel_type': 'memory', 'connected_to': [%d]}],"
                 " 'remote_buffers': [{'rank': %d, 'type': 'o', 'access_channel_types': "
                     "['memory']}]"
                 " %s, 'threadblocks': [{'id': 0, 'channels': [{'channel_type': 'memory',"
                 " 'channel_ids': [0]}], 'remote_buffer_refs': [{'access_channel_type': 'memory',"
                 " 'remote_buffer_ids': [0]}], 'ops': [%s]}]}",
                 r, 1 - r, 1 - r, gpu_extra, r == 0 ? ops0 : "{'name': 'nop'}");
    snprintf(text, sizeof text,
             "{'name': 'sk', 'collective': 'custom', 'protocol': 'Simple', 'inplace': true"
             "%s, 'gpus': [%s, %s]}",
             top, g[0], g[1]);
    return jq(text);
}

START_TEST(test_pipeline_flatten)
{
    mscclpp_plan_t *p = load_ok(skeleton(
        "", "",
        "{'name': 'nop'},"
        "{'name': 'pipeline', 'iter_context': {'unit_size': 1024, 'num_chunks': 4}, 'ops': ["
        "  {'name': 'copy', 'src_buff': [{'type': 'i', 'index': 0, 'size': 4}],"
        "   'dst_buff': [{'type': 'o', 'index': 4, 'size': 4}]},"
        "  {'name': 'nop'},"
        "  {'name': 'put', 'channel_type': 'memory', 'src_buff': [{'type': 'i', 'index': 0, "
            "'size': 4}],"
        "   'dst_buff': [{'buffer_id': 0, 'index': 0, 'size': 4}]}]},"
        "{'name': 'barrier', 'barrier_id': 0, 'num_threadblocks': 1},"
        "{'name': 'pipeline', 'iter_context': {'unit_size': 1, 'num_chunks': 1}, 'ops': []}"));
    const plan_block_t *blk = &p->gpus[0].blocks[0];
    ck_assert_int_eq(blk->n_ops, 7);
    ck_assert_uint_eq(blk->ops[0].type, PLAN_OP_NOP);
    ck_assert_uint_eq(blk->ops[1].type, PLAN_OP_PIPELINE);
    ck_assert_uint_eq(blk->ops[1].n_inner, 3);
    ck_assert_uint_eq(blk->ops[1].unit_size, 1024);
    ck_assert_uint_eq(blk->ops[1].num_chunks, 4);
    ck_assert_uint_eq(blk->ops[2].type, PLAN_OP_COPY);
    ck_assert_uint_eq(blk->ops[2].dst[0].index, 4);
    ck_assert_uint_eq(blk->ops[3].type, PLAN_OP_NOP);
    ck_assert_uint_eq(blk->ops[4].type, PLAN_OP_PUT);
    ck_assert_uint_eq(blk->ops[4].n_inner, 0);
    ck_assert_uint_eq(blk->ops[5].type, PLAN_OP_BARRIER);
    ck_assert_uint_eq(blk->ops[6].type, PLAN_OP_PIPELINE);
    ck_assert_uint_eq(blk->ops[6].n_inner, 0);
    mscclpp_plan_destroy(p);
}
END_TEST

/* A block of n ops (the last 4 in a pipeline body) on one rank: no JSON literal is this big. */
static char *big_block_plan(int n)
{
    size_t cap = (size_t)n * 24 + 4096, len = 0;
    char *t = malloc(cap);
    ck_assert_ptr_nonnull(t);
    len += (size_t)snprintf(t, cap,
                            "{\"name\": \"big\", \"collective\": \"custom\", \"protocol\": "
                            "\"Simple\", \"inplace\": false, \"gpus\": [{\"id\": 0, "
                            "\"input_chunks\": 1, \"output_chunks\": 1, \"scratch_chunks\": 0, "
                            "\"channels\": [], \"remote_buffers\": [], \"threadblocks\": [{"
                            "\"id\": 0, \"channels\": [], \"ops\": [");
    for (int i = 0; i < n - 5; i++) len += (size_t)snprintf(t + len, cap - len, "{\"name\": \"nop\"},");
    len += (size_t)snprintf(t + len, cap - len,
                            "{\"name\": \"pipeline\", \"iter_context\": {\"unit_size\": 64, "
                            "\"num_chunks\": 1}, \"ops\": [{\"name\": \"nop\"}, {\"name\": "
                            "\"nop\"}, {\"name\": \"nop\"}, {\"name\": \"nop\"}]}]}]}]}");
    ck_assert_uint_lt(len, cap);
    return t;
}

START_TEST(test_op_limit_exact)
{
    char *t = big_block_plan(PLAN_MAX_OPS_PER_BLOCK);
    mscclpp_plan_t *p = load_ok(t);
    ck_assert_int_eq(p->gpus[0].blocks[0].n_ops, PLAN_MAX_OPS_PER_BLOCK);
    mscclpp_plan_destroy(p);
    free(t);
    t = big_block_plan(PLAN_MAX_OPS_PER_BLOCK + 1);
    load_bad(t, "gpus[0].threadblocks[0].ops: 65536 ops (pipeline bodies included) exceed the "
                "limit of 65535 per thread block");
    free(t);
}
END_TEST

START_TEST(test_defaults_and_versions)
{
    mscclpp_plan_t *p = load_ok(skeleton("", "", "{'name': 'nop'}"));
    ck_assert_str_eq(mscclpp_plan_name(p), "sk");
    ck_assert_int_eq(p->format_version, 0);
    ck_assert_uint_eq(p->alignment, 16);
    ck_assert_uint_eq(p->threads_per_block, 1024);
    ck_assert_uint_eq(p->min_message_size, 0);
    ck_assert(p->max_message_size == UINT64_MAX);
    ck_assert(!p->packet_protocol && !p->reuse_resources && !p->double_scratch);
    ck_assert_int_eq(p->gpus[1].n_sems, 0);
    mscclpp_plan_destroy(p);

    p = load_ok(
        skeleton(", 'format': 'mscclpp-plan/1', 'buffer_alignment': 1", "", "{'name': 'nop'}"));
    ck_assert_int_eq(p->format_version, 1);
    ck_assert_uint_eq(p->alignment, 1);
    mscclpp_plan_destroy(p);

    /* 2^64-1 written as a real still means "no limit". */
    p = load_ok(skeleton(", 'max_message_size': 1.8446744073709552e19", "", "{'name': 'nop'}"));
    ck_assert(p->max_message_size == UINT64_MAX);
    mscclpp_plan_destroy(p);
    /* A big integer elsewhere in the file forces the "integers as reals" reparse. */
    p = load_ok(skeleton(", 'min_message_size': 4096, 'max_message_size': 18446744073709551615",
                         "", "{'name': 'nop'}"));
    ck_assert_uint_eq(p->min_message_size, 4096);
    ck_assert(p->max_message_size == UINT64_MAX);
    ck_assert_uint_eq(p->gpus[0].output_chunks, 8);
    mscclpp_plan_destroy(p);
    p = load_ok(skeleton(", 'max_message_size': 9007199254740992", "", "{'name': 'nop'}"));
    ck_assert_uint_eq(p->max_message_size, 9007199254740992ull);
    mscclpp_plan_destroy(p);
}
END_TEST

/* Zero chunk counts are valid (P4) as long as nothing indexes them; empty ranges too. */
START_TEST(test_zero_chunks)
{
    const char *json = jq(
        "{'name': 'z', 'collective': 'test', 'protocol': 'Simple', 'inplace': false, 'gpus': ["
        "{'id': 0, 'input_chunks': 0, 'output_chunks': 0, 'scratch_chunks': 0, 'channels': [],"
        " 'remote_buffers': [], 'threadblocks': [{'id': 0, 'channels': [], 'ops': ["
        "  {'name': 'copy', 'src_buff': [{'type': 'i', 'index': 0, 'size': 0}],"
        "   'dst_buff': [{'type': 's', 'index': 0, 'size': 0}]}]}]}]}");
    mscclpp_plan_t *p = load_ok(json);
    ck_assert_int_eq(mscclpp_plan_world_size(p), 1);
    ck_assert_uint_eq(p->gpus[0].blocks[0].ops[0].src[0].size, 0);
    mscclpp_plan_destroy(p);
}
END_TEST

/* Unpaired channel counts are accepted (setup pads them, plan-format §5.2); so are the keys
 * MSCCL++'s DSL writes and its reader ignores (a channel's legacy "buff", a descriptor's "rank";
 * unknown keys are refused: tests/plans-bad/unknown_key_*.json). */
START_TEST(test_unpaired_and_legacy_keys)
{
    const char *json = jq(
        "{'name': 'u', 'collective': 'sendrecv', 'protocol': 'Simple', 'inplace': false,"
        " 'gpus': ["
        "{'id': 0, 'input_chunks': 1, 'output_chunks': 1, 'scratch_chunks': 0,"
        " 'channels': [{'channel_type': 'memory', 'connected_to': [1, 1]},"
        "              {'channel_type': 'memory', 'connected_to': [1], 'buff': 'i'}],"
        " 'remote_buffers': [], 'threadblocks': [{'id': 0,"
        " 'channels': [{'channel_type': 'memory', 'channel_ids': [2, 0], 'buff': ['i']}],"
        " 'ops': [{'name': 'signal', 'channel_type': 'memory', 'channel_ids': [1]},"
        "         {'name': 'copy', 'src_buff': [{'type': 'i', 'index': 0, 'size': 1, 'rank': 0}],"
        "          'dst_buff': [{'type': 'o', 'index': 0, 'size': 1}]}]}]},"
        "{'id': 1, 'input_chunks': 1, 'output_chunks': 1, 'scratch_chunks': 0,"
        " 'channels': [{'channel_type': 'memory', 'connected_to': [0]}],"
        " 'remote_buffers': [], 'threadblocks': [{'id': 0, 'channels': [{'channel_type': 'memory',"
        " 'channel_ids': [0]}], 'ops': [{'name': 'wait', 'channel_type': 'memory', "
            "'channel_ids': [0]}]}]}]}");
    mscclpp_plan_t *p = load_ok(json);
    ck_assert_int_eq(p->gpus[0].n_chan[PLAN_CH_MEMORY], 3); /* two entries concatenated */
    ck_assert_int_eq(p->gpus[1].n_chan[PLAN_CH_MEMORY], 1);
    ck_assert_uint_eq(p->gpus[0].blocks[0].chan[PLAN_CH_MEMORY][0], 2);
    ck_assert_uint_eq(p->gpus[0].blocks[0].chan[PLAN_CH_MEMORY][1], 0);
    mscclpp_plan_destroy(p);
}
END_TEST

START_TEST(test_null_name_from_string)
{
    mscclpp_plan_t *p = load_ok(jq(
        "{'name': null, 'collective': 'test', 'protocol': 'Simple', 'inplace': false, 'gpus': ["
        "{'id': 0, 'input_chunks': 1, 'output_chunks': 1, 'scratch_chunks': 0, 'channels': [],"
        " 'remote_buffers': [], 'semaphores': null, 'threadblocks': []}]}"));
    ck_assert_str_eq(mscclpp_plan_name(p), "unnamed");
    ck_assert_int_eq(p->gpus[0].n_blocks, 0);
    mscclpp_plan_destroy(p);
}
END_TEST

/* A few rules that the file corpus does not reach, checked from strings. */
START_TEST(test_more_rules)
{
    load_bad(skeleton("", "", "{'name': 'rres', 'channel_type': 'port', 'src_buff': []}"),
             "ops[0].channel_type: rres cannot use port channels (it takes memory)");
    load_bad(skeleton("", "", "{'name': 'signal', 'channel_type': 'none', 'channel_ids': [0]}"),
             "ops[0].channel_type: signal cannot use none channels (it takes memory or port)");
    load_bad(skeleton("", "", "{'name': 'put', 'src_buff': [{'type': 'i', 'index': 0, 'size': 1}],"
                              "'dst_buff': [{'buffer_id': 0, 'index': 0, 'size': 1}]}"),
             "ops[0]: put needs channel_type \"memory\" or \"port\"");
    load_bad(skeleton("", "", "{'name': 'copy', 'src_buff': [{'type': 'i', 'index': 0, 'size': 1},"
                              "{'type': 'i', 'index': 1, 'size': 1}], 'dst_buff': []}"),
             "ops[0].src_buff: copy takes at most 1 src_buff entries, got 2");
    load_bad(skeleton("", "", "{'name': 'recpkt', 'src_buff': [{'type': 'i', 'index': 0, "
                              "'size': 1}],"
                              "'dst_buff': [{'type': 'o', 'index': 0, 'size': 1}]}"),
             "recpkt needs at least 2 destination descriptors, got 1");
    load_bad(skeleton("", "", "{'name': 'glres', 'src_buff': [{'type': 'i', 'index': 0, "
                              "'size': 1}],"
                              "'dst_buff': [{'type': 'o', 'index': 0, 'size': 1}]}"),
             "src_buff[0].type: glres needs a switch channel (\"switch_channel_id\") here");
    load_bad(skeleton("", "", "{'name': 'get', 'channel_type': 'memory',"
                              "'src_buff': [{'index': 0, 'size': 1}], 'dst_buff': []}"),
             "src_buff[0]: get needs a remote buffer (\"buffer_id\") here: required key "
             "\"buffer_id\" is missing");
    load_bad(skeleton("", ", 'semaphores': [{'init_value': -1}]", "{'name': 'nop'}"),
             "gpus[0].semaphores[0].init_value: -1 is negative");
    load_bad(skeleton("", "", "{'name': 'copy', 'tbg_info': {'tb_id': 0, 'tbg_size': 0},"
                              "'src_buff': [{'type': 'i', 'index': 0, 'size': 1}],"
                              "'dst_buff': [{'type': 'o', 'index': 0, 'size': 1}]}"),
             "ops[0].tbg_info.tbg_size: 0 is out of range (expected 1..65535)");
    load_bad(skeleton("", "", "{'name': 'pipeline', 'ops': []}"),
             "ops[0].iter_context: required key is missing");
    load_bad(skeleton(", 'buffer_alignment': 0", "", "{'name': 'nop'}"),
             "buffer_alignment: 0 is out of range");
    load_bad(skeleton(", 'num_threads_per_block': 0", "", "{'name': 'nop'}"),
             "num_threads_per_block: 0 is out of range (expected 1..1024)");
    load_bad(skeleton(", 'format': 1", "", "{'name': 'nop'}"), "format: expected a string");
    load_bad(skeleton("", "", "{'name': 'put', 'channel_type': 'memory',"
                              "'src_buff': [{'type': 'i', 'index': 4294967295, 'size': 2}],"
                              "'dst_buff': [{'buffer_id': 0, 'index': 0, 'size': 2}]}"),
             "src_buff[0].index: 4294967295 is out of range for input_chunks=4");
    load_bad(jq("{'name': 'x', 'collective': '', 'protocol': 'LL', 'inplace': true, 'gpus': []}"),
             "collective: must not be empty");
    load_bad("{\"a\": 1,", "<string>: JSON syntax error at line 1");
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* mscclpp_plan_verify: what loading cannot see (the order of waits and signals) */

/* 2 ranks, one block each, one memory channel between them; rank r runs ops[r]. */
static const char *pair_plan(const char *ops0, const char *ops1, const char *gpu_extra)
{
    static char text[8192];
    char g[2][3072];
    const char *ops[2] = {ops0, ops1};
    for (int r = 0; r < 2; r++)
        snprintf(g[r], sizeof g[r],
                 "{'id': %d, 'input_chunks': 1, 'output_chunks': 1, 'scratch_chunks': 0,"
                 " 'channels': [{'channel_type': 'memory', 'connected_to': [%d]}],"
                 " 'remote_buffers': []%s, 'threadblocks': [{'id': 0, 'channels': "
                 "[{'channel_type': 'memory', 'channel_ids': [0]}], 'ops': [%s]}]}",
                 r, 1 - r, gpu_extra, ops[r]);
    snprintf(text, sizeof text,
             "{'name': 'pair', 'collective': 'test', 'protocol': 'Simple', 'inplace': false,"
             " 'gpus': [%s, %s]}", g[0], g[1]);
    return jq(text);
}

#define SIG "{'name': 'signal', 'channel_type': 'memory', 'channel_ids': [0]}"
#define WAIT "{'name': 'wait', 'channel_type': 'memory', 'channel_ids': [0]}"

static void verify_bad(const char *json, const char *expect)
{
    mscclpp_plan_t *p = load_ok(json);
    mscclpp_result_t r = mscclpp_plan_verify(p);
    ck_assert_msg(r == MSCCLPP_ERR_INVALID_PLAN, "verify: expected INVALID_PLAN, got %s",
                  mscclpp_result_string(r));
    ck_assert_msg(strstr(mscclpp_last_error(), expect), "message \"%s\" lacks \"%s\"",
                  mscclpp_last_error(), expect);
    mscclpp_plan_destroy(p);
}

START_TEST(test_verify)
{
    /* signal then wait on both sides: fine */
    mscclpp_plan_t *p = load_ok(pair_plan(SIG "," WAIT, SIG "," WAIT, ""));
    ck_assert_int_eq(mscclpp_plan_verify(p), MSCCLPP_OK);
    mscclpp_plan_destroy(p);
    ck_assert_int_eq(mscclpp_plan_verify(NULL), MSCCLPP_ERR_INVALID_ARG);
    /* both wait first: balanced counts (it loads), but a deadlock */
    verify_bad(pair_plan(WAIT "," SIG, WAIT "," SIG, ""),
               "plan 'pair' deadlocks: gpus[0].threadblocks[0].ops[0] (wait) waits for a signal "
               "from rank 1 on memory channel 0 that never comes");
    /* inside a pipeline body (counts known only with the sizes: loading lets it through; the
     * body runs twice) */
#define PIPE_SIG "{'name': 'pipeline', 'iter_context': {'unit_size': 64, 'num_chunks': 1}, " \
                 "'ops': [" SIG "]}"
    verify_bad(pair_plan(PIPE_SIG, WAIT "," WAIT "," WAIT, ""),
               "gpus[1].threadblocks[0].ops[2] (wait) waits for a signal from rank 0 on memory "
               "channel 0 that never comes");
    verify_bad(pair_plan(PIPE_SIG, WAIT, ""),
               "rank 1 ends a launch with 1 signal from rank 0 on its memory channel 0 not "
               "waited for");
    /* a semaphore acquired before its release, in the same block */
    verify_bad(pair_plan("{'name': 'sem_acquire', 'semaphore_ids': [0]},"
                         "{'name': 'sem_release', 'semaphore_ids': [0]}", "{'name': 'nop'}",
                         ", 'semaphores': [{'init_value': 0}]"),
               "gpus[0].threadblocks[0].ops[0] (sem_acquire) acquires semaphore 0");
    /* the release in another block makes it fine */
    p = load_ok(jq("{'name': 's', 'collective': 'test', 'protocol': 'Simple', 'inplace': false,"
                   " 'gpus': [{'id': 0, 'input_chunks': 1, 'output_chunks': 1, "
                   "'scratch_chunks': 0, 'channels': [], 'remote_buffers': [], 'semaphores': "
                   "[{'init_value': 0}], 'threadblocks': ["
                   "{'id': 0, 'channels': [], 'ops': [{'name': 'sem_acquire', "
                   "'semaphore_ids': [0]}, {'name': 'barrier', 'barrier_id': 2, "
                   "'num_threadblocks': 2}]},"
                   "{'id': 1, 'channels': [], 'ops': [{'name': 'sem_release', "
                   "'semaphore_ids': [0]}, {'name': 'barrier', 'barrier_id': 2, "
                   "'num_threadblocks': 2}]}]}]}"));
    ck_assert_int_eq(mscclpp_plan_verify(p), MSCCLPP_OK);
    mscclpp_plan_destroy(p);
    /* a barrier counting 2 blocks that only one reaches */
    verify_bad(jq("{'name': 'b', 'collective': 'test', 'protocol': 'Simple', 'inplace': false,"
                  " 'gpus': [{'id': 0, 'input_chunks': 1, 'output_chunks': 1, "
                  "'scratch_chunks': 0, 'channels': [], 'remote_buffers': [], 'threadblocks': ["
                  "{'id': 0, 'channels': [], 'ops': [{'name': 'barrier', 'barrier_id': 2, "
                  "'num_threadblocks': 2}, {'name': 'barrier', 'barrier_id': 2, "
                  "'num_threadblocks': 2}]},"
                  "{'id': 1, 'channels': [], 'ops': [{'name': 'barrier', 'barrier_id': 2, "
                  "'num_threadblocks': 2}]}]}]}"),
               "gpus[0].threadblocks[0].ops[1] (barrier) waits in barrier 2 for 2 blocks; only "
               "1 arrive");
}
END_TEST

/* tests/plans-bad/verify: plans that load, then must fail mscclpp_plan_verify() with the message
 * of verify/EXPECTED (or pass it: the lines saying OK). Of the 12 that must fail, the verifier
 * before issue 22 passed 9 (every wrong result, the packet read nobody writes, the races). */
START_TEST(test_verify_corpus)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/plans-bad/verify/%s", top_srcdir(), vbad[_i].file);
    mscclpp_plan_t *p = NULL;
    ck_assert_msg(mscclpp_plan_load_file(path, &p) == MSCCLPP_OK, "%s: %s", vbad[_i].file,
                  mscclpp_last_error());
    mscclpp_result_t r = mscclpp_plan_verify(p);
    mscclpp_plan_destroy(p);
    if (!strcmp(vbad[_i].expect, "OK")) {
        ck_assert_msg(r == MSCCLPP_OK, "%s: %s", vbad[_i].file, mscclpp_last_error());
        return;
    }
    ck_assert_msg(r == MSCCLPP_ERR_INVALID_PLAN, "%s: expected INVALID_PLAN, got %s",
                  vbad[_i].file, mscclpp_result_string(r));
    ck_assert_msg(strstr(mscclpp_last_error(), vbad[_i].expect), "%s: message \"%s\" lacks \"%s\"",
                  vbad[_i].file, mscclpp_last_error(), vbad[_i].expect);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Files, strings, arguments, names */

START_TEST(test_load_string_and_file_agree)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/plans-reference/allgather_pkt_rppkt_4.json",
             top_srcdir());
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text, f);
    fclose(f);
    ck_assert_uint_lt(n, sizeof text);
    /* Not NUL-terminated on purpose: the length bounds the parse. */
    text[n] = 'x';
    mscclpp_plan_t *a = NULL, *b = NULL;
    ck_assert_int_eq(mscclpp_plan_load_string(text, n, &a), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_plan_load_file(path, &b), MSCCLPP_OK);
    ck_assert_str_eq(mscclpp_plan_name(a), "unnamed");
    ck_assert_str_eq(mscclpp_plan_name(b), "allgather_pkt_rppkt_4");
    /* where each came from: the file as given, none for a string */
    ck_assert_ptr_null(mscclpp_plan_file(a));
    ck_assert_str_eq(mscclpp_plan_file(b), path);
    ck_assert_ptr_null(mscclpp_plan_file(NULL));
    ck_assert_int_eq(a->nranks, b->nranks);
    for (int r = 0; r < a->nranks; r++) {
        ck_assert_int_eq(a->gpus[r].n_blocks, b->gpus[r].n_blocks);
        for (int k = 0; k < a->gpus[r].n_blocks; k++) {
            ck_assert_int_eq(a->gpus[r].blocks[k].n_ops, b->gpus[r].blocks[k].n_ops);
            for (int i = 0; i < a->gpus[r].blocks[k].n_ops; i++) {
                const plan_op_t *x = &a->gpus[r].blocks[k].ops[i];
                const plan_op_t *y = &b->gpus[r].blocks[k].ops[i];
                ck_assert_mem_eq(x, y, offsetof(plan_op_t, src));
                ck_assert_int_eq(x->n_src, y->n_src);
                ck_assert_int_eq(x->n_dst, y->n_dst);
                if (x->n_src)
                    ck_assert_mem_eq(x->src, y->src, sizeof(plan_desc_t) * x->n_src);
                if (x->n_dst)
                    ck_assert_mem_eq(x->dst, y->dst, sizeof(plan_desc_t) * x->n_dst);
            }
        }
    }
    mscclpp_plan_destroy(a);
    mscclpp_plan_destroy(b);
}
END_TEST

START_TEST(test_missing_file)
{
    mscclpp_plan_t *p = (mscclpp_plan_t *)(uintptr_t)1;
    mscclpp_result_t r = mscclpp_plan_load_file("/nonexistent-dir/plan.json", &p);
    ck_assert_int_eq(r, MSCCLPP_ERR_SYSTEM);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(mscclpp_last_error(), "/nonexistent-dir/plan.json") &&
                      strstr(mscclpp_last_error(), "No such file"),
                  "message: %s", mscclpp_last_error());
    /* A directory is not a plan file. */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/plans-bad", top_srcdir());
    r = mscclpp_plan_load_file(dir, &p);
    ck_assert_int_ne(r, MSCCLPP_OK);
    ck_assert_ptr_null(p);
    ck_assert_ptr_nonnull(strstr(mscclpp_last_error(), dir));
}
END_TEST

START_TEST(test_arguments)
{
    mscclpp_plan_t *p = NULL;
    ck_assert_int_eq(mscclpp_plan_load_file(NULL, &p), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_plan_load_file("x.json", NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_plan_load_string(NULL, 3, &p), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_plan_load_string("{}", 2, NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_plan_destroy(NULL), MSCCLPP_OK);
    ck_assert_ptr_null(mscclpp_plan_name(NULL));
    ck_assert_ptr_null(mscclpp_plan_collective(NULL));
    ck_assert_int_eq(mscclpp_plan_world_size(NULL), 0);
    ck_assert_int_eq(mscclpp_plan_is_inplace(NULL), 0);
    ck_assert_uint_eq(mscclpp_plan_min_message_size(NULL), 0);
    ck_assert_uint_eq(mscclpp_plan_max_message_size(NULL), 0);
    /* An empty string is a syntax error, not an argument error. */
    ck_assert_int_eq(mscclpp_plan_load_string("", 0, &p), MSCCLPP_ERR_INVALID_PLAN);
    ck_assert_ptr_null(p);
}
END_TEST

START_TEST(test_dtype_redop_names)
{
    static const struct {
        mscclpp_dtype_t t;
        size_t size;
        const char *name;
    } d[] = {
        {MSCCLPP_FLOAT32, 4, "float32"},   {MSCCLPP_FLOAT16, 2, "float16"},
        {MSCCLPP_BFLOAT16, 2, "bfloat16"}, {MSCCLPP_INT32, 4, "int32"},
        {MSCCLPP_UINT32, 4, "uint32"},     {MSCCLPP_INT8, 1, "int8"},
        {MSCCLPP_UINT8, 1, "uint8"},       {MSCCLPP_FLOAT64, 8, "float64"},
        {MSCCLPP_FP8_E4M3, 1, "fp8_e4m3"}, {MSCCLPP_FP8_E5M2, 1, "fp8_e5m2"},
        {MSCCLPP_INT64, 8, "int64"},       {MSCCLPP_UINT64, 8, "uint64"},
    };
    ck_assert_int_eq((int)(sizeof d / sizeof d[0]), MSCCLPP_DTYPE_COUNT);
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        ck_assert_uint_eq(mscclpp_dtype_size(d[i].t), d[i].size);
        ck_assert_str_eq(mscclpp_dtype_name(d[i].t), d[i].name);
    }
    ck_assert_uint_eq(mscclpp_dtype_size(MSCCLPP_DTYPE_COUNT), 0);
    ck_assert_uint_eq(mscclpp_dtype_size((mscclpp_dtype_t)-1), 0);
    ck_assert_ptr_null(mscclpp_dtype_name(MSCCLPP_DTYPE_COUNT));
    ck_assert_str_eq(mscclpp_redop_name(MSCCLPP_SUM), "sum");
    ck_assert_str_eq(mscclpp_redop_name(MSCCLPP_PROD), "prod");
    ck_assert_str_eq(mscclpp_redop_name(MSCCLPP_MIN), "min");
    ck_assert_str_eq(mscclpp_redop_name(MSCCLPP_MAX), "max");
    ck_assert_str_eq(mscclpp_redop_name(MSCCLPP_REDOP_PLAN), "plan");
    ck_assert_ptr_null(mscclpp_redop_name(MSCCLPP_REDOP_COUNT));
}
END_TEST

static uint64_t traffic_of(const mscclpp_plan_t *p, size_t in, size_t out)
{
    uint64_t b = 0;
    ck_assert_msg(mscclpp_plan_traffic(p, in, out, MSCCLPP_FLOAT32, &b) == MSCCLPP_OK, "%s",
                  mscclpp_last_error());
    return b;
}

/* mscclpp_collective_min_traffic of `p`'s collective, rank count and placement at these sizes. */
static uint64_t fewest_of(const mscclpp_plan_t *p, size_t in, size_t out)
{
    uint64_t b = 0;
    ck_assert_int_eq(mscclpp_collective_min_traffic(mscclpp_plan_collective(p),
                                                    mscclpp_plan_world_size(p), in, out,
                                                    mscclpp_plan_is_inplace(p), &b),
                     MSCCLPP_OK);
    return b;
}

/*
 * The direct plans of plans/direct/ (they read the peers' inputs and write their outputs) move
 * the fewest bytes a collective needs (issue 19 item 3), all ranks together for a message of S
 * bytes: allreduce 2 N S (in place too) where the scratch plan moves 2 (3N - 2) S; allgather of
 * s bytes per rank in place N^2 s, out of place N (N + 2) s (one local read of the input more
 * than the fewest, N (N + 1) s: the copy to its own block), where the scratch plan moves 3 N^2 s;
 * reducescatter of S bytes in (s = S / N out) N (S + s), in place too; alltoall 2 N S;
 * broadcast N S in place, (N + 2) S out of place (the root's copy to its own output reads the
 * input again); each less than its scratch plan. "The fewest" is
 * mscclpp_collective_min_traffic's.
 * They also pass the C verifier (wrong results, races, deadlocks).
 */
START_TEST(test_direct_traffic)
{
    static const char *const variant_dir[] = {"", "host/", "cuda/"};
    for (uint64_t n = 2; n <= 8; n++) {
        char rel[128];
        const size_t S = (size_t)n * 65536, s = 65536; /* whole chunks of every plan */
        for (int ip = 0; ip < 2; ip++) {
            snprintf(rel, sizeof rel, "direct/allreduce_direct%s_%d.json", ip ? "_ip" : "", (int)n);
            mscclpp_plan_t *p = load_tree("plans", rel);
            ck_assert_int_eq(mscclpp_plan_verify(p), MSCCLPP_OK);
            ck_assert_uint_eq(traffic_of(p, S, S), 2 * n * S);
            ck_assert_uint_eq(traffic_of(p, S, S), fewest_of(p, S, S));
            mscclpp_plan_destroy(p);
            /* one load of the input feeds every peer's output and its own (out of place):
             * (N + 1) S, the fewest, for the generic plans and each backend's variants */
            for (int v = 0; v < 3; v++) {
                snprintf(rel, sizeof rel, "direct/%sallgather_direct%s_%d.json", variant_dir[v],
                         ip ? "_ip" : "", (int)n);
                p = load_tree("plans", rel);
                ck_assert_int_eq(mscclpp_plan_verify(p), MSCCLPP_OK);
                ck_assert_msg(traffic_of(p, s, n * s) == (ip ? n * n * s : n * (n + 1) * s) &&
                                  traffic_of(p, s, n * s) == fewest_of(p, s, n * s),
                              "%s: %llu bytes, the fewest %llu", rel,
                              (unsigned long long)traffic_of(p, s, n * s),
                              (unsigned long long)fewest_of(p, s, n * s));
                mscclpp_plan_destroy(p);
            }
        }
        for (int ip = 0; ip < 2; ip++) {
            snprintf(rel, sizeof rel, "direct/reducescatter_direct%s_%d.json", ip ? "_ip" : "",
                     (int)n);
            mscclpp_plan_t *p = load_tree("plans", rel);
            ck_assert_int_eq(mscclpp_plan_verify(p), MSCCLPP_OK);
            ck_assert_uint_eq(traffic_of(p, S, s), n * (S + s));
            ck_assert_uint_eq(traffic_of(p, S, s), fewest_of(p, S, s));
            mscclpp_plan_destroy(p);
            for (int v = 0; v < 3; v++) {
                snprintf(rel, sizeof rel, "direct/%sbroadcast_direct%s_%d.json", variant_dir[v],
                         ip ? "_ip" : "", (int)n);
                p = load_tree("plans", rel);
                ck_assert_int_eq(mscclpp_plan_verify(p), MSCCLPP_OK);
                ck_assert_msg(traffic_of(p, S, S) == (ip ? n * S : (n + 1) * S) &&
                                  traffic_of(p, S, S) == fewest_of(p, S, S),
                              "%s: %llu bytes, the fewest %llu", rel,
                              (unsigned long long)traffic_of(p, S, S),
                              (unsigned long long)fewest_of(p, S, S));
                mscclpp_plan_destroy(p);
            }
        }
        snprintf(rel, sizeof rel, "direct/alltoall_direct_%d.json", (int)n);
        mscclpp_plan_t *p = load_tree("plans", rel);
        ck_assert_int_eq(mscclpp_plan_verify(p), MSCCLPP_OK);
        ck_assert_uint_eq(traffic_of(p, S, S), 2 * n * S);
        ck_assert_uint_eq(traffic_of(p, S, S), fewest_of(p, S, S));
        mscclpp_plan_destroy(p);
        /* the scratch plans the direct ones would replace move more */
        static const struct {
            const char *fam;
            int in_n, out_n; /* sizes in units of s */
        } scr[] = {{"reducescatter", 1, 0}, {"alltoall", 1, 1}, {"broadcast", 1, 1}};
        static const char *dfam[] = {"reducescatter_direct", "alltoall_direct",
                                     "broadcast_direct"};
        for (int i = 0; i < 3; i++) {
            size_t in = scr[i].in_n ? S : s, out = scr[i].out_n ? S : s;
            snprintf(rel, sizeof rel, "%s_%d.json", scr[i].fam, (int)n);
            p = load_tree("plans", rel);
            uint64_t scratch = traffic_of(p, in, out);
            mscclpp_plan_destroy(p);
            snprintf(rel, sizeof rel, "direct/%s_%d.json", dfam[i], (int)n);
            p = load_tree("plans", rel);
            ck_assert_msg(traffic_of(p, in, out) < scratch, "%s: %llu bytes, scratch plan %llu",
                          rel, (unsigned long long)traffic_of(p, in, out),
                          (unsigned long long)scratch);
            mscclpp_plan_destroy(p);
        }
        snprintf(rel, sizeof rel, "allreduce_simple_%d.json", (int)n);
        p = load_tree("plans", rel);
        ck_assert_uint_eq(traffic_of(p, S, S), 2 * (3 * n - 2) * S);
        mscclpp_plan_destroy(p);
        snprintf(rel, sizeof rel, "allgather_%d.json", (int)n);
        p = load_tree("plans", rel);
        /* its put to the peers' scratch and copy to its own output are one put (one read) */
        ck_assert_uint_eq(traffic_of(p, s, n * s), n * (3 * n - 1) * s);
        mscclpp_plan_destroy(p);
    }
}
END_TEST

static Suite *plan_suite(void)
{
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("bad");
    tcase_add_loop_test(tc, test_bad_plan, 0, nbad);
    tcase_add_test(tc, test_bad_manifest_complete);
    tcase_add_test(tc, test_more_rules);
    suite_add_tcase(s, tc);
    tc = tcase_create("good");
    tcase_add_test(tc, test_ref_allreduce);
    tcase_add_test(tc, test_ref_allreduce_pkt);
    tcase_add_test(tc, test_ref_allgather_pkt);
    tcase_add_test(tc, test_ref_allgather_nvls);
    tcase_add_test(tc, test_ref_alltoall);
    tcase_add_test(tc, test_all_ops);
    tcase_add_test(tc, test_pipeline_flatten);
    tcase_add_test(tc, test_op_limit_exact);
    tcase_add_test(tc, test_verify);
    tcase_add_loop_test(tc, test_verify_corpus, 0, nvbad);
    tcase_add_test(tc, test_defaults_and_versions);
    tcase_add_test(tc, test_zero_chunks);
    tcase_add_test(tc, test_unpaired_and_legacy_keys);
    tcase_add_test(tc, test_null_name_from_string);
    tcase_add_test(tc, test_load_string_and_file_agree);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_arguments);
    tcase_add_test(tc, test_dtype_redop_names);
    tcase_add_test(tc, test_direct_traffic);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (read_manifest("tests/plans-bad/EXPECTED", bad, MAX_BAD, &nbad) != 0 ||
        read_manifest("tests/plans-bad/verify/EXPECTED", vbad, 64, &nvbad) != 0 || nvbad < 10) {
        /* Without the corpus the suite cannot run: report it as a failure, not a pass. */
        printf("1..1\nnot ok 1 - plans-bad/EXPECTED is missing (MSCCLPP_TOP_SRCDIR=%s)\n",
               top_srcdir());
        return 1;
    }
    SRunner *sr = srunner_create(plan_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
