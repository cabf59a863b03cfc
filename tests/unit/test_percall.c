/*
 * The host path of a repeated call (issue 19 item 5): the backend operations (HAL) one
 * steady-state call asks for, counted with hal_count_enable (hal/hal.h) on the host backend.
 * The executor issues the same operations whatever the backend, and on a GPU each one is a
 * runtime or driver call (0.1-1 us under MPS), so what is counted here is what a GPU call
 * pays on the host. Two forked ranks; each scenario warms up (the context is set up, the plan
 * chosen), then repeats the same call on the same buffers and stream CALLS times, and the
 * counts over those calls must stay within the bounds below (docs/performance.md, "Host path
 * per call", lists them before and after the per-call caches).
 *
 * The large size is 2 MiB: above the 1 MiB from which the host backend's direct plans serve
 * (plans/direct/host), as 1 MiB is above CUDA's 128 KiB, so MSCCLPP_PLAN_DIRECT=on and auto run
 * a plan that shares the caller's buffers here as they would on a GPU.
 *
 * Scenarios that "ask first" call mscclpp_executor_direct before each call, as the NCCL layer
 * does to decide whether a call runs on its caller's buffers (nccl/nccl_coll.c, zero_copy):
 * what that lookup found is handed to the call, so the pair looks each buffer up once. Their
 * buffers are the application's own shareable memory (a memfd mapped MAP_SHARED: on the host
 * backend what a cudaMalloc'd PyTorch tensor is on CUDA), which the executor's steady path
 * must look up at every call (a range freed and mapped again at the same address must miss).
 *
 * Set TEST_PERCALL_PRINT=1 to print every scenario's operations per call (and the plan).
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "executor/exec_forget.h"
#include "hal/hal.h"
#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"

#define WARMUP 3
#define CALLS 20
#define MAX_SLOTS 64

typedef struct {
    const char *name;
    const char *direct; /* MSCCLPP_PLAN_DIRECT */
    size_t bytes;
    int inplace;
    /* bounds, per call (rounded up), on the total and on the lookups (mem_info + mem_range) */
    unsigned max_ops, max_lookups;
    int ask; /* mscclpp_executor_direct before each call, on the application's own memory */
} scenario_t;


/* Per-call counts of the calls counted: count[i] / CALLS (rounded up), printed when asked. */
static int report(int rank, const scenario_t *sc, const uint64_t *before, const uint64_t *after,
                  unsigned *total, unsigned *lookups)
{
    bool print = getenv("TEST_PERCALL_PRINT") != NULL;
    char line[1024];
    int len = snprintf(line, sizeof line, "# rank %d %s:", rank, sc->name);
    uint64_t sum = 0, look = 0;
    for (int i = 0; i < hal_count_slots(); i++) {
        uint64_t d = after[i] - before[i];
        if (!d) continue;
        sum += d;
        const char *name = hal_count_slot_name(i);
        if (!strcmp(name, "mem_info") || !strcmp(name, "mem_range")) look += d;
        if (len < (int)sizeof line)
            len += snprintf(line + len, sizeof line - (size_t)len, " %s=%.2f", name,
                            (double)d / CALLS);
    }
    *total = (unsigned)((sum + CALLS - 1) / CALLS);
    *lookups = (unsigned)((look + CALLS - 1) / CALLS);
    if (print) printf("%s (total %.2f per call)\n", line, (double)sum / CALLS);
    fflush(stdout);
    return 0;
}

