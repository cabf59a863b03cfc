/*
 * Every survivor names the dead rank (issue 22 item 5). 4 forked ranks, on one node or as 2
 * nodes of 2 (MSCCLPP_NODE_ID; port channels over UCX tcp on loopback); one rank SIGKILLs
 * itself at a chosen moment:
 *   - boot:  while the ranks join the bootstrap (after a delay from the start of its join);
 *   - setup: during the first collective on new buffers (context setup: setup messages, peer
 *            memory mapped through the fd broker, transport endpoints);
 *   - run:   while the survivors queue thousands of collectives on a stream (the stream's queue
 *            fills behind a launch that waits for the dead rank).
 * And one rank that cannot reach a peer (connect: its first transport connect fails, injected
 * by MSCCLPP_TEST_TRANSPORT_FAULT=connect:1): it fails and exits, and every other rank but the
 * unreachable one must name the unreachable one, which it heard of in that rank's abort notice,
 * not the rank that exited (as when a rank fails to reach a dead peer, then exits).
 * Each survivor runs until a call fails; its error, and the first error line it printed (its
 * stderr goes to a file of its own), must name the dead rank ("rank V"): not a live rank that
 * exited because of it, not a process id. The suite prints, per run, how many survivors named
 * it, and the totals.
 */
#define _GNU_SOURCE
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
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

#if defined(__SANITIZE_THREAD__)
#define TSAN 1
#else
#define TSAN 0
#endif

#define NRANKS 4
#define COUNT 4096       /* floats of the run phase's calls */
#define RUN_CALLS 3000   /* stream launches a survivor queues in the run phase */
#define FAIL_TIMEOUT "5" /* MSCCLPP_TIMEOUT of the phase under test */

enum { P_BOOT, P_SETUP, P_RUN, P_CONNECT };
static const char *const phase_names[] = {"boot", "setup", "run", "connect"};

typedef struct {
    int phase, nodes, victim, delay_us;
    char dir[256]; /* per-rank stderr files */
} culprit_case_t;

/* What each rank says about itself, in memory shared across the fork. */
typedef struct {
    int state; /* 0 never ended, 1 every call OK, 2 a call failed */
    double t;  /* CLOCK_MONOTONIC: when the call failed (a victim: when it killed itself) */
    char msg[768];
} rank_result_t;
static rank_result_t *results;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int victim_rank;

static void die_now(void)
{
    results[victim_rank].t = now_s();
    raise(SIGKILL);
}

static void *kill_later(void *arg)
{
    usleep((useconds_t)(intptr_t)arg);
    die_now();
    return NULL;
}

static void die_after(int delay_us)
{
    pthread_t t;
    if (delay_us <= 0) die_now();
    if (pthread_create(&t, NULL, kill_later, (void *)(intptr_t)delay_us) != 0) die_now();
}

static int failed(int rank, mscclpp_result_t r)
{
    results[rank].t = now_s();
    results[rank].state = 2;
    snprintf(results[rank].msg, sizeof results[rank].msg, "%s: %s", mscclpp_result_string(r),
             mscclpp_last_error());
    return 0; /* a survivor's failure is the expected outcome: judged by the parent */
}

