/*
 * The executor on the caller's own buffers (issue 18, "zero-copy"): memory the application
 * allocated itself, registered by its allocation on first use. On the host backend the
 * application's shareable memory is a memfd (or /dev/shm file) it maps MAP_SHARED: the HAL
 * finds it in /proc/self/maps, as the CUDA backend finds cudaMalloc'd or PyTorch's memory
 * through the driver. Checked on forked ranks:
 *
 *   t_foreign_io       a plan that writes its peers' output buffers, on the test's own memfd
 *                      mappings, at offsets that move inside them (alike on every rank), then
 *                      on a mapping replaced at the same address: every element checked
 *   t_asymmetric_offsets  the same plan, each rank's buffers at other offsets than its peer's,
 *                      eight calls queued on a stream: the owners publish their offsets at each
 *                      launch's fence
 *   t_private_refused  the same plan on malloc'd memory: refused before any rank talks, naming
 *                      the buffer; the built-in plans (scratch only) run on it
 *   t_scratch_bounded  a small call on a 64 MiB allocation gets a small scratch, a larger call
 *                      grows it (collectively), and scratch-only plans keep one context per
 *                      plan whatever the buffers
 *   t_fast_path        a call that repeats the last one takes the executor's fast path; any
 *                      other call, or one after the cache dropped its context, does not
 *   t_direct_staged    the direct plans (they reach the peers' input and output) on malloc'd
 *                      buffers of some ranks: those run them on staged stand-ins
 *   t_direct_back_to_back  the direct plans (no opening handshake: the launch fence) back to
 *                      back on the same buffers, no barrier, a slow rank in turn, every
 *                      element checked (2 and 4 ranks; in place too)
 *   t_direct_auto      MSCCLPP_PLAN_DIRECT=auto on the host backend: a call shape runs the
 *                      direct plan when every rank's buffers are shareable, the scratch plan
 *                      as soon as one rank's are malloc'd (2 and 4 ranks, mixes)
 *   t_direct_auto_one_rank_moves  ranks may move to new buffers (shared or malloc'd) alone,
 *                      and back, under MSCCLPP_PLAN_DIRECT=auto and off
 *   t_direct_auto_forget_alone  one rank forgets its buffers alone; the bounded cache still
 *                      evicts alike on every rank
 *   t_fast_io          the fast path for the direct plans' contexts: on mscclpp_malloc'd
 *                      buffers, on malloc'd (staged) ones, on the application's memfd mappings;
 *                      a buffer freed (or mapped anew) at the same address misses it;
 *                      the same with each call asked about first (mscclpp_executor_direct, as
 *                      the NCCL layer does, which hands its lookups to the call), an
 *                      mscclpp_free between the two included
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "executor/exec.h" /* the executor's contexts, read (never changed) to check sizes */
#include "executor/exec_forget.h"
#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"

static char corpus[600];

static void set_dirs(void)
{
    mp_plan_dir();
    snprintf(corpus, sizeof corpus, "%s/tests/fuzz/plan-corpus", mp_src_dir());
}


static int count_contexts(const mscclpp_executor_t *ex)
{
    int n = 0;
    for (const exec_context_t *c = exec_context_next(ex, NULL); c; c = exec_context_next(ex, c))
        n++;
    return n;
}

/* ---- a plan that writes the peers' output buffers, on the application's memory ---------- */

static int check_allgather(int rank, int n, const int32_t *out, size_t count, int round,
                           const char *what)
{
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < count; i++) {
            int32_t want = (int32_t)(round * 100000 + p * 1000 + (int)i);
            if (out[(size_t)p * count + i] != want)
                return MP_FAIL(rank, "%s, round %d: block of rank %d element %zu is %d, want %d",
                               what, round, p, i, (int)out[(size_t)p * count + i], (int)want);
        }
    return 0;
}

static int foreign_io_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    char path[700];
    snprintf(path, sizeof path, "%s/allgather_2.json", corpus);
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, path, &e)) return 1;
    const size_t count = 1000, alloc = 1 << 20;
    char *in_map = mp_app_map(alloc, NULL), *out_map = mp_app_map(alloc, NULL);
    if (!in_map || !out_map) return MP_FAIL(rank, "memfd mappings: %m");
    /* the buffers move inside their allocations from call to call, alike on every rank */
    for (int round = 0; round < 6; round++) {
        size_t off = (size_t)(round % 3) * 4096 + (size_t)round * 64;
        int32_t *in = (int32_t *)(in_map + off), *out = (int32_t *)(out_map + 2 * off);
        for (size_t i = 0; i < count; i++) in[i] = (int32_t)(round * 100000 + rank * 1000 + i);
        memset(out, 0xee, count * 4 * (size_t)n);
        MP_CHECK(rank, mscclpp_execute(e.ex, e.plan, in, out, count * 4, count * 4 * (size_t)n,
                                       MSCCLPP_INT32, MSCCLPP_SUM, NULL));
        if (check_allgather(rank, n, out, count, round, "moving offsets")) return 1;
    }
    if (count_contexts(e.ex) != 1)
        return MP_FAIL(rank, "%d contexts for one pair of allocations", count_contexts(e.ex));
    /* the output allocation replaced by another file at the same address, on every rank:
     * the peers must write the new one (a stale context writes the old file, and the new
     * mapping keeps 0xee) */
    MP_CHECK(rank, mscclpp_bootstrap_barrier(e.boot));
    if (mp_app_map(alloc, out_map) != out_map) return MP_FAIL(rank, "remap at %p: %m", out_map);
    for (int round = 6; round < 8; round++) {
        int32_t *in = (int32_t *)in_map, *out = (int32_t *)out_map;
        for (size_t i = 0; i < count; i++) in[i] = (int32_t)(round * 100000 + rank * 1000 + i);
        memset(out, 0xee, count * 4 * (size_t)n);
        MP_CHECK(rank, mscclpp_execute(e.ex, e.plan, in, out, count * 4, count * 4 * (size_t)n,
                                       MSCCLPP_INT32, MSCCLPP_SUM, NULL));
        if (check_allgather(rank, n, out, count, round, "replaced mapping")) return 1;
    }
    MP_CHECK(rank, mscclpp_bootstrap_barrier(e.boot)); /* peers done writing our memory */
    mp_exec_close(&e);
    munmap(in_map, alloc);
    munmap(out_map, alloc);
    return 0;
}

START_TEST(t_foreign_io)
{
    set_dirs();
    setenv("MSCCLPP_TIMEOUT", "10", 1);
    ck_assert_int_eq(mp_run(2, foreign_io_body, NULL, 120, NULL), 0);
    unsetenv("MSCCLPP_TIMEOUT");
}
END_TEST

/*
 * Ranks whose buffers sit at different offsets in their allocations (a caching allocator makes
 * no promise): every owner publishes its offsets at the launch fence and the writers follow
 * them. Eight calls queued on a stream back to back, each rank moving its buffers differently,
 * every output checked once the stream ran them.
 */
