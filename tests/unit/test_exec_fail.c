/*
 * Executor failures on forked ranks (issue 8): nothing lost, nothing hung.
 *
 * - A wait that times out in a launch on a user stream is reported by the call or the stream's
 *   synchronize, naming rank, op and peer, within MSCCLPP_TIMEOUT + 1 s; the executor is then
 *   broken: every later call returns that error at once (never OK doing nothing), as does
 *   mscclpp_executor_get_async_error; destroying it and the communicator and making new ones
 *   works.
 * - An executor destroyed with a launch still pending on a stream waits for it and returns
 *   its error; the stream's later sync is clean.
 * - A partial failure (one rank timed out, its peer did not call): the broken rank's next call
 *   fails at once with "broken by an earlier error" (no misleading setup-tag message), the
 *   peer's own call times out naming the broken rank, and both recover by recreating.
 * - A rank killed (SIGKILL) during context setup, a collective without a stream, and one on a
 *   stream: every survivor returns an error naming the dead rank within MSCCLPP_TIMEOUT + 1 s;
 *   between two calls of different sizes it is the launch fence's wait that fails, between two
 *   of one shape an op of the plan.
 *
 * MSCCLPP_TIMEOUT is SETUP_TIMEOUT_S while ranks start and build contexts (a loaded CI machine
 * may start a rank seconds after another), and TIMEOUT_S for the phase under test, whose calls
 * use another size so that they are lowered (and take their wait bound) under it.
 */
#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"

#define TIMEOUT_S 2
#define SETUP_TIMEOUT_S 30
/* allreduce_simple plans (signal/wait on memory channels) take messages above 256 KiB */
#define BUF_BYTES ((size_t)1 << 20)
#define WARM_BYTES BUF_BYTES          /* calls before the phase under test */
#define FAIL_BYTES ((size_t)512 << 10) /* calls of the phase under test */

static const char *plan_dir; /* the source tree's plans/ (MSCCLPP_PLAN_DIR) */

/* What every rank holds. */
typedef struct {
    int rank, n;
    mp_exec_t x; /* comm, bootstrap, executor, the simple allreduce plan */
    float *a, *b;
    mscclpp_stream_t stream;
    size_t bytes; /* of the next simple_allreduce */
} rank_t;

/* Enter the phase under test: the short timeout, and calls of a size not lowered yet. */
static void failure_phase(rank_t *r)
{
    mp_set_timeout(TIMEOUT_S);
    r->bytes = FAIL_BYTES;
}

static int rank_open(rank_t *r, int rank, int n, const mscclpp_unique_id_t *id)
{
    memset(r, 0, sizeof *r);
    r->rank = rank;
    r->n = n;
    char path[1100];
    snprintf(path, sizeof path, "%s/allreduce_simple_%d.json", plan_dir, n);
    if (mp_exec_open(rank, n, id, path, &r->x)) return 1;
    MP_CHECK(rank, mscclpp_malloc(BUF_BYTES, (void **)&r->a));
    MP_CHECK(rank, mscclpp_malloc(BUF_BYTES, (void **)&r->b));
    r->bytes = WARM_BYTES;
    MP_CHECK(rank, mscclpp_stream_create(&r->stream));
    return 0;
}

static void rank_close(rank_t *r)
{
    if (r->stream) mscclpp_stream_destroy(r->stream);
    mp_exec_close(&r->x);
    mscclpp_free(r->a);
    mscclpp_free(r->b);
    memset(r, 0, sizeof *r);
}

/* One allreduce of r->bytes through the simple plan; checks the sum when it succeeds. */
static mscclpp_result_t simple_allreduce(rank_t *r, mscclpp_stream_t stream, int check)
{
    size_t count = r->bytes / sizeof(float);
    for (size_t i = 0; i < count; i++) r->a[i] = (float)(r->rank + 1 + (int)(i % 7));
    memset(r->b, 0, r->bytes);
    mscclpp_result_t res = mscclpp_execute(r->x.ex, r->x.plan, r->a, r->b, r->bytes, r->bytes,
                                           MSCCLPP_FLOAT32, MSCCLPP_SUM, stream);
    if (res == MSCCLPP_OK && stream) res = mscclpp_stream_synchronize(stream);
    if (res != MSCCLPP_OK || !check) return res;
    for (size_t i = 0; i < count; i++) {
        float want = (float)(r->n * (r->n + 1) / 2 + r->n * (int)(i % 7));
        if (r->b[i] != want) {
            fprintf(stderr, "# rank %d: element %zu is %g, want %g\n", r->rank, i, r->b[i],
                    want);
            return MSCCLPP_ERR_INTERNAL;
        }
    }
    return MSCCLPP_OK;
}

