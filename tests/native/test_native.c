/*
 * Native algorithms (include/mscclpp/native.h) on forked ranks of the host backend: the C
 * allreduce of examples/native checked element by element at 2 and 4 ranks (dtypes, ops,
 * sizes, in-place and out-of-place, moving offsets), selection through the registry and the
 * tuning table, the launch shape and root reaching the algorithm, and every error a user can
 * meet (a module that is missing, has no symbols, was built for another ABI, fails in init or
 * in a call, with and without a message), on a user stream too: the call, the stream's sync and
 * the async query all report an algorithm's error, and a module's waits end in MSCCLPP_TIMEOUT.
 * t_one_cache: the algorithm's buffer sets and a plan's contexts are entries of the executor's
 * one cache: one least-recently-used bound (MSCCLPP_EXEC_CONTEXTS) for both, one forget, and a
 * context a captured graph uses survives any pressure.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mscclpp/mscclpp.h"
#include "mscclpp/native.h"
#include "executor/exec_forget.h"
#include "tests/unit/mp_harness.h"

#ifndef NATIVE_MODULE_DIR
#error "NATIVE_MODULE_DIR (where the test modules are built) must be defined"
#endif

static char example_so[1024], probe_so[1024], failing_so[1024], badabi_so[1024], nosyms_so[1024];

static void set_paths(void)
{
    snprintf(example_so, sizeof example_so, "%s/libnative_example.so", NATIVE_MODULE_DIR);
    snprintf(probe_so, sizeof probe_so, "%s/libnative_probe.so", NATIVE_MODULE_DIR);
    snprintf(failing_so, sizeof failing_so, "%s/libnative_failing.so", NATIVE_MODULE_DIR);
    snprintf(badabi_so, sizeof badabi_so, "%s/libnative_badabi.so", NATIVE_MODULE_DIR);
    snprintf(nosyms_so, sizeof nosyms_so, "%s/libnative_nosyms.so", NATIVE_MODULE_DIR);
    /* the default plans are not needed: only native algorithms run here */
    setenv("MSCCLPP_PLAN_DIR", "/nonexistent-mscclpp-plans", 1);
    setenv("MSCCLPP_TUNING_FILE", "none", 1);
}

/* ---- loading errors (one process, no ranks) ---- */

START_TEST(t_load_errors)
{
    set_paths();
    mscclpp_native_t *m = (mscclpp_native_t *)1;
    ck_assert_int_eq(mscclpp_native_load("/nonexistent/mod.so", &m), MSCCLPP_ERR_SYSTEM);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(mscclpp_last_error(), "/nonexistent/mod.so"));
    ck_assert_ptr_nonnull(strstr(mscclpp_last_error(), "dlopen"));

    ck_assert_int_eq(mscclpp_native_load(nosyms_so, &m), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(mscclpp_last_error(), "no symbol mscclpp_native_abi_version"));

    ck_assert_int_eq(mscclpp_native_load(badabi_so, &m), MSCCLPP_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(mscclpp_last_error(), "version 99") &&
                      strstr(mscclpp_last_error(), "version 1"),
                  "message: %s", mscclpp_last_error());

    ck_assert_int_eq(mscclpp_native_load(example_so, &m), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_native_count(m), 1);
    ck_assert_str_eq(mscclpp_native_name(m, 0), "native_allreduce_c");
    ck_assert_str_eq(mscclpp_native_collective(m, 0), "allreduce");
    ck_assert_ptr_null(mscclpp_native_name(m, 1));
    ck_assert_int_eq(mscclpp_native_destroy(m), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_native_destroy(NULL), MSCCLPP_OK);
}
END_TEST

/* ---- what every rank body starts and ends with ---- */

/* Load module `so`, join the communicator, make an executor. */
static int rank_setup(int rank, int n, const mscclpp_unique_id_t *id, const char *so,
                      mscclpp_native_t **mod, mscclpp_comm_t **comm, mscclpp_executor_t **ex)
{
    MP_CHECK(rank, mscclpp_native_load(so, mod));
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, comm));
    MP_CHECK(rank, mscclpp_executor_create(*comm, ex));
    return 0;
}

/* How a body ends: every destroy must succeed when CLEAN; a broken executor's destroy returns
 * the error that broke it; a bootstrap left out of step may fail the communicator's too. */
enum { CLEAN, EXEC_BROKEN, BOOT_OUT_OF_STEP };

/* Destroy in the order the library asks: executor, module, communicator. */
static int rank_teardown(int rank, mscclpp_executor_t *ex, mscclpp_native_t *mod,
                         mscclpp_comm_t *comm, int how)
{
    mscclpp_result_t r[3] = {mscclpp_executor_destroy(ex), mscclpp_native_destroy(mod),
                             mscclpp_comm_destroy(comm)};
    static const char *const what[3] = {"executor", "module", "communicator"};
    bool check[3] = {how == CLEAN, true, how != BOOT_OUT_OF_STEP};
    for (int i = 0; i < 3; i++)
        if (check[i] && r[i] != MSCCLPP_OK)
            return MP_FAIL(rank, "destroying the %s: %s: %s", what[i], mscclpp_result_string(r[i]),
                           mscclpp_last_error());
    return 0;
}

/* ---- the example allreduce, element by element ---- */

/* input element i of rank r: small integers so that every op is exact in every dtype */
static int val(int r, size_t i) { return (int)((i * 7 + (size_t)r * 3) % 11) + 1; }

static double expect(int n, size_t i, mscclpp_redop_t op)
{
    double acc = val(0, i);
    for (int r = 1; r < n; r++) {
        double v = val(r, i);
        if (op == MSCCLPP_SUM) acc += v;
        else if (op == MSCCLPP_MIN) acc = v < acc ? v : acc;
        else if (op == MSCCLPP_MAX) acc = v > acc ? v : acc;
        else acc *= v;
    }
    return acc;
}