static int asym_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    char path[700];
    snprintf(path, sizeof path, "%s/allgather_2.json", corpus);
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, path, &e)) return 1;
    mscclpp_stream_t st = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&st));
    enum { ROUNDS = 8 };
    const size_t count = 1000, alloc = (size_t)4 << 20, slot = 64 << 10;
    char *in_map = mp_app_map(alloc, NULL), *out_map = mp_app_map(alloc, NULL);
    if (!in_map || !out_map) return MP_FAIL(rank, "memfd mappings: %m");
    memset(out_map, 0xee, alloc);
    int32_t *outs[ROUNDS];
    for (int round = 0; round < ROUNDS; round++) {
        /* rank 0 and rank 1 place each round's buffers at different offsets */
        size_t off = (size_t)round * slot + (size_t)((round * (rank + 1) * 7) % 5) * 4096 +
                     (size_t)rank * 192;
        int32_t *in = (int32_t *)(in_map + off), *out = (int32_t *)(out_map + 2 * off);
        outs[round] = out;
        for (size_t i = 0; i < count; i++) in[i] = (int32_t)(round * 100000 + rank * 1000 + i);
        MP_CHECK(rank, mscclpp_execute(e.ex, e.plan, in, out, count * 4, count * 4 * (size_t)n,
                                       MSCCLPP_INT32, MSCCLPP_SUM, st));
    }
    MP_CHECK(rank, mscclpp_stream_synchronize(st));
    for (int round = 0; round < ROUNDS; round++)
        if (check_allgather(rank, n, outs[round], count, round, "different offsets per rank"))
            return 1;
    MP_CHECK(rank, mscclpp_bootstrap_barrier(e.boot));
    mscclpp_stream_destroy(st);
    mp_exec_close(&e);
    munmap(in_map, alloc);
    munmap(out_map, alloc);
    return 0;
}

START_TEST(t_asymmetric_offsets)
{
    set_dirs();
    setenv("MSCCLPP_TIMEOUT", "10", 1);
    ck_assert_int_eq(mp_run(2, asym_body, NULL, 120, NULL), 0);
    unsetenv("MSCCLPP_TIMEOUT");
}
END_TEST

static int private_refused_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    char path[700];
    snprintf(path, sizeof path, "%s/allgather_2.json", corpus);
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, path, &e)) return 1;
    const size_t count = 256;
    int32_t *in = malloc(count * 4), *out = malloc(count * 4 * (size_t)n);
    mscclpp_result_t r = mscclpp_execute(e.ex, e.plan, in, out, count * 4, count * 4 * (size_t)n,
                                         MSCCLPP_INT32, MSCCLPP_SUM, NULL);
    if (r != MSCCLPP_ERR_INVALID_ARG || !strstr(mscclpp_last_error(), "can share") ||
        !strstr(mscclpp_last_error(), "send buffer"))
        return MP_FAIL(rank, "malloc'd buffers for a plan reaching peers' outputs: %d, %s", r,
                       mscclpp_last_error());
    /* refused before any rank talked: the executor is not broken */
    for (size_t i = 0; i < count; i++) in[i] = rank + 1;
    MP_CHECK(rank, mscclpp_allreduce(e.ex, in, in, count, MSCCLPP_INT32, MSCCLPP_SUM, NULL));
    if (in[count - 1] != n * (n + 1) / 2)
        return MP_FAIL(rank, "allreduce on malloc'd memory: %d", (int)in[count - 1]);
    free(in);
    free(out);
    mp_exec_close(&e);
    return 0;
}

START_TEST(t_private_refused)
{
    set_dirs();
    ck_assert_int_eq(mp_run(2, private_refused_body, NULL, 120, NULL), 0);
}
END_TEST

/* ---- scratch follows the call, not the allocation ------------------------------------------ */

static uint64_t scratch_of(const mscclpp_executor_t *ex)
{
    uint64_t most = 0;
    for (const exec_context_t *c = exec_context_next(ex, NULL); c; c = exec_context_next(ex, c))
        if (c->scratch_bytes > most) most = c->scratch_bytes;
    return most;
}

