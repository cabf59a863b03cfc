/*
 * ncclCommAbort and ncclCommDestroy while another thread of the rank is inside a call on the
 * same communicator (issue 22 item 4). Two forked ranks on the host backend; rank 0 starts a
 * call on a thread that rank 1 never joins (or joins late), and its main thread then aborts or
 * destroys the communicator:
 *   - abort: the running call returns an error well before MSCCLPP_TIMEOUT (the abort
 *     interrupts it), ncclCommAbort returns ncclSuccess, and nothing is freed under the call
 *     (before the fix: SIGSEGV in 6 of 10 runs, ASan: heap-use-after-free in the bootstrap);
 *   - destroy: ncclCommDestroy waits for the call, which rank 1 then completes with the right
 *     sum, and frees the communicator after it.
 * The calls: the first allreduce on new buffers (the context setup talks over the bootstrap),
 * an allreduce whose context exists (the plan interpreter waits for the peer's signal), and a
 * receive (a bootstrap wait). This suite runs under ASan and TSan (scripts/sanitize.sh).
 *
 * Whether abort or destroy returned before the call left the communicator is decided inside
 * the library: MSCCLPP_TEST_NCCL_LEAVE_MS makes every call wait LEAVE_MS, its work done, before
 * it leaves, so an abort or destroy that waits for it returns at least LEAVE_MS after it began
 * (one that did not wait returns within milliseconds and frees under the call). The test once
 * compared the call's return time, taken in its thread after ncclAllReduce returned, with the
 * abort's: under load that thread could lose the core between leaving and reading the clock,
 * and the check failed (ncclCommAbort "returned 0.010 s before the call ended", TSan at load
 * 35; plain build 1 run in 6 beside a busy loop) with nothing freed under the call.
 */
#define _GNU_SOURCE
#include <check.h>
#include <nccl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"

#define COUNT 4096
#define BIG (16 * COUNT) /* a larger call: the shim's staging grows, a new context is set up */
#define TIMEOUT_S 30     /* MSCCLPP_TIMEOUT of the ranks: an interrupted call ends far earlier */
#define INTERRUPT_S 5.0  /* the call must return this soon after ncclCommAbort */
#define LEAVE_MS 200     /* MSCCLPP_TEST_NCCL_LEAVE_MS: a call's last moment inside, made long */

enum { K_SETUP, K_LAUNCH, K_RECV };
static const char *const kind_names[] = {"first allreduce (setup)", "allreduce (launch)",
                                         "receive"};

typedef struct {
    int kind;
    bool destroy; /* ncclCommDestroy instead of ncclCommAbort (rank 1 then joins) */
    int go[2];    /* rank 0 -> rank 1: "abort/destroy done" (or "join the call now") */
} scenario_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
    ncclComm_t comm;
    int kind;
    size_t count;
    float *send, *recv;
    volatile int started;
    ncclResult_t res;
    double ended;
    char err[512];
} call_t;

static void *call_thread(void *p)
{
    call_t *c = p;
    __atomic_store_n(&c->started, 1, __ATOMIC_RELEASE);
    if (c->kind == K_RECV) c->res = ncclRecv(c->recv, c->count, ncclFloat32, 1, c->comm, NULL);
    else c->res = ncclAllReduce(c->send, c->recv, c->count, ncclFloat32, ncclSum, c->comm, NULL);
    c->ended = now_s();
    snprintf(c->err, sizeof c->err, "%s", ncclGetLastError(NULL));
    return NULL;
}

static void fill(float *x, size_t n, int rank)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)(rank + 1) * (float)(i % 97);
}

static int check_sum(int rank, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (y[i] != 3.0f * (float)(i % 97))
            return MP_FAIL(rank, "recv[%zu] = %g, want %g", i, (double)y[i],
                           3.0 * (double)(i % 97));
    return 0;
}

/* Wait up to `s` seconds for the byte of rank 0 (0: it came). */
static int wait_go(int fd, double s)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, (int)(s * 1000)) != 1) return -1;
    char b;
    return read(fd, &b, 1) == 1 ? 0 : -1;
}

