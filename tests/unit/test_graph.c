/*
 * Graph capture and replay (docs/graphs.md, issue 18 item 4) on the host backend, whose
 * streams record what is queued while capturing and replay it in order, as CUDA graphs do.
 *
 *   t_hal_*        the host HAL's capture mode itself: copies, sets, launches and event
 *                  records are recorded, not run; a replay runs them in order with the
 *                  buffers' contents of replay time; synchronizing a capturing stream fails
 *                  and invalidates the capture
 *   t_replay_*     collectives captured through the same executor code the GPUs run, replayed
 *                  100 times with new input data each time (every element checked), mixed
 *                  with direct calls of other shapes, buffers and offsets, on 2 and 3 ranks
 *   t_capture_*    what capture must refuse or survive: a sync inside a capture, an executor
 *                  reset between replays, the executor's own error checks
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hal/hal.h"
#include "hal/host/host.h"
#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"

#define REPLAYS 100

/* ---- the host HAL's capture mode ------------------------------------------------------------ */

static const hal_ops_t *host(void)
{
    const hal_ops_t *h = hal_host_ops();
    ck_assert_int_eq(h->init(), MSCCLPP_OK);
    return h;
}

START_TEST(t_hal_capture_records_copies)
{
    const hal_ops_t *h = host();
    hal_stream_t s;
    ck_assert_int_eq(h->stream_create(&s), MSCCLPP_OK);
    bool cap = true;
    ck_assert_int_eq(h->stream_capturing(s, &cap), MSCCLPP_OK);
    ck_assert(!cap);
    int src[64], mid[64], dst[64];
    memset(dst, 0, sizeof dst);
    memset(mid, 0, sizeof mid);
    ck_assert_int_eq(h->stream_begin_capture(s), MSCCLPP_OK);
    ck_assert_int_eq(h->stream_capturing(s, &cap), MSCCLPP_OK);
    ck_assert(cap);
    ck_assert_int_ne(h->stream_begin_capture(s), MSCCLPP_OK); /* once at a time */
    /* src -> mid, mid[0..3] = 0x7f7f7f7f, mid -> dst: order matters */
    ck_assert_int_eq(h->memcpy_async(mid, src, sizeof src, s), MSCCLPP_OK);
    ck_assert_int_eq(h->memset_async(mid, 0x7f, 4 * sizeof(int), s), MSCCLPP_OK);
    ck_assert_int_eq(h->memcpy_async(dst, mid, sizeof mid, s), MSCCLPP_OK);
    hal_event_t ev;
    ck_assert_int_eq(h->event_create(&ev), MSCCLPP_OK);
    ck_assert_int_eq(h->event_record(ev, s), MSCCLPP_OK);
    /* recorded, not run: nothing moved (the worker would have run it at once) */
    usleep(20000);
    ck_assert_int_eq(dst[10], 0);
    ck_assert_int_eq(mid[10], 0);
    hal_graph_t g = NULL;
    ck_assert_int_eq(h->stream_end_capture(s, &g), MSCCLPP_OK);
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(h->stream_capturing(s, &cap), MSCCLPP_OK);
    ck_assert(!cap);
    hal_graph_t none = (hal_graph_t)&none;
    ck_assert_int_eq(h->stream_end_capture(s, &none), MSCCLPP_ERR_INVALID_ARG); /* not now */
    ck_assert_ptr_null(none);
    /* the stream runs work again */
    int one = 1, got = 0;
    ck_assert_int_eq(h->memcpy_async(&got, &one, sizeof one, s), MSCCLPP_OK);
    ck_assert_int_eq(h->stream_sync(s), MSCCLPP_OK);
    ck_assert_int_eq(got, 1);
    hal_graph_t keep = NULL;
    ck_assert_int_eq(h->stream_begin_capture(s), MSCCLPP_OK);
    ck_assert_int_eq(h->memcpy_async(mid, src, sizeof src, s), MSCCLPP_OK);
    ck_assert_int_eq(h->memset_async(mid, 0x7f, 4 * sizeof(int), s), MSCCLPP_OK);
    ck_assert_int_eq(h->memcpy_async(dst, mid, sizeof mid, s), MSCCLPP_OK);
    ck_assert_int_eq(h->event_record(ev, s), MSCCLPP_OK);
    ck_assert_int_eq(h->stream_end_capture(s, &keep), MSCCLPP_OK);
    h->graph_destroy(g);
    /* replays read the sources as they are at replay time */
    for (int r = 0; r < 5; r++) {
        for (int i = 0; i < 64; i++) src[i] = 1000 * r + i;
        ck_assert_int_eq(h->graph_launch(keep, s), MSCCLPP_OK);
        ck_assert_int_eq(h->stream_sync(s), MSCCLPP_OK);
        ck_assert_int_eq(h->event_sync(ev), MSCCLPP_OK);
        for (int i = 0; i < 64; i++) ck_assert_int_eq(dst[i], i < 4 ? 0x7f7f7f7f : 1000 * r + i);
    }
    /* launched twice, then destroyed before they ran: the launches own what they run */
    for (int i = 0; i < 64; i++) src[i] = -i;
    ck_assert_int_eq(h->graph_launch(keep, s), MSCCLPP_OK);
    ck_assert_int_eq(h->graph_launch(keep, s), MSCCLPP_OK);
    ck_assert_int_eq(h->graph_destroy(keep), MSCCLPP_OK);
    ck_assert_int_eq(h->stream_sync(s), MSCCLPP_OK);
    ck_assert_int_eq(dst[63], -63);
    /* the NULL stream replays synchronously in the caller */
    ck_assert_int_eq(h->stream_begin_capture(s), MSCCLPP_OK);
    ck_assert_int_eq(h->memcpy_async(dst, src, sizeof src, s), MSCCLPP_OK);
    ck_assert_int_eq(h->stream_end_capture(s, &g), MSCCLPP_OK);
    src[5] = 555;
    ck_assert_int_eq(h->graph_launch(g, NULL), MSCCLPP_OK);
    ck_assert_int_eq(dst[5], 555);
    ck_assert_int_eq(h->graph_destroy(g), MSCCLPP_OK);
    ck_assert_int_eq(h->event_destroy(ev), MSCCLPP_OK);
    ck_assert_int_eq(h->stream_destroy(s), MSCCLPP_OK);
}
END_TEST