/* The error text must name all of `words`. */
static int names(int rank, const char *what, const char *msg, const char *const *words, int n)
{
    for (int i = 0; i < n; i++)
        if (!strstr(msg, words[i]))
            return MP_FAIL(rank, "%s: message does not name '%s': %s", what, words[i], msg);
    return 0;
}

/*
 * The new unique id after a failure travels out of band, as a real job would send it over MPI
 * or its launcher: rank 0 makes it and publishes it in memory shared by the forked ranks.
 */
typedef struct {
    volatile int ready;
    volatile int broken;    /* partial failure: rank 0 timed out and checked its next call */
    volatile int peer_done; /* partial failure: rank 1 has seen its own timeout */
    mscclpp_unique_id_t id;
} id_box_t;

/* Wait (bounded) until *flag is set by another rank. */
static int wait_flag(int rank, volatile int *flag, const char *what)
{
    for (int i = 0; i < 30000 && !__atomic_load_n(flag, __ATOMIC_ACQUIRE); i++) usleep(1000);
    if (!*flag) return MP_FAIL(rank, "gave up waiting: %s", what);
    return 0;
}

static id_box_t *id_box_new(void)
{
    void *p = mmap(NULL, sizeof(id_box_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Destroy everything, bootstrap again with a new id, and check a collective works. */
static int recreate(rank_t *r, id_box_t *box)
{
    int rank = r->rank, n = r->n;
    rank_close(r);
    mp_set_timeout(SETUP_TIMEOUT_S);
    if (rank == 0) {
        MP_CHECK(rank, mscclpp_get_unique_id(&box->id));
        __atomic_store_n(&box->ready, 1, __ATOMIC_RELEASE);
    } else if (wait_flag(rank, &box->ready, "rank 0 publishes a new id")) {
        return 1;
    }
    if (rank_open(r, rank, n, &box->id)) return 1;
    MP_CHECK(rank, simple_allreduce(r, r->stream, 1));
    MP_CHECK(rank, simple_allreduce(r, NULL, 1));
    rank_close(r);
    return 0;
}

/* ---- a timeout on a user stream ---------------------------------------------------------- */

static int stream_timeout_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    id_box_t *id2 = arg;
    rank_t r;
    if (rank_open(&r, rank, n, id)) return 1;
    /* both ranks: contexts built and a correct result on the stream */
    MP_CHECK(rank, simple_allreduce(&r, r.stream, 1));
    if (rank == 1) {
        /* never calls the second collective: rank 0 waits for it in vain (then sends the id
         * of the new communicator) */
        return recreate(&r, id2);
    }
    failure_phase(&r);
    double t0 = mp_now_s();
    mscclpp_result_t res = mscclpp_execute(r.x.ex, r.x.plan, r.a, r.b, r.bytes, r.bytes,
                                           MSCCLPP_FLOAT32, MSCCLPP_SUM, r.stream);
    if (res != MSCCLPP_OK) return MP_FAIL(rank, "the launch itself failed: %s",
                                          mscclpp_last_error());
    res = mscclpp_stream_synchronize(r.stream);
    double dt = mp_now_s() - t0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
    if (res != MSCCLPP_ERR_TIMEOUT)
        return MP_FAIL(rank, "stream sync after a lost peer returned %s (%s)",
                       mscclpp_result_string(res), msg);
    if (dt > TIMEOUT_S + 1.0) return MP_FAIL(rank, "the timeout took %.2f s", dt);
    /* a call of a new size: the wait that times out is its launch fence (kern_args.h) */
    const char *w[] = {"rank 0", "rank 1", "op ", "timed out", "launch fence"};
    if (names(rank, "stream sync", msg, w, 5)) return 1;
    printf("# stream timeout reported in %.2f s: %s\n", dt, msg);

    /* broken: every later call fails at once, naming the original error */
    mscclpp_result_t async = MSCCLPP_OK;
    MP_CHECK(rank, mscclpp_executor_get_async_error(r.x.ex, &async));
    if (async != MSCCLPP_ERR_TIMEOUT)
        return MP_FAIL(rank, "async error: %s", mscclpp_result_string(async));
    for (int k = 0; k < 3; k++) {
        mscclpp_stream_t s = k == 0 ? r.stream : NULL;
        t0 = mp_now_s();
        res = k < 2 ? simple_allreduce(&r, s, 0)
                    : mscclpp_allreduce(r.x.ex, r.a, r.b, 16, MSCCLPP_FLOAT32, MSCCLPP_SUM, s);
        dt = mp_now_s() - t0;
        if (res != MSCCLPP_ERR_TIMEOUT || dt > 0.5)
            return MP_FAIL(rank, "call %d after the failure: %s in %.2f s (%s)", k,
                           mscclpp_result_string(res), dt, mscclpp_last_error());
        const char *w2[] = {"broken by an earlier error", "rank 1", "destroy it"};
        if (names(rank, "later call", mscclpp_last_error(), w2, 3)) return 1;
    }
    if (mscclpp_executor_reset(r.x.ex) != MSCCLPP_ERR_TIMEOUT)
        return MP_FAIL(rank, "reset of a broken executor: %s", mscclpp_last_error());
    return recreate(&r, id2);
}

START_TEST(t_stream_timeout)
{
    id_box_t *box = id_box_new();
    ck_assert_ptr_nonnull(box);
    ck_assert_int_eq(mp_run(2, stream_timeout_body, box, 60, NULL), 0);
    munmap(box, sizeof *box);
}
END_TEST

/* ---- destroy with a launch pending on a stream ------------------------------------------- */

/*
 * Rank 0 queues a collective on its stream that waits for rank 1, which never calls, and
 * destroys its executor at once. The launch uses the executor's contexts: destroy must wait
 * for it (before: it freed them under the running launch, a use after free) and return the
 * timeout it recorded (before: OK, and the error was lost), and a later sync of the stream
 * must neither ask the destroyed executor nor fail.
 */
static int destroy_pending_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    id_box_t *id2 = arg;
    rank_t r;
    if (rank_open(&r, rank, n, id)) return 1;
    MP_CHECK(rank, simple_allreduce(&r, r.stream, 1));
    if (rank == 1) return recreate(&r, id2);
    failure_phase(&r);
    double t0 = mp_now_s();
    MP_CHECK(rank, mscclpp_execute(r.x.ex, r.x.plan, r.a, r.b, r.bytes, r.bytes, MSCCLPP_FLOAT32,
                                   MSCCLPP_SUM, r.stream));
    mscclpp_result_t res = mscclpp_executor_destroy(r.x.ex);
    double dt = mp_now_s() - t0;
    r.x.ex = NULL;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
    if (res != MSCCLPP_ERR_TIMEOUT)
        return MP_FAIL(rank, "destroy with a launch pending returned %s after %.2f s (%s)",
                       mscclpp_result_string(res), dt, msg);
    if (dt > TIMEOUT_S + 1.0) return MP_FAIL(rank, "destroy took %.2f s", dt);
    const char *w[] = {"rank 0", "rank 1", "timed out"};
    if (names(rank, "destroy", msg, w, 3)) return 1;
    printf("# destroy with a pending launch returned in %.2f s: %s\n", dt, msg);
    res = mscclpp_stream_synchronize(r.stream);
    if (res != MSCCLPP_OK)
        return MP_FAIL(rank, "stream sync after destroy: %s (%s)", mscclpp_result_string(res),
                       mscclpp_last_error());
    return recreate(&r, id2);
}

START_TEST(t_destroy_pending)
{
    id_box_t *box = id_box_new();
    ck_assert_ptr_nonnull(box);
    ck_assert_int_eq(mp_run(2, destroy_pending_body, box, 60, NULL), 0);
    munmap(box, sizeof *box);
}
END_TEST

/* ---- partial failure --------------------------------------------------------------------- */

static int partial_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    id_box_t *id2 = arg;
    rank_t r;
    if (rank_open(&r, rank, n, id)) return 1;
    MP_CHECK(rank, simple_allreduce(&r, NULL, 1));
    double t0;
    mscclpp_result_t res;
    if (rank == 0) {
        /* rank 1 does not call: this one times out, synchronously */
        failure_phase(&r);
        t0 = mp_now_s();
        res = simple_allreduce(&r, NULL, 0);
        if (res != MSCCLPP_ERR_TIMEOUT || mp_now_s() - t0 > TIMEOUT_S + 1.0)
            return MP_FAIL(rank, "first call: %s after %.2f s", mscclpp_result_string(res),
                           mp_now_s() - t0);
        /* now rank 1 calls, rank 0 is broken: it must not take part, nor hang, nor blame tags */
        t0 = mp_now_s();
        res = mscclpp_allreduce(r.x.ex, r.a, r.b, 1024, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL);
        if (res != MSCCLPP_ERR_TIMEOUT || mp_now_s() - t0 > 0.5)
            return MP_FAIL(rank, "call on the broken executor: %s after %.2f s (%s)",
                           mscclpp_result_string(res), mp_now_s() - t0, mscclpp_last_error());
        if (strstr(mscclpp_last_error(), "tag"))
            return MP_FAIL(rank, "misleading message: %s", mscclpp_last_error());
        const char *w[] = {"broken by an earlier error", "from rank 1"};
        if (names(rank, "broken call", mscclpp_last_error(), w, 2)) return 1;
        __atomic_store_n(&id2->broken, 1, __ATOMIC_RELEASE);
        if (wait_flag(rank, &id2->peer_done, "rank 1 times out")) return 1;
    } else {
        if (wait_flag(rank, &id2->broken, "rank 0 times out")) return 1;
        failure_phase(&r);
        /* rank 0 is broken and does not answer: this times out naming it */
        t0 = mp_now_s();
        res = simple_allreduce(&r, NULL, 0);
        double dt = mp_now_s() - t0;
        if (res != MSCCLPP_ERR_TIMEOUT || dt > TIMEOUT_S + 1.0)
            return MP_FAIL(rank, "call after the peer broke: %s after %.2f s (%s)",
                           mscclpp_result_string(res), dt, mscclpp_last_error());
        const char *w[] = {"from rank 0"};
        if (names(rank, "peer's timeout", mscclpp_last_error(), w, 1)) return 1;
        printf("# partial failure: rank 1 got in %.2f s: %s\n", dt, mscclpp_last_error());
        __atomic_store_n(&id2->peer_done, 1, __ATOMIC_RELEASE);
    }
    return recreate(&r, id2);
}

