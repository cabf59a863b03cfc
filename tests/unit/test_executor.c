/*
 * The executor's public API on forked ranks: collectives through the default plans (in-place
 * and out-of-place, moving buffers, broadcast from every root), plan registration and
 * selection, reset, and the errors users hit (bad arguments, wrong world size, sizes outside a
 * plan's range, memory the backend cannot share).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"

static const char *plan_dir; /* the source tree's plans/ */

static void set_plan_dir(void) { plan_dir = mp_plan_dir(); }

static int collectives_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, NULL, &e)) return 1;
    size_t cap = 1 << 20;
    float *a = NULL, *b = NULL;
    MP_CHECK(rank, mscclpp_malloc(cap, (void **)&a));
    MP_CHECK(rank, mscclpp_malloc(cap, (void **)&b));

    /* allreduce at moving offsets inside the same allocations, then in place */
    for (int round = 0; round < 6; round++) {
        size_t count = 100 + (size_t)round * 333, off = (size_t)round * 8;
        float *src = a + off, *dst = round % 2 ? src : b + off * 2;
        for (size_t i = 0; i < count; i++) src[i] = (float)(rank * 3 + (int)(i % 5));
        MP_CHECK(rank,
                 mscclpp_allreduce(e.ex, src, dst, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
        for (size_t i = 0; i < count; i++) {
            float want = (float)(3 * n * (n - 1) / 2 + n * (int)(i % 5));
            if (dst[i] != want)
                return MP_FAIL(rank, "allreduce round %d element %zu: %g want %g", round, i,
                               dst[i], want);
        }
    }
    /* broadcast from every root (plans written for root 0, run with rotated ranks) */
    for (int root = 0; root < n; root++) {
        size_t count = 777;
        for (size_t i = 0; i < count; i++) a[i] = rank == root ? (float)(root * 1000 + i) : -1;
        memset(b, 0, count * sizeof(float));
        MP_CHECK(rank, mscclpp_broadcast(e.ex, a, b, count, MSCCLPP_FLOAT32, root, NULL));
        for (size_t i = 0; i < count; i++)
            if (b[i] != (float)(root * 1000 + i))
                return MP_FAIL(rank, "broadcast root %d element %zu: %g", root, i, b[i]);
    }
    /* in-place allgather and reducescatter (served by out-of-place plans with staging) */
    {
        size_t count = 123;
        float *mine = b + (size_t)rank * count;
        for (size_t i = 0; i < count; i++) mine[i] = (float)(rank * 100 + (int)i);
        MP_CHECK(rank, mscclpp_allgather(e.ex, mine, b, count, MSCCLPP_FLOAT32, NULL));
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < count; i++)
                if (b[(size_t)p * count + i] != (float)(p * 100 + (int)i))
                    return MP_FAIL(rank, "in-place allgather block %d element %zu", p, i);
        for (size_t i = 0; i < count * n; i++) a[i] = (float)(i % 11);
        float *out = a + (size_t)rank * count;
        MP_CHECK(rank,
                 mscclpp_reducescatter(e.ex, a, out, count, MSCCLPP_FLOAT32, MSCCLPP_MAX, NULL));
        for (size_t i = 0; i < count; i++)
            if (out[i] != (float)(((size_t)rank * count + i) % 11))
                return MP_FAIL(rank, "in-place reducescatter element %zu: %g", i, out[i]);
    }
    /* alltoall */
    {
        size_t count = 50;
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < count; i++) a[(size_t)p * count + i] = (float)(rank * 10000 + p * 100 + (int)i);
        MP_CHECK(rank, mscclpp_alltoall(e.ex, a, b, count, MSCCLPP_FLOAT32, NULL));
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < count; i++)
                if (b[(size_t)p * count + i] != (float)(p * 10000 + rank * 100 + (int)i))
                    return MP_FAIL(rank, "alltoall from %d element %zu", p, i);
    }
    /* reset drops contexts; the next call rebuilds them */
    MP_CHECK(rank, mscclpp_executor_reset(e.ex));
    for (size_t i = 0; i < 64; i++) a[i] = 1;
    MP_CHECK(rank, mscclpp_allreduce(e.ex, a, b, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
    if (b[63] != (float)n) return MP_FAIL(rank, "allreduce after reset: %g", b[63]);

    /* the host backend's device memory is host memory: plans that touch only scratch (every
     * built-in plan) run on malloc'd buffers too, out of place and in place */
    float *plain = malloc(4096 * sizeof(float));
    for (size_t i = 0; i < 4096; i++) plain[i] = (float)(rank + (int)(i % 7));
    MP_CHECK(rank, mscclpp_allreduce(e.ex, plain, plain + 2048, 2048, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                                     NULL));
    MP_CHECK(rank, mscclpp_allreduce(e.ex, plain, plain, 2048, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
    for (size_t i = 0; i < 2048; i++) {
        float want = (float)(n * (n - 1) / 2 + n * (int)(i % 7));
        if (plain[i] != want || plain[2048 + i] != want)
            return MP_FAIL(rank, "malloc'd buffers, element %zu: %g and %g, want %g", i,
                           plain[i], plain[2048 + i], want);
    }
    free(plain);
    if (mscclpp_allreduce(e.ex, a, b, 64, (mscclpp_dtype_t)99, MSCCLPP_SUM, NULL) !=
        MSCCLPP_ERR_INVALID_ARG)
        return MP_FAIL(rank, "bad dtype accepted");
    if (mscclpp_allreduce(e.ex, a, b, 64, MSCCLPP_FLOAT32, (mscclpp_redop_t)7, NULL) !=
        MSCCLPP_ERR_INVALID_ARG)
        return MP_FAIL(rank, "bad op accepted");
    if (mscclpp_broadcast(e.ex, a, b, 64, MSCCLPP_FLOAT32, n, NULL) != MSCCLPP_ERR_INVALID_ARG)
        return MP_FAIL(rank, "bad root accepted");
    mscclpp_plan_t *p4 = NULL;
    char path[600];
    snprintf(path, sizeof path, "%s/allreduce_pkt_%d.json", plan_dir, n == 4 ? 2 : 4);
    MP_CHECK(rank, mscclpp_plan_load_file(path, &p4));
    if (mscclpp_execute(e.ex, p4, a, b, 256, 256, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL) !=
            MSCCLPP_ERR_INVALID_ARG ||
        !strstr(mscclpp_last_error(), "ranks"))
        return MP_FAIL(rank, "world-size mismatch: %s", mscclpp_last_error());
    mscclpp_plan_destroy(p4);
    /* a registered plan is selected; sizes outside its range are refused */
    mscclpp_plan_t *mine = NULL;
    snprintf(path, sizeof path, "%s/allreduce_allpairs_%d.json", plan_dir, n);
    MP_CHECK(rank, mscclpp_plan_load_file(path, &mine));
    MP_CHECK(rank, mscclpp_executor_register_plan(e.ex, mine, 0, "variant=test"));
    const mscclpp_plan_t *sel = NULL;
    MP_CHECK(rank, mscclpp_executor_select_plan(e.ex, "allreduce", 0, 1024, "variant=test", &sel));
    if (sel != mine) return MP_FAIL(rank, "registered plan not selected");
    if (mscclpp_executor_select_plan(e.ex, "allreduce", 0, 1024, "variant=other", &sel) !=
        MSCCLPP_ERR_UNSUPPORTED)
        return MP_FAIL(rank, "tag mismatch selected a plan");
    if (mscclpp_execute(e.ex, mine, a, b, (size_t)1 << 19, (size_t)1 << 19, MSCCLPP_FLOAT32,
                        MSCCLPP_SUM, NULL) != MSCCLPP_ERR_INVALID_ARG ||
        !strstr(mscclpp_last_error(), "accepts messages"))
        return MP_FAIL(rank, "oversized message: %s", mscclpp_last_error());
    if (mscclpp_execute(NULL, mine, a, b, 64, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL) !=
            MSCCLPP_ERR_INVALID_ARG ||
        mscclpp_execute(e.ex, NULL, a, b, 64, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL) !=
            MSCCLPP_ERR_INVALID_ARG ||
        mscclpp_execute(e.ex, mine, NULL, b, 64, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL) !=
            MSCCLPP_ERR_INVALID_ARG ||
        mscclpp_execute_ex(e.ex, mine, a, b, 64, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                           (mscclpp_packet_t)5, NULL) != MSCCLPP_ERR_INVALID_ARG)
        return MP_FAIL(rank, "bad execute arguments accepted");
    /* LL8 packets through the same plan */
    for (size_t i = 0; i < 256; i++) a[i] = (float)(rank + 1);
    MP_CHECK(rank, mscclpp_execute_ex(e.ex, mine, a, b, 1024, 1024, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                                      MSCCLPP_PACKET_LL8, NULL));
    if (b[255] != (float)(n * (n + 1) / 2)) return MP_FAIL(rank, "LL8 allreduce: %g", b[255]);

    mp_exec_close(&e);
    mscclpp_plan_destroy(mine);
    mscclpp_free(a);
    mscclpp_free(b);
    return 0;
}

START_TEST(t_collectives)
{
    set_plan_dir();
    int n = _i;
    ck_assert_int_eq(mp_run(n, collectives_body, NULL, 300, NULL), 0);
}
END_TEST

/*
 * Back-to-back allreduces on the same buffers whose size changes from call to call, with no
 * barrier between them. Packet plans alternate scratch halves by call; the halves must not
 * move with the message size, or a fast rank writes the next call's packets over ones its peer
 * has not read yet (seen as "timed out waiting for LL packets with flag 22 (last seen 23)").
 * Simple plans place their scratch chunks by message size: after a small call, a fast rank's
 * next, larger call wrote a peer's scratch where that peer still copied out the small call's
 * result (t_size_alternate: 3 ranks, 2048 then 70016 bytes gave wrong bytes); the launch fence
 * of a call whose shape changed prevents that (kern_args.h).
 */
static int size_cycle_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    static const size_t mixed[] = {32, 32, 1024, 1024, 70016, 70016, 8, 4096, 200, 70016};
    static const size_t simple[] = {2048, 70016}; /* Simple plans on every backend */
    const size_t *sizes = arg ? simple : mixed;
    const size_t ns = arg ? 2 : sizeof mixed / sizeof mixed[0];
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, NULL, &e)) return 1;
    uint8_t *a = NULL, *b = NULL;
    MP_CHECK(rank, mscclpp_malloc(1 << 17, (void **)&a));
    MP_CHECK(rank, mscclpp_malloc(1 << 17, (void **)&b));
    for (int it = 0; it < 300; it++) {
        size_t count = sizes[(size_t)it % ns];
        for (size_t i = 0; i < count; i++) a[i] = (uint8_t)(rank + i + (size_t)it);
        MP_CHECK(rank, mscclpp_allreduce(e.ex, a, b, count, MSCCLPP_UINT8, MSCCLPP_SUM, NULL));
        for (size_t i = 0; i < count; i++) {
            uint8_t want = 0;
            for (int r = 0; r < n; r++) want = (uint8_t)(want + r + i + (size_t)it);
            if (b[i] != want)
                return MP_FAIL(rank, "iteration %d (%zu bytes): b[%zu] = %u, want %u", it, count,
                               i, b[i], want);
        }
    }
    mp_exec_close(&e);
    mscclpp_free(a);
    mscclpp_free(b);
    return 0;
}