START_TEST(t_hal_capture_sync_invalidates)
{
    const hal_ops_t *h = host();
    hal_stream_t s;
    ck_assert_int_eq(h->stream_create(&s), MSCCLPP_OK);
    int a = 1, b = 0;
    ck_assert_int_eq(h->stream_begin_capture(s), MSCCLPP_OK);
    ck_assert_int_eq(h->memcpy_async(&b, &a, sizeof a, s), MSCCLPP_OK);
    /* as CUDA: not permitted while capturing, and the capture is lost */
    ck_assert_int_eq(h->stream_sync(s), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(mscclpp_last_error(), "capturing"));
    hal_graph_t g = NULL;
    ck_assert_int_eq(h->stream_end_capture(s, &g), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(mscclpp_last_error(), "stream_sync"));
    ck_assert_ptr_null(g);
    ck_assert_int_eq(b, 0);
    /* the stream itself is fine */
    ck_assert_int_eq(h->stream_sync(s), MSCCLPP_OK);
    ck_assert_int_eq(h->memcpy_async(&b, &a, sizeof a, s), MSCCLPP_OK);
    ck_assert_int_eq(h->stream_sync(s), MSCCLPP_OK);
    ck_assert_int_eq(b, 1);
    /* a stream destroyed while capturing drops the recording */
    ck_assert_int_eq(h->stream_begin_capture(s), MSCCLPP_OK);
    ck_assert_int_eq(h->memcpy_async(&b, &a, sizeof a, s), MSCCLPP_OK);
    ck_assert_int_eq(h->stream_destroy(s), MSCCLPP_OK);
    ck_assert_int_ne(h->stream_begin_capture(NULL), MSCCLPP_OK);
}
END_TEST

/* Work queued before the capture began still runs; a graph launched into another capture is
 * recorded there (graphs nest). */
START_TEST(t_hal_capture_nested)
{
    const hal_ops_t *h = host();
    hal_stream_t s, t;
    ck_assert_int_eq(h->stream_create(&s), MSCCLPP_OK);
    ck_assert_int_eq(h->stream_create(&t), MSCCLPP_OK);
    int a[16], b[16], c[16];
    for (int i = 0; i < 16; i++) a[i] = i;
    memset(b, 0, sizeof b);
    memset(c, 0, sizeof c);
    ck_assert_int_eq(h->memcpy_async(c, a, sizeof a, s), MSCCLPP_OK); /* before: runs */
    ck_assert_int_eq(h->stream_begin_capture(s), MSCCLPP_OK);
    ck_assert_int_eq(h->memcpy_async(b, a, sizeof a, s), MSCCLPP_OK);
    hal_graph_t inner = NULL, outer = NULL;
    ck_assert_int_eq(h->stream_end_capture(s, &inner), MSCCLPP_OK);
    ck_assert_int_eq(h->stream_sync(s), MSCCLPP_OK);
    ck_assert_int_eq(c[15], 15);
    ck_assert_int_eq(b[15], 0);
    ck_assert_int_eq(h->stream_begin_capture(t), MSCCLPP_OK);
    ck_assert_int_eq(h->graph_launch(inner, t), MSCCLPP_OK);
    ck_assert_int_eq(h->graph_launch(inner, t), MSCCLPP_OK);
    ck_assert_int_eq(h->stream_end_capture(t, &outer), MSCCLPP_OK);
    ck_assert_int_eq(h->graph_destroy(inner), MSCCLPP_OK);
    usleep(10000);
    ck_assert_int_eq(b[15], 0);
    ck_assert_int_eq(h->graph_launch(outer, s), MSCCLPP_OK);
    ck_assert_int_eq(h->stream_sync(s), MSCCLPP_OK);
    ck_assert_int_eq(b[15], 15);
    ck_assert_int_eq(h->graph_destroy(outer), MSCCLPP_OK);
    ck_assert_int_eq(h->stream_destroy(s), MSCCLPP_OK);
    ck_assert_int_eq(h->stream_destroy(t), MSCCLPP_OK);
}
END_TEST

