/*
 * Plans that only this executor runs, executed on the host interpreter with every byte checked
 * (issue 10 items 5 and 6):
 *   - glre, the unfused switch load-reduce (no multicast store): MSCCL++ cannot execute it,
 *     our loader and interpreter do (switch channels are member pointers on the host);
 *   - MSCCL++'s executor limits lifted: a 16-rank allreduce whose block has more than 64 ops
 *     and whose reduces have 16 sources (MSCCL++: 64 ops per block, 10 descriptors per op).
 * Each plan is also checked by mscclpp_plan_verify(): each ends with a signal to every peer after
 * a block-wide sync, and a wait for every peer's, so that no rank returns while a peer still
 * reads its input (the caller may write it as soon as the call returns).
 */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "tests/unit/kern_harness.h"

static const mscclpp_dtype_t dtypes[] = {MSCCLPP_FLOAT32, MSCCLPP_FLOAT16, MSCCLPP_BFLOAT16,
                                         MSCCLPP_INT32,   MSCCLPP_UINT8,   MSCCLPP_FLOAT64};
static const mscclpp_redop_t redops[] = {MSCCLPP_SUM, MSCCLPP_PROD, MSCCLPP_MIN, MSCCLPP_MAX};
#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void append(char **s, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char **s, size_t *len, size_t *cap, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(*s + *len, *cap - *len, fmt, ap);
        va_end(ap);
        ck_assert_int_ge(n, 0);
        if ((size_t)n < *cap - *len) {
            *len += (size_t)n;
            return;
        }
        *cap *= 2;
        *s = realloc(*s, *cap);
        ck_assert_ptr_nonnull(*s);
    }
}

/* Every dtype x op, a few counts (tails included), two launches each. */
static void check_allreduce(struct mscclpp_plan *p, const size_t *counts, int ncounts)
{
    ck_assert_int_eq(mscclpp_plan_verify(p), MSCCLPP_OK);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    char msg[256];
    for (int c = 0; c < ncounts; c++)
        for (int d = 0; d < N_OF(dtypes); d++)
            for (int o = 0; o < N_OF(redops); o++) {
                mscclpp_result_t r =
                    kh_check_collective(w, KH_ALLREDUCE, counts[c], dtypes[d], redops[o],
                                        MSCCLPP_PACKET_LL16, false, 2, msg, sizeof msg);
                ck_assert_msg(r == MSCCLPP_OK, "count %zu %s %s: %s", counts[c],
                              mscclpp_dtype_name(dtypes[d]), mscclpp_redop_name(redops[o]), msg);
            }
    kh_world_destroy(w);
    plan_free(p);
}

/* glre: every rank reduces all chunks of every member's input (through one switch channel
 * bound to the inputs) into its own output. An allreduce with no multicast store; memory
 * channels to both peers carry the closing handshake. */
START_TEST(test_glre_allreduce)
{
    const int n = 3;
    size_t len = 0, cap = 4096;
    char *s = malloc(cap);
    append(&s, &len, &cap, "{\"name\": \"glre3\", \"collective\": \"allreduce\", \"protocol\": "
                           "\"Simple\", \"inplace\": false, \"gpus\": [");
    for (int r = 0; r < n; r++)
        append(&s, &len, &cap,
               "%s{\"id\": %d, \"input_chunks\": 3, \"output_chunks\": 3, \"scratch_chunks\": 0,"
               " \"channels\": [{\"channel_type\": \"switch\", \"buffer_type\": \"i\","
               " \"rank_groups\": [{\"size\": 3, \"ranks\": [0, 1, 2]}]},"
               " {\"channel_type\": \"memory\", \"connected_to\": [%d, %d]}], \"remote_buffers\": [],"
               " \"threadblocks\": [{\"id\": 0, \"channels\": [{\"channel_type\": \"switch\","
               " \"channel_ids\": [0]}, {\"channel_type\": \"memory\", \"channel_ids\": [0, 1]}],"
               " \"ops\": [{\"name\": \"glre\", \"src_buff\": "
               "[{\"switch_channel_id\": 0, \"index\": 0, \"size\": 3}], \"dst_buff\": "
               "[{\"type\": \"o\", \"index\": 0, \"size\": 3}]}, {\"name\": \"nop\"},"
               " {\"name\": \"signal\", \"channel_type\": \"memory\", \"channel_ids\": [0, 1]},"
               " {\"name\": \"wait\", \"channel_type\": \"memory\", \"channel_ids\": [0, 1]}]}]}",
               r ? ", " : "", r, (r + 1) % n, (r + 2) % n);
    append(&s, &len, &cap, "]}");
    struct mscclpp_plan *p = kh_plan_load(s);
    free(s);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(p->gpus[0].blocks[0].ops[0].type, PLAN_OP_GLRE);
    static const size_t counts[] = {1, 3 * 64 + 5, 1000};
    check_allreduce(p, counts, N_OF(counts));
}
END_TEST

/*
 * 16 ranks, one block each: for every chunk c of 16, one rre of this rank's input chunk and the
 * 15 peers' (16 sources) into the output, each followed by 4 nops: 80 ops in the block, then the
 * closing handshake with every peer (signals and waits of at most 8 channels each).
 */