static int body(int rank, int nranks, const mscclpp_unique_id_t *id, void *arg)
{
    const scenario_t *sc = arg;
    setenv("MSCCLPP_PLAN_DIRECT", sc->direct, 1);
    hal_count_enable();
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, nranks, &comm));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    size_t count = sc->bytes / sizeof(float);
    float *a = NULL, *b = NULL;
    if (sc->ask) {
        a = mp_app_map(sc->bytes, NULL);
        b = mp_app_map(sc->bytes, NULL);
        if (!a || !b) return MP_FAIL(rank, "memfd buffers: out of memory");
    } else {
        MP_CHECK(rank, mscclpp_malloc(sc->bytes, (void **)&a));
        MP_CHECK(rank, mscclpp_malloc(sc->bytes, (void **)&b));
    }
    float *out = sc->inplace ? a : b;
    mscclpp_stream_t s = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&s));
    uint64_t before[MAX_SLOTS], after[MAX_SLOTS];
    if (hal_count_slots() > MAX_SLOTS) return MP_FAIL(rank, "more than %d HAL slots", MAX_SLOTS);
    for (int i = 0; i < WARMUP + CALLS; i++) {
        if (i == WARMUP) {
            MP_CHECK(rank, mscclpp_stream_synchronize(s));
            hal_count_read(before);
        }
        for (size_t k = 0; k < count && (sc->inplace || i == 0); k++) a[k] = (float)(rank + 1);
        if (sc->ask) {
            int direct = 0;
            MP_CHECK(rank, mscclpp_executor_direct(ex, NULL, "allreduce", a, out, sc->bytes,
                                                   sc->bytes, MSCCLPP_FLOAT32, &direct));
            if (!direct && strcmp(sc->direct, "off") != 0 && sc->bytes > (1 << 20) && !sc->inplace)
                return MP_FAIL(rank, "%s: the direct plan does not run on these buffers",
                               sc->name);
        }
        MP_CHECK(rank, mscclpp_allreduce(ex, a, out, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, s));
        if (sc->inplace) MP_CHECK(rank, mscclpp_stream_synchronize(s));
    }
    hal_count_read(after);
    MP_CHECK(rank, mscclpp_stream_synchronize(s));
    for (size_t k = 0; k < count; k++)
        if (out[k] != 3.0f)
            return MP_FAIL(rank, "%s: out[%zu] = %g, want 3", sc->name, k, (double)out[k]);
    unsigned total, lookups;
    report(rank, sc, before, after, &total, &lookups);
    const mscclpp_plan_t *plan = NULL;
    int nt = 0;
    if (getenv("TEST_PERCALL_PRINT")) {
        mscclpp_result_t pr =
            mscclpp_executor_choose_plan(ex, "allreduce", sc->inplace, sc->bytes, &plan, &nt);
        printf("# rank %d %s: plan %s\n", rank, sc->name,
               pr == MSCCLPP_OK ? mscclpp_plan_name(plan) : mscclpp_last_error());
    }
    int rc = 0;
    if (total > sc->max_ops)
        rc = MP_FAIL(rank, "%s: %u HAL operations per steady-state call, at most %u expected",
                     sc->name, total, sc->max_ops);
    if (lookups > sc->max_lookups)
        rc = MP_FAIL(rank,
                     "%s: %u allocation lookups (mem_info, mem_range) per steady-state call, at "
                     "most %u expected",
                     sc->name, lookups, sc->max_lookups);
    MP_CHECK(rank, mscclpp_stream_destroy(s));
    MP_CHECK(rank, mscclpp_executor_destroy(ex));
    if (sc->ask) {
        munmap(a, sc->bytes);
        munmap(b, sc->bytes);
    } else {
        mscclpp_free(a);
        mscclpp_free(b);
    }
    MP_CHECK(rank, mscclpp_comm_destroy(comm));
    return rc;
}

static const scenario_t scenarios[] = {
    {"8 B out of place, direct off", "off", 8, 0, 2, 0},
    {"8 B in place, direct off", "off", 8, 1, 3, 0},
    {"2 MiB out of place, direct off", "off", 2 << 20, 0, 2, 0},
    {"2 MiB in place, direct off", "off", 2 << 20, 1, 3, 0},
    {"8 B out of place, direct auto", "auto", 8, 0, 2, 0},
    {"2 MiB out of place, direct auto", "auto", 2 << 20, 0, 4, 2},
    {"8 B out of place, direct on", "on", 8, 0, 2, 0},
    {"8 B in place, direct on", "on", 8, 1, 3, 0},
    {"2 MiB out of place, direct on", "on", 2 << 20, 0, 2, 0},
    /* asking first (the NCCL layer's zero-copy check), on the application's memory: one lookup
     * per buffer for the pair (before the hand-over: the query's and the call's, 4) */
    {"app memory 2 MiB out of place, asked first, direct on", "on", 2 << 20, 0, 4, 2, 1},
    {"app memory 2 MiB out of place, asked first, direct auto", "auto", 2 << 20, 0, 4, 2, 1},
    {"app memory 2 MiB in place, asked first, direct on", "on", 2 << 20, 1, 4, 1, 1},
    {"app memory 2 MiB in place, asked first, direct auto", "auto", 2 << 20, 1, 4, 1, 1},
    {"app memory 8 B out of place, asked first, direct off", "off", 8, 0, 4, 2, 1},
};
#define NSCENARIOS (int)(sizeof scenarios / sizeof scenarios[0])

START_TEST(t_percall) { ck_assert_int_eq(mp_run(2, body, (void *)&scenarios[_i], 120, NULL), 0); }
END_TEST

int main(void)
{
    const char *top = getenv("MSCCLPP_TOP_SRCDIR");
    char plan_dir[512];
    snprintf(plan_dir, sizeof plan_dir, "%s/plans", top ? top : ".");
    setenv("MSCCLPP_PLAN_DIR", plan_dir, 1);
    setenv("MSCCLPP_HAL", "host", 1);
    Suite *s = suite_create("percall");
    TCase *tc = tcase_create("allreduce");
    tcase_set_timeout(tc, 150);
    tcase_add_loop_test(tc, t_percall, 0, NSCENARIOS);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