static int scratch_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    /* the scratch plans (auto would run the 8 MiB call below with the direct plan, which has
     * no scratch, on these shareable buffers) */
    setenv("MSCCLPP_PLAN_DIRECT", "off", 1);
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, NULL, &e)) return 1;
    const size_t big = (size_t)64 << 20;
    float *a = NULL;
    MP_CHECK(rank, mscclpp_malloc(big, (void **)&a));
    float *f = mp_app_map(big, NULL);
    if (!f) return MP_FAIL(rank, "memfd mapping: %m");
    /* a 1 KiB allreduce in a 64 MiB allocation (and in the application's own 64 MiB) */
    for (int k = 0; k < 2; k++) {
        float *x = k ? f : a;
        for (size_t i = 0; i < 256; i++) x[i] = (float)(rank + 1);
        MP_CHECK(rank,
                 mscclpp_allreduce(e.ex, x, x + 1024, 256, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
        if (x[1024 + 255] != (float)(n * (n + 1) / 2))
            return MP_FAIL(rank, "allreduce: %g", x[1024 + 255]);
    }
    uint64_t small = scratch_of(e.ex);
    if (small == 0 || small > ((uint64_t)4 << 20))
        return MP_FAIL(rank, "scratch of a 1 KiB call in a 64 MiB allocation: %llu bytes",
                       (unsigned long long)small);
    int before = count_contexts(e.ex);
    /* the same plan (out of place, as above: in place has plans of its own) on many other
     * buffers: no new context (scratch-only plans) */
    for (int k = 0; k < 8; k++) {
        float *x = malloc(4096);
        for (size_t i = 0; i < 256; i++) x[i] = (float)(rank + k);
        MP_CHECK(rank,
                 mscclpp_allreduce(e.ex, x, x + 512, 256, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
        if (x[512 + 7] != (float)(n * (n - 1) / 2 + n * k))
            return MP_FAIL(rank, "allreduce %d on malloc'd memory: %g", k, x[512 + 7]);
        free(x);
    }
    if (count_contexts(e.ex) != before)
        return MP_FAIL(rank, "%d contexts after 8 more buffers, %d before", count_contexts(e.ex),
                       before);
    /* an 8 MiB call grows the scratch, on every rank, and stays right */
    const size_t cnt = (size_t)2 << 20;
    for (size_t i = 0; i < cnt; i++) a[i] = (float)(rank + (int)(i % 3));
    MP_CHECK(rank, mscclpp_allreduce(e.ex, a, a + cnt, cnt, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
    for (size_t i = 0; i < cnt; i++)
        if (a[cnt + i] != (float)(n * (n - 1) / 2 + n * (int)(i % 3)))
            return MP_FAIL(rank, "8 MiB allreduce element %zu: %g", i, a[cnt + i]);
    uint64_t grown = scratch_of(e.ex);
    if (grown <= small || grown > ((uint64_t)64 << 20))
        return MP_FAIL(rank, "scratch after an 8 MiB call: %llu bytes (was %llu)",
                       (unsigned long long)grown, (unsigned long long)small);
    mp_exec_close(&e);
    mscclpp_free(a);
    munmap(f, big);
    return 0;
}

START_TEST(t_scratch_bounded)
{
    set_dirs();
    ck_assert_int_eq(mp_run(2, scratch_body, NULL, 300, NULL), 0);
}
END_TEST

/* ---- the last call again (issue 19 item 5): the executor's fast path ------------------------ */

/* An allreduce of `count` floats from x into x + 4096 (a scratch-only plan at these sizes),
 * checked; *hit says whether it took the fast path. */
static int fast_call(int rank, int n, mscclpp_executor_t *ex, float *x, size_t count, int k,
                     bool *hit)
{
    uint64_t before = ex->fast.hits;
    for (size_t i = 0; i < count; i++) x[i] = (float)(rank + k + (int)(i % 5));
    MP_CHECK(rank, mscclpp_allreduce(ex, x, x + 4096, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
    for (size_t i = 0; i < count; i++)
        if (x[4096 + i] != (float)(n * (n - 1) / 2 + n * (k + (int)(i % 5))))
            return MP_FAIL(rank, "call %d: element %zu is %g", k, i, x[4096 + i]);
    *hit = ex->fast.hits != before;
    return 0;
}

static int fast_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, NULL, &e)) return 1;
    float *x = NULL;
    MP_CHECK(rank, mscclpp_malloc(1 << 16, (void **)&x));
    /* expected: miss (first), hit, hit, miss (other size), hit, miss (after a reset), hit,
     * miss (other buffer), miss (the first buffer again: only the last call is kept), hit */
    static const struct {
        size_t count, off;
        bool reset, hit;
    } calls[] = {{256, 0, false, false}, {256, 0, false, true},   {256, 0, false, true},
                 {300, 0, false, false}, {300, 0, false, true},   {300, 0, true, false},
                 {300, 0, false, true},  {300, 64, false, false}, {300, 0, false, false},
                 {300, 0, false, true}};
    for (int k = 0; k < (int)(sizeof calls / sizeof *calls); k++) {
        if (calls[k].reset) MP_CHECK(rank, mscclpp_executor_reset(e.ex));
        bool hit = false;
        if (fast_call(rank, n, e.ex, x + calls[k].off, calls[k].count, k, &hit)) return 1;
        if (hit != calls[k].hit)
            return MP_FAIL(rank, "call %d (%zu floats at +%zu%s) %s the fast path", k,
                           calls[k].count, calls[k].off, calls[k].reset ? ", after a reset" : "",
                           hit ? "took" : "missed");
    }
    mp_exec_close(&e);
    mscclpp_free(x);
    return 0;
}

START_TEST(t_fast_path)
{
    set_dirs();
    ck_assert_int_eq(mp_run(2, fast_body, NULL, 120, NULL), 0);
}
END_TEST

/* ---- direct plans on buffers the peers cannot map: staged (issue 19 item 3) ---------------- */

/* Two buffers of `bytes` each: malloc'd (`priv`: not shareable, staged by the executor) or
 * mscclpp_malloc'd (shareable). Nonzero, after saying why, when memory runs out. */
static int pair_alloc(int rank, bool priv, size_t bytes, float **a, float **b)
{
    *a = *b = NULL;
    if (priv) {
        *a = malloc(bytes);
        *b = malloc(bytes);
    } else {
        MP_CHECK(rank, mscclpp_malloc(bytes, (void **)a));
        MP_CHECK(rank, mscclpp_malloc(bytes, (void **)b));
    }
    if (!*a || !*b) return MP_FAIL(rank, "out of memory for two buffers of %zu bytes", bytes);
    return 0;
}

static void pair_free(bool priv, float *a, float *b)
{
    if (priv) {
        free(a);
        free(b);
    } else {
        mscclpp_free(a);
        mscclpp_free(b);
    }
}

/* Every rank's executor loads the direct plans (plans/direct/: the peers' input read and
 * output written) as its default plans; `arg` says which ranks pass malloc'd buffers (bit r:
 * rank r), the others mscclpp_malloc'd ones. The plan is chosen by the call's shape alone, so
 * every rank runs the same one; a rank on malloc'd memory runs it on its context's stand-ins
 * (before: refused with MSCCLPP_ERR_INVALID_ARG on that rank, its peers failing after it),
 * also captured into a graph and replayed. */
static int staged_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    const int private_ranks = *(const int *)arg;
    const bool priv = (private_ranks >> rank) & 1;
    char dir[900];
    snprintf(dir, sizeof dir, "%s/direct", mp_plan_dir());
    setenv("MSCCLPP_PLAN_DIR", dir, 1); /* this rank's process only */
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, NULL, &e)) return 1;
    /* 1 MiB, then 4 MiB (the contexts grow on every rank), then 1 MiB again */
    static const size_t counts[] = {262144, 1048576, 262144};
    const size_t most = 1048576 * 4 * (size_t)n;
    float *a = NULL, *b = NULL;
    if (pair_alloc(rank, priv, most, &a, &b)) return 1;
    mscclpp_stream_t st = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&st));
    for (int k = 0; k < 3; k++) {
        const size_t cnt = counts[k];
        const float want = (float)(n * (n - 1) / 2 + n * k);
        for (size_t i = 0; i < cnt; i++) a[i] = (float)(rank + k);
        MP_CHECK(rank, mscclpp_allreduce(e.ex, a, b, cnt, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
        for (size_t i = 0; i < cnt; i++)
            if (b[i] != want)
                return MP_FAIL(rank, "call %d: allreduce element %zu: %g, not %g", k, i, b[i],
                               want);
        /* in place, on a stream */
        MP_CHECK(rank, mscclpp_allreduce(e.ex, b, b, cnt, MSCCLPP_FLOAT32, MSCCLPP_SUM, st));
        MP_CHECK(rank, mscclpp_stream_synchronize(st));
        for (size_t i = 0; i < cnt; i++)
            if (b[i] != want * (float)n)
                return MP_FAIL(rank, "call %d: in-place allreduce element %zu: %g, not %g", k, i,
                               b[i], want * (float)n);
        /* allgather: every rank's block in every output */
        for (size_t i = 0; i < cnt; i++) a[i] = (float)(rank * 1000 + k);
        MP_CHECK(rank, mscclpp_allgather(e.ex, a, b, cnt, MSCCLPP_FLOAT32, st));
        MP_CHECK(rank, mscclpp_stream_synchronize(st));
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < cnt; i++)
                if (b[(size_t)r * cnt + i] != (float)(r * 1000 + k))
                    return MP_FAIL(rank, "call %d: allgather block %d element %zu: %g", k, r, i,
                                   b[(size_t)r * cnt + i]);
    }
    /* captured into a graph (the copies in and out of a staged call with it), replayed with
     * new input each time */
    const size_t cnt = counts[0];
    mscclpp_graph_t g = NULL;
    MP_CHECK(rank, mscclpp_stream_begin_capture(st));
    MP_CHECK(rank, mscclpp_allreduce(e.ex, a, b, cnt, MSCCLPP_FLOAT32, MSCCLPP_SUM, st));
    MP_CHECK(rank, mscclpp_stream_end_capture(st, &g));
    for (int rep = 0; rep < 3; rep++) {
        for (size_t i = 0; i < cnt; i++) a[i] = (float)(rank + 10 * rep);
        MP_CHECK(rank, mscclpp_graph_launch(g, st));
        MP_CHECK(rank, mscclpp_stream_synchronize(st));
        const float want = (float)(n * (n - 1) / 2 + 10 * rep * n);
        for (size_t i = 0; i < cnt; i++)
            if (b[i] != want)
                return MP_FAIL(rank, "replay %d: allreduce element %zu: %g, not %g", rep, i, b[i],
                               want);
    }
    MP_CHECK(rank, mscclpp_graph_destroy(g));
    /* the direct plans served the calls (not the scratch plans after them) */
    int direct = 0;
    for (const exec_context_t *c = exec_context_next(e.ex, NULL); c;
         c = exec_context_next(e.ex, c))
        if (strstr(c->plan->name, "direct_")) direct += 1 + (c->staged ? 100 : 0);
    if (direct == 0) return MP_FAIL(rank, "no context of a direct plan");
    if (priv != (direct >= 100))
        return MP_FAIL(rank, "%s buffers, but %s context is staged", priv ? "malloc'd" : "shared",
                       direct >= 100 ? "a" : "no");
    MP_CHECK(rank, mscclpp_bootstrap_barrier(e.boot));
    mscclpp_stream_destroy(st);
    mp_exec_close(&e);
    pair_free(priv, a, b);
    return 0;
}