START_TEST(t_partial_failure)
{
    id_box_t *box = id_box_new();
    ck_assert_ptr_nonnull(box);
    ck_assert_int_eq(mp_run(2, partial_body, box, 60, NULL), 0);
    munmap(box, sizeof *box);
}
END_TEST

/* ---- a rank killed at each executor phase ------------------------------------------------ */

/*
 * The collective phases call with another size than the call before the kill, so the
 * survivors' launch fences first (kern_args.h, "Launch fence") and it is the fence's wait that
 * fails, naming the dead peer. The SAME_* phases make one call of the failing size while every
 * rank lives (lowered under the short timeout, fenced), so the call after the kill has the
 * previous call's shape: no fence, and an op of the plan fails.
 */
enum {
    PHASE_SETUP,
    PHASE_NO_STREAM,
    PHASE_STREAM,
    PHASE_SAME_NO_STREAM,
    PHASE_SAME_STREAM,
    PHASE__COUNT
};
static const char *const phase_name[] = {
    "context setup", "collective without stream (in the launch fence)",
    "collective on a stream (in the launch fence)", "collective without stream (no fence)",
    "collective on a stream (no fence)"};
#define KILL_RANKS 3
#define VICTIM 1

typedef struct {
    int phase;
    int reported; /* survivors that have their error (shared between the forked ranks) */
} kill_arg_t;