static int body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    const culprit_case_t *cc = arg;
    bool victim = rank == cc->victim;
    victim_rank = cc->victim;
    char path[512];
    snprintf(path, sizeof path, "%s/rank%d.log", cc->dir, rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
        dup2(fd, 2);
        close(fd);
    }
    char node[32];
    snprintf(node, sizeof node, "culprit-node-%d", cc->nodes > 1 ? rank / (n / cc->nodes) : 0);
    setenv("MSCCLPP_NODE_ID", node, 1);
    setenv("UCX_TLS", "tcp", 1);
    setenv("UCX_NET_DEVICES", "lo", 1);
    setenv("MSCCLPP_TIMEOUT", cc->phase == P_BOOT ? FAIL_TIMEOUT : "30", 1);
    if (victim && cc->phase == P_BOOT) die_after(cc->delay_us);
    if (victim && cc->phase == P_CONNECT) setenv("MSCCLPP_TEST_TRANSPORT_FAULT", "connect:1", 1);
    mscclpp_comm_t *comm = NULL;
    mscclpp_result_t r = mscclpp_comm_init_rank(id, rank, n, &comm);
    if (r != MSCCLPP_OK) return failed(rank, r);
    mscclpp_executor_t *ex = NULL;
    mscclpp_stream_t s = NULL;
    float *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    r = mscclpp_executor_create(comm, &ex);
    if (r == MSCCLPP_OK) r = mscclpp_stream_create(&s);
    if (r == MSCCLPP_OK) r = mscclpp_malloc(COUNT * sizeof(float), (void **)&a);
    if (r == MSCCLPP_OK) r = mscclpp_malloc(COUNT * sizeof(float), (void **)&b);
    if (r == MSCCLPP_OK) r = mscclpp_malloc(COUNT * sizeof(float), (void **)&c);
    if (r == MSCCLPP_OK) r = mscclpp_malloc(COUNT * sizeof(float), (void **)&d);
    if (r != MSCCLPP_OK) return failed(rank, r);
    for (int i = 0; i < COUNT; i++) a[i] = c[i] = 1.0f;
    if (cc->phase == P_RUN) {
        /* the context exists before the failure: the run phase's launches (on the same
         * buffers, another size) wait on the peer */
        r = mscclpp_allreduce(ex, c, d, COUNT / 4, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL);
        if (r != MSCCLPP_OK) return failed(rank, r);
    }
    mscclpp_bootstrap_t *boot = NULL;
    mscclpp_comm_bootstrap(comm, &boot);
    if (cc->phase != P_BOOT) {
        r = mscclpp_bootstrap_barrier(boot);
        if (r != MSCCLPP_OK) return failed(rank, r);
        setenv("MSCCLPP_TIMEOUT", FAIL_TIMEOUT, 1);
    }
    if (victim && cc->phase != P_BOOT && cc->phase != P_CONNECT) die_after(cc->delay_us);
    /* every rank runs until a call fails (the victim until it dies): none can get past the
     * victim's death, whenever it lands; bounded, in case a call wrongly succeeds */
    time_t until = time(NULL) + 60;
    while (r == MSCCLPP_OK && time(NULL) < until) {
        if (cc->phase == P_RUN) {
            /* another size: lowered again, under the short bound */
            for (int i = 0; i < RUN_CALLS && r == MSCCLPP_OK; i++)
                r = mscclpp_allreduce(ex, c, d, COUNT / 2, MSCCLPP_FLOAT32, MSCCLPP_SUM, s);
            if (r == MSCCLPP_OK) r = mscclpp_stream_synchronize(s);
        } else {
            r = mscclpp_allreduce(ex, c, d, COUNT, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL);
        }
    }
    if (r != MSCCLPP_OK) return failed(rank, r);
    results[rank].state = 1;
    return 0;
}

/* `text` mentions "rank V" (not "rank V0"), or V in a list "rank(s) 0, 2-4". */
static bool names_rank(const char *text, int v)
{
    char want[16];
    snprintf(want, sizeof want, "rank %d", v);
    for (const char *p = text; (p = strstr(p, want)); p++)
        if (p[strlen(want)] < '0' || p[strlen(want)] > '9') return true;
    for (const char *p = text; (p = strstr(p, "rank(s) ")); p++) {
        const char *q = p + 8;
        for (;;) {
            char *end;
            long a = strtol(q, &end, 10), b = a;
            if (end == q) break;
            if (*end == '-') b = strtol(end + 1, &end, 10);
            if (v >= a && v <= b) return true;
            if (end[0] != ',' || end[1] != ' ') break;
            q = end + 2;
        }
    }
    return false;
}

/* The first line of a rank's stderr that reports an error (the library's WARN lines). */
static bool first_error_line(const char *path, char *line, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool found = false;
    while (!found && fgets(line, (int)cap, f)) found = strstr(line, " WARN ") != NULL;
    fclose(f);
    if (found) line[strcspn(line, "\n")] = '\0';
    return found;
}