static void put(void *buf, mscclpp_dtype_t dt, size_t i, double v)
{
    switch (dt) {
    case MSCCLPP_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case MSCCLPP_FLOAT64: ((double *)buf)[i] = v; break;
    case MSCCLPP_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    default: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    }
}

static double get(const void *buf, mscclpp_dtype_t dt, size_t i)
{
    switch (dt) {
    case MSCCLPP_FLOAT32: return ((const float *)buf)[i];
    case MSCCLPP_FLOAT64: return ((const double *)buf)[i];
    case MSCCLPP_INT32: return ((const int32_t *)buf)[i];
    default: return ((const uint8_t *)buf)[i];
    }
}

static int allreduce_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mscclpp_native_t *mod = NULL;
    mscclpp_comm_t *comm = NULL;
    mscclpp_executor_t *ex = NULL;
    if (rank_setup(rank, n, id, example_so, &mod, &comm, &ex)) return 1;
    const mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_executor_register_native(ex, comm, mod, "native_allreduce_c", 0, NULL,
                                                    &plan));
    if (!mscclpp_plan_is_native(plan) || strcmp(mscclpp_plan_name(plan), "native_allreduce_c") ||
        strcmp(mscclpp_plan_collective(plan), "allreduce") || mscclpp_plan_world_size(plan) != n)
        return MP_FAIL(rank, "the native plan handle does not describe the algorithm");

    /* the registry serves it like a plan, for both in-place modes */
    const mscclpp_plan_t *sel = NULL;
    MP_CHECK(rank, mscclpp_executor_select_plan(ex, "allreduce", 0, 4096, NULL, &sel));
    if (!mscclpp_plan_is_native(sel)) return MP_FAIL(rank, "out-of-place selection");
    MP_CHECK(rank, mscclpp_executor_select_plan(ex, "allreduce", 1, 4096, NULL, &sel));
    if (!mscclpp_plan_is_native(sel)) return MP_FAIL(rank, "in-place selection");
    const mscclpp_plan_t *cands[8];
    int nc = 0;
    MP_CHECK(rank, mscclpp_executor_list_plans(ex, "allreduce", 0, 4096, 0, cands, 8, &nc));
    /* the native algorithm first; after it only the plan made for the job */
    if (nc < 1 || nc > 8 || !mscclpp_plan_is_native(cands[0]))
        return MP_FAIL(rank, "tuning candidates: %d, not the native algorithm first", nc);
    for (int i = 1; i < nc; i++)
        if (strncmp(mscclpp_plan_name(cands[i]), "made_", 5))
            return MP_FAIL(rank, "tuning candidate %d: '%s'", i, mscclpp_plan_name(cands[i]));

    size_t cap = 1 << 20;
    char *a = NULL, *b = NULL;
    MP_CHECK(rank, mscclpp_malloc(cap, (void **)&a));
    MP_CHECK(rank, mscclpp_malloc(cap, (void **)&b));
    const mscclpp_dtype_t dts[] = {MSCCLPP_FLOAT32, MSCCLPP_INT32, MSCCLPP_FLOAT64, MSCCLPP_UINT8};
    const mscclpp_redop_t ops[] = {MSCCLPP_SUM, MSCCLPP_MIN, MSCCLPP_MAX, MSCCLPP_PROD};
    const size_t counts[] = {1, 3, 1000, 65536 + 5};
    int round = 0;
    for (size_t d = 0; d < 4; d++)
        for (size_t o = 0; o < 4; o++)
            for (size_t k = 0; k < 4; k++, round++) {
                mscclpp_dtype_t dt = dts[d];
                mscclpp_redop_t op = ops[o];
                /* uint8 products overflow; keep them for sums of small values only */
                if (dt == MSCCLPP_UINT8 && op == MSCCLPP_PROD) continue;
                size_t es = mscclpp_dtype_size(dt), count = counts[k];
                size_t off = (size_t)(round % 5) * 8 * es; /* moving offsets in the allocations */
                bool inplace = round % 2;
                char *src = a + off, *dst = inplace ? src : b + off + es * 16;
                if (off + count * es + es * 16 > cap) continue;
                for (size_t i = 0; i < count; i++) put(src, dt, i, val(rank, i));
                if (!inplace) memset(dst, 0xee, count * es);
                MP_CHECK(rank, mscclpp_execute_launch(ex, plan, src, dst, count * es, count * es,
                                                      dt, op, MSCCLPP_PACKET_LL16, 0, 0, NULL));
                for (size_t i = 0; i < count; i++) {
                    double want = expect(n, i, op), got = get(dst, dt, i);
                    if (op == MSCCLPP_PROD && dt == MSCCLPP_INT32) want = (int32_t)(int64_t)want;
                    if (got != want)
                        return MP_FAIL(rank, "%s %s of %zu (%s): element %zu is %g, expected %g",
                                       mscclpp_dtype_name(dt), mscclpp_redop_name(op), count,
                                       inplace ? "in-place" : "out-of-place", i, got, want);
                }
            }

    /* more buffer sets than the algorithm keeps mapped (16): the oldest are dropped on every
     * rank alike and set up again when they come back */
    enum { NSETS = 20, NF = 300 };
    float *sets[NSETS];
    for (int k = 0; k < NSETS; k++) MP_CHECK(rank, mscclpp_malloc(NF * 4, (void **)&sets[k]));
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < NSETS; k++) {
            for (int i = 0; i < NF; i++) sets[k][i] = (float)(rank + k + i % 3);
            MP_CHECK(rank, mscclpp_execute_launch(ex, plan, sets[k], sets[k], NF * 4, NF * 4,
                                                  MSCCLPP_FLOAT32, MSCCLPP_SUM,
                                                  MSCCLPP_PACKET_LL16, 0, 0, NULL));
            for (int i = 0; i < NF; i++) {
                float want = (float)(n * (n - 1) / 2 + n * (k + i % 3));
                if (sets[k][i] != want)
                    return MP_FAIL(rank, "buffer set %d (pass %d): element %d is %g, expected %g",
                                   k, pass, i, sets[k][i], want);
            }
        }
    /* a buffer freed and allocated again may come back at the same address and size: the
     * executor's forget drops the algorithm's mappings of it too (issue 21 item 2: it reached
     * the plan contexts only), and the next call maps it again on every rank */
    int dropped = 0;
    MP_CHECK(rank, mscclpp_executor_forget(ex, sets[NSETS - 1], &dropped));
    if (dropped < 1) return MP_FAIL(rank, "forget dropped %d mappings of a set in use", dropped);
    MP_CHECK(rank, mscclpp_executor_forget(ex, sets[NSETS - 1], &dropped));
    if (dropped != 0) return MP_FAIL(rank, "a second forget dropped %d mappings", dropped);
    for (int i = 0; i < NF; i++) sets[NSETS - 1][i] = (float)(rank + i % 3);
    MP_CHECK(rank, mscclpp_execute_launch(ex, plan, sets[NSETS - 1], sets[NSETS - 1], NF * 4,
                                          NF * 4, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                                          MSCCLPP_PACKET_LL16, 0, 0, NULL));
    for (int i = 0; i < NF; i++)
        if (sets[NSETS - 1][i] != (float)(n * (n - 1) / 2 + n * (i % 3)))
            return MP_FAIL(rank, "after forget: element %d is %g", i, sets[NSETS - 1][i]);
    for (int k = 0; k < NSETS; k++) MP_CHECK(rank, mscclpp_free(sets[k]));

    /* an unsupported dtype: the algorithm's own message, with its name and rank in front */
    mscclpp_result_t r = mscclpp_execute_launch(ex, plan, a, b, 64, 64, MSCCLPP_FLOAT16,
                                                MSCCLPP_SUM, MSCCLPP_PACKET_LL16, 0, 0, NULL);
    if (r != MSCCLPP_ERR_UNSUPPORTED || !strstr(mscclpp_last_error(), "native_allreduce_c") ||
        !strstr(mscclpp_last_error(), "dtype 1 is not implemented"))
        return MP_FAIL(rank, "float16: %s: %s", mscclpp_result_string(r), mscclpp_last_error());

    MP_CHECK(rank, mscclpp_executor_release_natives(ex));
    MP_CHECK(rank, mscclpp_free(a));
    MP_CHECK(rank, mscclpp_free(b));
    return rank_teardown(rank, ex, mod, comm, CLEAN);
}