/* ---- collectives captured and replayed ------------------------------------------------------- */

/* The calls a graph holds: allreduce out of place (packet plan), allreduce in place (the
 * staging copy + an out-of-place plan), a larger allreduce (Simple plan), an allgather, all at
 * offsets inside their allocations. */
#define SMALL 1000   /* floats: 4 KB, packet plans */
#define LARGE 100000 /* floats: 400 KB, Simple plans */
#define GATHER 257   /* floats per rank */

typedef struct {
    float *in, *out, *big_in, *big_out, *inplace, *gin, *gout;
} bufs_t;

static float val(int rank, int call, int replay, size_t i)
{
    /* integers below 2^24: sums over ranks are exact */
    return (float)((rank + 1) * 1000 + call * 100 + replay * 7 + (int)(i % 97));
}

static float sum_val(int n, int call, int replay, size_t i)
{
    float s = 0;
    for (int r = 0; r < n; r++) s += val(r, call, replay, i);
    return s;
}

static void fill(bufs_t *b, int rank, int n, int replay)
{
    for (size_t i = 0; i < SMALL; i++) b->in[i] = val(rank, 0, replay, i);
    for (size_t i = 0; i < SMALL; i++) b->inplace[i] = val(rank, 1, replay, i);
    for (size_t i = 0; i < LARGE; i++) b->big_in[i] = val(rank, 2, replay, i);
    for (size_t i = 0; i < GATHER; i++) b->gin[i] = val(rank, 3, replay, i);
    /* stale outputs: a call that did not run shows */
    memset(b->out, 0xff, SMALL * sizeof(float));
    memset(b->big_out, 0xff, LARGE * sizeof(float));
    memset(b->gout, 0xff, (size_t)n * GATHER * sizeof(float));
}

/* `rounds`: how often the in-place allreduce ran on its input since it was filled (each one
 * multiplies by n what the ranks hold alike) */
static int check_rounds(int rank, int n, const bufs_t *b, int replay, const char *what, int rounds)
{
    for (size_t i = 0; i < SMALL; i++)
        if (b->out[i] != sum_val(n, 0, replay, i))
            return MP_FAIL(rank, "%s %d: small allreduce [%zu] = %g, want %g", what, replay, i,
                           b->out[i], sum_val(n, 0, replay, i));
    float times = 1;
    for (int k = 1; k < rounds; k++) times *= (float)n;
    for (size_t i = 0; i < SMALL; i++)
        if (b->inplace[i] != times * sum_val(n, 1, replay, i))
            return MP_FAIL(rank, "%s %d: in-place allreduce [%zu] = %g, want %g", what, replay, i,
                           b->inplace[i], times * sum_val(n, 1, replay, i));
    for (size_t i = 0; i < LARGE; i++)
        if (b->big_out[i] != sum_val(n, 2, replay, i))
            return MP_FAIL(rank, "%s %d: large allreduce [%zu] = %g, want %g", what, replay, i,
                           b->big_out[i], sum_val(n, 2, replay, i));
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < GATHER; i++)
            if (b->gout[(size_t)r * GATHER + i] != val(r, 3, replay, i))
                return MP_FAIL(rank, "%s %d: allgather block %d [%zu] = %g, want %g", what, replay,
                               r, i, b->gout[(size_t)r * GATHER + i], val(r, 3, replay, i));
    return 0;
}

static int check(int rank, int n, const bufs_t *b, int replay, const char *what)
{
    return check_rounds(rank, n, b, replay, what, 1);
}

static mscclpp_result_t queue_calls(mscclpp_executor_t *ex, bufs_t *b, mscclpp_stream_t s)
{
    mscclpp_result_t r;
    if ((r = mscclpp_allreduce(ex, b->in, b->out, SMALL, MSCCLPP_FLOAT32, MSCCLPP_SUM, s)))
        return r;
    if ((r = mscclpp_allreduce(ex, b->inplace, b->inplace, SMALL, MSCCLPP_FLOAT32, MSCCLPP_SUM, s)))
        return r;
    if ((r = mscclpp_allreduce(ex, b->big_in, b->big_out, LARGE, MSCCLPP_FLOAT32, MSCCLPP_SUM, s)))
        return r;
    return mscclpp_allgather(ex, b->gin, b->gout, GATHER, MSCCLPP_FLOAT32, s);
}

/* A direct call of another shape, on other buffers, checked (mixes eager work with replays). */
static int eager_other(int rank, int n, mscclpp_executor_t *ex, float *x, float *y, int k,
                       mscclpp_stream_t s)
{
    size_t count = 37 + (size_t)(k % 5) * 501; /* shapes the graph never saw */
    for (size_t i = 0; i < count; i++) x[i] = (float)(rank + k + (int)(i % 13));
    MP_CHECK(rank, mscclpp_allreduce(ex, x, y, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, s));
    if (s) MP_CHECK(rank, mscclpp_stream_synchronize(s));
    for (size_t i = 0; i < count; i++) {
        float want = (float)(n * (n - 1) / 2 + n * (k + (int)(i % 13)));
        if (y[i] != want)
            return MP_FAIL(rank, "eager call %d [%zu] = %g, want %g", k, i, y[i], want);
    }
    /* in place and larger than what the graph staged: the staging buffer grows */
    MP_CHECK(rank, mscclpp_allreduce(ex, y, y, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, s));
    if (s) MP_CHECK(rank, mscclpp_stream_synchronize(s));
    for (size_t i = 0; i < count; i++) {
        float want = (float)n * (float)(n * (n - 1) / 2 + n * (k + (int)(i % 13)));
        if (y[i] != want)
            return MP_FAIL(rank, "eager in-place call %d [%zu] = %g, want %g", k, i, y[i], want);
    }
    return 0;
}

