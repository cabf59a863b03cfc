/*
 * The interpreter's phase trace (MSCCLPP_KERN_TRACE, kern_args.h "Phase trace",
 * executor/exec_trace.c) on the host backend, 2 ranks as processes:
 *   t_direct   a direct plan (plans/direct/allreduce_direct_2.json: the peers' input and
 *              output, on mscclpp_malloc'd buffers) with the variable set: every launch carries
 *              the table, each rank's file exists after mscclpp_executor_destroy, names the
 *              plan and its block count, every block's stamps are in order (entry <= prologue
 *              <= fence <= each op's end <= exit) and its ops are the plan block's top-level
 *              ops (index and code)
 *   t_scratch  the same for a scratch plan (plans/host/allreduce_pkt_2.json, 64 B: packets
 *              through the plan's scratch buffer), run after a launch of the direct plan with
 *              more blocks and ops on the same table: the file has only the last launch's
 *              blocks and ops (the kernel clears nothing; older stamps are left out)
 *   t_pipeline an allgather whose block runs a pipeline among other ops
 *              (tests/fuzz/plan-corpus/pipeline_sem_barrier_2.json): the pipeline's end is
 *              stamped in the slot of its own index, with its code, its body skipped
 *   t_off      the variable unset: the launch arguments carry NULL and nothing is written
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "executor/exec.h" /* the lowered plans' arguments and blob, read to check them */
#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"

typedef struct {
    const char *plan;  /* file under plans/, or under the source tree when it starts with / */
    bool allgather;    /* else allreduce */
    bool direct_first; /* one 2 MiB call of the direct allreduce first, on the same executor */
    size_t count;      /* floats per rank */
    bool traced;       /* MSCCLPP_KERN_TRACE set */
    char prefix[600];
} trace_case_t;

/* The top-level ops of every block of the lowered plan (as the interpreter runs them: a
 * pipeline is one, its body skipped), their codes in expect[b][k] (-1: none at index k). */
typedef struct {
    int nblocks;
    int expect[KERN_MAX_BLOCKS][KERN_TRACE_OPS];
} plan_ops_t;

static void plan_ops(const kern_plan_t *p, plan_ops_t *po)
{
    const kern_block_t *blocks = (const kern_block_t *)((const char *)p + p->off_blocks);
    const kern_op_t *ops = (const kern_op_t *)((const char *)p + p->off_ops);
    po->nblocks = (int)p->n_blocks;
    for (uint32_t b = 0; b < p->n_blocks && b < KERN_MAX_BLOCKS; b++) {
        const kern_op_t *bo = ops + blocks[b].first_op;
        for (int k = 0; k < KERN_TRACE_OPS; k++) po->expect[b][k] = -1;
        for (uint32_t i = 0; i < blocks[b].n_ops;) {
            if (i < KERN_TRACE_OPS) po->expect[b][i] = bo[i].type;
            i += bo[i].type == KERN_OP_PIPELINE ? 1u + bo[i].n_inner : 1u;
        }
    }
}