START_TEST(t_size_cycle)
{
    set_plan_dir();
    setenv("MSCCLPP_TIMEOUT", "5", 1);
    ck_assert_int_eq(mp_run(_i, size_cycle_body, NULL, 120, NULL), 0);
    unsetenv("MSCCLPP_TIMEOUT");
}
END_TEST

START_TEST(t_size_alternate)
{
    set_plan_dir();
    setenv("MSCCLPP_TIMEOUT", "5", 1);
    ck_assert_int_eq(mp_run(3, size_cycle_body, (void *)1, 120, NULL), 0);
    unsetenv("MSCCLPP_TIMEOUT");
}
END_TEST

/*
 * One rank moves its buffers inside their allocations from call to call, the other does not,
 * at one size: the lowered plan is rebuilt on the moving rank only. Whether a launch fences
 * must not follow that (the ranks would disagree and one would wait in its fence for a signal
 * that never comes): it depends only on the context and the call shape.
 */
static int offset_moves_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, NULL, &e)) return 1;
    uint8_t *a = NULL, *b = NULL;
    MP_CHECK(rank, mscclpp_malloc(1 << 16, (void **)&a));
    MP_CHECK(rank, mscclpp_malloc(1 << 16, (void **)&b));
    const size_t count = 4096;
    for (int it = 0; it < 40; it++) {
        size_t off = rank == 1 ? (size_t)(it % 3) * 256 : 0;
        uint8_t *x = a + off, *y = b + off;
        for (size_t i = 0; i < count; i++) x[i] = (uint8_t)(rank + i + (size_t)it);
        MP_CHECK(rank, mscclpp_allreduce(e.ex, x, y, count, MSCCLPP_UINT8, MSCCLPP_SUM, NULL));
        for (size_t i = 0; i < count; i++) {
            uint8_t want = 0;
            for (int r = 0; r < n; r++) want = (uint8_t)(want + r + i + (size_t)it);
            if (y[i] != want)
                return MP_FAIL(rank, "iteration %d: y[%zu] = %u, want %u", it, i, y[i], want);
        }
    }
    mp_exec_close(&e);
    mscclpp_free(a);
    mscclpp_free(b);
    return 0;
}