START_TEST(t_allreduce)
{
    set_paths();
    int n = _i;
    ck_assert_int_eq(mp_run(n, allreduce_body, NULL, 120, NULL), 0);
}
END_TEST

/* ---- launch shape, root and op reach the algorithm; the tuning table picks it ---- */

static int probe_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mscclpp_native_t *mod = NULL;
    mscclpp_comm_t *comm = NULL;
    mscclpp_executor_t *ex = NULL;
    if (rank_setup(rank, n, id, probe_so, &mod, &comm, &ex)) return 1;
    const mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_executor_register_native(ex, comm, mod, NULL, 0, "kind=probe", &plan));
    if (strcmp(mscclpp_plan_name(plan), "probe_broadcast"))
        return MP_FAIL(rank, "the last registered algorithm's handle: %s", mscclpp_plan_name(plan));
    const mscclpp_plan_t *ar = NULL;
    MP_CHECK(rank, mscclpp_executor_select_plan(ex, "allreduce", 0, 64, "kind=probe", &ar));
    uint64_t moved = 1;
    if (mscclpp_plan_traffic(ar, 64, 64, MSCCLPP_INT32, &moved) != MSCCLPP_ERR_UNSUPPORTED ||
        moved != 0 || !strstr(mscclpp_last_error(), "native algorithm"))
        return MP_FAIL(rank, "traffic of a native algorithm: %s", mscclpp_last_error());
    if (mscclpp_plan_num_blocks(ar) != 7)
        return MP_FAIL(rank, "num_blocks %d", mscclpp_plan_num_blocks(ar));
    int32_t *buf = NULL, *out = NULL;
    MP_CHECK(rank, mscclpp_malloc(4096, (void **)&buf));
    MP_CHECK(rank, mscclpp_malloc(4096, (void **)&out));
    struct { int nb, nt; int32_t want[8]; } cases[] = {
        {0, 0, {7, 96, 0, MSCCLPP_MAX, MSCCLPP_INT32, rank, n, 0}},   /* the algorithm's defaults */
        {3, 2000, {3, 2000, 0, MSCCLPP_MAX, MSCCLPP_INT32, rank, n, 1}}, /* any shape: its own */
    };
    for (int c = 0; c < 2; c++) {
        MP_CHECK(rank, mscclpp_execute_launch(ex, ar, buf, out, 64, 64, MSCCLPP_INT32,
                                              MSCCLPP_MAX, MSCCLPP_PACKET_LL16, cases[c].nb,
                                              cases[c].nt, NULL));
        for (int i = 0; i < 8; i++)
            if (out[i] != cases[c].want[i])
                return MP_FAIL(rank, "case %d: field %d is %d, expected %d", c, i, out[i],
                               cases[c].want[i]);
        if (out[8] != 0 || out[9] != 1) return MP_FAIL(rank, "peer memory / ABI fields");
    }
    mscclpp_result_t r = mscclpp_execute_launch(ex, ar, buf, out, 64, 64, MSCCLPP_INT32,
                                                MSCCLPP_SUM, MSCCLPP_PACKET_LL16, -1, 0, NULL);
    if (r != MSCCLPP_ERR_INVALID_ARG || !strstr(mscclpp_last_error(), "nblocks -1"))
        return MP_FAIL(rank, "nblocks -1: %s", mscclpp_last_error());
    /* MSCCLPP_REDOP_PLAN means the default, SUM */
    MP_CHECK(rank, mscclpp_execute_launch(ex, plan, buf, out, 64, 64, MSCCLPP_FLOAT32,
                                          MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, 0, 0, NULL));
    if (out[3] != MSCCLPP_SUM || out[4] != MSCCLPP_FLOAT32) return MP_FAIL(rank, "op/dtype");

    /* a tuning table naming the algorithm: the executor's choice for that size */
    char dev[256], path[512];
    MP_CHECK(rank, mscclpp_executor_tuning_target(ex, dev, sizeof dev, NULL, 0));
    snprintf(path, sizeof path, "/tmp/mscclpp-native-tune-%d-%d.json", (int)getppid(), rank);
    FILE *f = fopen(path, "w");
    if (!f) return MP_FAIL(rank, "cannot write %s", path);
    fprintf(f, "{\"format\": \"mscclpp-tuning\", \"version\": 1, \"backend\": \"%s\", "
               "\"device\": \"%s\", \"nranks\": %d, \"ranks_per_node\": %d, \"entries\": ["
               "{\"collective\": \"allreduce\", \"inplace\": false, \"min_bytes\": 0, "
               "\"max_bytes\": 1024, \"plan\": \"probe_allreduce\", \"nblocks\": 7, "
               "\"nthreads\": 256}]}\n", mscclpp_backend_name(), dev, n, n);
    fclose(f);
    setenv("MSCCLPP_TUNING_FILE", path, 1);
    mscclpp_executor_t *ex2 = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex2));
    unlink(path);
    setenv("MSCCLPP_TUNING_FILE", "none", 1);
    MP_CHECK(rank, mscclpp_executor_register_native(ex2, comm, mod, "probe_allreduce", 0, NULL,
                                                    NULL));
    const mscclpp_plan_t *chosen = NULL;
    int nth = -1;
    MP_CHECK(rank, mscclpp_executor_choose_plan(ex2, "allreduce", 0, 512, &chosen, &nth));
    if (!mscclpp_plan_is_native(chosen) || strcmp(mscclpp_plan_name(chosen), "probe_allreduce") ||
        nth != 256)
        return MP_FAIL(rank, "tuning table choice: %s, %d threads", mscclpp_plan_name(chosen), nth);
    /* the collective call runs the table's choice with the table's threads per block (needs
     * the executor's dispatch to natives: see hook_body) */
    if (getenv("NATIVE_TEST_HOOK")) {
        memset(out, 0, 64);
        MP_CHECK(rank, mscclpp_allreduce(ex2, buf, out, 16, MSCCLPP_INT32, MSCCLPP_MIN, NULL));
        if (out[0] == 0 && out[1] == 0) { /* the interpreter ran an empty plan: no dispatch */
            FILE *m = fopen(getenv("NATIVE_TEST_HOOK"), "w");
            if (m) fclose(m);
            return 1;
        }
        if (out[0] != 7 || out[1] != 256 || out[3] != MSCCLPP_MIN)
            return MP_FAIL(rank, "mscclpp_allreduce ran the native with %d blocks, %d threads, "
                           "op %d", out[0], out[1], out[3]);
    }
    /* a handle belongs to the executor it was registered with */
    r = mscclpp_execute_launch(ex, chosen, buf, out, 64, 64, MSCCLPP_INT32, MSCCLPP_SUM,
                               MSCCLPP_PACKET_LL16, 0, 0, NULL);
    if (r != MSCCLPP_ERR_INVALID_ARG || !strstr(mscclpp_last_error(), "another executor"))
        return MP_FAIL(rank, "foreign handle: %s", mscclpp_last_error());

    MP_CHECK(rank, mscclpp_executor_destroy(ex2));
    MP_CHECK(rank, mscclpp_free(buf));
    MP_CHECK(rank, mscclpp_free(out));
    return rank_teardown(rank, ex, mod, comm, CLEAN);
}