typedef struct {
    bool reset_between; /* mscclpp_executor_reset once midway */
    bool move_between;  /* direct calls on the graph's allocations at other offsets */
} replay_opts_t;

static int replay_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    const replay_opts_t *o = arg;
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    /* one allocation for the small buffers, so the graph's buffers sit at offsets in it */
    char *small = NULL, *big = NULL, *other = NULL;
    size_t sb = 8 * SMALL * sizeof(float) + (size_t)(n + 2) * GATHER * sizeof(float) + 4096;
    MP_CHECK(rank, mscclpp_malloc(sb, (void **)&small));
    MP_CHECK(rank, mscclpp_malloc(2 * LARGE * sizeof(float) + 4096, (void **)&big));
    MP_CHECK(rank, mscclpp_malloc(64 * 1024, (void **)&other));
    bufs_t b = {
        .in = (float *)(small + 256),
        .out = (float *)(small + 256) + 2 * SMALL,
        .inplace = (float *)(small + 256) + 4 * SMALL,
        .gin = (float *)(small + 256) + 6 * SMALL,
        .gout = (float *)(small + 256) + 6 * SMALL + GATHER,
        .big_in = (float *)big,
        .big_out = (float *)big + LARGE + 64,
    };
    mscclpp_stream_t s = NULL, t = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&s));
    MP_CHECK(rank, mscclpp_stream_create(&t));
    /* eager first for some shapes, so capture meets both cached and new contexts */
    fill(&b, rank, n, -1);
    MP_CHECK(rank, mscclpp_allreduce(ex, b.in, b.out, SMALL, MSCCLPP_FLOAT32, MSCCLPP_SUM, s));
    MP_CHECK(rank, mscclpp_stream_synchronize(s));

    MP_CHECK(rank, mscclpp_stream_begin_capture(s));
    int capturing = 0;
    MP_CHECK(rank, mscclpp_stream_is_capturing(s, &capturing));
    if (!capturing) return MP_FAIL(rank, "stream not capturing after begin");
    fill(&b, rank, n, 0);
    MP_CHECK(rank, queue_calls(ex, &b, s));
    mscclpp_graph_t g = NULL;
    MP_CHECK(rank, mscclpp_stream_end_capture(s, &g));
    /* capture ran nothing: outputs still stale */
    if (b.out[0] == sum_val(n, 0, 0, 0) || b.big_out[0] == sum_val(n, 2, 0, 0))
        return MP_FAIL(rank, "a captured call ran during the capture");

    for (int rep = 0; rep < REPLAYS; rep++) {
        fill(&b, rank, n, rep);
        /* replays alternate between the captured stream and another one */
        mscclpp_stream_t on = rep % 2 ? t : s;
        MP_CHECK(rank, mscclpp_graph_launch(g, on));
        MP_CHECK(rank, mscclpp_stream_synchronize(on));
        if (check(rank, n, &b, rep, "replay")) return 1;
        if (rep % 3 == 1 && eager_other(rank, n, ex, (float *)other, (float *)other + 4096, rep,
                                        rep % 2 ? NULL : s))
            return 1;
        if (o->move_between && rep % 10 == 5) {
            /* the same shapes on the graph's allocations at other offsets: the executor
             * re-lowers for them, and must keep what the graph launches */
            bufs_t m = b;
            m.in += 16;
            m.out += 16;
            m.inplace += 16;
            m.big_in += 16;
            m.big_out += 16;
            m.gin += 16;
            m.gout += 16;
            fill(&m, rank, n, 1000 + rep);
            MP_CHECK(rank, queue_calls(ex, &m, s));
            MP_CHECK(rank, mscclpp_stream_synchronize(s));
            if (check(rank, n, &m, 1000 + rep, "moved")) return 1;
        }
        if (o->reset_between && rep == REPLAYS / 2) MP_CHECK(rank, mscclpp_executor_reset(ex));
    }
    /* three replays back to back without a sync in between (the in-place allreduce sums its
     * own result again each time), then the direct calls */
    fill(&b, rank, n, 7);
    MP_CHECK(rank, mscclpp_graph_launch(g, s));
    MP_CHECK(rank, mscclpp_graph_launch(g, s));
    MP_CHECK(rank, mscclpp_graph_launch(g, s));
    MP_CHECK(rank, mscclpp_stream_synchronize(s));
    if (check_rounds(rank, n, &b, 7, "back to back", 3)) return 1;
    fill(&b, rank, n, 8);
    MP_CHECK(rank, queue_calls(ex, &b, s));
    MP_CHECK(rank, mscclpp_stream_synchronize(s));
    if (check(rank, n, &b, 8, "direct")) return 1;

    MP_CHECK(rank, mscclpp_graph_destroy(g));
    MP_CHECK(rank, mscclpp_stream_destroy(s));
    MP_CHECK(rank, mscclpp_stream_destroy(t));
    MP_CHECK(rank, mscclpp_executor_destroy(ex));
    MP_CHECK(rank, mscclpp_free(small));
    MP_CHECK(rank, mscclpp_free(big));
    MP_CHECK(rank, mscclpp_free(other));
    MP_CHECK(rank, mscclpp_comm_destroy(comm));
    return 0;
}