START_TEST(t_direct_staged)
{
    set_dirs();
    static const int mixes[] = {3, 1, 0}; /* both ranks malloc'd, rank 0 only, none */
    int mix = mixes[_i];
    ck_assert_int_eq(mp_run(2, staged_body, &mix, 300, NULL), 0);
}
END_TEST

/* ---- direct plans back to back, no barrier: the launch fence opens every call ------------- */

/* The direct plans open with no handshake of their own (plans/_common.py, direct_ranks): the
 * launch fence, which every launch of a plan reaching the peers' buffers runs, is what keeps a
 * fast rank's next call from reading a peer's input before that peer wrote it, or writing a
 * peer's output before that peer has read the last result. Each call here changes every
 * input, and in turn one rank is slow: it sleeps before writing its input and again before
 * reading its output, so a peer let in early reads stale input or overwrites the result under
 * the check. Five collectives (out of place, then allreduce and allgather in place) follow
 * each other on the same buffers with nothing between them but the checks. */
#define B2B_COUNT 131072 /* floats per rank block: 512 KiB, past the allreduce plan's floor */
#define B2B_CALLS 14

static float b2b_in(int coll, int rank, int k, int n, size_t j)
{
    switch (coll) {
    case 0: return (float)(rank * 10 + k + (int)(j % 7));                      /* allreduce */
    case 1: return (float)(rank * 1000 + k + (int)(j % 5));                    /* allgather */
    case 2: return (float)(rank + k + (int)(j % 11));                          /* reducescatter */
    case 3: return (float)(rank * 100 + (int)(j / B2B_COUNT) + k);            /* alltoall */
    default: return rank == 0 ? (float)(7 + k + (int)(j % 13)) : (float)(-1 - n); /* broadcast */
    }
}

/* Output element j of `rank` for collective coll at call k. */
static float b2b_out(int coll, int rank, int k, int n, size_t j)
{
    const size_t blk = j / B2B_COUNT, i = j % B2B_COUNT;
    switch (coll) {
    case 0: return (float)(10 * n * (n - 1) / 2 + n * (k + (int)(j % 7)));
    case 1: return (float)((int)blk * 1000 + k + (int)(i % 5));
    case 2: return (float)(n * (n - 1) / 2 + n * (k + (int)(((size_t)rank * B2B_COUNT + j) % 11)));
    case 3: return (float)((int)blk * 100 + rank + k);
    default: return (float)(7 + k + (int)(j % 13));
    }
}

static int b2b_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    static const char *const names[] = {"allreduce", "allgather", "reducescatter", "alltoall",
                                        "broadcast"};
    char dir[900];
    snprintf(dir, sizeof dir, "%s/direct", mp_plan_dir());
    setenv("MSCCLPP_PLAN_DIR", dir, 1); /* this rank's process only */
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, NULL, &e)) return 1;
    const size_t big = (size_t)B2B_COUNT * (size_t)n;
    float *a = NULL, *b = NULL;
    if (pair_alloc(rank, false, big * sizeof(float), &a, &b)) return 1;
    for (int k = 0; k < B2B_CALLS; k++) {
        /* calls 0-9 out of place, two of each; 10-13: allreduce and allgather in place */
        const int coll = k < 10 ? k % 5 : (k % 2 ? 1 : 0), inplace = k >= 10;
        const bool slow = rank == k % n;
        const size_t nin = coll == 2 || coll == 3 ? big : B2B_COUNT;
        const size_t nout = coll == 1 || coll == 3 ? big : B2B_COUNT;
        float *in = a, *out = inplace ? a : b;
        if (slow) usleep(20000); /* a peer let in now reads the last call's input */
        if (inplace && coll == 1) { /* in place: this rank's block of the output is the input */
            in = a + (size_t)rank * B2B_COUNT;
            for (size_t j = 0; j < B2B_COUNT; j++) in[j] = b2b_in(coll, rank, k, n, j);
        } else {
            for (size_t j = 0; j < nin; j++) in[j] = b2b_in(coll, rank, k, n, j);
        }
        mscclpp_result_t rc;
        switch (coll) {
        case 0:
            rc = mscclpp_allreduce(e.ex, in, out, B2B_COUNT, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL);
            break;
        case 1: rc = mscclpp_allgather(e.ex, in, out, B2B_COUNT, MSCCLPP_FLOAT32, NULL); break;
        case 2:
            rc = mscclpp_reducescatter(e.ex, in, out, B2B_COUNT, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                                       NULL);
            break;
        case 3: rc = mscclpp_alltoall(e.ex, in, out, B2B_COUNT, MSCCLPP_FLOAT32, NULL); break;
        default: rc = mscclpp_broadcast(e.ex, in, out, B2B_COUNT, MSCCLPP_FLOAT32, 0, NULL); break;
        }
        if (rc != MSCCLPP_OK)
            return MP_FAIL(rank, "call %d (%s%s): %s", k, names[coll], inplace ? " in place" : "",
                           mscclpp_result_string(rc));
        if (slow) usleep(20000); /* a peer let in now overwrites this result */
        for (size_t j = 0; j < nout; j++) {
            const float want = b2b_out(coll, rank, k, n, j);
            if (out[j] != want)
                return MP_FAIL(rank, "call %d (%s%s), rank %d slow: element %zu is %g, not %g", k,
                               names[coll], inplace ? " in place" : "", k % n, j, out[j], want);
        }
    }
    /* every call ran a direct plan, on the callers' own buffers */
    int direct = 0, other = 0;
    for (const exec_context_t *c = exec_context_next(e.ex, NULL); c;
         c = exec_context_next(e.ex, c)) {
        if (strncmp(c->plan->name, "direct_", 7) == 0 && !c->staged)
            direct++;
        else
            other++;
    }
    if (direct < 5 || other)
        return MP_FAIL(rank, "%d direct contexts on the callers' buffers and %d others", direct,
                       other);
    MP_CHECK(rank, mscclpp_bootstrap_barrier(e.boot)); /* peers done with our memory */
    mp_exec_close(&e);
    pair_free(false, a, b);
    return 0;
}