START_TEST(t_probe)
{
    set_paths();
    ck_assert_int_eq(mp_run(2, probe_body, NULL, 60, NULL), 0);
}
END_TEST

/* ---- errors of an algorithm reach mscclpp_last_error() ---- */

static int failing_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mscclpp_native_t *mod = NULL;
    mscclpp_comm_t *comm = NULL;
    mscclpp_executor_t *ex = NULL;
    if (rank_setup(rank, n, id, failing_so, &mod, &comm, &ex)) return 1;
    const mscclpp_plan_t *p_msg = NULL, *p_silent = NULL;
    MP_CHECK(rank, mscclpp_executor_register_native(ex, comm, mod, "fail_msg", 0, NULL, &p_msg));
    MP_CHECK(rank, mscclpp_executor_register_native(ex, comm, mod, "fail_silent", 0, NULL,
                                                    &p_silent));
    mscclpp_result_t r = mscclpp_executor_register_native(ex, comm, mod, "init_fails", 0, NULL,
                                                          NULL);
    if (r != MSCCLPP_ERR_SYSTEM || !strstr(mscclpp_last_error(), "init could not open") ||
        !strstr(mscclpp_last_error(), "'init_fails'"))
        return MP_FAIL(rank, "init failure: %s", mscclpp_last_error());
    r = mscclpp_executor_register_native(ex, comm, mod, "no_such_algo", 0, NULL, NULL);
    if (r != MSCCLPP_ERR_INVALID_ARG ||
        !strstr(mscclpp_last_error(), "no algorithm 'no_such_algo'"))
        return MP_FAIL(rank, "unknown name: %s", mscclpp_last_error());

    char *a = NULL, *b = NULL;
    MP_CHECK(rank, mscclpp_malloc(4096, (void **)&a));
    MP_CHECK(rank, mscclpp_malloc(4096, (void **)&b));
    /* in-place is not served by these */
    r = mscclpp_execute_launch(ex, p_msg, a, a, 64, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                               MSCCLPP_PACKET_LL16, 0, 0, NULL);
    if (r != MSCCLPP_ERR_UNSUPPORTED || !strstr(mscclpp_last_error(), "in-place"))
        return MP_FAIL(rank, "in-place call: %s", mscclpp_last_error());
    r = mscclpp_execute_launch(ex, p_msg, a, b, 64, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                               MSCCLPP_PACKET_LL16, 0, 0, NULL);
    char want[128];
    snprintf(want, sizeof want, "deliberate failure on rank %d, call 0", rank);
    if (r != MSCCLPP_ERR_REMOTE || !strstr(mscclpp_last_error(), want) ||
        !strstr(mscclpp_last_error(), "native algorithm 'fail_msg' (allreduce, rank"))
        return MP_FAIL(rank, "failing call: %s: %s", mscclpp_result_string(r),
                       mscclpp_last_error());
    r = mscclpp_execute_launch(ex, p_msg, a, b, 64, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                               MSCCLPP_PACKET_LL16, 0, 0, NULL);
    if (r != MSCCLPP_ERR_REMOTE || !strstr(mscclpp_last_error(), "broken by an earlier error") ||
        !strstr(mscclpp_last_error(), want))
        return MP_FAIL(rank, "call after the failure: %s", mscclpp_last_error());
    /* the failure broke the executor, not only that algorithm: another one runs nothing */
    r = mscclpp_execute_launch(ex, p_silent, a, b, 64, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                               MSCCLPP_PACKET_LL16, 0, 0, NULL);
    if (r != MSCCLPP_ERR_REMOTE || !strstr(mscclpp_last_error(), "executor broken") ||
        !strstr(mscclpp_last_error(), want))
        return MP_FAIL(rank, "another algorithm after the failure: %s: %s",
                       mscclpp_result_string(r), mscclpp_last_error());
    mscclpp_executor_destroy(ex); /* its result: the error that broke it */
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    MP_CHECK(rank, mscclpp_executor_register_native(ex, comm, mod, "fail_silent", 0, NULL,
                                                    &p_silent));
    r = mscclpp_execute_launch(ex, p_silent, a, b, 64, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                               MSCCLPP_PACKET_LL16, 0, 0, NULL);
    if (r != MSCCLPP_ERR_INTERNAL || !strstr(mscclpp_last_error(), "'fail_silent'") ||
        !strstr(mscclpp_last_error(), "no message"))
        return MP_FAIL(rank, "silent failure: %s: %s", mscclpp_result_string(r),
                       mscclpp_last_error());
    MP_CHECK(rank, mscclpp_free(a));
    MP_CHECK(rank, mscclpp_free(b));
    return rank_teardown(rank, ex, mod, comm, EXEC_BROKEN); /* fail_silent broke it */
}