/* One "key=value" token of a block line: the stamp in microseconds, or -1 for "-". */
static int check_file(int rank, const char *path, const plan_ops_t *po, const char *plan_name)
{
    FILE *f = fopen(path, "r");
    if (!f) return MP_FAIL(rank, "no trace file %s: %m", path);
    char line[4096];
    int blocks_hdr = -1, nlines = 0, bad = 0;
    bool named = false;
    while (!bad && fgets(line, sizeof line, f)) {
        char word[256];
        if (line[0] == '#') continue;
        if (sscanf(line, "blocks %d", &blocks_hdr) == 1) continue;
        if (sscanf(line, "plan %255s", word) == 1) {
            named = strcmp(word, plan_name) == 0;
            continue;
        }
        int b;
        if (sscanf(line, "block %d", &b) != 1) continue;
        if (b != nlines || b >= po->nblocks) {
            bad = MP_FAIL(rank, "%s: block line %d names block %d", path, nlines, b);
            break;
        }
        nlines++;
        /* the points in the order the file writes them, which is the order they happen */
        double last = -1;
        int nops = 0;
        char *save = NULL;
        for (char *tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
            char *eq = strchr(tok, '=');
            if (!eq) continue;
            *eq = '\0';
            if (!strcmp(eq + 1, "-")) {
                bad = MP_FAIL(rank, "%s: block %d never reached %s", path, b, tok);
                break;
            }
            double us = atof(eq + 1);
            if (us < last || us < 0) {
                bad = MP_FAIL(rank,
                              "%s: block %d: %s at %.3f us, before the point before it "
                              "(%.3f us)",
                              path, b, tok, us, last);
                break;
            }
            last = us;
            unsigned k;
            char name[64];
            if (sscanf(tok, "op%u:%63s", &k, name) == 2) {
                if (k >= KERN_TRACE_OPS || po->expect[b][k] < 0 ||
                    strcmp(name, exec_op_name(po->expect[b][k])) != 0) {
                    bad = MP_FAIL(
                        rank, "%s: block %d op %u is %s; the plan's is %s", path, b, k, name,
                        k < KERN_TRACE_OPS && po->expect[b][k] >= 0 ? exec_op_name(po->expect[b][k])
                                                                    : "none");
                    break;
                }
                nops++;
            }
        }
        int want = 0;
        for (int k = 0; k < KERN_TRACE_OPS; k++) want += po->expect[b][k] >= 0;
        if (!bad && nops != want)
            bad = MP_FAIL(rank, "%s: block %d has %d ops stamped, the plan's block %d", path, b,
                          nops, want);
    }
    fclose(f);
    if (bad) return 1;
    if (!named) return MP_FAIL(rank, "%s does not name plan %s", path, plan_name);
    if (blocks_hdr != po->nblocks || nlines != po->nblocks)
        return MP_FAIL(rank, "%s: %d blocks said, %d block lines; the plan has %d", path,
                       blocks_hdr, nlines, po->nblocks);
    return 0;
}