START_TEST(t_direct_back_to_back)
{
    set_dirs();
    ck_assert_int_eq(mp_run(_i ? 4 : 2, b2b_body, NULL, 300, NULL), 0);
}
END_TEST

/* ---- MSCCLPP_PLAN_DIRECT=auto: the direct plan where every rank's buffers are shareable ---- */

/* The plan the executor's last call ran (its fast-path record) is a direct one or not, as
 * `direct` says; the call took the fast path when `hit`. */
static int auto_ran(int rank, const mscclpp_executor_t *ex, bool direct, const char *what, int k)
{
    if (!ex->fast.valid) return MP_FAIL(rank, "%s, call %d: no record of the call's plan", what, k);
    const char *name = ex->fast.plan->name;
    if ((strncmp(name, "direct_", 7) == 0) != direct)
        return MP_FAIL(rank, "%s, call %d ran plan '%s': want %s plan", what, k, name,
                       direct ? "the direct" : "a scratch");
    return 0;
}

/* arg: {nranks' malloc mask}: rank r's buffers are malloc'd when bit r is set, else
 * mscclpp_malloc'd. Every call's output is checked element by element. */
static int auto_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    const unsigned mask = *(const unsigned *)arg;
    const bool priv = (mask >> rank) & 1u, direct = mask == 0;
    setenv("MSCCLPP_PLAN_DIRECT", "auto", 1);
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, NULL, &e)) return 1;
    const size_t count = 524288, bytes = count * sizeof(float); /* 2 MiB: direct/host's range */
    float *a = NULL, *b = NULL;
    if (pair_alloc(rank, priv, bytes * (size_t)n, &a, &b)) return 1;
    mscclpp_stream_t st = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&st));
    char want[64];
    snprintf(want, sizeof want, "direct_allreduce_host_%d", n);
    for (int k = 0; k < 4; k++) {
        uint64_t hits = e.ex->fast.hits;
        for (size_t i = 0; i < count; i++) a[i] = (float)(rank + k + (int)(i % 7));
        MP_CHECK(rank, mscclpp_allreduce(e.ex, a, b, count, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                                         k == 3 ? st : NULL));
        if (k == 3) MP_CHECK(rank, mscclpp_stream_synchronize(st));
        for (size_t i = 0; i < count; i++)
            if (b[i] != (float)(n * (n - 1) / 2 + n * (k + (int)(i % 7))))
                return MP_FAIL(rank, "allreduce call %d: element %zu is %g", k, i, b[i]);
        /* every call agrees on every rank's buffers first: the direct plan from the first call
         * where all are shareable, the scratch plan from the first where one is not; the third
         * and fourth on the fast path */
        if (auto_ran(rank, e.ex, direct, "allreduce", k)) return 1;
        if (k >= 2 && e.ex->fast.hits == hits)
            return MP_FAIL(rank, "allreduce call %d missed the fast path", k);
    }
    if (direct && strcmp(e.ex->fast.plan->name, want))
        return MP_FAIL(rank, "allreduce ran '%s', not '%s'", e.ex->fast.plan->name, want);
    /* what mscclpp-info and the bench report for this size */
    const mscclpp_plan_t *chosen = NULL;
    MP_CHECK(rank, mscclpp_executor_choose_plan(e.ex, "allreduce", 0, bytes, &chosen, NULL));
    if ((strncmp(mscclpp_plan_name(chosen), "direct_", 7) == 0) != direct)
        return MP_FAIL(rank, "choose_plan reports '%s'", mscclpp_plan_name(chosen));
    /* in place, then an allgather (shapes of their own) */
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < count; i++) b[i] = (float)(rank * 3 + k);
        MP_CHECK(rank, mscclpp_allreduce(e.ex, b, b, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, st));
        MP_CHECK(rank, mscclpp_stream_synchronize(st));
        for (size_t i = 0; i < count; i++)
            if (b[i] != (float)(3 * n * (n - 1) / 2 + n * k))
                return MP_FAIL(rank, "in-place call %d: element %zu is %g", k, i, b[i]);
        if (k == 1 && auto_ran(rank, e.ex, direct, "in-place allreduce", k)) return 1;
        for (size_t i = 0; i < count; i++) a[i] = (float)(rank * 1000 + k + (int)(i % 3));
        MP_CHECK(rank, mscclpp_allgather(e.ex, a, b, count, MSCCLPP_FLOAT32, NULL));
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < count; i++)
                if (b[(size_t)r * count + i] != (float)(r * 1000 + k + (int)(i % 3)))
                    return MP_FAIL(rank, "allgather call %d: block %d element %zu is %g", k, r, i,
                                   b[(size_t)r * count + i]);
        if (k == 1 && auto_ran(rank, e.ex, direct, "allgather", k)) return 1;
    }
    /* in-place allgather and reducescatter: no scratch plan serves them in place, so a rank's
     * buffer is staged through the out-of-place plan, except where every rank's buffers are
     * shareable: there the in-place direct plan (before, the out-of-place one, staged) */
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < count; i++) b[(size_t)rank * count + i] = (float)(rank * 10 + k);
        MP_CHECK(rank, mscclpp_allgather(e.ex, b + (size_t)rank * count, b, count,
                                         MSCCLPP_FLOAT32, NULL));
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < count; i++)
                if (b[(size_t)r * count + i] != (float)(r * 10 + k))
                    return MP_FAIL(rank, "in-place allgather call %d: block %d element %zu is %g",
                                   k, r, i, b[(size_t)r * count + i]);
        if (auto_ran(rank, e.ex, direct, "in-place allgather", k)) return 1;
        snprintf(want, sizeof want, "direct_allgather_ip_host_%d", n);
        if (direct && strcmp(e.ex->fast.plan->name, want))
            return MP_FAIL(rank, "in-place allgather ran '%s', not '%s'", e.ex->fast.plan->name,
                           want);
        const size_t rc = count / (size_t)n; /* reducescatter: rc elements out per rank */
        for (size_t i = 0; i < count; i++) b[i] = (float)(rank + k + (int)(i % 5));
        MP_CHECK(rank, mscclpp_reducescatter(e.ex, b, b + (size_t)rank * rc, rc,
                                             MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
        for (size_t i = 0; i < rc; i++) {
            size_t g = (size_t)rank * rc + i;
            if (b[g] != (float)(n * (n - 1) / 2 + n * (k + (int)(g % 5))))
                return MP_FAIL(rank, "in-place reducescatter call %d: element %zu is %g", k, i,
                               b[g]);
        }
        if (auto_ran(rank, e.ex, direct, "in-place reducescatter", k)) return 1;
        snprintf(want, sizeof want, "direct_reducescatter_ip_host_%d", n);
        if (direct && strcmp(e.ex->fast.plan->name, want))
            return MP_FAIL(rank, "in-place reducescatter ran '%s', not '%s'",
                           e.ex->fast.plan->name, want);
    }
    MP_CHECK(rank, mscclpp_bootstrap_barrier(e.boot));
    mscclpp_stream_destroy(st);
    mp_exec_close(&e);
    pair_free(priv, a, b);
    return 0;
}