START_TEST(t_replay_two_ranks)
{
    replay_opts_t o = {0};
    ck_assert_int_eq(mp_run(2, replay_body, &o, 300, NULL), 0);
}
END_TEST

START_TEST(t_replay_three_ranks_moved)
{
    replay_opts_t o = {.move_between = true};
    ck_assert_int_eq(mp_run(3, replay_body, &o, 300, NULL), 0);
}
END_TEST

START_TEST(t_replay_reset_between)
{
    replay_opts_t o = {.reset_between = true, .move_between = true};
    ck_assert_int_eq(mp_run(2, replay_body, &o, 300, NULL), 0);
}
END_TEST

/* A plan run through mscclpp_execute_ex under capture, and two graphs of one executor
 * replayed in alternation (each one's launches follow the other's). */
static int execute_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    const mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_executor_select_plan(ex, "allreduce", 0, 4096, NULL, &plan));
    float *x = NULL, *y = NULL;
    MP_CHECK(rank, mscclpp_malloc(1 << 16, (void **)&x));
    MP_CHECK(rank, mscclpp_malloc(1 << 16, (void **)&y));
    mscclpp_stream_t s = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&s));
    mscclpp_graph_t g[2] = {NULL, NULL};
    size_t count[2] = {1024, 96};
    float *dst[2] = {y, y + 2048};
    for (int k = 0; k < 2; k++) {
        MP_CHECK(rank, mscclpp_stream_begin_capture(s));
        MP_CHECK(rank,
                 mscclpp_execute_ex(ex, plan, x + 4096 * k, dst[k], count[k] * 4, count[k] * 4,
                                    MSCCLPP_FLOAT32, MSCCLPP_MAX, MSCCLPP_PACKET_LL8, s));
        MP_CHECK(rank, mscclpp_stream_end_capture(s, &g[k]));
    }
    for (int rep = 0; rep < REPLAYS; rep++) {
        int k = (rep * 7 / 3) % 2; /* irregular alternation */
        float *in = x + 4096 * k;
        for (size_t i = 0; i < count[k]; i++) in[i] = (float)((rank * 31 + rep + (int)i) % 50);
        memset(dst[k], 0, count[k] * 4);
        MP_CHECK(rank, mscclpp_graph_launch(g[k], s));
        MP_CHECK(rank, mscclpp_stream_synchronize(s));
        for (size_t i = 0; i < count[k]; i++) {
            float want = 0;
            for (int r = 0; r < n; r++) {
                float v = (float)((r * 31 + rep + (int)i) % 50);
                if (v > want) want = v;
            }
            if (dst[k][i] != want)
                return MP_FAIL(rank, "replay %d of graph %d: [%zu] = %g, want %g", rep, k, i,
                               dst[k][i], want);
        }
    }
    for (int k = 0; k < 2; k++) MP_CHECK(rank, mscclpp_graph_destroy(g[k]));
    MP_CHECK(rank, mscclpp_stream_destroy(s));
    MP_CHECK(rank, mscclpp_executor_destroy(ex));
    MP_CHECK(rank, mscclpp_free(x));
    MP_CHECK(rank, mscclpp_free(y));
    MP_CHECK(rank, mscclpp_comm_destroy(comm));
    return 0;
}

START_TEST(t_replay_execute_two_graphs)
{
    ck_assert_int_eq(mp_run(2, execute_body, NULL, 300, NULL), 0);
}
END_TEST

/*
 * A plan that writes straight into the peer's output (plan-format §5.4): its lowered plan holds
 * the peers' buffer pointers, so a direct call at other offsets in the same allocations lowers
 * again. What the graph launches must stay as it was captured.
 */