START_TEST(t_failing)
{
    set_paths();
    ck_assert_int_eq(mp_run(2, failing_body, NULL, 60, NULL), 0);
}
END_TEST

/* ---- the stream route: nothing lost, nothing unbounded (issue 8) ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* `r` is `want_r` and the last error holds every word of `words` (NULL-terminated). */
static int expect_err(int rank, const char *what, mscclpp_result_t r, mscclpp_result_t want_r,
                      const char *const *words)
{
    const char *msg = mscclpp_last_error();
    if (r != want_r)
        return MP_FAIL(rank, "%s: %s, want %s: %s", what, mscclpp_result_string(r),
                       mscclpp_result_string(want_r), msg);
    for (int i = 0; words[i]; i++)
        if (!strstr(msg, words[i]))
            return MP_FAIL(rank, "%s: the message does not say \"%s\": %s", what, words[i], msg);
    return 0;
}

#define NATIVE_TIMEOUT_S 2.0

/*
 * An algorithm's error on a user stream (mscclpp_stream_create) is returned by the call, by
 * mscclpp_stream_synchronize and by mscclpp_executor_get_async_error, each with the
 * algorithm's message, and breaks the executor like a plan's failure (mscclpp.h). A module's
 * own wait and the services' barrier end within MSCCLPP_TIMEOUT (+1 s) as native.h promises,
 * MSCCLPP_TIMEOUT being what it is at the call (set here after the module was loaded).
 */