/* Ranks need not change their buffers together (NCCL lets each rank pass any buffers at any
 * call), also under MSCCLPP_PLAN_DIRECT=auto, where a direct context maps every rank's buffers:
 * after two calls of a shape on shared buffers (2 MiB, the direct plans' range), the ranks of
 * `movers` move to a new pair (mscclpp_malloc'd, or malloc'd), the others keep theirs; two calls
 * later the movers go back to their first pair (or stay). Every call must succeed with the right
 * sum on every rank, and under auto run the direct plan where every rank's buffers are
 * shareable, the scratch plan where one rank's are not. With session 7's auto the third call
 * timed out on every rank: a direct context was keyed by each rank's own buffers only, so rank 1
 * launched on the old one while rank 0 set up a new one. */
typedef struct {
    int n;
    unsigned movers;  /* bit r: rank r moves */
    bool to_malloc;   /* the movers' new pair is malloc'd */
    bool back;        /* the movers go back to their first pair for calls 4 and 5 */
    bool stream;      /* calls on a stream */
    const char *mode; /* MSCCLPP_PLAN_DIRECT, NULL: the default */
} moves_case_t;

/* The buffer agreement's board names (executor.c board_setup) this process left in /dev/shm. */
static int board_names_left(void)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "mscclpp-board-%ld-", (long)getpid());
    DIR *d = opendir("/dev/shm");
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        n += !strncmp(de->d_name, prefix, strlen(prefix));
    if (d) closedir(d);
    return n;
}

static int moves_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    const moves_case_t *mc = arg;
    if (mc->mode) setenv("MSCCLPP_PLAN_DIRECT", mc->mode, 1);
    else unsetenv("MSCCLPP_PLAN_DIRECT"); /* the default */
    const bool mover = (mc->movers >> rank) & 1u;
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, NULL, &e)) return 1;
    const size_t count = 524288, bytes = count * sizeof(float);
    float *a[2], *b[2];
    if (pair_alloc(rank, false, bytes, &a[0], &b[0]) ||
        pair_alloc(rank, mc->to_malloc, bytes, &a[1], &b[1]))
        return 1;
    mscclpp_stream_t st = NULL;
    if (mc->stream) MP_CHECK(rank, mscclpp_stream_create(&st));
    const bool autom = mc->mode && !strcmp(mc->mode, "auto");
    int before_back = 0;
    for (int k = 0; k < 6; k++) {
        const bool moved = k >= 2 && (k < 4 || !mc->back);
        int w = mover && moved;
        for (size_t i = 0; i < count; i++) a[w][i] = (float)(rank + k + (int)(i % 5));
        if (k == 4) before_back = count_contexts(e.ex);
        mscclpp_result_t r =
            mscclpp_allreduce(e.ex, a[w], b[w], count, MSCCLPP_FLOAT32, MSCCLPP_SUM, st);
        if (r == MSCCLPP_OK && st) r = mscclpp_stream_synchronize(st);
        if (r != MSCCLPP_OK) return MP_FAIL(rank, "call %d: %s", k, mscclpp_last_error());
        for (size_t i = 0; i < count; i++)
            if (b[w][i] != (float)(n * (n - 1) / 2 + n * (k + (int)(i % 5))))
                return MP_FAIL(rank, "call %d: element %zu is %g", k, i, b[w][i]);
        /* auto: the direct plan unless a mover's buffers are malloc'd (alike on every rank) */
        if (autom && auto_ran(rank, e.ex, !(moved && mc->to_malloc), "allreduce", k)) return 1;
    }
    /* the agreements went through the shared board (one node), not the bootstrap; its name
     * is gone once every rank mapped it (nothing left in /dev/shm by a killed job) */
    if (autom && e.ex->board_state != 1)
        return MP_FAIL(rank, "buffer agreements without the shared board (state %d)",
                       e.ex->board_state);
    if (autom && board_names_left() != 0)
        return MP_FAIL(rank, "%d shared-memory board names of this process left in /dev/shm",
                       board_names_left());
    /* back on the first pair: the context built for it at the first call serves again */
    if (autom && mc->back && count_contexts(e.ex) != before_back)
        return MP_FAIL(rank, "%d contexts after the movers went back, %d before",
                       count_contexts(e.ex), before_back);
    MP_CHECK(rank, mscclpp_bootstrap_barrier(e.boot));
    if (st) mscclpp_stream_destroy(st);
    mp_exec_close(&e);
    pair_free(false, a[0], b[0]);
    pair_free(mc->to_malloc, a[1], b[1]);
    return 0;
}

START_TEST(t_direct_auto_one_rank_moves)
{
    set_dirs();
    static const moves_case_t cases[] = {
        {2, 1, false, false, false, "auto"}, /* rank 0 to new shared buffers */
        {2, 1, true, false, false, "auto"},  /* rank 0 to malloc'd ones */
        {2, 1, false, true, false, "auto"},  /* and back */
        {2, 1, true, true, false, "auto"},   /* to malloc'd and back */
        {2, 2, false, true, true, "auto"},   /* rank 1, on a stream */
        {2, 3, false, true, false, "auto"},  /* both ranks */
        {4, 4, false, true, false, "auto"},  /* rank 2 of 4 */
        {4, 9, true, true, true, "auto"},    /* ranks 0 and 3 of 4 to malloc'd and back */
        {4, 5, false, false, false, "auto"}, /* ranks 0 and 2 of 4, staying */
        {2, 1, false, true, false, NULL},    /* the default */
        {2, 1, false, true, false, "off"},
    };
    const moves_case_t *mc = &cases[_i];
    ck_assert_int_eq(mp_run(mc->n, moves_body, (void *)mc, 300, NULL), 0);
}
END_TEST

/* A rank may forget its buffers alone (mscclpp_executor_forget; the NCCL API's ncclMemFree):
 * under MSCCLPP_PLAN_DIRECT=auto the direct contexts are keyed by every rank's buffers, so
 * dropping one on that rank only would leave the ranks' caches unlike, and the bound on the
 * cache (MSCCLPP_EXEC_CONTEXTS, 3 here) would then evict on one rank and not on the other (a
 * barrier met by one rank: the call timed out). Rank 0 forgets its first pair alone; then four
 * calls on new pairs, every element checked. */
