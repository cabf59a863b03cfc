/*
 * The host path of a repeated ncclAllReduce (issue 19 item 5): the backend operations (HAL)
 * one steady-state call through libmscclpp_nccl asks for, counted on the host backend
 * (hal_count_enable, hal/hal.h). The NCCL layer and the executor issue the same operations on
 * a GPU, where each is a runtime or driver call, so these counts are what PyTorch's
 * dist.all_reduce pays on the host per call beyond the Python side. Two forked ranks; each
 * scenario warms up, then repeats one call on the same buffers and stream CALLS times.
 *
 * Buffers as an application has them: from ncclMemAlloc, or its own shareable memory (a memfd
 * mapped MAP_SHARED: on the host backend what a cudaMalloc'd PyTorch tensor is on CUDA, memory
 * the library did not allocate that peers can map). The stream: one of the program's (on the
 * host backend a cudaStream_t may be an mscclpp stream), as PyTorch passes its current stream.
 *
 * Built from the NCCL layer's sources and the library's objects (it reads internal counters).
 * TEST_PERCALL_PRINT=1 prints every scenario's operations per call.
 */
#define _GNU_SOURCE
#include <check.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hal/hal.h"
#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"

#define WARMUP 3
#define CALLS 20
#define MAX_SLOTS 64

enum { B_NCCLMEM, B_APP };

typedef struct {
    const char *name;
    const char *direct; /* MSCCLPP_PLAN_DIRECT */
    size_t bytes;
    int inplace;
    int buffers;        /* B_* */
    unsigned max_ops;   /* bound per call (rounded up) on every HAL operation */
    unsigned max_looks; /* on the allocation lookups (mem_info, mem_range) */
} scenario_t;

static int body(int rank, int nranks, const mscclpp_unique_id_t *mid, void *arg)
{
    const scenario_t *sc = arg;
    setenv("MSCCLPP_PLAN_DIRECT", sc->direct, 1);
    hal_count_enable();
    ncclUniqueId id;
    memcpy(&id, mid, sizeof id);
    ncclComm_t comm = NULL;
    if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess)
        return MP_FAIL(rank, "ncclCommInitRank: %s", ncclGetLastError(NULL));
    size_t bytes = sc->bytes < 4096 ? 4096 : sc->bytes, count = sc->bytes / sizeof(float);
    float *a = NULL, *b = NULL;
    if (sc->buffers == B_NCCLMEM) {
        if (ncclMemAlloc((void **)&a, bytes) != ncclSuccess ||
            ncclMemAlloc((void **)&b, bytes) != ncclSuccess)
            return MP_FAIL(rank, "ncclMemAlloc: %s", ncclGetLastError(NULL));
    } else {
        a = mp_app_map(bytes, NULL);
        b = mp_app_map(bytes, NULL);
        if (!a || !b) return MP_FAIL(rank, "memfd buffers: out of memory");
    }
    float *out = sc->inplace ? a : b;
    mscclpp_stream_t s = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&s));
    cudaStream_t cs = (cudaStream_t)(void *)s;
    if (hal_count_slots() > MAX_SLOTS) return MP_FAIL(rank, "more than %d HAL slots", MAX_SLOTS);
    uint64_t before[MAX_SLOTS], after[MAX_SLOTS];
    for (int i = 0; i < WARMUP + CALLS; i++) {
        if (i == WARMUP) {
            MP_CHECK(rank, mscclpp_stream_synchronize(s));
            hal_count_read(before);
        }
        for (size_t k = 0; k < count && (sc->inplace || i == 0); k++) a[k] = (float)(rank + 1);
        if (ncclAllReduce(a, out, count, ncclFloat32, ncclSum, comm, cs) != ncclSuccess)
            return MP_FAIL(rank, "%s: ncclAllReduce: %s", sc->name, ncclGetLastError(comm));
        if (sc->inplace) MP_CHECK(rank, mscclpp_stream_synchronize(s));
    }
    hal_count_read(after);
    MP_CHECK(rank, mscclpp_stream_synchronize(s));
    for (size_t k = 0; k < count; k++)
        if (out[k] != 3.0f)
            return MP_FAIL(rank, "%s: out[%zu] = %g, want 3", sc->name, k, (double)out[k]);
    uint64_t sum = 0, looks = 0;
    char line[1024];
    int len = snprintf(line, sizeof line, "# rank %d %s:", rank, sc->name);
    for (int i = 0; i < hal_count_slots(); i++) {
        uint64_t d = after[i] - before[i];
        if (!d) continue;
        const char *name = hal_count_slot_name(i);
        sum += d;
        if (!strcmp(name, "mem_info") || !strcmp(name, "mem_range")) looks += d;
        if (len < (int)sizeof line)
            len += snprintf(line + len, sizeof line - (size_t)len, " %s=%.2f", name,
                            (double)d / CALLS);
    }
    if (getenv("TEST_PERCALL_PRINT"))
        printf("%s (total %.2f per call)\n", line, (double)sum / CALLS);
    fflush(stdout);
    int rc = 0;
    unsigned total = (unsigned)((sum + CALLS - 1) / CALLS);
    unsigned lookups = (unsigned)((looks + CALLS - 1) / CALLS);
    if (total > sc->max_ops)
        rc = MP_FAIL(rank, "%s: %u HAL operations per steady-state call, at most %u expected",
                     sc->name, total, sc->max_ops);
    if (lookups > sc->max_looks)
        rc = MP_FAIL(rank,
                     "%s: %u allocation lookups (mem_info, mem_range) per steady-state call, at "
                     "most %u expected",
                     sc->name, lookups, sc->max_looks);
    /* ncclMemAlloc memory freed and allocated again (often at the same address): the call on
     * the new buffer must not run on what was kept of the old one (the zero-copy base the
     * NCCL layer keeps per ncclMemAlloc entry goes with the entry) */
    if (sc->buffers == B_NCCLMEM && !sc->inplace) {
        ncclMemFree(b);
        b = NULL;
        if (ncclMemAlloc((void **)&b, bytes) != ncclSuccess)
            return MP_FAIL(rank, "ncclMemAlloc again: %s", ncclGetLastError(NULL));
        for (size_t k = 0; k < count; k++) b[k] = -1.0f;
        if (ncclAllReduce(a, b, count, ncclFloat32, ncclSum, comm, cs) != ncclSuccess)
            return MP_FAIL(rank, "%s: ncclAllReduce on a new buffer: %s", sc->name,
                           ncclGetLastError(comm));
        MP_CHECK(rank, mscclpp_stream_synchronize(s));
        for (size_t k = 0; k < count; k++)
            if (b[k] != 3.0f)
                return MP_FAIL(rank, "%s: new buffer: out[%zu] = %g, want 3", sc->name, k,
                               (double)b[k]);
    }
    if (ncclCommDestroy(comm) != ncclSuccess)
        rc = MP_FAIL(rank, "ncclCommDestroy: %s", ncclGetLastError(NULL));
    MP_CHECK(rank, mscclpp_stream_destroy(s));
    if (sc->buffers == B_NCCLMEM) {
        ncclMemFree(a);
        ncclMemFree(b);
    } else {
        munmap(a, bytes);
        munmap(b, bytes);
    }
    return rc;
}