static int kill_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    kill_arg_t *ka = arg;
    int phase = ka->phase;
    rank_t r;
    if (rank_open(&r, rank, n, id)) return 1;
    bool on_stream = phase == PHASE_STREAM || phase == PHASE_SAME_STREAM;
    bool same = phase == PHASE_SAME_NO_STREAM || phase == PHASE_SAME_STREAM;
    mscclpp_stream_t s = on_stream ? r.stream : NULL;
    if (phase != PHASE_SETUP) MP_CHECK(rank, simple_allreduce(&r, s, 1)); /* contexts built */
    mscclpp_bootstrap_t *boot = r.x.boot;
    if (same) {
        /* every rank is here before the short timeout applies to anything */
        MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
        failure_phase(&r);
        MP_CHECK(rank, simple_allreduce(&r, s, 1));
    }
    /* everyone has its executor and (but in the setup case) its contexts */
    MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
    failure_phase(&r);
    if (rank == VICTIM) raise(SIGKILL);
    double t0 = mp_now_s();
    double stall = 0; /* polling survivor: the longest it was kept from running */
    bool polled = on_stream && rank == n - 1;
    mscclpp_result_t res;
    if (polled) {
        /* this survivor polls without synchronizing: the error shows up while queued work
         * is still "in flight" from the caller's point of view. It polls well past the bound,
         * so that a late error says how late, and measures how long a 5 ms sleep of its own
         * overshot: a machine that stalls this process stalls its launch too (load 35 once
         * kept the error past TIMEOUT_S + 1 s), so the bound below adds that stall. */
        res = mscclpp_execute(r.x.ex, r.x.plan, r.a, r.b, r.bytes, r.bytes, MSCCLPP_FLOAT32,
                              MSCCLPP_SUM, s);
        if (res != MSCCLPP_OK) return MP_FAIL(rank, "launch: %s", mscclpp_last_error());
        mscclpp_result_t async = MSCCLPP_OK;
        while (async == MSCCLPP_OK && mp_now_s() - t0 < TIMEOUT_S + 10.0) {
            MP_CHECK(rank, mscclpp_executor_get_async_error(r.x.ex, &async));
            if (async != MSCCLPP_OK) break;
            double s0 = mp_now_s();
            usleep(5000);
            double over = mp_now_s() - s0 - 0.005;
            if (over > stall) stall = over;
        }
        res = async;
        if (res != MSCCLPP_OK)
            printf("# async query after %.2f s (longest stall %.3f s): %s\n", mp_now_s() - t0,
                   stall, mscclpp_last_error());
        else
            return MP_FAIL(rank,
                           "%s: no asynchronous error %.1f s after the launch with a dead rank "
                           "(mscclpp_executor_get_async_error kept returning OK)",
                           phase_name[phase], mp_now_s() - t0);
    } else {
        res = simple_allreduce(&r, s, 0);
    }
    double dt = mp_now_s() - t0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
    /* the sync after the query still reports it */
    if (res != MSCCLPP_OK && polled && mscclpp_stream_synchronize(s) == MSCCLPP_OK)
        return MP_FAIL(rank, "stream sync after the failure returned OK");
    if (res == MSCCLPP_OK)
        return MP_FAIL(rank, "%s: a collective with a dead rank returned OK", phase_name[phase]);
    if (dt > TIMEOUT_S + 1.0 + stall)
        return MP_FAIL(rank,
                       "%s: the error took %.2f s (bound %.2f s: MSCCLPP_TIMEOUT + 1 s + "
                       "this process's longest stall %.3f s): %s",
                       phase_name[phase], dt, TIMEOUT_S + 1.0 + stall, stall, msg);
    char dead[32];
    snprintf(dead, sizeof dead, "rank %d", VICTIM);
    if (!strstr(msg, dead))
        return MP_FAIL(rank, "%s: the error does not name the dead %s: %s", phase_name[phase],
                       dead, msg);
    /* where it failed: the fence's wait when the shape changed, else an op of the plan */
    bool fenced = strstr(msg, "in the launch fence") != NULL;
    if (phase != PHASE_SETUP && fenced == same)
        return MP_FAIL(rank, "%s: the error %s the launch fence: %s", phase_name[phase],
                       fenced ? "names" : "does not name", msg);
    printf("# kill during %s: rank %d got %s in %.2f s: %s\n", phase_name[phase], rank,
           mscclpp_result_string(res), dt, msg);
    /* and stays broken */
    res = simple_allreduce(&r, s, 0);
    if (res == MSCCLPP_OK) return MP_FAIL(rank, "%s: the next call returned OK", phase_name[phase]);
    /* tear down only once every survivor has its own error: a survivor that closes its
     * connections early is a second failure, which the others would rightly report */
    __atomic_add_fetch(&ka->reported, 1, __ATOMIC_ACQ_REL);
    for (int i = 0; i < 10000 && __atomic_load_n(&ka->reported, __ATOMIC_ACQUIRE) < n - 1; i++)
        usleep(1000);
    rank_close(&r);
    return 0;
}

START_TEST(t_kill_rank)
{
    int phase = _i;
    unsigned failed = 0;
    kill_arg_t *ka = mmap(NULL, sizeof *ka, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                          -1, 0);
    ck_assert_ptr_ne(ka, MAP_FAILED);
    ka->phase = phase;
    ka->reported = 0;
    mp_run(KILL_RANKS, kill_body, ka, 60, &failed);
    munmap(ka, sizeof *ka);
    ck_assert_msg(failed == 1u << VICTIM, "%s: failed ranks 0x%x, want only the victim 0x%x",
                  phase_name[phase], failed, 1u << VICTIM);
}
END_TEST

int main(void)
{
    plan_dir = mp_plan_dir();
    mp_set_timeout(SETUP_TIMEOUT_S);
    setenv("MSCCLPP_HAL", "host", 1);

    Suite *s = suite_create("exec_fail");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, t_stream_timeout);
    tcase_add_test(tc, t_destroy_pending);
    tcase_add_test(tc, t_partial_failure);
    tcase_add_loop_test(tc, t_kill_rank, 0, PHASE__COUNT);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