static char *big_allreduce_plan(int n, int nops_between)
{
    size_t len = 0, cap = 65536;
    char *s = malloc(cap);
    append(&s, &len, &cap, "{\"name\": \"rre16\", \"collective\": \"allreduce\", \"protocol\": "
                           "\"Simple\", \"inplace\": false, \"gpus\": [");
    for (int r = 0; r < n; r++) {
        append(&s, &len, &cap,
               "%s{\"id\": %d, \"input_chunks\": %d, \"output_chunks\": %d, \"scratch_chunks\": 0,"
               " \"channels\": [{\"channel_type\": \"memory\", \"connected_to\": [",
               r ? ", " : "", r, n, n);
        for (int k = 1; k < n; k++) append(&s, &len, &cap, "%s%d", k > 1 ? ", " : "", (r + k) % n);
        append(&s, &len, &cap, "]}], \"remote_buffers\": [");
        for (int k = 1; k < n; k++)
            append(&s, &len, &cap, "%s{\"rank\": %d, \"type\": \"i\", \"access_channel_types\": "
                                   "[\"memory\"]}", k > 1 ? ", " : "", (r + k) % n);
        append(&s, &len, &cap, "], \"threadblocks\": [{\"id\": 0, \"channels\": "
                               "[{\"channel_type\": \"memory\", \"channel_ids\": [");
        for (int k = 0; k < n - 1; k++) append(&s, &len, &cap, "%s%d", k ? ", " : "", k);
        append(&s, &len, &cap, "]}], \"remote_buffer_refs\": [{\"access_channel_type\": "
                               "\"memory\", \"remote_buffer_ids\": [");
        for (int k = 0; k < n - 1; k++) append(&s, &len, &cap, "%s%d", k ? ", " : "", k);
        append(&s, &len, &cap, "]}], \"ops\": [");
        for (int c = 0; c < n; c++) {
            append(&s, &len, &cap, "%s{\"name\": \"rre\", \"channel_type\": \"memory\", "
                                   "\"src_buff\": [{\"type\": \"i\", \"index\": %d, \"size\": 1}",
                   c ? ", " : "", c);
            for (int k = 0; k < n - 1; k++)
                append(&s, &len, &cap, ", {\"buffer_id\": %d, \"index\": %d, \"size\": 1}", k, c);
            append(&s, &len, &cap, "], \"dst_buff\": [{\"type\": \"o\", \"index\": %d, "
                                   "\"size\": 1}]}", c);
            for (int i = 0; i < nops_between; i++) append(&s, &len, &cap, ", {\"name\": \"nop\"}");
        }
        append(&s, &len, &cap, ", {\"name\": \"nop\"}");
        for (int w = 0; w < 2; w++)
            for (int k0 = 0; k0 < n - 1; k0 += 8) {
                append(&s, &len, &cap, ", {\"name\": \"%s\", \"channel_type\": \"memory\", "
                                       "\"channel_ids\": [", w ? "wait" : "signal");
                for (int k = k0; k < n - 1 && k < k0 + 8; k++)
                    append(&s, &len, &cap, "%s%d", k > k0 ? ", " : "", k);
                append(&s, &len, &cap, "]}");
            }
        append(&s, &len, &cap, "]}]}");
    }
    append(&s, &len, &cap, "]}");
    return s;
}

START_TEST(test_lifted_limits_16_ranks)
{
    char *s = big_allreduce_plan(16, 4);
    struct mscclpp_plan *p = kh_plan_load(s);
    free(s);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(p->gpus[0].blocks[0].n_ops, 16 * 5 + 5); /* > 64 (MSCCL++'s limit) */
    ck_assert_uint_eq(p->gpus[0].blocks[0].ops[0].n_src, 16); /* > 9 sources */
    {
        /* more ops than a block stages: no per-block layout, the block reads them in place */
        kh_world_t *w;
        exec_lowered_t *lw;
        ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
        ck_assert_int_eq(kh_world_buffers(w, 64, 64, MSCCLPP_FLOAT32, KH_SEPARATE), MSCCLPP_OK);
        ck_assert_int_eq(kh_lower(w, 0, MSCCLPP_SUM, MSCCLPP_PACKET_LL16, 0, &lw), MSCCLPP_OK);
        ck_assert_uint_gt(((const kern_block_t *)((const char *)lw->blob +
                                                  KERN_PLAN_BLOCKS_OFF))[0].n_ops,
                          KERN_STAGE_OPS);
        ck_assert_uint_eq(lw->args.blk_ops, 0);
        exec_lowered_free(lw);
        kh_world_destroy(w);
    }
    static const size_t counts[] = {16, 16 * 33 + 7};
    check_allreduce(p, counts, N_OF(counts));
}
END_TEST

static Suite *plan_exec_suite(void)
{
    Suite *s = suite_create("plan_exec");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_glre_allreduce);
    tcase_add_test(tc, test_lifted_limits_16_ranks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(plan_exec_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