START_TEST(t_offset_moves)
{
    set_plan_dir();
    /* 20 s, not 5: this case checks bytes, not failure times, and failed once (both ranks)
     * in a full run at load ~270 while passing 4 of 4 reruns at load 60-190 */
    setenv("MSCCLPP_TIMEOUT", "20", 1);
    ck_assert_int_eq(mp_run(2, offset_moves_body, NULL, 120, NULL), 0);
    unsetenv("MSCCLPP_TIMEOUT");
}
END_TEST

/*
 * In-place calls served by out-of-place plans stage their input in a buffer of the executor's,
 * which grows with the message. Queued on a stream without a sync in between, the second
 * (larger) call grew it while the first launch still read the old one and its contexts: they
 * were freed under it. Growing now waits for the queued launches first.
 */
static int staging_growth_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, NULL, &e)) return 1;
    mscclpp_stream_t s = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&s));
    const size_t counts[] = {1024, 64 * 1024, 256 * 1024}; /* floats: the staging grows twice */
    float *buf[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        MP_CHECK(rank, mscclpp_malloc(counts[k] * sizeof(float), (void **)&buf[k]));
        for (size_t i = 0; i < counts[k]; i++) buf[k][i] = (float)(rank + 1) * (float)(i % 251);
    }
    for (int k = 0; k < 3; k++)
        MP_CHECK(rank, mscclpp_allreduce(e.ex, buf[k], buf[k], counts[k], MSCCLPP_FLOAT32,
                                         MSCCLPP_SUM, s));
    MP_CHECK(rank, mscclpp_stream_synchronize(s));
    float sum = (float)(n * (n + 1) / 2);
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < counts[k]; i++)
            if (buf[k][i] != sum * (float)(i % 251))
                return MP_FAIL(rank, "call %d: buf[%zu] = %g, want %g", k, i, buf[k][i],
                               sum * (float)(i % 251));
    mscclpp_stream_destroy(s);
    mp_exec_close(&e);
    for (int k = 0; k < 3; k++) mscclpp_free(buf[k]);
    return 0;
}