static int forget_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    setenv("MSCCLPP_PLAN_DIRECT", "auto", 1);
    setenv("MSCCLPP_EXEC_CONTEXTS", "3", 1);
    setenv("MSCCLPP_TIMEOUT", "10", 1);
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, NULL, &e)) return 1;
    const size_t count = 524288, bytes = count * sizeof(float); /* 2 MiB: direct/host's range */
    float *a[5], *b[5];
    int dropped = 0;
    for (int k = 0; k < 5; k++)
        if (pair_alloc(rank, false, bytes, &a[k], &b[k])) return 1;
    for (int k = 0; k < 5; k++) {
        for (size_t i = 0; i < count; i++) a[k][i] = (float)(rank + k + (int)(i % 3));
        MP_CHECK(rank, mscclpp_allreduce(e.ex, a[k], b[k], count, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                                         NULL));
        for (size_t i = 0; i < count; i++)
            if (b[k][i] != (float)(n * (n - 1) / 2 + n * (k + (int)(i % 3))))
                return MP_FAIL(rank, "call %d: element %zu is %g", k, i, b[k][i]);
        if (auto_ran(rank, e.ex, true, "allreduce", k)) return 1;
        if (k == 0 && rank == 0) MP_CHECK(rank, mscclpp_executor_forget(e.ex, a[0], &dropped));
    }
    if (dropped != 0)
        return MP_FAIL(rank, "forget dropped %d contexts keyed by every rank's buffers", dropped);
    MP_CHECK(rank, mscclpp_bootstrap_barrier(e.boot));
    mp_exec_close(&e);
    for (int k = 0; k < 5; k++) pair_free(false, a[k], b[k]);
    unsetenv("MSCCLPP_EXEC_CONTEXTS");
    unsetenv("MSCCLPP_TIMEOUT");
    return 0;
}

START_TEST(t_direct_auto_forget_alone)
{
    set_dirs();
    ck_assert_int_eq(mp_run(2, forget_body, NULL, 300, NULL), 0);
}
END_TEST

/* The per-call buffer agreement's failures (MSCCLPP_PLAN_DIRECT=auto, calls of 1 MiB and up):
 * case 0, ranks that make different calls there (2 and 4 MiB allreduces) both get "ranks
 * disagree", naming both ranks and the call, nothing launched, and then agree again (the next
 * same call is right); case 1, a rank whose call is below the direct plans' range (512 KiB, no
 * agreement) leaves its peer to say, within MSCCLPP_TIMEOUT, that the buffer agreement with
 * rank 1 failed, while rank 1 says that rank 0 did not answer its plan's context setup (both
 * messages named neither the call nor the cause before: only a bootstrap tag); a rank whose
 * peer gave up first may instead get the peer's failure (MSCCLPP_ERR_REMOTE), naming it. */