static int stream_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mscclpp_native_t *mod = NULL;
    MP_CHECK(rank, mscclpp_native_load(failing_so, &mod));
    setenv("MSCCLPP_TIMEOUT", "2", 1);
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    mscclpp_bootstrap_t *boot = NULL;
    MP_CHECK(rank, mscclpp_comm_bootstrap(comm, &boot));
    char *a = NULL, *b = NULL;
    MP_CHECK(rank, mscclpp_malloc(4096, (void **)&a));
    MP_CHECK(rank, mscclpp_malloc(4096, (void **)&b));
    mscclpp_stream_t s = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&s));

    /* 1. an error with a message */
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    const mscclpp_plan_t *p_msg = NULL, *p_silent = NULL;
    MP_CHECK(rank, mscclpp_executor_register_native(ex, comm, mod, "fail_msg", 0, NULL, &p_msg));
    MP_CHECK(rank, mscclpp_executor_register_native(ex, comm, mod, "fail_silent", 0, NULL,
                                                    &p_silent));
    char want[128];
    snprintf(want, sizeof want, "deliberate failure on rank %d, call 0", rank);
    const char *const msg_words[] = {want, "'fail_msg'", NULL};
    mscclpp_result_t r = mscclpp_execute(ex, p_msg, a, b, 64, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM, s);
    if (expect_err(rank, "the call on a stream", r, MSCCLPP_ERR_REMOTE, msg_words)) return 1;
    r = mscclpp_stream_synchronize(s);
    if (expect_err(rank, "mscclpp_stream_synchronize", r, MSCCLPP_ERR_REMOTE, msg_words))
        return 1;
    mscclpp_result_t async = MSCCLPP_OK;
    MP_CHECK(rank, mscclpp_executor_get_async_error(ex, &async));
    if (expect_err(rank, "mscclpp_executor_get_async_error", async, MSCCLPP_ERR_REMOTE,
                   msg_words))
        return 1;
    const char *const broken_words[] = {"executor broken", want, NULL};
    r = mscclpp_execute(ex, p_silent, a, b, 64, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM, s);
    if (expect_err(rank, "a later call", r, MSCCLPP_ERR_REMOTE, broken_words)) return 1;
    mscclpp_executor_destroy(ex); /* its result: the error that broke it */

    /* 2. the module's own wait on peer memory, bounded by the timeout_ns it was handed */
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    const mscclpp_plan_t *p_hang = NULL;
    MP_CHECK(rank, mscclpp_executor_register_native(ex, comm, mod, "hang_flag", 0, NULL,
                                                    &p_hang));
    MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
    double t0 = now_s();
    char peer[64];
    snprintf(peer, sizeof peer, "for rank %d's flag", (rank + 1) % n);
    const char *const hang_words[] = {"'hang_flag'", "timeout_ns 2000000000", peer, NULL};
    r = mscclpp_execute(ex, p_hang, a, b, 64, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM, s);
    double dt = now_s() - t0;
    if (expect_err(rank, "a hung algorithm", r, MSCCLPP_ERR_TIMEOUT, hang_words)) return 1;
    if (dt > NATIVE_TIMEOUT_S + 1.0 || dt < NATIVE_TIMEOUT_S - 0.5)
        return MP_FAIL(rank, "a hung algorithm gave up after %.2f s, MSCCLPP_TIMEOUT is %.0f s",
                       dt, NATIVE_TIMEOUT_S);
    r = mscclpp_stream_synchronize(s);
    if (expect_err(rank, "sync after a hung algorithm", r, MSCCLPP_ERR_TIMEOUT, hang_words))
        return 1;
    mscclpp_executor_destroy(ex);

    /* 3. the services' barrier that one rank alone enters */
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    const mscclpp_plan_t *p_bar = NULL;
    MP_CHECK(rank, mscclpp_executor_register_native(ex, comm, mod, "barrier_alone", 0, NULL,
                                                    &p_bar));
    MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
    t0 = now_s();
    r = mscclpp_execute(ex, p_bar, a, b, 64, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM, s);
    dt = now_s() - t0;
    if (rank == 0) {
        if (r == MSCCLPP_OK || !strstr(mscclpp_last_error(), "'barrier_alone'"))
            return MP_FAIL(rank, "a barrier no peer enters: %s: %s", mscclpp_result_string(r),
                           mscclpp_last_error());
        if (dt > NATIVE_TIMEOUT_S + 1.0)
            return MP_FAIL(rank, "the barrier gave up after %.2f s, MSCCLPP_TIMEOUT is %.0f s",
                           dt, NATIVE_TIMEOUT_S);
        printf("# rank 0: a barrier no peer entered failed in %.2f s: %s\n", dt,
               mscclpp_last_error());
    } else {
        if (r != MSCCLPP_OK) return MP_FAIL(rank, "barrier_alone: %s", mscclpp_last_error());
        /* stay (silent) until rank 0 gave up: its barrier must end by the timeout, not
         * because this rank closed its connections */
        usleep((useconds_t)((NATIVE_TIMEOUT_S + 1.5) * 1e6));
    }
    mscclpp_stream_destroy(s);
    mscclpp_free(a);
    mscclpp_free(b);
    return rank_teardown(rank, ex, mod, comm, BOOT_OUT_OF_STEP);
}

START_TEST(t_stream_errors)
{
    set_paths();
    unsigned failed = 0;
    ck_assert_msg(mp_run(2, stream_body, NULL, 60, &failed) == 0, "failed ranks 0x%x", failed);
}
END_TEST

/*
 * A plan's launch queued on a stream fails (a deadlock: each rank waits before it signals);
 * a native call queued behind it on the same stream waits for it, then must run nothing on the
 * executor that launch broke: it returns the plan's error, and the algorithm never ran.
 */
#define DEADLOCK_GPU(r, p)                                                                      \
    "{\"id\": " #r ", \"input_chunks\": 1, \"output_chunks\": 1, \"scratch_chunks\": 0, "    \
    "\"channels\": [{\"channel_type\": \"memory\", \"connected_to\": [" #p "]}], "            \
    "\"remote_buffers\": [], \"semaphores\": [], \"threadblocks\": [{\"id\": 0, "              \
    "\"channels\": [{\"channel_type\": \"memory\", \"channel_ids\": [0]}], \"ops\": ["        \
    "{\"name\": \"wait\", \"channel_ids\": [0], \"channel_type\": \"memory\"}, "               \
    "{\"name\": \"signal\", \"channel_ids\": [0], \"channel_type\": \"memory\"}]}]}"