START_TEST(t_staging_growth)
{
    set_plan_dir();
    ck_assert_int_eq(mp_run(2, staging_growth_body, NULL, 120, NULL), 0);
}
END_TEST

/*
 * A plan destroyed by its caller while the executor keeps it: the context of a call it ran
 * (the next call with another plan announces its setup in that context, reading its plan) and
 * a registry entry (mscclpp_executor_register_plan, then selection at every call). The plan's
 * memory was freed under both (ASan: heap-use-after-free in exec_setup_announce, found by
 * test_kern_trace); the executor now holds the plans it keeps (plan_hold).
 */
static int destroyed_plan_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, NULL, &e)) return 1;
    const size_t cap = 128 * 1024; /* floats per rank */
    float *a = NULL, *b = NULL;
    MP_CHECK(rank, mscclpp_malloc(cap * sizeof(float) * (size_t)n, (void **)&a));
    MP_CHECK(rank, mscclpp_malloc(cap * sizeof(float) * (size_t)n, (void **)&b));
    /* each in its size range: the Simple allreduce from 256 KiB + 1, the packet one to 256 KiB */
    const char *files[] = {"allreduce_simple_2.json", "allgather_2.json", "allreduce_pkt_2.json"};
    const size_t counts[] = {cap, 16 * 1024, 16 * 1024};
    for (int k = 0; k < 3; k++) {
        const size_t count = counts[k];
        char path[600];
        snprintf(path, sizeof path, "%s/%s", plan_dir, files[k]);
        mscclpp_plan_t *p = NULL;
        MP_CHECK(rank, mscclpp_plan_load_file(path, &p));
        const int gather = k == 1;
        const size_t out = gather ? count * (size_t)n : count;
        for (size_t i = 0; i < count; i++) a[i] = (float)(rank + k);
        MP_CHECK(rank, mscclpp_execute(e.ex, p, a, b, count * sizeof(float), out * sizeof(float),
                                       MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
        MP_CHECK(rank, mscclpp_plan_destroy(p)); /* the executor keeps its context */
        for (size_t i = 0; i < out; i++) {
            float want = gather ? (float)((int)(i / count) + k) : (float)(n * (n - 1) / 2 + n * k);
            if (b[i] != want)
                return MP_FAIL(rank, "%s: b[%zu] = %g, want %g", files[k], i, b[i], want);
        }
    }
    /* registered, then destroyed: the registry still selects it */
    char path[600];
    snprintf(path, sizeof path, "%s/allreduce_allpairs_2.json", plan_dir);
    mscclpp_plan_t *p = NULL;
    MP_CHECK(rank, mscclpp_plan_load_file(path, &p));
    MP_CHECK(rank, mscclpp_executor_register_plan(e.ex, p, 0, NULL));
    MP_CHECK(rank, mscclpp_plan_destroy(p));
    for (int call = 0; call < 2; call++) {
        for (size_t i = 0; i < 256; i++) a[i] = (float)(rank + call);
        MP_CHECK(rank, mscclpp_allreduce(e.ex, a, b, 256, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
        for (size_t i = 0; i < 256; i++)
            if (b[i] != (float)(n * (n - 1) / 2 + n * call))
                return MP_FAIL(rank, "registered plan, call %d: b[%zu] = %g", call, i, b[i]);
    }
    mp_exec_close(&e); /* the last holders go with the executor (ASan: nothing leaks) */
    mscclpp_free(a);
    mscclpp_free(b);
    return 0;
}

START_TEST(t_plan_destroyed_early)
{
    set_plan_dir();
    ck_assert_int_eq(mp_run(2, destroyed_plan_body, NULL, 120, NULL), 0);
}
END_TEST

/*
 * mscclpp_free then mscclpp_malloc of the same sizes hands back the same addresses (the
 * allocator reuses the range). A plan that writes the peers' output buffers keeps mappings of
 * them in its context, which was keyed by the allocation's address only: the second call found
 * the old context and put into the peer's old output (still mapped by us, so no fault), and the
 * peer's new output kept its stale bytes. Contexts now also remember which allocation they
 * were built on.
 */
static int realloc_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    char path[600];
    const char *top = getenv("MSCCLPP_TOP_SRCDIR");
    snprintf(path, sizeof path, "%s/tests/fuzz/plan-corpus/allgather_2.json", top ? top : ".");
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, path, &e)) return 1;
    const size_t count = 1024; /* int32 per rank */
    int same = 0;
    void *prev_in = NULL, *prev_out = NULL;
    for (int round = 0; round < 4; round++) {
        int32_t *in = NULL, *out = NULL;
        MP_CHECK(rank, mscclpp_malloc(count * 4, (void **)&in));
        MP_CHECK(rank, mscclpp_malloc(count * 4 * (size_t)n, (void **)&out));
        same += in == prev_in && out == prev_out;
        prev_in = in;
        prev_out = out;
        for (size_t i = 0; i < count; i++) in[i] = (int32_t)(round * 100000 + rank * 1000 + i);
        memset(out, 0xee, count * 4 * (size_t)n);
        MP_CHECK(rank, mscclpp_execute(e.ex, e.plan, in, out, count * 4, count * 4 * (size_t)n,
                                       MSCCLPP_INT32, MSCCLPP_SUM, NULL));
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < count; i++) {
                int32_t want = (int32_t)(round * 100000 + p * 1000 + i);
                if (out[(size_t)p * count + i] != want)
                    return MP_FAIL(rank, "round %d (same addresses as before: %s): block of "
                                   "rank %d element %zu is %d, want %d", round,
                                   in == prev_in ? "yes" : "no", p, i,
                                   (int)out[(size_t)p * count + i], (int)want);
            }
        /* both ranks free before either allocates again */
        MP_CHECK(rank, mscclpp_bootstrap_barrier(e.boot));
        MP_CHECK(rank, mscclpp_free(in));
        MP_CHECK(rank, mscclpp_free(out));
    }
    if (same == 0) fprintf(stderr, "rank %d: the allocator never reused an address\n", rank);
    mp_exec_close(&e);
    return 0;
}

