/*
 * Graph capture through the C API on whatever backend is selected (scripts/gpu-check.sh runs it
 * with MSCCLPP_HAL=cuda; make check runs it on the host backend): each of N forked ranks
 * captures allreduces (out of place at a packet size and a Simple size, in place), an
 * allgather and a plan run through mscclpp_execute, replays the graph REPLAYS times with new
 * input each time (written with mscclpp_memcpy, so device memory works), checks every element,
 * and calls the same collectives directly on other shapes between replays.
 *
 *   graph_replay [NRANKS [REPLAYS]]     prints "graph_replay: N ranks, R replays: ok (T us per
 *                                       replay)" and exits 0, or says what was wrong and exits 1
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"

#define SMALL 4096    /* floats: packet plans */
#define LARGE 1048576 /* floats: 4 MiB, Simple plans */
#define GATHER 1031   /* floats per rank */

static int replays = 100;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static float val(int rank, int call, int rep, size_t i)
{
    return (float)((rank + 1) * 1000 + call * 100 + rep * 3 + (int)(i % 89));
}

typedef struct {
    float *in, *out, *inplace, *big_in, *big_out, *gin, *gout, *pin, *pout;
    float *host; /* LARGE * nranks floats of host memory */
} bufs_t;

static mscclpp_result_t put(float *dev, const float *host, size_t n)
{
    return mscclpp_memcpy(dev, host, n * sizeof(float));
}

static mscclpp_result_t fill(bufs_t *b, int rank, int rep)
{
    mscclpp_result_t r;
    float *h = b->host;
    for (size_t i = 0; i < SMALL; i++) h[i] = val(rank, 0, rep, i);
    if ((r = put(b->in, h, SMALL))) return r;
    for (size_t i = 0; i < SMALL; i++) h[i] = val(rank, 1, rep, i);
    if ((r = put(b->inplace, h, SMALL))) return r;
    for (size_t i = 0; i < LARGE; i++) h[i] = val(rank, 2, rep, i);
    if ((r = put(b->big_in, h, LARGE))) return r;
    for (size_t i = 0; i < GATHER; i++) h[i] = val(rank, 3, rep, i);
    if ((r = put(b->gin, h, GATHER))) return r;
    for (size_t i = 0; i < SMALL; i++) h[i] = val(rank, 4, rep, i);
    if ((r = put(b->pin, h, SMALL))) return r;
    /* stale outputs show a call that did not run */
    if ((r = mscclpp_memset(b->out, 0xff, SMALL * sizeof(float)))) return r;
    if ((r = mscclpp_memset(b->big_out, 0xff, LARGE * sizeof(float)))) return r;
    return mscclpp_memset(b->pout, 0xff, SMALL * sizeof(float));
}

static int compare(int rank, const float *dev, size_t n, float *host, int rep, const char *what,
                   float (*want)(int, int, int, size_t, int), int nranks, int arg)
{
    MP_CHECK(rank, mscclpp_memcpy(host, dev, n * sizeof(float)));
    for (size_t i = 0; i < n; i++)
        if (host[i] != want(nranks, arg, rep, i, rank))
            return MP_FAIL(rank, "replay %d: %s [%zu] = %g, want %g", rep, what, i, host[i],
                           want(nranks, arg, rep, i, rank));
    return 0;
}

static float want_sum(int n, int call, int rep, size_t i, int rank)
{
    (void)rank;
    float s = 0;
    for (int r = 0; r < n; r++) s += val(r, call, rep, i);
    return s;
}

static float want_max(int n, int call, int rep, size_t i, int rank)
{
    (void)rank;
    return val(n - 1, call, rep, i); /* val grows with the rank */
}

static float want_gather(int n, int call, int rep, size_t i, int rank)
{
    (void)rank;
    (void)n;
    return val((int)(i / GATHER), call, rep, i % GATHER);
}

static int check(int rank, int n, bufs_t *b, int rep)
{
    if (compare(rank, b->out, SMALL, b->host, rep, "allreduce", want_sum, n, 0)) return 1;
    if (compare(rank, b->inplace, SMALL, b->host, rep, "in-place allreduce", want_sum, n, 1))
        return 1;
    if (compare(rank, b->big_out, LARGE, b->host, rep, "4 MiB allreduce", want_sum, n, 2)) return 1;
    if (compare(rank, b->gout, (size_t)n * GATHER, b->host, rep, "allgather", want_gather, n, 3))
        return 1;
    return compare(rank, b->pout, SMALL, b->host, rep, "execute (max)", want_max, n, 4);
}

static mscclpp_result_t calls(mscclpp_executor_t *ex, const mscclpp_plan_t *plan, bufs_t *b,
                              mscclpp_stream_t s)
{
    mscclpp_result_t r;
    if ((r = mscclpp_allreduce(ex, b->in, b->out, SMALL, MSCCLPP_FLOAT32, MSCCLPP_SUM, s)))
        return r;
    if ((r = mscclpp_allreduce(ex, b->inplace, b->inplace, SMALL, MSCCLPP_FLOAT32, MSCCLPP_SUM, s)))
        return r;
    if ((r = mscclpp_allreduce(ex, b->big_in, b->big_out, LARGE, MSCCLPP_FLOAT32, MSCCLPP_SUM, s)))
        return r;
    if ((r = mscclpp_allgather(ex, b->gin, b->gout, GATHER, MSCCLPP_FLOAT32, s))) return r;
    return mscclpp_execute(ex, plan, b->pin, b->pout, SMALL * 4, SMALL * 4, MSCCLPP_FLOAT32,
                           MSCCLPP_MAX, s);
}

