/*
 * A killed rank or node across "nodes" (issue 10 item 8): every surviving rank's collective
 * fails naming a dead peer within MSCCLPP_TIMEOUT (+1 s), and once the survivor destroys its
 * executor and communicator, no thread of the library is left: no proxy thread, no bootstrap
 * or transport thread (UCX's worker and async thread included). Only process-wide threads may
 * stay, by design: the host backend's block pool and stream workers (reused by the next
 * launch) and the fd broker that serves shareable memory ("mscclpp-fdb", until exit). Nodes are MSCCLPP_NODE_ID values; port channels between nodes run
 * over UCX's tcp transport. Threads are read from /proc/self/task (their names).
 */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"
#include "transports/transport.h"

#define TIMEOUT_S 5
#define COUNT (64 * 1024)

typedef struct {
    int total;     /* threads of this process */
    int process;   /* process-wide: host block pool, stream workers, fd broker */
    int proxy;     /* "mscclpp-proxy" */
    char names[512];
} threads_t;

static void threads_read(threads_t *t)
{
    memset(t, 0, sizeof *t);
    DIR *d = opendir("/proc/self/task");
    if (!d) return;
    struct dirent *e;
    size_t used = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[300], name[32] = "?";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(name, sizeof name, f)) name[strcspn(name, "\n")] = 0;
            fclose(f);
        }
        t->total++;
        if (!strncmp(name, "mscclpp-b", 9) || !strcmp(name, "mscclpp-stream") ||
            !strcmp(name, "mscclpp-fdb"))
            t->process++;
        if (!strcmp(name, "mscclpp-proxy")) t->proxy++;
        if (used < sizeof t->names)
            used += (size_t)snprintf(t->names + used, sizeof t->names - used, "%s%s",
                                     used ? "," : "", name);
    }
    closedir(d);
}

typedef struct {
    int per_node;   /* ranks per node */
    int first_dead; /* ranks [first_dead, first_dead + n_dead) die after the first call */
    int n_dead;
    int stream;     /* the failing call is on a stream */
} kill_case_t;