START_TEST(t_realloc_same_address)
{
    set_plan_dir();
    setenv("MSCCLPP_TIMEOUT", "5", 1);
    ck_assert_int_eq(mp_run(2, realloc_body, NULL, 120, NULL), 0);
    unsetenv("MSCCLPP_TIMEOUT");
}
END_TEST

/* An in-place plan called out of place is refused (before: it ran, reading an output block the
 * caller never wrote, and returned OK with garbage). */
static int inplace_misuse_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    char path[1100];
    snprintf(path, sizeof path, "%s/tests/multinode/programs/allgather_pkt_2x1.json", mp_src_dir());
    mp_exec_t e;
    if (mp_exec_open(rank, n, id, path, &e)) return 1;
    float *in = NULL, *out = NULL;
    MP_CHECK(rank, mscclpp_malloc(4096, (void **)&in));
    MP_CHECK(rank, mscclpp_malloc(4096 * (size_t)n, (void **)&out));
    mscclpp_result_t r = mscclpp_execute(e.ex, e.plan, in, out, 4096, 4096 * (size_t)n,
                                         MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL);
    if (r != MSCCLPP_ERR_INVALID_ARG || !strstr(mscclpp_last_error(), "is in-place"))
        return MP_FAIL(rank, "out-of-place call of an in-place plan: %s (%s)",
                       mscclpp_result_string(r), mscclpp_last_error());
    mp_exec_close(&e);
    mscclpp_free(in);
    mscclpp_free(out);
    return 0;
}

