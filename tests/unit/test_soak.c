/*
 * Soak (issue 8): many small collectives on forked ranks, with and without a stream; after a
 * warm-up, resident memory and open file descriptors must stay flat, and every result right.
 * The count is bounded for CI (SOAK_CALLS, or MSCCLPP_SOAK_CALLS to run the 1M).
 *
 * Many buffers (issue 22 item 6) under `ulimit -n 1024` (each rank lowers its own limit):
 * 48 buffer pairs alive at once, each used in turn, then 600 pairs each allocated, used once
 * and freed; every result is checked, no call may fail, and the descriptors the executor holds
 * stay bounded (its context cache drops the least recently used, MSCCLPP_EXEC_CONTEXTS). Before
 * the bound every cached pair kept about 18 descriptors and such a program failed with
 * "memfd_create: Too many open files".
 */
#include <check.h>
#include <dirent.h>
#include <sys/resource.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"

#define SOAK_CALLS 100000L
#define WARMUP_CALLS 5000L
#define COUNT 16 /* floats per allreduce */
#define STREAM_BATCH 64 /* stream launches between two syncs */
/* allocator noise allowed after warm-up; a leak of even 16 bytes a call would be 1.6 MB */
#define RSS_SLACK_KB 512

static long soak_calls(void)
{
    const char *e = getenv("MSCCLPP_SOAK_CALLS");
    long n = e ? atol(e) : SOAK_CALLS;
    return n > 0 ? n : SOAK_CALLS;
}

static long rss_kb(void)
{
    long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* the directory's own */
}

/* `calls` allreduces: even rounds synchronous, odd rounds batches on the stream. */
static int run_calls(int rank, int n, mscclpp_executor_t *ex, mscclpp_stream_t s, float *a,
                     float *b, long calls, long *done)
{
    while (calls > 0) {
        long k = calls < STREAM_BATCH ? calls : STREAM_BATCH;
        bool on_stream = (*done / STREAM_BATCH) % 2 == 1;
        for (long i = 0; i < k; i++) {
            /* inputs change per call, so a call that did nothing shows */
            float v = (float)((*done + i) % 1000);
            a[0] = v + (float)rank;
            MP_CHECK(rank, mscclpp_allreduce(ex, a, b, COUNT, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                                             on_stream ? s : NULL));
            if (!on_stream) {
                float want = v * (float)n + (float)(n * (n - 1) / 2);
                if (b[0] != want || b[COUNT - 1] != (float)n)
                    return MP_FAIL(rank, "call %ld: %g %g, want %g %d", *done + i, b[0],
                                   b[COUNT - 1], want, n);
            }
        }
        if (on_stream) {
            MP_CHECK(rank, mscclpp_stream_synchronize(s));
            float v = (float)((*done + k - 1) % 1000);
            float want = v * (float)n + (float)(n * (n - 1) / 2);
            if (b[0] != want)
                return MP_FAIL(rank, "stream batch at %ld: %g want %g", *done, b[0], want);
        }
        *done += k;
        calls -= k;
    }
    return 0;
}

static int soak_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    float *a = NULL, *b = NULL;
    MP_CHECK(rank, mscclpp_malloc(4096, (void **)&a));
    MP_CHECK(rank, mscclpp_malloc(4096, (void **)&b));
    for (int i = 0; i < COUNT; i++) a[i] = 1;
    mscclpp_stream_t s = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&s));
    long done = 0;
    if (run_calls(rank, n, ex, s, a, b, WARMUP_CALLS, &done)) return 1;
    long rss0 = rss_kb();
    int fd0 = open_fds();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long calls = soak_calls();
    if (run_calls(rank, n, ex, s, a, b, calls, &done)) return 1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long rss1 = rss_kb();
    int fd1 = open_fds();
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("# soak rank %d: %ld calls in %.1f s (%.1f us/call): RSS %ld -> %ld KiB, fds %d -> %d\n",
           rank, calls, secs, secs * 1e6 / (double)calls, rss0, rss1, fd0, fd1);
    fflush(stdout);
    if (rss0 < 0 || fd0 < 0) return MP_FAIL(rank, "cannot read /proc/self");
    if (rss1 - rss0 > RSS_SLACK_KB)
        return MP_FAIL(rank, "RSS grew by %ld KiB over %ld calls", rss1 - rss0, calls);
    if (fd1 != fd0) return MP_FAIL(rank, "open fds went from %d to %d", fd0, fd1);
    MP_CHECK(rank, mscclpp_stream_destroy(s));
    MP_CHECK(rank, mscclpp_executor_destroy(ex));
    mscclpp_free(a);
    mscclpp_free(b);
    MP_CHECK(rank, mscclpp_comm_destroy(comm));
    return 0;
}