static int total_survivors, total_named;
static double total_slowest;

static void run(int phase, int nodes, int victim, int delay_us)
{
    culprit_case_t cc = {.phase = phase, .nodes = nodes, .victim = victim, .delay_us = delay_us};
    snprintf(cc.dir, sizeof cc.dir, "%s/culprit.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(cc.dir));
    memset(results, 0, sizeof *results * NRANKS);
    /* the bootstrap root starts (in rank 0) before the body runs: it takes the bound here */
    setenv("MSCCLPP_TIMEOUT", phase == P_BOOT ? FAIL_TIMEOUT : "30", 1);
    unsigned failed_ranks = 0;
    mp_run(NRANKS, body, &cc, 120, &failed_ranks);
    int survivors = 0, named = 0;
    double slowest = 0; /* from the kill to a survivor's failure */
    char report[4096] = "";
    size_t used = 0;
    /* the rank to name: the dead one, or the one the connect phase's victim could not reach */
    int culprit = victim;
    if (phase == P_CONNECT) {
        const char *p = strstr(results[victim].msg, "connect #1 to rank ");
        ck_assert_msg(results[victim].state == 2 && p,
                      "connect: rank %d's injected connect fault did not fail its call: %s", victim,
                      results[victim].msg);
        culprit = atoi(p + strlen("connect #1 to rank "));
        ck_assert_int_ne(culprit, victim);
    }
    for (int r = 0; r < NRANKS; r++) {
        if (r == culprit || (r == victim && phase != P_CONNECT)) continue;
        survivors++;
        char path[512], line[1024] = "";
        snprintf(path, sizeof path, "%s/rank%d.log", cc.dir, r);
        bool have_line = first_error_line(path, line, sizeof line);
        const char *why = NULL;
        if (results[r].state == 1) why = "every call returned OK";
        else if (results[r].state == 0) why = "never ended (crashed or killed)";
        else if (!names_rank(results[r].msg, culprit)) why = "its error does not name the culprit";
        else if (strstr(results[r].msg, "does not say which rank writes"))
            /* the 2-node cases run made packet plans: their peers' stubs name the writers */
            why = "its packet wait names no writer";
        else if (!have_line) why = "printed no error line";
        else if (!names_rank(strstr(line, " WARN ") + 6, culprit))
            why = "its first error line does not name the culprit";
        if (results[r].state == 2 && results[victim].t > 0 &&
            results[r].t - results[victim].t > slowest)
            slowest = results[r].t - results[victim].t;
        if (!why) {
            named++;
            continue;
        }
        used += (size_t)snprintf(report + used, used < sizeof report ? sizeof report - used : 0,
                                 "\n#   rank %d: %s (%.2f s after the kill)\n#     error: %s\n#  "
                                 "   first line: %s",
                                 r, why, results[r].t - results[victim].t, results[r].msg,
                                 have_line ? line : "(none)");
        if (results[r].state == 0) { /* what it printed last (a sanitizer's report, say) */
            char cmd[700];
            snprintf(cmd, sizeof cmd, "tail -n 40 '%s' | sed 's/^/#     | /' >&2", path);
            if (system(cmd) != 0) fprintf(stderr, "#     (no log)\n");
        }
    }
    if (named != survivors) /* every rank's error lines, for the cause */
        for (int r = 0; r < NRANKS; r++) {
            char cmd[700];
            fprintf(stderr, "# rank %d (%s, %.2f s after the kill):\n", r,
                    r == victim ? (phase == P_CONNECT ? "could not connect" : "killed")
                                : "survivor",
                    results[r].t > 0 ? results[r].t - results[victim].t : 0.0);
            snprintf(cmd, sizeof cmd,
                     "grep ' WARN ' '%s/rank%d.log' | head -n 6 | cut -c1-400 | sed 's/^/#   | /' "
                     ">&2",
                     cc.dir, r);
            if (system(cmd) != 0) fprintf(stderr, "#   (no error lines)\n");
        }
    total_survivors += survivors;
    total_named += named;
    if (slowest > total_slowest) total_slowest = slowest;
    printf("# %s, %d node(s), rank %d killed after %d us: %d of %d survivors named it, the "
           "slowest %.2f s after the kill\n",
           phase_names[phase], nodes, victim, delay_us, named, survivors, slowest);
    fflush(stdout);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cc.dir);
    if (getenv("CULPRIT_KEEP")) /* the ranks' whole logs, for debugging */
        printf("# logs kept in %s\n", cc.dir);
    else if (system(cmd) != 0) fprintf(stderr, "# could not remove %s\n", cc.dir);
    ck_assert_msg(named == survivors,
                  "%s, %d node(s), rank %d killed after %d us: %d of %d "
                  "survivors named it:%s",
                  phase_names[phase], nodes, victim, delay_us, named, survivors, report);
    /* MSCCLPP_TIMEOUT + 1 s (the bound), + 1 s for a loaded CI machine; ThreadSanitizer
     * slows every step several times over */
    ck_assert_msg(slowest <= atof(FAIL_TIMEOUT) + 2.0 + (TSAN ? 6.0 : 0.0),
                  "%s, %d node(s), rank %d killed after %d us: a survivor failed %.2f s after "
                  "the kill (MSCCLPP_TIMEOUT %s)",
                  phase_names[phase], nodes, victim, delay_us, slowest, FAIL_TIMEOUT);
}