START_TEST(t_inplace_misuse)
{
    ck_assert_int_eq(mp_run(2, inplace_misuse_body, NULL, 60, NULL), 0);
}
END_TEST

START_TEST(t_bad_arguments)
{
    mscclpp_executor_t *ex = NULL;
    mscclpp_plan_t *plan = NULL;
    const mscclpp_plan_t *cp = NULL;
    int k = 0;
    ck_assert_int_eq(mscclpp_executor_create(NULL, &ex), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_executor_reset(NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_executor_destroy(NULL), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_executor_register_plan(NULL, plan, 0, NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_executor_load_plan_dir(NULL, NULL, &k), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_executor_select_plan(NULL, "allreduce", 0, 8, NULL, &cp),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_allreduce(NULL, &k, &k, 1, MSCCLPP_INT32, MSCCLPP_SUM, NULL),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_allgather(NULL, &k, &k, 1, MSCCLPP_INT32, NULL),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_reducescatter(NULL, &k, &k, 1, MSCCLPP_INT32, MSCCLPP_SUM, NULL),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_alltoall(NULL, &k, &k, 1, MSCCLPP_INT32, NULL),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_broadcast(NULL, &k, &k, 1, MSCCLPP_INT32, 0, NULL),
                     MSCCLPP_ERR_INVALID_ARG);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("executor");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, t_bad_arguments);
    tcase_add_loop_test(tc, t_collectives, 2, 5); /* 2, 3 and 4 ranks */
    tcase_add_loop_test(tc, t_collectives, 8, 9);
    tcase_add_loop_test(tc, t_size_cycle, 2, 4); /* 2 and 3 ranks */
    tcase_add_test(tc, t_size_alternate);
    tcase_add_test(tc, t_offset_moves);
    tcase_add_test(tc, t_inplace_misuse);
    tcase_add_test(tc, t_staging_growth);
    tcase_add_test(tc, t_plan_destroyed_early);
    tcase_add_test(tc, t_realloc_same_address);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