/*
 * The NCCL layer asks whether the stream is captured only for calls that change streams or
 * stage (shim_stream_captured): a captured call that stages must still keep the staging
 * buffers its graph reads at a replay. Rank buffers from malloc (staged), a warm-up call sizes
 * the staging, a captured small call records a graph on it, a larger call then grows the
 * staging (the old buffers must stay), and the graph replayed must still sum the input. Odd
 * counts: calls whose blocks are not whole words are staged (padded) on every backend.
 */
#define CAP_SMALL 15             /* an odd count: not whole words per rank, so staged (padded) */
#define CAP_BIG (600 * 1024 + 1) /* floats: 2.4 MB, past the first 1 MiB of staging */

static int capture_body(int rank, int nranks, const mscclpp_unique_id_t *mid, void *arg)
{
    (void)arg;
    setenv("MSCCLPP_PLAN_DIRECT", "off", 1);
    ncclUniqueId id;
    memcpy(&id, mid, sizeof id);
    ncclComm_t comm = NULL;
    if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess)
        return MP_FAIL(rank, "ncclCommInitRank: %s", ncclGetLastError(NULL));
    float *a = calloc(CAP_BIG, sizeof(float)), *b = calloc(CAP_BIG, sizeof(float));
    if (!a || !b) return MP_FAIL(rank, "out of memory");
    mscclpp_stream_t s = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&s));
    cudaStream_t cs = (cudaStream_t)(void *)s;
    for (int k = 0; k < CAP_SMALL; k++) a[k] = (float)(rank + 1);
    if (ncclAllReduce(a, b, CAP_SMALL, ncclFloat32, ncclSum, comm, cs) != ncclSuccess)
        return MP_FAIL(rank, "warm-up: %s", ncclGetLastError(comm));
    MP_CHECK(rank, mscclpp_stream_synchronize(s));
    mscclpp_graph_t g = NULL;
    MP_CHECK(rank, mscclpp_stream_begin_capture(s));
    ncclResult_t res = ncclAllReduce(a, b, CAP_SMALL, ncclFloat32, ncclSum, comm, cs);
    MP_CHECK(rank, mscclpp_stream_end_capture(s, &g));
    if (res != ncclSuccess) return MP_FAIL(rank, "captured call: %s", ncclGetLastError(comm));
    /* a larger call grows the staging while the graph holds the old buffers */
    for (int k = 0; k < CAP_BIG; k++) a[k] = (float)(rank + 1);
    if (ncclAllReduce(a, b, CAP_BIG, ncclFloat32, ncclSum, comm, cs) != ncclSuccess)
        return MP_FAIL(rank, "larger call: %s", ncclGetLastError(comm));
    MP_CHECK(rank, mscclpp_stream_synchronize(s));
    for (int k = 0; k < CAP_SMALL; k++) {
        a[k] = (float)(10 * (rank + 1));
        b[k] = -1.0f;
    }
    MP_CHECK(rank, mscclpp_graph_launch(g, s));
    MP_CHECK(rank, mscclpp_stream_synchronize(s));
    int rc = 0;
    for (int k = 0; k < CAP_SMALL && !rc; k++)
        if (b[k] != 30.0f)
            rc = MP_FAIL(rank, "graph replay after the staging grew: out[%d] = %g, want 30", k,
                         (double)b[k]);
    MP_CHECK(rank, mscclpp_graph_destroy(g));
    if (ncclCommDestroy(comm) != ncclSuccess)
        rc = MP_FAIL(rank, "ncclCommDestroy: %s", ncclGetLastError(NULL));
    MP_CHECK(rank, mscclpp_stream_destroy(s));
    free(a);
    free(b);
    return rc;
}