START_TEST(t_boot) { run(P_BOOT, _i % 2 ? 2 : 1, 1 + _i % 3, _i < 2 ? 0 : 3000); }
END_TEST
START_TEST(t_setup) { run(P_SETUP, _i % 2 ? 2 : 1, 1 + _i % 3, (int[]){0, 500, 2000, 8000}[_i]); }
END_TEST
START_TEST(t_run) { run(P_RUN, _i % 2 ? 2 : 1, 1 + _i % 3, 20000 + 30000 * _i); }
END_TEST
/* 2 nodes: rank 3's port channels to ranks 0 and 1 cross them */
START_TEST(t_connect) { run(P_CONNECT, 2, 3, 0); }
END_TEST

int main(void)
{
    results = mmap(NULL, sizeof *results * NRANKS, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (results == MAP_FAILED) return 1;
    const char *top = getenv("MSCCLPP_TOP_SRCDIR");
    char plan_dir[512];
    snprintf(plan_dir, sizeof plan_dir, "%s/plans", top ? top : ".");
    setenv("MSCCLPP_PLAN_DIR", plan_dir, 1);
    setenv("MSCCLPP_HAL", "host", 1);
    Suite *s = suite_create("culprit");
    TCase *tc = tcase_create("kill");
    tcase_set_timeout(tc, 150);
    /* CULPRIT_ONLY=<phase>:<i> (say setup:3) runs one case, for debugging a flaky one;
     * CULPRIT_KEEP=1 keeps the ranks' logs (set MSCCLPP_DEBUG=INFO for more) */
    const char *only = getenv("CULPRIT_ONLY");
    char only_phase[16] = "";
    int only_i = -1;
    if (only && sscanf(only, "%15[a-z]:%d", only_phase, &only_i) != 2) only_i = -1;
#define CULPRIT_ADD(t, name)                          \
    if (only_i < 0) tcase_add_loop_test(tc, t, 0, 4); \
    else if (!strcmp(only_phase, name) && only_i < 4) tcase_add_loop_test(tc, t, only_i, only_i + 1)
    CULPRIT_ADD(t_boot, "boot");
    CULPRIT_ADD(t_setup, "setup");
    CULPRIT_ADD(t_run, "run");
    if (only_i < 0 || (!strcmp(only_phase, "connect") && only_i == 0))
        tcase_add_test(tc, t_connect);
#undef CULPRIT_ADD
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    /* no fork per case: the totals add up in this process */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    printf("# culprit named by %d of %d survivors; the slowest failed %.2f s after the kill "
           "(MSCCLPP_TIMEOUT %s)\n",
           total_named, total_survivors, total_slowest, FAIL_TIMEOUT);
    return nf ? 1 : 0;
}