#define LIVE_PAIRS 48
#define CHURN_PAIRS 600
#define FD_LIMIT 1024

/* One allreduce of `count` floats on (a, b), checked. */
static int one_call(int rank, int n, mscclpp_executor_t *ex, float *a, float *b, size_t count,
                    int tag)
{
    for (size_t i = 0; i < count; i++) a[i] = (float)(rank + 1) * (float)((i + (size_t)tag) % 13);
    MP_CHECK(rank, mscclpp_allreduce(ex, a, b, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
    float ranks_sum = (float)(n * (n + 1) / 2);
    for (size_t i = 0; i < count; i++)
        if (b[i] != ranks_sum * (float)((i + (size_t)tag) % 13))
            return MP_FAIL(rank, "call %d, %zu floats: b[%zu] = %g, want %g", tag, count, i,
                           (double)b[i], (double)(ranks_sum * (float)((i + (size_t)tag) % 13)));
    return 0;
}

static int buffers_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return MP_FAIL(rank, "getrlimit");
    if (rl.rlim_cur > FD_LIMIT) rl.rlim_cur = FD_LIMIT;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return MP_FAIL(rank, "setrlimit to %d", FD_LIMIT);
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    float *a[LIVE_PAIRS], *b[LIVE_PAIRS];
    for (int p = 0; p < LIVE_PAIRS; p++) {
        MP_CHECK(rank, mscclpp_malloc(4096, (void **)&a[p]));
        MP_CHECK(rank, mscclpp_malloc(4096, (void **)&b[p]));
    }
    int fd_start = open_fds(), tag = 0;
    for (int round = 0; round < 3; round++)
        for (int p = 0; p < LIVE_PAIRS; p++)
            if (one_call(rank, n, ex, a[p], b[p], 256, tag++)) return 1;
    int fd_live = open_fds();
    int fd_peak = fd_live;
    for (int i = 0; i < CHURN_PAIRS; i++) {
        size_t bytes = 4096 * (size_t)(1 + i % 5); /* sizes vary: new addresses */
        float *x = NULL, *y = NULL;
        MP_CHECK(rank, mscclpp_malloc(bytes, (void **)&x));
        MP_CHECK(rank, mscclpp_malloc(bytes, (void **)&y));
        if (one_call(rank, n, ex, x, y, bytes / sizeof(float), tag++)) return 1;
        MP_CHECK(rank, mscclpp_free(x));
        MP_CHECK(rank, mscclpp_free(y));
        int f = open_fds();
        if (f > fd_peak) fd_peak = f;
    }
    /* the live pairs still work (their contexts were dropped and come back) */
    for (int p = 0; p < LIVE_PAIRS; p++)
        if (one_call(rank, n, ex, a[p], b[p], 256, tag++)) return 1;
    int fd_end = open_fds();
    printf("# buffers rank %d: %d calls under RLIMIT_NOFILE %d: fds %d with %d pairs allocated, "
           "%d after their contexts, peak %d during %d allocate-use-free pairs, %d at the end\n",
           rank, tag, FD_LIMIT, fd_start, LIVE_PAIRS, fd_live, fd_peak, CHURN_PAIRS, fd_end);
    fflush(stdout);
    for (int p = 0; p < LIVE_PAIRS; p++) {
        mscclpp_free(a[p]);
        mscclpp_free(b[p]);
    }
    MP_CHECK(rank, mscclpp_executor_destroy(ex));
    MP_CHECK(rank, mscclpp_comm_destroy(comm));
    /* what the executor holds is bounded: well under the limit, whatever the churn */
    if (fd_peak > FD_LIMIT / 2)
        return MP_FAIL(rank, "%d descriptors open at the peak (limit %d)", fd_peak, FD_LIMIT);
    return 0;
}

START_TEST(t_soak_buffers) { ck_assert_int_eq(mp_run(2, buffers_body, NULL, 280, NULL), 0); }
END_TEST

START_TEST(t_soak)
{
    ck_assert_int_eq(mp_run(2, soak_body, NULL, 280, NULL), 0);
}
END_TEST

int main(void)
{
    const char *top = getenv("MSCCLPP_TOP_SRCDIR");
    char plan_dir[512];
    snprintf(plan_dir, sizeof plan_dir, "%s/plans", top ? top : ".");
    setenv("MSCCLPP_PLAN_DIR", plan_dir, 1);
    setenv("MSCCLPP_HAL", "host", 1);
    Suite *s = suite_create("soak");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, t_soak);
    suite_add_tcase(s, tc);
    TCase *tb = tcase_create("buffers");
    tcase_set_timeout(tb, 300);
    tcase_add_test(tb, t_soak_buffers);
    suite_add_tcase(s, tb);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