/* A direct allreduce of a shape the graph does not hold, checked. */
static int direct(int rank, int n, mscclpp_executor_t *ex, float *x, float *h, int k,
                  mscclpp_stream_t s)
{
    size_t count = 100 + (size_t)(k % 4) * 3000;
    for (size_t i = 0; i < count; i++) h[i] = (float)(rank + k + (int)(i % 11));
    MP_CHECK(rank, put(x, h, count));
    MP_CHECK(rank, mscclpp_allreduce(ex, x, x, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, s));
    MP_CHECK(rank, mscclpp_stream_synchronize(s));
    MP_CHECK(rank, mscclpp_memcpy(h, x, count * sizeof(float)));
    for (size_t i = 0; i < count; i++) {
        float want = (float)(n * (n - 1) / 2 + n * (k + (int)(i % 11)));
        if (h[i] != want)
            return MP_FAIL(rank, "direct call %d [%zu] = %g, want %g", k, i, h[i], want);
    }
    return 0;
}

static int body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    const mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_executor_select_plan(ex, "allreduce", 0, SMALL * 4, NULL, &plan));
    bufs_t b;
    memset(&b, 0, sizeof b);
    float **all[] = {&b.in, &b.out, &b.inplace, &b.pin, &b.pout};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++)
        MP_CHECK(rank, mscclpp_malloc(SMALL * 4, (void **)all[k]));
    MP_CHECK(rank, mscclpp_malloc(LARGE * 4, (void **)&b.big_in));
    MP_CHECK(rank, mscclpp_malloc(LARGE * 4, (void **)&b.big_out));
    MP_CHECK(rank, mscclpp_malloc(GATHER * 4, (void **)&b.gin));
    MP_CHECK(rank, mscclpp_malloc((size_t)n * GATHER * 4, (void **)&b.gout));
    float *x = NULL;
    MP_CHECK(rank, mscclpp_malloc(16384 * 4, (void **)&x));
    b.host = malloc((size_t)(LARGE > n * GATHER ? LARGE : n * GATHER) * sizeof(float));
    if (!b.host) return MP_FAIL(rank, "out of host memory");
    mscclpp_stream_t s = NULL, t = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&s));
    MP_CHECK(rank, mscclpp_stream_create(&t));

    MP_CHECK(rank, mscclpp_stream_begin_capture(s));
    MP_CHECK(rank, calls(ex, plan, &b, s));
    mscclpp_graph_t g = NULL;
    MP_CHECK(rank, mscclpp_stream_end_capture(s, &g));
    double total = 0;
    for (int rep = 0; rep < replays; rep++) {
        MP_CHECK(rank, fill(&b, rank, rep));
        mscclpp_stream_t on = rep % 2 ? t : s;
        double t0 = now_us();
        MP_CHECK(rank, mscclpp_graph_launch(g, on));
        MP_CHECK(rank, mscclpp_stream_synchronize(on));
        total += now_us() - t0;
        if (check(rank, n, &b, rep)) return 1;
        if (rep % 4 == 3 && direct(rank, n, ex, x, b.host, rep, rep % 8 == 3 ? s : t)) return 1;
    }
    /* the same calls directly, after all the replays */
    MP_CHECK(rank, fill(&b, rank, replays));
    MP_CHECK(rank, calls(ex, plan, &b, s));
    MP_CHECK(rank, mscclpp_stream_synchronize(s));
    if (check(rank, n, &b, replays)) return 1;
    if (rank == 0)
        printf("graph_replay: %d ranks, %d replays of 5 calls on %s: ok (%.1f us per replay "
               "with its sync)\n",
               n, replays, mscclpp_backend_name(), total / replays);
    MP_CHECK(rank, mscclpp_graph_destroy(g));
    MP_CHECK(rank, mscclpp_stream_destroy(s));
    MP_CHECK(rank, mscclpp_stream_destroy(t));
    MP_CHECK(rank, mscclpp_executor_destroy(ex));
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) MP_CHECK(rank, mscclpp_free(*all[k]));
    MP_CHECK(rank, mscclpp_free(b.big_in));
    MP_CHECK(rank, mscclpp_free(b.big_out));
    MP_CHECK(rank, mscclpp_free(b.gin));
    MP_CHECK(rank, mscclpp_free(b.gout));
    MP_CHECK(rank, mscclpp_free(x));
    free(b.host);
    MP_CHECK(rank, mscclpp_comm_destroy(comm));
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2;
    if (argc > 2) replays = atoi(argv[2]);
    if (n < 1 || n > 64 || replays < 1) {
        fprintf(stderr, "usage: graph_replay [NRANKS [REPLAYS]]\n");
        return 2;
    }
    int failed = mp_run(n, body, NULL, 600, NULL);
    if (failed) printf("graph_replay: %d ranks: FAILED on %d rank(s)\n", n, failed);
    return failed ? 1 : 0;
}