static const char direct_plan[] =
    "{\"name\":\"ag2_direct\",\"collective\":\"allgather\",\"protocol\":\"Simple\",\"inplace\":"
    "false,\"reuse_resources\":false,\"use_double_scratch_buffer\":false,\"buffer_alig"
    "nment\":16,\"num_threads_per_block\":1024,\"min_message_size\":0,\"max_message_siz"
    "e\":1073741824,\"gpus\":[{\"id\":0,\"input_chunks\":1,\"output_chunks\":2,\"scratch_ch"
    "unks\":0,\"channels\":[{\"channel_type\":\"memory\",\"connected_to\":[1]}],\"remote_bu"
    "ffers\":[{\"rank\":1,\"type\":\"o\",\"access_channel_types\":[\"memory\"]}],\"semaphores"
    "\":[],\"threadblocks\":[{\"id\":0,\"channels\":[{\"channel_type\":\"memory\",\"channel_i"
    "ds\":[0]}],\"remote_buffer_refs\":[{\"access_channel_type\":\"memory\",\"remote_buff"
    "er_ids\":[0]}],\"ops\":[{\"name\":\"rlxsignal\",\"channel_ids\":[0],\"channel_type\":\"m"
    "emory\"},{\"name\":\"rlxwait\",\"channel_ids\":[0],\"channel_type\":\"memory\"},{\"name\""
    ":\"nop\"},{\"name\":\"copy\",\"src_buff\":[{\"type\":\"i\",\"index\":0,\"size\":1}],\"dst_buf"
    "f\":[{\"type\":\"o\",\"index\":0,\"size\":1}]},{\"name\":\"put\",\"src_buff\":[{\"type\":\"i\","
    "\"index\":0,\"size\":1}],\"dst_buff\":[{\"buffer_id\":0,\"index\":0,\"size\":1}],\"channe"
    "l_type\":\"memory\"},{\"name\":\"nop\"},{\"name\":\"signal\",\"channel_ids\":[0],\"channel"
    "_type\":\"memory\"},{\"name\":\"wait\",\"channel_ids\":[0],\"channel_type\":\"memory\"},{"
    "\"name\":\"nop\"}]}]},{\"id\":1,\"input_chunks\":1,\"output_chunks\":2,\"scratch_chunks"
    "\":0,\"channels\":[{\"channel_type\":\"memory\",\"connected_to\":[0]}],\"remote_buffer"
    "s\":[{\"rank\":0,\"type\":\"o\",\"access_channel_types\":[\"memory\"]}],\"semaphores\":[]"
    ",\"threadblocks\":[{\"id\":0,\"channels\":[{\"channel_type\":\"memory\",\"channel_ids\":"
    "[0]}],\"remote_buffer_refs\":[{\"access_channel_type\":\"memory\",\"remote_buffer_i"
    "ds\":[0]}],\"ops\":[{\"name\":\"rlxsignal\",\"channel_ids\":[0],\"channel_type\":\"memor"
    "y\"},{\"name\":\"rlxwait\",\"channel_ids\":[0],\"channel_type\":\"memory\"},{\"name\":\"no"
    "p\"},{\"name\":\"copy\",\"src_buff\":[{\"type\":\"i\",\"index\":0,\"size\":1}],\"dst_buff\":["
    "{\"type\":\"o\",\"index\":1,\"size\":1}]},{\"name\":\"put\",\"src_buff\":[{\"type\":\"i\",\"ind"
    "ex\":0,\"size\":1}],\"dst_buff\":[{\"buffer_id\":0,\"index\":1,\"size\":1}],\"channel_ty"
    "pe\":\"memory\"},{\"name\":\"nop\"},{\"name\":\"signal\",\"channel_ids\":[0],\"channel_typ"
    "e\":\"memory\"},{\"name\":\"wait\",\"channel_ids\":[0],\"channel_type\":\"memory\"},{\"nam"
    "e\":\"nop\"}]}]}]}";

static int direct_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_plan_load_string(direct_plan, sizeof direct_plan - 1, &plan));
    enum { COUNT = 512 };
    float *x = NULL, *y = NULL;
    MP_CHECK(rank, mscclpp_malloc(1 << 16, (void **)&x));
    MP_CHECK(rank, mscclpp_malloc(1 << 16, (void **)&y));
    mscclpp_stream_t s = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&s));
    mscclpp_graph_t g = NULL;
    MP_CHECK(rank, mscclpp_stream_begin_capture(s));
    MP_CHECK(rank, mscclpp_execute(ex, plan, x, y, COUNT * 4, (size_t)n * COUNT * 4,
                                   MSCCLPP_FLOAT32, MSCCLPP_REDOP_PLAN, s));
    MP_CHECK(rank, mscclpp_stream_end_capture(s, &g));
    for (int rep = 0; rep < REPLAYS; rep++) {
        /* a direct call at another offset first (every third time): the executor lowers the
         * plan again for the peers' new pointers */
        if (rep % 3 == 2) {
            size_t off = 64 * (size_t)(1 + rep % 7);
            float *xi = x + off, *yo = y + 2 * off;
            for (int i = 0; i < COUNT; i++) xi[i] = (float)(-rank - i - rep);
            MP_CHECK(rank, mscclpp_execute(ex, plan, xi, yo, COUNT * 4, (size_t)n * COUNT * 4,
                                           MSCCLPP_FLOAT32, MSCCLPP_REDOP_PLAN, s));
            MP_CHECK(rank, mscclpp_stream_synchronize(s));
            for (int r = 0; r < n; r++)
                for (int i = 0; i < COUNT; i++)
                    if (yo[r * COUNT + i] != (float)(-r - i - rep))
                        return MP_FAIL(rank, "direct call %d: block %d [%d] = %g", rep, r, i,
                                       yo[r * COUNT + i]);
        }
        for (int i = 0; i < COUNT; i++) x[i] = (float)(rank * 100000 + rep * 10 + i);
        memset(y, 0, (size_t)n * COUNT * 4);
        MP_CHECK(rank, mscclpp_graph_launch(g, s));
        MP_CHECK(rank, mscclpp_stream_synchronize(s));
        for (int r = 0; r < n; r++)
            for (int i = 0; i < COUNT; i++)
                if (y[r * COUNT + i] != (float)(r * 100000 + rep * 10 + i))
                    return MP_FAIL(rank, "replay %d: block %d [%d] = %g, want %g", rep, r, i,
                                   y[r * COUNT + i], (float)(r * 100000 + rep * 10 + i));
    }
    MP_CHECK(rank, mscclpp_graph_destroy(g));
    MP_CHECK(rank, mscclpp_stream_destroy(s));
    MP_CHECK(rank, mscclpp_executor_destroy(ex));
    MP_CHECK(rank, mscclpp_plan_destroy(plan));
    MP_CHECK(rank, mscclpp_free(x));
    MP_CHECK(rank, mscclpp_free(y));
    MP_CHECK(rank, mscclpp_comm_destroy(comm));
    return 0;
}

