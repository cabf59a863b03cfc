/*
 * mscclpp_comm_abort from another thread while a rank is inside a call (issue 22 item 4): the
 * call returns MSCCLPP_ERR_ABORTED well before MSCCLPP_TIMEOUT, later calls fail at once, and
 * the executor and the communicator are then destroyed cleanly (ASan and TSan run this suite).
 * Two forked ranks on the host backend; rank 1 never joins the call rank 0 is in:
 *   - setup:  the first allreduce on new buffers (the context setup waits in the bootstrap);
 *   - launch: an allreduce whose context exists (the interpreter waits for rank 1's signal);
 *   - stream: the same launch on a stream, rank 0's thread in mscclpp_stream_synchronize;
 *   - boot:   a bootstrap receive.
 */
#define _GNU_SOURCE
#include <check.h>
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
#define TIMEOUT_S 30      /* an interrupted call ends far earlier */
#define INTERRUPT_S 5.0   /* ... within this after mscclpp_comm_abort */

enum { K_SETUP, K_LAUNCH, K_STREAM, K_BOOT };
static const char *const kind_names[] = {"setup", "launch", "stream sync", "bootstrap receive"};

typedef struct {
    int kind;
    int go[2]; /* rank 0 -> rank 1: rank 0 is done */
} scenario_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
    int kind;
    mscclpp_comm_t *comm;
    mscclpp_executor_t *ex;
    mscclpp_stream_t stream;
    float *send, *recv;
    volatile int started;
    mscclpp_result_t res;
    double ended;
    char err[768];
} call_t;

static void *call_thread(void *p)
{
    call_t *c = p;
    __atomic_store_n(&c->started, 1, __ATOMIC_RELEASE);
    switch (c->kind) {
    case K_BOOT: {
        mscclpp_bootstrap_t *boot = NULL;
        c->res = mscclpp_comm_bootstrap(c->comm, &boot);
        if (c->res == MSCCLPP_OK) c->res = mscclpp_bootstrap_recv(boot, c->recv, 64, 1, 77);
        break;
    }
    case K_STREAM:
        c->res = mscclpp_allreduce(c->ex, c->send, c->recv, COUNT, MSCCLPP_FLOAT32,
                                   MSCCLPP_SUM, c->stream);
        if (c->res == MSCCLPP_OK) c->res = mscclpp_stream_synchronize(c->stream);
        break;
    default:
        c->res = mscclpp_allreduce(c->ex, c->send, c->recv, COUNT, MSCCLPP_FLOAT32,
                                   MSCCLPP_SUM, NULL);
    }
    c->ended = now_s();
    snprintf(c->err, sizeof c->err, "%s", mscclpp_last_error());
    return NULL;
}

static int wait_go(int fd, double s)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, (int)(s * 1000)) != 1) return -1;
    char b;
    return read(fd, &b, 1) == 1 ? 0 : -1;
}