static const char deadlock_plan[] =
    "{\"format\": \"mscclpp-plan/1\", \"name\": \"deadlock\", \"collective\": \"allreduce\", "
    "\"protocol\": \"Simple\", \"inplace\": false, \"reuse_resources\": false, "
    "\"num_threads_per_block\": 256, \"use_double_scratch_buffer\": false, "
    "\"buffer_alignment\": 16, \"min_message_size\": 0, "
    "\"max_message_size\": 18446744073709551615, \"gpus\": [" DEADLOCK_GPU(0, 1) ", "
    DEADLOCK_GPU(1, 0) "]}";

static int plan_then_native_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    setenv("MSCCLPP_TIMEOUT", "2", 1);
    mscclpp_native_t *mod = NULL;
    mscclpp_comm_t *comm = NULL;
    mscclpp_executor_t *ex = NULL;
    if (rank_setup(rank, n, id, probe_so, &mod, &comm, &ex)) return 1;
    const mscclpp_plan_t *probe = NULL;
    MP_CHECK(rank, mscclpp_executor_register_native(ex, comm, mod, "probe_allreduce", 0, NULL,
                                                    &probe));
    mscclpp_plan_t *dead = NULL;
    MP_CHECK(rank, mscclpp_plan_load_string(deadlock_plan, sizeof deadlock_plan - 1, &dead));
    int32_t *a = NULL, *b = NULL;
    MP_CHECK(rank, mscclpp_malloc(4096, (void **)&a));
    MP_CHECK(rank, mscclpp_malloc(4096, (void **)&b));
    memset(b, 0, 4096);
    mscclpp_stream_t s = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&s));
    MP_CHECK(rank, mscclpp_execute(ex, dead, a, b, 64, 64, MSCCLPP_INT32, MSCCLPP_SUM, s));
    mscclpp_result_t r = mscclpp_execute(ex, probe, a, b, 64, 64, MSCCLPP_INT32, MSCCLPP_SUM, s);
    const char *const words[] = {"plan 'deadlock'", "timed out", NULL};
    if (expect_err(rank, "a native call behind a failed launch", r, MSCCLPP_ERR_TIMEOUT, words))
        return 1;
    for (int i = 0; i < 10; i++)
        if (b[i] != 0)
            return MP_FAIL(rank, "the native algorithm ran on a broken executor (out[%d] = %d)", i,
                           b[i]);
    mscclpp_stream_destroy(s);
    mscclpp_plan_destroy(dead);
    mscclpp_free(a);
    mscclpp_free(b);
    return rank_teardown(rank, ex, mod, comm, EXEC_BROKEN);
}

START_TEST(t_plan_then_native)
{
    set_paths();
    unsigned failed = 0;
    ck_assert_msg(mp_run(2, plan_then_native_body, NULL, 60, &failed) == 0, "failed ranks 0x%x",
                  failed);
}
END_TEST

/* ---- one cache: plan contexts and the algorithm's buffer sets (issue 21 item 2) ---- */

typedef struct {
    int rank, n;
    mscclpp_executor_t *ex;
    const mscclpp_plan_t *nat; /* the example allreduce */
    mscclpp_plan_t *ag;        /* a plan keyed by the call's allocations (plans/direct) */
} cache_run_t;

enum { CNF = 256 };

/* The direct allgather from `in` into `out` (on stream s, or waiting), its bytes checked. */
static int cache_ag(const cache_run_t *t, float *in, float *out, mscclpp_stream_t s, int tag)
{
    for (int i = 0; i < CNF; i++) in[i] = (float)(t->rank * 1000 + tag * 10 + i);
    memset(out, 0, (size_t)t->n * CNF * 4);
    MP_CHECK(t->rank, mscclpp_execute(t->ex, t->ag, in, out, CNF * 4, (size_t)t->n * CNF * 4,
                                      MSCCLPP_FLOAT32, MSCCLPP_REDOP_PLAN, s));
    if (s) MP_CHECK(t->rank, mscclpp_stream_synchronize(s));
    for (int r = 0; r < t->n; r++)
        for (int i = 0; i < CNF; i++)
            if (out[r * CNF + i] != (float)(r * 1000 + tag * 10 + i))
                return MP_FAIL(t->rank, "allgather %d: block %d [%d] = %g", tag, r, i,
                               out[r * CNF + i]);
    return 0;
}

/* The native allreduce in place on `set`, checked. */
static int cache_nat(const cache_run_t *t, float *set, int k)
{
    for (int i = 0; i < CNF; i++) set[i] = (float)(t->rank + k);
    MP_CHECK(t->rank,
             mscclpp_execute_launch(t->ex, t->nat, set, set, CNF * 4, CNF * 4, MSCCLPP_FLOAT32,
                                    MSCCLPP_SUM, MSCCLPP_PACKET_LL16, 0, 0, NULL));
    for (int i = 0; i < CNF; i++)
        if (set[i] != (float)(t->n * (t->n - 1) / 2 + t->n * k))
            return MP_FAIL(t->rank, "native set %d: [%d] = %g", k, i, set[i]);
    return 0;
}

/* mscclpp_executor_forget(base) drops `want` entries. */
static int cache_forgets(const cache_run_t *t, const void *base, int want, const char *what)
{
    int dropped = -1;
    MP_CHECK(t->rank, mscclpp_executor_forget(t->ex, base, &dropped));
    if (dropped != want)
        return MP_FAIL(t->rank, "forget of %s dropped %d entries, expected %d", what, dropped,
                       want);
    return 0;
}