static int rank_body(int rank, int nranks, const mscclpp_unique_id_t *mid, void *arg)
{
    scenario_t *sc = arg;
    ncclUniqueId id;
    memcpy(&id, mid, sizeof id);
    ncclComm_t comm = NULL;
    if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess)
        return MP_FAIL(rank, "ncclCommInitRank: %s", ncclGetLastError(NULL));
    float *warm_s = calloc(COUNT, sizeof(float)), *warm_r = calloc(COUNT, sizeof(float));
    float *send = calloc(BIG, sizeof(float)), *recv = calloc(BIG, sizeof(float));
    if (!warm_s || !warm_r || !send || !recv) return MP_FAIL(rank, "out of memory");
    fill(warm_s, COUNT, rank);
    fill(send, BIG, rank);
    /* every scenario starts from a communicator that has run a collective */
    if (ncclAllReduce(warm_s, warm_r, COUNT, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess)
        return MP_FAIL(rank, "warm-up allreduce: %s", ncclGetLastError(NULL));
    if (check_sum(rank, warm_r, COUNT)) return 1;
    /* K_LAUNCH runs the warm-up's call again: its context exists, the launch waits */
    float *s = sc->kind == K_LAUNCH ? warm_s : send, *r = sc->kind == K_LAUNCH ? warm_r : recv;
    size_t count = sc->kind == K_SETUP ? BIG : COUNT;
    int rc = 0;
    if (rank == 1) {
        close(sc->go[1]);
        if (sc->destroy) {
            /* join rank 0's call once its destroy is under way */
            if (wait_go(sc->go[0], TIMEOUT_S) != 0) return MP_FAIL(rank, "no word from rank 0");
            ncclResult_t res = sc->kind == K_RECV
                                   ? ncclSend(s, count, ncclFloat32, 0, comm, NULL)
                                   : ncclAllReduce(s, r, count, ncclFloat32, ncclSum, comm, NULL);
            if (res != ncclSuccess)
                rc = MP_FAIL(rank, "joining the call: %s", ncclGetLastError(NULL));
            else if (sc->kind != K_RECV) rc = check_sum(rank, r, count);
            if (ncclCommDestroy(comm) != ncclSuccess)
                rc = MP_FAIL(rank, "ncclCommDestroy: %s", ncclGetLastError(NULL));
        } else {
            /* never join: wait until rank 0 aborted, then abort too (rank 0 is gone) */
            if (wait_go(sc->go[0], TIMEOUT_S + 10) != 0) rc = MP_FAIL(rank, "no word from rank 0");
            if (ncclCommAbort(comm) != ncclSuccess)
                rc = MP_FAIL(rank, "ncclCommAbort: %s", ncclGetLastError(NULL));
        }
        goto out;
    }
    close(sc->go[0]);
    call_t call = {.comm = comm, .kind = sc->kind, .count = count, .send = s, .recv = r};
    pthread_t th;
    if (pthread_create(&th, NULL, call_thread, &call) != 0) return MP_FAIL(rank, "pthread_create");
    while (!__atomic_load_n(&call.started, __ATOMIC_ACQUIRE)) usleep(1000);
    usleep(300000); /* let the call get to its wait */
    double t0 = now_s();
    ncclResult_t res;
    if (sc->destroy) {
        if (write(sc->go[1], "g", 1) != 1) return MP_FAIL(rank, "write to rank 1");
        res = ncclCommDestroy(comm);
    } else {
        res = ncclCommAbort(comm);
    }
    double t1 = now_s();
    pthread_join(th, NULL);
    const char *what = sc->destroy ? "ncclCommDestroy" : "ncclCommAbort";
    if (res != ncclSuccess) rc = MP_FAIL(rank, "%s: %s", what, ncclGetLastError(NULL));
    if (t1 - t0 < LEAVE_MS * 1e-3)
        rc = MP_FAIL(rank,
                     "%s returned after %.3f s, before the call inside left the communicator "
                     "(it waits %d ms to leave, MSCCLPP_TEST_NCCL_LEAVE_MS): freed under it",
                     what, t1 - t0, LEAVE_MS);
    if (sc->destroy) {
        if (call.res != ncclSuccess)
            rc = MP_FAIL(rank, "%s during destroy: %s", kind_names[sc->kind], call.err);
        else if (sc->kind != K_RECV && check_sum(rank, r, count)) rc = 1;
    } else {
        if (call.res == ncclSuccess)
            rc = MP_FAIL(rank, "%s returned ncclSuccess though rank 1 never joined",
                         kind_names[sc->kind]);
        else if (call.ended - t0 > INTERRUPT_S)
            rc = MP_FAIL(rank, "%s returned %.1f s after ncclCommAbort (not interrupted): %s",
                         kind_names[sc->kind], call.ended - t0, call.err);
        else
            fprintf(stderr, "# rank 0: %s interrupted after %.3f s: %s\n", kind_names[sc->kind],
                    call.ended - t0, call.err);
        if (write(sc->go[1], "g", 1) != 1) rc = MP_FAIL(rank, "write to rank 1");
    }
out:
    free(warm_s);
    free(warm_r);
    free(send);
    free(recv);
    return rc;
}

static void run(int kind, bool destroy)
{
    scenario_t sc = {.kind = kind, .destroy = destroy};
    ck_assert_int_eq(pipe(sc.go), 0);
    char t[8];
    snprintf(t, sizeof t, "%d", TIMEOUT_S);
    setenv("MSCCLPP_TIMEOUT", t, 1);
    setenv("MSCCLPP_HAL", "host", 1);
    snprintf(t, sizeof t, "%d", LEAVE_MS);
    setenv("MSCCLPP_TEST_NCCL_LEAVE_MS", t, 1);
    unsigned failed = 0;
    int n = mp_run(2, rank_body, &sc, TIMEOUT_S + 40, &failed);
    close(sc.go[0]);
    close(sc.go[1]);
    ck_assert_msg(n == 0, "%s %s: ranks failed (mask 0x%x)", kind_names[kind],
                  destroy ? "destroy" : "abort", failed);
}

START_TEST(t_abort_setup) { run(K_SETUP, false); }
END_TEST
START_TEST(t_abort_launch) { run(K_LAUNCH, false); }
END_TEST
START_TEST(t_abort_recv) { run(K_RECV, false); }
END_TEST
START_TEST(t_destroy_setup) { run(K_SETUP, true); }
END_TEST
START_TEST(t_destroy_launch) { run(K_LAUNCH, true); }
END_TEST
START_TEST(t_destroy_recv) { run(K_RECV, true); }
END_TEST

int main(void)
{
    Suite *s = suite_create("nccl_abort");
    TCase *tc = tcase_create("abort");
    tcase_set_timeout(tc, TIMEOUT_S + 60);
    tcase_add_test(tc, t_abort_setup);
    tcase_add_test(tc, t_abort_launch);
    tcase_add_test(tc, t_abort_recv);
    tcase_add_test(tc, t_destroy_setup);
    tcase_add_test(tc, t_destroy_launch);
    tcase_add_test(tc, t_destroy_recv);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