START_TEST(t_replay_peer_pointers_moved)
{
    ck_assert_int_eq(mp_run(2, direct_body, NULL, 300, NULL), 0);
}
END_TEST

/*
 * A direct call on another stream while a stream the executor used before is being captured
 * (as with torch.cuda.graph on a stream of earlier direct calls): when that call must re-lower
 * (the peers' pointers moved), the executor cannot wait for the capturing stream; it must
 * neither try (that would invalidate the capture) nor free what queued work may read.
 */
static int other_stream_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_plan_load_string(direct_plan, sizeof direct_plan - 1, &plan));
    enum { COUNT = 256 };
    float *x = NULL, *y = NULL;
    MP_CHECK(rank, mscclpp_malloc(1 << 16, (void **)&x));
    MP_CHECK(rank, mscclpp_malloc(1 << 16, (void **)&y));
    mscclpp_stream_t s = NULL, t = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&s));
    MP_CHECK(rank, mscclpp_stream_create(&t));
    size_t bytes = COUNT * 4, out = (size_t)n * COUNT * 4;
    /* a direct call on s: the executor watches s from now on. It ends before the call on t
     * below: two launches of one context must not run at once (nothing orders s and t; the
     * launch fence's offsets and the plan's counters assume one launch at a time) */
    MP_CHECK(rank,
             mscclpp_execute(ex, plan, x, y, bytes, out, MSCCLPP_FLOAT32, MSCCLPP_REDOP_PLAN, s));
    MP_CHECK(rank, mscclpp_stream_synchronize(s));
    MP_CHECK(rank, mscclpp_stream_begin_capture(s));
    MP_CHECK(rank,
             mscclpp_execute(ex, plan, x, y, bytes, out, MSCCLPP_FLOAT32, MSCCLPP_REDOP_PLAN, s));
    /* on t, at other offsets: lowered again for the peers' moved pointers */
    for (int i = 0; i < COUNT; i++) x[1024 + i] = (float)(rank * 1000 + i);
    MP_CHECK(rank, mscclpp_execute(ex, plan, x + 1024, y + 4096, bytes, out, MSCCLPP_FLOAT32,
                                   MSCCLPP_REDOP_PLAN, t));
    MP_CHECK(rank, mscclpp_stream_synchronize(t));
    for (int r = 0; r < n; r++)
        for (int i = 0; i < COUNT; i++)
            if (y[4096 + r * COUNT + i] != (float)(r * 1000 + i))
                return MP_FAIL(rank, "direct call on t: block %d [%d] = %g", r, i,
                               y[4096 + r * COUNT + i]);
    mscclpp_graph_t g = NULL;
    MP_CHECK(rank, mscclpp_stream_end_capture(s, &g));
    for (int rep = 0; rep < 10; rep++) {
        for (int i = 0; i < COUNT; i++) x[i] = (float)(rank * 100 + rep + i);
        MP_CHECK(rank, mscclpp_graph_launch(g, s));
        MP_CHECK(rank, mscclpp_stream_synchronize(s));
        for (int r = 0; r < n; r++)
            for (int i = 0; i < COUNT; i++)
                if (y[r * COUNT + i] != (float)(r * 100 + rep + i))
                    return MP_FAIL(rank, "replay %d: block %d [%d] = %g", rep, r, i,
                                   y[r * COUNT + i]);
    }
    MP_CHECK(rank, mscclpp_graph_destroy(g));
    MP_CHECK(rank, mscclpp_stream_destroy(s));
    MP_CHECK(rank, mscclpp_stream_destroy(t));
    MP_CHECK(rank, mscclpp_executor_destroy(ex));
    MP_CHECK(rank, mscclpp_plan_destroy(plan));
    MP_CHECK(rank, mscclpp_free(x));
    MP_CHECK(rank, mscclpp_free(y));
    MP_CHECK(rank, mscclpp_comm_destroy(comm));
    return 0;
}

START_TEST(t_capture_other_stream_moves)
{
    ck_assert_int_eq(mp_run(2, other_stream_body, NULL, 120, NULL), 0);
}
END_TEST