static int trace_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    trace_case_t *tc = arg;
    char plan_path[900], out[700];
    if (tc->plan[0] == '/') snprintf(plan_path, sizeof plan_path, "%s%s", mp_src_dir(), tc->plan);
    else snprintf(plan_path, sizeof plan_path, "%s/%s", mp_plan_dir(), tc->plan);
    snprintf(out, sizeof out, "%s.rank%d.txt", tc->prefix, rank);
    if (tc->traced) setenv("MSCCLPP_KERN_TRACE", tc->prefix, 1);
    else unsetenv("MSCCLPP_KERN_TRACE");
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, plan_path, &e)) return 1;
    const size_t count = tc->count, outc = tc->allgather ? count * (size_t)n : count;
    float *a = NULL, *b = NULL;
    MP_CHECK(rank, mscclpp_malloc(count * sizeof(float), (void **)&a));
    MP_CHECK(rank, mscclpp_malloc(outc * sizeof(float), (void **)&b));
    if (tc->direct_first) {
        const size_t big = 512 * 1024;
        char first[900];
        snprintf(first, sizeof first, "%s/direct/allreduce_direct_2.json", mp_plan_dir());
        mscclpp_plan_t *fp = NULL;
        float *x = NULL, *y = NULL;
        MP_CHECK(rank, mscclpp_plan_load_file(first, &fp));
        MP_CHECK(rank, mscclpp_malloc(big * sizeof(float), (void **)&x));
        MP_CHECK(rank, mscclpp_malloc(big * sizeof(float), (void **)&y));
        for (size_t i = 0; i < big; i++) x[i] = 1.0f;
        MP_CHECK(rank, mscclpp_execute(e.ex, fp, x, y, big * sizeof(float), big * sizeof(float),
                                       MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
        if (y[big - 1] != (float)n) return MP_FAIL(rank, "first call: %g, not %d", y[big - 1], n);
        MP_CHECK(rank, mscclpp_bootstrap_barrier(e.boot)); /* peers done with x and y */
        mscclpp_free(x);
        mscclpp_free(y);
        mscclpp_plan_destroy(fp);
    }
    for (int call = 0; call < 3; call++) {
        for (size_t i = 0; i < count; i++) a[i] = (float)(rank + call);
        MP_CHECK(rank, mscclpp_execute(e.ex, e.plan, a, b, count * sizeof(float),
                                       outc * sizeof(float), MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
        for (size_t i = 0; i < outc; i++) {
            /* allgather: rank i / count's input; allreduce: the sum of every rank's */
            const float want = tc->allgather ? (float)((int)(i / count) + call)
                                             : (float)(n * (n - 1) / 2 + n * call);
            if (b[i] != want)
                return MP_FAIL(rank, "call %d: element %zu is %g, not %g", call, i, b[i], want);
        }
    }
    /* the launch's arguments: the table, or NULL */
    static plan_ops_t po;
    const exec_context_t *c = exec_context_next(e.ex, NULL);
    while (c && strcmp(c->plan->name, e.plan->name) != 0) c = exec_context_next(e.ex, c);
    if (!c || !c->lowered)
        return MP_FAIL(rank, "no lowered plan of %s after the calls", e.plan->name);
    const exec_lowcache_t *l = c->lowered;
    if ((l->low->args.trace != NULL) != tc->traced)
        return MP_FAIL(rank, "MSCCLPP_KERN_TRACE %s, the launch's args.trace is %p",
                       tc->traced ? "set" : "unset", (void *)l->low->args.trace);
    plan_ops((const kern_plan_t *)l->low->blob, &po);
    char name[128];
    snprintf(name, sizeof name, "%s", c->plan->name);
    MP_CHECK(rank, mscclpp_bootstrap_barrier(e.boot)); /* peers done with our buffers */
    mscclpp_free(a);
    mscclpp_free(b);
    mp_exec_close(&e); /* writes the file */
    if (!tc->traced) {
        if (access(out, F_OK) == 0) return MP_FAIL(rank, "%s written with the variable unset", out);
        return 0;
    }
    return check_file(rank, out, &po, name);
}

static void run_case(const char *plan, bool allgather, size_t count, bool traced, bool direct_first)
{
    static trace_case_t tc;
    char dir[] = "/tmp/mscclpp-kt-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    tc.plan = plan;
    tc.count = count;
    tc.allgather = allgather;
    tc.direct_first = direct_first;
    tc.traced = traced;
    snprintf(tc.prefix, sizeof tc.prefix, "%s/kt", dir);
    setenv("MSCCLPP_TIMEOUT", "20", 1);
    ck_assert_int_eq(mp_run(2, trace_body, &tc, 120, NULL), 0);
    for (int r = 0; r < 2; r++) {
        char p[700];
        snprintf(p, sizeof p, "%s.rank%d.txt", tc.prefix, r);
        unlink(p);
    }
    rmdir(dir);
}

START_TEST(t_direct) { run_case("direct/allreduce_direct_2.json", false, 512 * 1024, true, false); }
END_TEST

START_TEST(t_scratch) { run_case("host/allreduce_pkt_2.json", false, 16, true, true); }
END_TEST

START_TEST(t_pipeline)
{
    run_case("/tests/fuzz/plan-corpus/pipeline_sem_barrier_2.json", true, 64 * 1024, true, false);
}
END_TEST

START_TEST(t_off) { run_case("direct/allreduce_direct_2.json", false, 512 * 1024, false, false); }
END_TEST

/* A prefix too long for the files' names: the executor is refused, and the message says why
 * and what to do. */
static int long_prefix_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    char prefix[700];
    memset(prefix, 'p', sizeof prefix - 1);
    prefix[sizeof prefix - 1] = '\0';
    setenv("MSCCLPP_KERN_TRACE", prefix, 1);
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    mscclpp_executor_t *ex = NULL;
    mscclpp_result_t r = mscclpp_executor_create(comm, &ex);
    if (r != MSCCLPP_ERR_INVALID_ARG)
        return MP_FAIL(rank, "a %zu-character prefix gave %s", strlen(prefix),
                       mscclpp_result_string(r));
    if (!strstr(mscclpp_last_error(), "MSCCLPP_KERN_TRACE") ||
        !strstr(mscclpp_last_error(), "shorter"))
        return MP_FAIL(rank, "message: %s", mscclpp_last_error());
    mscclpp_comm_destroy(comm);
    return 0;
}

START_TEST(t_long_prefix) { ck_assert_int_eq(mp_run(1, long_prefix_body, NULL, 60, NULL), 0); }
END_TEST

int main(void)
{
    Suite *s = suite_create("kern_trace");
    TCase *tc = tcase_create("trace");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, t_direct);
    tcase_add_test(tc, t_scratch);
    tcase_add_test(tc, t_pipeline);
    tcase_add_test(tc, t_off);
    tcase_add_test(tc, t_long_prefix);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