static int disagree_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    const int mode = *(const int *)arg;
    setenv("MSCCLPP_PLAN_DIRECT", "auto", 1);
    setenv("MSCCLPP_TIMEOUT", "3", 1);
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, NULL, &e)) return 1;
    const size_t big = 1048576; /* floats: 4 MiB */
    float *a = NULL, *b = NULL;
    if (pair_alloc(rank, false, big * sizeof(float), &a, &b)) return 1;
    size_t count = rank == 0 ? big / 2 : (mode == 0 ? big : big / 8);
    for (size_t i = 0; i < count; i++) a[i] = (float)(rank + 1);
    double t0 = mp_now_s();
    mscclpp_result_t r =
        mscclpp_allreduce(e.ex, a, b, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL);
    double dt = mp_now_s() - t0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
    if (r == MSCCLPP_OK) return MP_FAIL(rank, "calls of different sizes returned OK");
    if (dt > 3 + 2.0) return MP_FAIL(rank, "the error took %.2f s: %s", dt, msg);
    if (mode == 0) {
        if (r != MSCCLPP_ERR_INVALID_ARG || !strstr(msg, "ranks disagree") ||
            !strstr(msg, "rank 0") || !strstr(msg, "rank 1") || !strstr(msg, "allreduce"))
            return MP_FAIL(rank, "disagreeing calls: %s: %s", mscclpp_result_string(r), msg);
        /* every rank refused the call alike: the same call next is right */
        count = big / 2;
        for (size_t i = 0; i < count; i++) a[i] = (float)(rank + 1);
        MP_CHECK(rank, mscclpp_allreduce(e.ex, a, b, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
        for (size_t i = 0; i < count; i++)
            if (b[i] != 3.0f) return MP_FAIL(rank, "after agreeing: element %zu is %g", i, b[i]);
        MP_CHECK(rank, mscclpp_bootstrap_barrier(e.boot));
    } else if (r == MSCCLPP_ERR_REMOTE) {
        /* the peer gave up first (both wait MSCCLPP_TIMEOUT; on a loaded machine either side
         * can be first) and told this rank: the error names it */
        if (!strstr(msg, rank == 0 ? "rank 1" : "rank 0"))
            return MP_FAIL(rank, "a peer that gave up first: %s: %s",
                           mscclpp_result_string(r), msg);
    } else if (r != MSCCLPP_ERR_TIMEOUT ||
               !strstr(msg, rank == 0 ? "buffer agreement of this allreduce call"
                                      : "setting up a plan's context") ||
               !strstr(msg, rank == 0 ? "rank 1" : "rank 0") ||
               !strstr(msg, "makes another call")) {
        return MP_FAIL(rank, "a peer that makes another call: %s: %s",
                       mscclpp_result_string(r), msg);
    }
    printf("# %s: rank %d: %s in %.2f s: %s\n", mode ? "peer elsewhere" : "disagree", rank,
           mscclpp_result_string(r), dt, msg);
    mp_exec_close(&e);
    pair_free(false, a, b);
    unsetenv("MSCCLPP_TIMEOUT");
    return 0;
}

START_TEST(t_direct_auto_disagree)
{
    set_dirs();
    int mode = _i;
    ck_assert_int_eq(mp_run(2, disagree_body, &mode, 120, NULL), 0);
}
END_TEST

START_TEST(t_direct_auto)
{
    set_dirs();
    /* {ranks, malloc mask}: all shared, rank 0 / rank 1 / both malloc'd; 4 ranks: all
     * shared, rank 2 malloc'd, all malloc'd */
    static const struct {
        int n;
        unsigned mask;
    } cases[] = {{2, 0}, {2, 1}, {2, 2}, {2, 3}, {4, 0}, {4, 4}, {4, 15}};
    unsigned mask = cases[_i].mask;
    ck_assert_int_eq(mp_run(cases[_i].n, auto_body, &mask, 300, NULL), 0);
}
END_TEST

/* ---- the fast path for contexts that share the caller's buffers (issue 19 item 5) ----------- */

/* One out-of-place (or in-place: a == b) allreduce of `count` floats with the direct plans,
 * on `st` (or none), every element checked; *hit: whether it took the fast path. */
static int fast_io_call(int rank, int n, mscclpp_executor_t *ex, float *a, float *b, size_t count,
                        int k, mscclpp_stream_t st, bool *hit)
{
    uint64_t before = ex->fast.hits;
    for (size_t i = 0; i < count; i++) a[i] = (float)(rank + k + (int)(i % 5));
    MP_CHECK(rank, mscclpp_allreduce(ex, a, b, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, st));
    if (st) MP_CHECK(rank, mscclpp_stream_synchronize(st));
    for (size_t i = 0; i < count; i++)
        if (b[i] != (float)(n * (n - 1) / 2 + n * (k + (int)(i % 5))))
            return MP_FAIL(rank, "call %d: element %zu is %g", k, i, b[i]);
    *hit = ex->fast.hits != before;
    return 0;
}

/* What the NCCL layer asks before a call (mscclpp_executor_direct): these buffers are the
 * direct plan's. */
static int ask_direct(int rank, mscclpp_executor_t *ex, const float *send, const float *recv,
                      size_t bytes)
{
    int direct = 0;
    MP_CHECK(rank, mscclpp_executor_direct(ex, NULL, "allreduce", send, recv, bytes, bytes,
                                           MSCCLPP_FLOAT32, &direct));
    if (!direct)
        return MP_FAIL(rank, "mscclpp_executor_direct: %p -> %p does not run direct", send, recv);
    return 0;
}

/* arg: 0 mscclpp_malloc'd buffers (contexts keyed by the allocations), 1 malloc'd (staged
 * contexts), 2 the application's memfd mappings (foreign: keyed by the allocations); 3 and 4:
 * 0 and 2 with each call asked about first (ask_direct), for mscclpp_malloc'd buffers before
 * the output buffer is renewed (its lookup must not serve the new one) */
static int fast_io_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    const bool ask = *(const int *)arg >= 3;
    const int mode = *(const int *)arg == 3 ? 0 : *(const int *)arg == 4 ? 2 : *(const int *)arg;
    char dir[900];
    snprintf(dir, sizeof dir, "%s/direct", mp_plan_dir());
    setenv("MSCCLPP_PLAN_DIR", dir, 1); /* this rank's process only */
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, NULL, &e)) return 1;
    const size_t count = 262144, bytes = count * sizeof(float); /* 1 MiB: the direct plan's */
    float *a = NULL, *b = NULL;
    if (mode == 0) {
        MP_CHECK(rank, mscclpp_malloc(bytes, (void **)&a));
        MP_CHECK(rank, mscclpp_malloc(bytes, (void **)&b));
    } else if (mode == 1) {
        a = malloc(bytes);
        b = malloc(bytes);
    } else {
        a = mp_app_map(bytes, NULL);
        b = mp_app_map(bytes, NULL);
    }
    if (!a || !b) return MP_FAIL(rank, "no buffers");
    mscclpp_stream_t st = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&st));
    /* expected: miss (first), hit, hit on a stream; after the output buffer is freed and
     * allocated again (mapped anew at the same address: modes 0 and 2) miss, hit; in place
     * miss, hit */
    static const struct {
        bool on_stream, renew, inplace, hit;
    } calls[] = {{false, false, false, false}, {false, false, false, true},
                 {true, false, false, true},   {false, true, false, false},
                 {false, false, false, true},  {false, false, true, false},
                 {true, false, true, true}};
    for (int k = 0; k < (int)(sizeof calls / sizeof *calls); k++) {
        if (calls[k].renew && mode == 1) continue; /* malloc gives no address back for sure */
        if (ask && mode == 0 && ask_direct(rank, e.ex, calls[k].inplace ? b : a, b, bytes))
            return 1;
        if (calls[k].renew && mode == 0) {
            void *old = b;
            MP_CHECK(rank, mscclpp_free(b));
            MP_CHECK(rank, mscclpp_malloc(bytes, (void **)&b));
            if (b != old) /* another address misses anyway: still checked */
                fprintf(stderr, "rank %d: mscclpp_malloc gave %p, not %p again\n", rank, (void *)b,
                        old);
        } else if (calls[k].renew && (b = mp_app_map(bytes, b)) == NULL) {
            return MP_FAIL(rank, "cannot map a new buffer at the old one's address");
        }
        bool hit = false;
        float *src = calls[k].inplace ? b : a;
        if (ask && mode == 2 && ask_direct(rank, e.ex, src, b, bytes)) return 1;
        if (fast_io_call(rank, n, e.ex, src, b, count, k, calls[k].on_stream ? st : NULL, &hit))
            return 1;
        if (hit != calls[k].hit)
            return MP_FAIL(rank, "mode %d call %d (%s%s%s) %s the fast path", mode, k,
                           calls[k].inplace ? "in place" : "out of place",
                           calls[k].on_stream ? ", on a stream" : "",
                           calls[k].renew ? ", output buffer renewed" : "",
                           hit ? "took" : "missed");
    }
    /* the direct plan served them, on stand-ins exactly when the buffers are malloc'd */
    int direct = 0, staged = 0;
    for (const exec_context_t *c = exec_context_next(e.ex, NULL); c; c = exec_context_next(e.ex, c))
        if (strstr(c->plan->name, "direct_")) {
            direct++;
            staged += c->staged;
        }
    if (!direct || (mode == 1) != (staged > 0))
        return MP_FAIL(rank, "mode %d: %d direct context(s), %d staged", mode, direct, staged);
    MP_CHECK(rank, mscclpp_bootstrap_barrier(e.boot));
    mscclpp_stream_destroy(st);
    mp_exec_close(&e);
    if (mode == 0) {
        mscclpp_free(a);
        mscclpp_free(b);
    } else if (mode == 1) {
        free(a);
        free(b);
    } else {
        munmap(a, bytes);
        munmap(b, bytes);
    }
    return 0;
}

START_TEST(t_fast_io)
{
    set_dirs();
    int mode = _i;
    ck_assert_int_eq(mp_run(2, fast_io_body, &mode, 300, NULL), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("buffers");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, t_foreign_io);
    tcase_add_test(tc, t_asymmetric_offsets);
    tcase_add_test(tc, t_private_refused);
    tcase_add_test(tc, t_scratch_bounded);
    tcase_add_test(tc, t_fast_path);
    tcase_add_loop_test(tc, t_direct_staged, 0, 3);
    tcase_add_loop_test(tc, t_direct_back_to_back, 0, 2);
    tcase_add_loop_test(tc, t_fast_io, 0, 5);
    tcase_add_loop_test(tc, t_direct_auto, 0, 7);
    tcase_add_loop_test(tc, t_direct_auto_one_rank_moves, 0, 11);
    tcase_add_test(tc, t_direct_auto_forget_alone);
    tcase_add_loop_test(tc, t_direct_auto_disagree, 0, 2);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