/* Synchronizing the stream inside a capture fails and loses the capture, but breaks nothing:
 * the executor and the stream work on, and a new capture replays right. */
static int sync_inside_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    float *x = NULL, *y = NULL;
    MP_CHECK(rank, mscclpp_malloc(4096, (void **)&x));
    MP_CHECK(rank, mscclpp_malloc(4096, (void **)&y));
    mscclpp_stream_t s = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&s));
    for (int i = 0; i < 64; i++) x[i] = (float)rank;
    MP_CHECK(rank, mscclpp_stream_begin_capture(s));
    MP_CHECK(rank, mscclpp_allreduce(ex, x, y, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM, s));
    if (mscclpp_stream_synchronize(s) == MSCCLPP_OK)
        return MP_FAIL(rank, "a capturing stream was synchronized");
    if (mscclpp_stream_begin_capture(s) == MSCCLPP_OK)
        return MP_FAIL(rank, "a second capture began on a capturing stream");
    mscclpp_graph_t g = NULL;
    if (mscclpp_stream_end_capture(s, &g) == MSCCLPP_OK || g)
        return MP_FAIL(rank, "an invalidated capture made a graph");
    if (!strstr(mscclpp_last_error(), "invalidated"))
        return MP_FAIL(rank, "end_capture said: %s", mscclpp_last_error());
    mscclpp_result_t async = MSCCLPP_OK;
    MP_CHECK(rank, mscclpp_executor_get_async_error(ex, &async));
    if (async != MSCCLPP_OK) return MP_FAIL(rank, "executor broken: %s", mscclpp_last_error());
    /* the lost capture launched nothing: both ranks go on alike */
    MP_CHECK(rank, mscclpp_allreduce(ex, x, y, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM, s));
    MP_CHECK(rank, mscclpp_stream_synchronize(s));
    if (y[63] != (float)(n * (n - 1) / 2)) return MP_FAIL(rank, "after: %g", y[63]);
    MP_CHECK(rank, mscclpp_stream_begin_capture(s));
    MP_CHECK(rank, mscclpp_allreduce(ex, x, y, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM, s));
    MP_CHECK(rank, mscclpp_stream_end_capture(s, &g));
    for (int rep = 0; rep < 10; rep++) {
        for (int i = 0; i < 64; i++) x[i] = (float)(rank + rep);
        MP_CHECK(rank, mscclpp_graph_launch(g, s));
        MP_CHECK(rank, mscclpp_stream_synchronize(s));
        if (y[0] != (float)(n * (n - 1) / 2 + n * rep))
            return MP_FAIL(rank, "replay %d: %g", rep, y[0]);
    }
    /* argument errors */
    mscclpp_graph_t none = NULL;
    if (mscclpp_graph_launch(g, NULL) != MSCCLPP_ERR_INVALID_ARG ||
        mscclpp_graph_launch(NULL, s) != MSCCLPP_ERR_INVALID_ARG ||
        mscclpp_stream_begin_capture(NULL) != MSCCLPP_ERR_INVALID_ARG ||
        mscclpp_stream_end_capture(s, NULL) != MSCCLPP_ERR_INVALID_ARG ||
        mscclpp_stream_end_capture(s, &none) != MSCCLPP_ERR_INVALID_ARG || none)
        return MP_FAIL(rank, "bad arguments accepted");
    MP_CHECK(rank, mscclpp_graph_destroy(NULL));
    MP_CHECK(rank, mscclpp_graph_destroy(g));
    MP_CHECK(rank, mscclpp_stream_destroy(s));
    MP_CHECK(rank, mscclpp_executor_destroy(ex));
    MP_CHECK(rank, mscclpp_free(x));
    MP_CHECK(rank, mscclpp_free(y));
    MP_CHECK(rank, mscclpp_comm_destroy(comm));
    return 0;
}

START_TEST(t_capture_sync_inside)
{
    ck_assert_int_eq(mp_run(2, sync_inside_body, NULL, 120, NULL), 0);
}
END_TEST

static Suite *graph_suite(void)
{
    Suite *s = suite_create("graph");
    TCase *hal = tcase_create("hal");
    tcase_add_test(hal, t_hal_capture_records_copies);
    tcase_add_test(hal, t_hal_capture_sync_invalidates);
    tcase_add_test(hal, t_hal_capture_nested);
    suite_add_tcase(s, hal);
    TCase *rep = tcase_create("replay");
    tcase_set_timeout(rep, 600);
    tcase_add_test(rep, t_replay_two_ranks);
    tcase_add_test(rep, t_replay_three_ranks_moved);
    tcase_add_test(rep, t_replay_reset_between);
    tcase_add_test(rep, t_replay_execute_two_graphs);
    tcase_add_test(rep, t_replay_peer_pointers_moved);
    tcase_add_test(rep, t_capture_sync_inside);
    tcase_add_test(rep, t_capture_other_stream_moves);
    suite_add_tcase(s, rep);
    return s;
}

int main(void)
{
    setenv("MSCCLPP_HAL", "host", 1);
    SRunner *sr = srunner_create(graph_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