static int cache_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    setenv("MSCCLPP_EXEC_CONTEXTS", "3", 1); /* three entries of both kinds together */
    mscclpp_native_t *mod = NULL;
    mscclpp_comm_t *comm = NULL;
    cache_run_t t = {rank, n, NULL, NULL, NULL};
    if (rank_setup(rank, n, id, example_so, &mod, &comm, &t.ex)) return 1;
    MP_CHECK(rank, mscclpp_executor_register_native(t.ex, comm, mod, "native_allreduce_c", 0, NULL,
                                                    &t.nat));
    char path[1024];
    snprintf(path, sizeof path, "%s/direct/allgather_direct_%d.json", mp_plan_dir(), n);
    MP_CHECK(rank, mscclpp_plan_load_file(path, &t.ag));
    float *in = NULL, *out = NULL, *sets[5];
    MP_CHECK(rank, mscclpp_malloc(CNF * 4, (void **)&in));
    MP_CHECK(rank, mscclpp_malloc((size_t)n * CNF * 4, (void **)&out));
    for (int k = 0; k < 5; k++) MP_CHECK(rank, mscclpp_malloc(CNF * 4, (void **)&sets[k]));

    /* most recently used first: [ag] -> [n1 n0 ag] -> [ag n1 n0] (a hit moves ag up) */
    if (cache_ag(&t, in, out, NULL, 0) || cache_nat(&t, sets[0], 0) || cache_nat(&t, sets[1], 1) ||
        cache_ag(&t, in, out, NULL, 1))
        return 1;
    /* a fourth entry drops the least recently used of either kind: n0, then n1, then the
     * plan's context (before one cache, the algorithm kept 16 sets of its own, and the plan's
     * contexts did not count them) */
    if (cache_nat(&t, sets[2], 2) || cache_forgets(&t, sets[0], 0, "an evicted native set"))
        return 1;
    if (cache_nat(&t, sets[3], 3) || cache_nat(&t, sets[4], 4) ||
        cache_forgets(&t, in, 0, "the evicted plan context"))
        return 1;
    /* [n4 n3 n2]: a context on sets[4] evicts n2; forget of sets[4] drops both kinds, once */
    if (cache_ag(&t, sets[4], out, NULL, 2) || cache_forgets(&t, sets[4], 2, "a shared buffer") ||
        cache_forgets(&t, sets[2], 0, "an evicted native set"))
        return 1;

    /* a context a captured graph launches with stays through any pressure: it does not count,
     * is never evicted, and after a forget it waits with the dead for the executor's end */
    mscclpp_stream_t s = NULL;
    mscclpp_graph_t g = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&s));
    MP_CHECK(rank, mscclpp_stream_begin_capture(s));
    MP_CHECK(rank, mscclpp_execute(t.ex, t.ag, in, out, CNF * 4, (size_t)n * CNF * 4,
                                   MSCCLPP_FLOAT32, MSCCLPP_REDOP_PLAN, s));
    MP_CHECK(rank, mscclpp_stream_end_capture(s, &g));
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < 5; k++)
            if (cache_nat(&t, sets[k], k + round)) return 1;
        if (cache_ag(&t, sets[round], out, NULL, 3 + round)) return 1;
        if (round == 2 && cache_forgets(&t, in, 1, "the captured context")) return 1;
        for (int i = 0; i < CNF; i++) in[i] = (float)(rank * 1000 + 70 + round * 10 + i);
        memset(out, 0, (size_t)n * CNF * 4);
        MP_CHECK(rank, mscclpp_graph_launch(g, s));
        MP_CHECK(rank, mscclpp_stream_synchronize(s));
        for (int r = 0; r < n; r++)
            for (int i = 0; i < CNF; i++)
                if (out[r * CNF + i] != (float)(r * 1000 + 70 + round * 10 + i))
                    return MP_FAIL(rank, "replay %d: block %d [%d] = %g", round, r, i,
                                   out[r * CNF + i]);
    }
    MP_CHECK(rank, mscclpp_graph_destroy(g));
    MP_CHECK(rank, mscclpp_stream_destroy(s));
    /* the buffers after the executor: its dead keep the captured context's mappings */
    if (rank_teardown(rank, t.ex, mod, comm, CLEAN)) return 1;
    for (int k = 0; k < 5; k++) MP_CHECK(rank, mscclpp_free(sets[k]));
    MP_CHECK(rank, mscclpp_free(in));
    MP_CHECK(rank, mscclpp_free(out));
    MP_CHECK(rank, mscclpp_plan_destroy(t.ag));
    return 0;
}

START_TEST(t_one_cache)
{
    set_paths();
    ck_assert_int_eq(mp_run(2, cache_body, NULL, 120, NULL), 0);
}
END_TEST

/* `test_native hook`: only the collective path (tests/native/test_native_hook.sh) */
static int run_hook(void)
{
    set_paths();
    char marker[256];
    snprintf(marker, sizeof marker, "/tmp/mscclpp-native-hook-%d", (int)getpid());
    unlink(marker);
    setenv("NATIVE_TEST_HOOK", marker, 1);
    int nf = mp_run(2, probe_body, NULL, 60, NULL);
    if (nf == 0) return 0;
    if (access(marker, F_OK) == 0) {
        unlink(marker);
        printf("SKIP: mscclpp_allreduce ran a native algorithm's plan as an empty plan: the "
               "executor does not dispatch to exec_native_execute yet (executor.c hook)\n");
        return 77;
    }
    return 1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "hook")) return run_hook();
    Suite *s = suite_create("native");
    TCase *tc = tcase_create("native");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, t_load_errors);
    tcase_add_loop_test(tc, t_allreduce, 2, 3);
    tcase_add_loop_test(tc, t_allreduce, 4, 5);
    tcase_add_test(tc, t_probe);
    tcase_add_test(tc, t_failing);
    tcase_add_test(tc, t_stream_errors);
    tcase_add_test(tc, t_plan_then_native);
    tcase_add_test(tc, t_one_cache);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