static int kill_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    const kill_case_t *kc = arg;
    mp_set_timeout(30); /* setup on a loaded machine; the failure gets TIMEOUT_S */
    mscclpp_comm_t *comm = NULL;
    if (mp_join_node(rank, n, kc->per_node, "kill", id, &comm)) return 1;
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/multinode/plans/%dx%d/allgather.json",
             getenv("MSCCLPP_TOP_SRCDIR"), n / kc->per_node, kc->per_node);
    mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_plan_load_file(path, &plan));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    float *in = NULL, *out = NULL;
    MP_CHECK(rank, mscclpp_malloc(COUNT * 4, (void **)&in));
    MP_CHECK(rank, mscclpp_malloc(COUNT * 4 * (size_t)n, (void **)&out));
    for (int i = 0; i < COUNT; i++) in[i] = (float)(rank * 100000 + i);
    mscclpp_stream_t s = NULL;
    if (kc->stream) MP_CHECK(rank, mscclpp_stream_create(&s));
    /* call 1: everyone alive; every element checked */
    MP_CHECK(rank, mscclpp_execute(ex, plan, in, out, COUNT * 4, COUNT * 4 * (size_t)n,
                                   MSCCLPP_FLOAT32, MSCCLPP_SUM, s));
    if (s) MP_CHECK(rank, mscclpp_stream_synchronize(s));
    for (int r = 0; r < n; r++)
        for (int i = 0; i < COUNT; i++)
            if (out[r * COUNT + i] != (float)(r * 100000 + i))
                return MP_FAIL(rank, "call 1: out[%d] = %g", r * COUNT + i, out[r * COUNT + i]);
    threads_t during;
    threads_read(&during);
    if (during.proxy != 1)
        return MP_FAIL(rank, "%d proxy threads while running, want 1 (%s)", during.proxy,
                       during.names);
    bool dies = rank >= kc->first_dead && rank < kc->first_dead + kc->n_dead;
    if (mp_barrier_then_die(rank, comm, dies)) return 1;

    /* the short bound, for a size not lowered yet (a lowering keeps the bound it was made with) */
    mp_set_timeout(TIMEOUT_S);
    double t0 = mp_now_s();
    mscclpp_result_t r = mscclpp_execute(ex, plan, in, out, COUNT * 2, COUNT * 2 * (size_t)n,
                                         MSCCLPP_FLOAT32, MSCCLPP_SUM, s);
    if (r == MSCCLPP_OK && s) r = mscclpp_stream_synchronize(s);
    double dt = mp_now_s() - t0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
    if (r == MSCCLPP_OK) return MP_FAIL(rank, "the call with dead ranks returned OK");
    if (dt > TIMEOUT_S + 1.0) return MP_FAIL(rank, "the error took %.2f s: %s", dt, msg);
    bool named = false;
    for (int d = kc->first_dead; d < kc->first_dead + kc->n_dead; d++)
        named = named || mp_names_rank(msg, d);
    if (!named) return MP_FAIL(rank, "the error names no dead rank: %s", msg);

    /* teardown is bounded too, and leaves no thread of ours behind */
    double t1 = mp_now_s();
    if (s) mscclpp_stream_destroy(s);
    mscclpp_executor_destroy(ex);
    mscclpp_plan_destroy(plan);
    mscclpp_free(in);
    mscclpp_free(out);
    mscclpp_comm_destroy(comm);
    double td = mp_now_s() - t1;
    threads_t after;
    threads_read(&after);
    /* UCX's async thread ends on its own once its last context is cleaned up; under
     * ThreadSanitizer that once outlived the cleanup call by a moment (1 run in 5). A leak
     * stays: give it a bounded moment to go. */
    for (int i = 0; i < 100 && strstr(after.names, "async"); i++) {
        usleep(20000);
        threads_read(&after);
    }
    printf("# rank %d: error in %.2f s, teardown %.2f s; threads: %d while running (%s), %d "
           "after (%s): %s\n", rank, dt, td, during.total, during.names, after.total,
           after.names, msg);
    if (td > TIMEOUT_S + 1.0) return MP_FAIL(rank, "teardown took %.2f s", td);
    if (after.proxy) return MP_FAIL(rank, "a proxy thread survived: %s", after.names);
    if (strstr(after.names, "async"))
        return MP_FAIL(rank, "UCX's async thread survived: %s", after.names);
    /* this thread and the process-wide ones: nothing of the communicator or the executor.
     * ThreadSanitizer runs threads of its own (named after the program): not counted there. */
#ifndef __SANITIZE_THREAD__
    if (after.total - after.process != 1)
        return MP_FAIL(rank, "%d threads after teardown besides the process-wide ones: %s",
                       after.total - after.process, after.names);
#endif
    return 0;
}

static void run(int n, kill_case_t kc)
{
    unsigned failed = 0;
    mp_run(n, kill_body, &kc, 120, &failed);
    unsigned dead = ((1u << kc.n_dead) - 1) << kc.first_dead;
    ck_assert_msg(failed == dead, "failed ranks 0x%x, want only the dead ones 0x%x", failed, dead);
}

/* 2 nodes x 1: rank 1 killed, the call without a stream */
START_TEST(t_kill_rank_2x1) { run(2, (kill_case_t){1, 1, 1, 0}); }
END_TEST
/* the same on a stream: the error comes at the sync */
START_TEST(t_kill_rank_2x1_stream) { run(2, (kill_case_t){1, 1, 1, 1}); }
END_TEST
/* 2 nodes x 2: the whole node 1 (ranks 2 and 3) killed */
START_TEST(t_kill_node_2x2) { run(4, (kill_case_t){2, 2, 2, 0}); }
END_TEST

int main(void)
{
    setenv("MSCCLPP_HAL", "host", 1);
    if (!tp_built(TP_UCX)) {
        /* TAP (the test driver counts it as skipped, with the reason) */
        printf("1..0 # SKIP the kill tests cross nodes over UCX, which this build lacks\n");
        return 0;
    }
    Suite *s = suite_create("kill_threads");
    TCase *tc = tcase_create("kill");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, t_kill_rank_2x1);
    tcase_add_test(tc, t_kill_rank_2x1_stream);
    tcase_add_test(tc, t_kill_node_2x2);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