static int rank_body(int rank, int nranks, const mscclpp_unique_id_t *id, void *arg)
{
    scenario_t *sc = arg;
    mscclpp_comm_t *comm = NULL;
    mscclpp_executor_t *ex = NULL;
    mscclpp_stream_t stream = NULL;
    float *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    size_t bytes = COUNT * sizeof(float);
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, nranks, &comm));
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    MP_CHECK(rank, mscclpp_stream_create(&stream));
    MP_CHECK(rank, mscclpp_malloc(bytes, (void **)&a));
    MP_CHECK(rank, mscclpp_malloc(bytes, (void **)&b));
    MP_CHECK(rank, mscclpp_malloc(bytes, (void **)&c));
    MP_CHECK(rank, mscclpp_malloc(bytes, (void **)&d));
    for (int i = 0; i < COUNT; i++) a[i] = c[i] = (float)(rank + 1);
    /* a collective that works first, on a and b (with and without the stream) */
    MP_CHECK(rank, mscclpp_allreduce(ex, a, b, COUNT, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                                     NULL));
    MP_CHECK(rank, mscclpp_allreduce(ex, a, b, COUNT, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                                     stream));
    MP_CHECK(rank, mscclpp_stream_synchronize(stream));
    if (b[0] != 3.0f) return MP_FAIL(rank, "warm-up: b[0] = %g, want 3", (double)b[0]);
    int rc = 0;
    if (rank == 1) {
        close(sc->go[1]);
        if (wait_go(sc->go[0], TIMEOUT_S + 10) != 0) rc = MP_FAIL(rank, "no word from rank 0");
        goto out;
    }
    close(sc->go[0]);
    /* setup: new buffers c and d, a context to build; the others: a and b again */
    call_t call = {.kind = sc->kind, .comm = comm, .ex = ex, .stream = stream,
                   .send = sc->kind == K_SETUP ? c : a, .recv = sc->kind == K_SETUP ? d : b};
    pthread_t th;
    if (pthread_create(&th, NULL, call_thread, &call) != 0) return MP_FAIL(rank, "pthread_create");
    while (!__atomic_load_n(&call.started, __ATOMIC_ACQUIRE)) usleep(1000);
    usleep(300000); /* into its wait */
    double t0 = now_s();
    MP_CHECK(rank, mscclpp_comm_abort(comm));
    MP_CHECK(rank, mscclpp_comm_abort(comm)); /* again: nothing */
    pthread_join(th, NULL);
    if (call.res != MSCCLPP_ERR_ABORTED)
        rc = MP_FAIL(rank, "%s returned %s, want MSCCLPP_ERR_ABORTED: %s", kind_names[sc->kind],
                     mscclpp_result_string(call.res), call.err);
    else if (call.ended - t0 > INTERRUPT_S)
        rc = MP_FAIL(rank, "%s returned %.1f s after the abort (not interrupted): %s",
                     kind_names[sc->kind], call.ended - t0, call.err);
    else if (!strstr(call.err, "aborted"))
        rc = MP_FAIL(rank, "%s: the error does not say the communicator was aborted: %s",
                     kind_names[sc->kind], call.err);
    else
        fprintf(stderr, "# rank 0: %s interrupted after %.3f s: %s\n", kind_names[sc->kind],
                call.ended - t0, call.err);
    /* every later call fails at once, without waiting for anyone */
    double t1 = now_s();
    mscclpp_result_t r = mscclpp_allreduce(ex, c, d, COUNT, MSCCLPP_FLOAT32,
                                           MSCCLPP_SUM, NULL);
    if (r == MSCCLPP_OK || now_s() - t1 > 1.0)
        rc = MP_FAIL(rank, "an allreduce after the abort returned %s after %.1f s",
                     mscclpp_result_string(r), now_s() - t1);
    mscclpp_bootstrap_t *boot = NULL;
    MP_CHECK(rank, mscclpp_comm_bootstrap(comm, &boot));
    t1 = now_s();
    r = mscclpp_bootstrap_barrier(boot);
    if (r != MSCCLPP_ERR_ABORTED || now_s() - t1 > 1.0)
        rc = MP_FAIL(rank, "a barrier after the abort returned %s after %.1f s",
                     mscclpp_result_string(r), now_s() - t1);
    if (write(sc->go[1], "g", 1) != 1) rc = MP_FAIL(rank, "write to rank 1");
out:
    /* destroy works after an abort (the stream's error was reported by its sync above) */
    (void)mscclpp_stream_synchronize(stream);
    (void)mscclpp_executor_destroy(ex);
    mscclpp_stream_destroy(stream);
    mscclpp_free(a);
    mscclpp_free(b);
    mscclpp_free(c);
    mscclpp_free(d);
    MP_CHECK(rank, mscclpp_comm_destroy(comm));
    return rc;
}

static void run(int kind)
{
    scenario_t sc = {.kind = kind};
    ck_assert_int_eq(pipe(sc.go), 0);
    char t[8];
    snprintf(t, sizeof t, "%d", TIMEOUT_S);
    setenv("MSCCLPP_TIMEOUT", t, 1);
    setenv("MSCCLPP_HAL", "host", 1);
    unsigned failed = 0;
    int n = mp_run(2, rank_body, &sc, TIMEOUT_S + 40, &failed);
    close(sc.go[0]);
    close(sc.go[1]);
    ck_assert_msg(n == 0, "%s: ranks failed (mask 0x%x)", kind_names[kind], failed);
}

START_TEST(t_abort_setup) { run(K_SETUP); }
END_TEST
START_TEST(t_abort_launch) { run(K_LAUNCH); }
END_TEST
START_TEST(t_abort_stream) { run(K_STREAM); }
END_TEST
START_TEST(t_abort_boot) { run(K_BOOT); }
END_TEST

int main(void)
{
    Suite *s = suite_create("comm_abort");
    TCase *tc = tcase_create("abort");
    tcase_set_timeout(tc, TIMEOUT_S + 60);
    tcase_add_test(tc, t_abort_setup);
    tcase_add_test(tc, t_abort_launch);
    tcase_add_test(tc, t_abort_stream);
    tcase_add_test(tc, t_abort_boot);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