START_TEST(t_capture_staged) { ck_assert_int_eq(mp_run(2, capture_body, NULL, 120, NULL), 0); }
END_TEST

static const scenario_t scenarios[] = {
    {"ncclMemAlloc 8 B out of place, direct off", "off", 8, 0, B_NCCLMEM, 4, 2},
    {"ncclMemAlloc 8 B in place, direct off", "off", 8, 1, B_NCCLMEM, 4, 1},
    {"ncclMemAlloc 2 MiB out of place, direct off", "off", 2 << 20, 0, B_NCCLMEM, 4, 2},
    {"app memory 8 B out of place, direct off", "off", 8, 0, B_APP, 4, 2},
    {"app memory 8 B in place, direct off", "off", 8, 1, B_APP, 4, 1},
    {"app memory 2 MiB out of place, direct off", "off", 2 << 20, 0, B_APP, 4, 2},
    {"app memory 2 MiB in place, direct off", "off", 2 << 20, 1, B_APP, 4, 1},
    {"app memory 8 B out of place, direct auto", "auto", 8, 0, B_APP, 4, 2},
    /* a direct plan (from 1 MiB + 1 on the host backend): the zero-copy check's lookups are
     * the call's (mscclpp_executor_direct hands them over); 4 lookups before that */
    {"app memory 2 MiB out of place, direct auto", "auto", 2 << 20, 0, B_APP, 4, 2},
    {"app memory 2 MiB in place, direct auto", "auto", 2 << 20, 1, B_APP, 4, 1},
    {"app memory 8 B out of place, direct on", "on", 8, 0, B_APP, 4, 2},
    {"app memory 8 B in place, direct on", "on", 8, 1, B_APP, 4, 1},
    {"app memory 2 MiB out of place, direct on", "on", 2 << 20, 0, B_APP, 4, 2},
    {"app memory 2 MiB in place, direct on", "on", 2 << 20, 1, B_APP, 4, 1},
    {"ncclMemAlloc 8 B out of place, direct on", "on", 8, 0, B_NCCLMEM, 4, 2},
    {"ncclMemAlloc 2 MiB out of place, direct on", "on", 2 << 20, 0, B_NCCLMEM, 4, 2},
};
#define NSCENARIOS (int)(sizeof scenarios / sizeof scenarios[0])

START_TEST(t_percall) { ck_assert_int_eq(mp_run(2, body, (void *)&scenarios[_i], 120, NULL), 0); }
END_TEST

int main(void)
{
    setenv("MSCCLPP_HAL", "host", 1);
    Suite *s = suite_create("nccl_percall");
    TCase *tc = tcase_create("allreduce");
    tcase_set_timeout(tc, 150);
    tcase_add_loop_test(tc, t_percall, 0, NSCENARIOS);
    tcase_add_test(tc, t_capture_staged);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
