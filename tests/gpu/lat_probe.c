/*
 * lat_probe: where does the time of a small collective go? (issue 11 item 5, issue 19 item 5;
 * a measurement tool, not a test). For N forked ranks it times, per allreduce of BYTES
 * (default 8):
 *   host     the library's host work per call plus the backend's launch call, with nothing
 *            queued: batches of up to 64 calls, each after a stream sync, only the issuing timed
 *            (the mean, the best batch, which a loaded machine disturbs least, and the calling
 *            thread's CPU time per call, which others' load does not inflate);
 *   enqueue  host time to issue ITERS back-to-back calls on a stream (no sync in between); once
 *            the stream's queue is full (1024 on the host backend) it follows the execution;
 *   total    the same ITERS calls plus one stream sync, as mscclpp-bench times them: when it is
 *            much above `enqueue`, the device (kernel run time, cross-rank waits) is the limit;
 *   sync     one call + a stream sync, ITERS times: the round-trip latency of one call.
 * usage: lat_probe [NRANKS [BYTES [ITERS [malloc]]]]   (MSCCLPP_HAL picks the backend; host
 * works too). `malloc`: the buffers from malloc, not mscclpp_malloc (host backend: memory the
 * peers cannot map, so plans that reach the peers' buffers run staged). MSCCLPP_PLAN_DIR naming
 * plans/direct times the contexts of those plans (from 256 KiB + 1 for the allreduce).
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"

static size_t bytes = 8;
static int iters = 1000;
static bool use_malloc;

static double clock_us(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double now_us(void) { return clock_us(CLOCK_MONOTONIC); }

static int body(int rank, int nranks, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, nranks, &comm));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    mscclpp_bootstrap_t *boot = NULL;
    MP_CHECK(rank, mscclpp_comm_bootstrap(comm, &boot));
    void *a = NULL, *b = NULL;
    const size_t alloc = bytes < 4096 ? 4096 : bytes;
    if (use_malloc) {
        a = calloc(1, alloc);
        b = calloc(1, alloc);
        if (!a || !b) return MP_FAIL(rank, "out of memory");
    } else {
        MP_CHECK(rank, mscclpp_malloc(alloc, &a));
        MP_CHECK(rank, mscclpp_malloc(alloc, &b));
    }
    mscclpp_stream_t s = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&s));
    size_t count = bytes / 4 ? bytes / 4 : 1;
    for (int i = 0; i < 50; i++) /* warm up: contexts, lowering, module load */
        MP_CHECK(rank, mscclpp_allreduce(ex, a, b, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, s));
    MP_CHECK(rank, mscclpp_stream_synchronize(s));

    /* host: batches issued onto an empty stream */
    enum { BATCH = 64 };
    double host = 0, best = 1e30, cpu = 0;
    for (int done = 0; done < iters;) {
        int k = iters - done < BATCH ? iters - done : BATCH;
        MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
        double c0 = clock_us(CLOCK_THREAD_CPUTIME_ID), b0 = now_us();
        for (int i = 0; i < k; i++)
            MP_CHECK(rank, mscclpp_allreduce(ex, a, b, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, s));
        double dt = now_us() - b0;
        cpu += clock_us(CLOCK_THREAD_CPUTIME_ID) - c0;
        MP_CHECK(rank, mscclpp_stream_synchronize(s));
        host += dt;
        if (dt / k < best) best = dt / k;
        done += k;
    }

    MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
    double t0 = now_us();
    for (int i = 0; i < iters; i++)
        MP_CHECK(rank, mscclpp_allreduce(ex, a, b, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, s));
    double t1 = now_us();
    MP_CHECK(rank, mscclpp_stream_synchronize(s));
    double t2 = now_us();

    MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
    double t3 = now_us();
    for (int i = 0; i < iters; i++) {
        MP_CHECK(rank, mscclpp_allreduce(ex, a, b, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, s));
        MP_CHECK(rank, mscclpp_stream_synchronize(s));
    }
    double t4 = now_us();
    printf("lat_probe rank %d/%d %zu B%s: host %.2f us/call (best batch %.2f, cpu %.2f), enqueue "
           "%.2f us/call, total %.2f us/call, call+sync %.2f us/call (%d calls)\n",
           rank, nranks, bytes, use_malloc ? " (malloc)" : "", host / iters, best, cpu / iters,
           (t1 - t0) / iters, (t2 - t0) / iters, (t4 - t3) / iters, iters);
    fflush(stdout);
    mscclpp_stream_destroy(s);
    mscclpp_executor_destroy(ex); /* its staged copies are done: the stream was synced */
    if (use_malloc) {
        free(a);
        free(b);
    } else {
        mscclpp_free(a);
        mscclpp_free(b);
    }
    mscclpp_comm_destroy(comm);
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2;
    if (argc > 2) bytes = (size_t)strtoull(argv[2], NULL, 0);
    if (argc > 3) iters = atoi(argv[3]);
    if (argc > 4) use_malloc = !strcmp(argv[4], "malloc");
    if (n < 1 || n > 64 || iters < 1 || (argc > 4 && !use_malloc)) {
        fprintf(stderr, "usage: %s [NRANKS [BYTES [ITERS [malloc]]]]\n", argv[0]);
        return 2;
    }
    return mp_run(n, body, NULL, 300, NULL) ? 1 : 0;
}
