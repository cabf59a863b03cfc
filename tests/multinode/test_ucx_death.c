/*
 * A peer that dies in the middle of a UCX connection must not take the survivor with it
 * (issue 22: no abort on a peer's death). The ucx transport driven directly, over UCX's tcp on
 * loopback, by two forked ranks and this process, which orders their steps through pipes:
 *
 *   1. both make a context and exchange worker addresses;
 *   2. the victim (rank 1) connects to the survivor (rank 0) and stops driving its worker: UCX's
 *      tcp sends its connection request at once;
 *   3. the survivor drives its worker (as its proxy does while other contexts run): UCX accepts
 *      the request, keeps the half-made connection and answers it;
 *   4. the victim is killed (SIGKILL, the answer unread: its kernel resets the socket);
 *   5. the survivor connects to the victim. UCX 1.13's tcp reuses the half-made connection,
 *      whose send fails at once, and then asserted on the next progress
 *      (tcp_ep.c:478 '!(ep->flags & UCT_TCP_EP_FLAG_CTX_TYPE_TX)': SIGABRT), the crash seen in
 *      test_culprit t_setup.
 * The survivor must instead get an error naming rank 1 from the connect, its progress, its
 * endpoint's status or a flush, and exit normally. Each round takes ~0.2 s.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "base/wire.h"
#include "hal/hal.h"
#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"
#include "transports/transport.h"

#define ROUNDS_DEFAULT 10

/* exit codes of the survivor */
enum { S_OK = 0, S_SETUP = 2, S_SILENT = 3, S_WRONG = 4 };

typedef struct {
    int rank;
    int to, from; /* pipes to and from this process */
    tp_world_t world;
    uint64_t nodes[2];
    const tp_ops_t *ops;
    tp_ctx_t *ctx;
    tp_ep_t *ep;
    uint8_t addr[TP_ADDR_MAX];
    uint32_t alen;
} side_t;

/* Steps 1 of either rank: a context, this side's address out, the peer's in. */
static int side_setup(side_t *s)
{
    setenv("UCX_TLS", "tcp", 1);
    setenv("UCX_NET_DEVICES", "lo", 1);
    setenv("MSCCLPP_TIMEOUT", "5", 1);
    s->nodes[0] = 1;
    s->nodes[1] = 2;
    s->world = (tp_world_t){.rank = s->rank,
                            .nranks = 2,
                            .local_rank = 0,
                            .nlocal = 1,
                            .node_id = s->nodes,
                            .hal = hal_host_ops(),
                            .maps = NULL};
    s->ops = tp_ucx_ops();
    if (s->ops->init(&s->world, &s->ctx) != MSCCLPP_OK) {
        fprintf(stderr, "rank %d: ucx init: %s\n", s->rank, mscclpp_last_error());
        return -1;
    }
    uint8_t mine[TP_ADDR_MAX];
    wire_writer_t w = {mine, sizeof mine, 0, false};
    if (s->ops->ep_open(s->ctx, 1 - s->rank, &s->ep, &w) != MSCCLPP_OK) {
        fprintf(stderr, "rank %d: ep_open: %s\n", s->rank, mscclpp_last_error());
        return -1;
    }
    uint32_t n = (uint32_t)w.len;
    if (mp_write_all(s->to, &n, sizeof n) || mp_write_all(s->to, mine, n)) return -1;
    if (mp_read_all(s->from, &s->alen, sizeof s->alen, 30000) || s->alen > sizeof s->addr ||
        mp_read_all(s->from, s->addr, s->alen, 30000))
        return -1;
    return 0;
}

static mscclpp_result_t side_connect(side_t *s)
{
    wire_reader_t r = {s->addr, s->alen, 0, false};
    return s->ops->ep_connect(s->ep, &r);
}

static void victim_main(side_t *s)
{
    if (side_setup(s)) _exit(S_SETUP);
    if (side_connect(s) != MSCCLPP_OK) _exit(S_SETUP);
    char c = 'C';
    if (mp_write_all(s->to, &c, 1)) _exit(S_SETUP);
    for (;;) pause(); /* never drives its worker again: killed here */
}

/* An error that names the victim: what the survivor must get. It then goes on as a survivor
 * does (its proxy drives the worker until the communicator goes, then closes and finishes):
 * nothing UCX left behind may abort it later. */
static int judged(side_t *s, mscclpp_result_t r, const char *where)
{
    const char *msg = mscclpp_last_error();
    fprintf(stderr, "survivor: %s: %s: %s\n", where, mscclpp_result_string(r), msg);
    int code = strstr(msg, "rank 1") ? S_OK : S_WRONG;
    double t0 = mp_now_s();
    while (mp_now_s() - t0 < 0.2) {
        (void)s->ops->progress(s->ctx);
        usleep(1000);
    }
    (void)s->ops->close(s->ep);
    s->ops->fini(s->ctx);
    return code;
}

static void survivor_main(side_t *s)
{
    if (side_setup(s)) _exit(S_SETUP);
    char c;
    if (mp_read_all(s->from, &c, 1, 30000) || c != 'G') _exit(S_SETUP);
    /* step 3: drive the worker while the victim's request comes in and is answered */
    double t0 = mp_now_s();
    while (mp_now_s() - t0 < 0.1) {
        if (s->ops->progress(s->ctx) != MSCCLPP_OK) _exit(S_SETUP);
        usleep(1000);
    }
    c = 'P';
    if (mp_write_all(s->to, &c, 1) || mp_read_all(s->from, &c, 1, 30000) || c != 'D')
        _exit(S_SETUP);
    /* step 5: the victim is dead; nothing drove the worker since */
    mscclpp_result_t r = side_connect(s);
    if (r != MSCCLPP_OK) _exit(judged(s, r, "connect"));
    t0 = mp_now_s();
    while (mp_now_s() - t0 < 5) {
        r = s->ops->progress(s->ctx);
        if (r != MSCCLPP_OK) _exit(judged(s, r, "progress"));
        r = s->ops->ep_status(s->ep);
        if (r != MSCCLPP_OK) _exit(judged(s, r, "ep_status"));
        usleep(1000);
    }
    r = s->ops->flush(s->ep, 2000000000ull, TP_FLUSH_REMOTE);
    if (r != MSCCLPP_OK) _exit(judged(s, r, "flush"));
    fprintf(stderr, "survivor: no call failed 5 s after the victim's death\n");
    _exit(S_SILENT);
}

/* One round; returns 0, or fails the test saying how the survivor ended. */
static void round_run(int round)
{
    int a_to[2], a_from[2], v_to[2], v_from[2]; /* [0] read end, [1] write end */
    ck_assert(pipe(a_to) == 0 && pipe(a_from) == 0 && pipe(v_to) == 0 && pipe(v_from) == 0);
    fflush(NULL);
    pid_t a = fork();
    ck_assert(a >= 0);
    if (a == 0) {
        side_t s = {.rank = 0, .to = a_from[1], .from = a_to[0]};
        survivor_main(&s);
    }
    pid_t v = fork();
    ck_assert(v >= 0);
    if (v == 0) {
        side_t s = {.rank = 1, .to = v_from[1], .from = v_to[0]};
        victim_main(&s);
    }
    close(a_to[0]);
    close(a_from[1]);
    close(v_to[0]);
    close(v_from[1]);
    /* step 1: forward the addresses */
    uint8_t buf[2][TP_ADDR_MAX];
    uint32_t n[2];
    bool ok = !mp_read_all(a_from[0], &n[0], 4, 30000) && n[0] <= TP_ADDR_MAX &&
              !mp_read_all(a_from[0], buf[0], n[0], 30000) &&
              !mp_read_all(v_from[0], &n[1], 4, 30000) && n[1] <= TP_ADDR_MAX &&
              !mp_read_all(v_from[0], buf[1], n[1], 30000) && !mp_write_all(a_to[1], &n[1], 4) &&
              !mp_write_all(a_to[1], buf[1], n[1]) && !mp_write_all(v_to[1], &n[0], 4) &&
              !mp_write_all(v_to[1], buf[0], n[0]);
    /* step 2 done by the victim; 3 by the survivor; 4 here */
    char c = 0;
    ok = ok && !mp_read_all(v_from[0], &c, 1, 30000) && c == 'C';
    c = 'G';
    ok = ok && !mp_write_all(a_to[1], &c, 1) && !mp_read_all(a_from[0], &c, 1, 30000) && c == 'P';
    kill(v, SIGKILL);
    int st = 0;
    waitpid(v, &st, 0);
    usleep(20000); /* the reset reaches the survivor's socket */
    c = 'D';
    ok = ok && !mp_write_all(a_to[1], &c, 1);
    if (!ok) kill(a, SIGKILL);
    waitpid(a, &st, 0);
    close(a_to[1]);
    close(a_from[0]);
    close(v_to[1]);
    close(v_from[0]);
    ck_assert_msg(ok, "round %d: the ranks did not get through their steps", round);
    ck_assert_msg(!WIFSIGNALED(st),
                  "round %d: the survivor died of signal %d (%s) after its "
                  "peer was killed mid-connect (UCX tcp_ep.c assertion? see the log)",
                  round, WTERMSIG(st), strsignal(WTERMSIG(st)));
    ck_assert_msg(WEXITSTATUS(st) == S_OK, "round %d: the survivor exited %d (%s)", round,
                  WEXITSTATUS(st),
                  WEXITSTATUS(st) == S_SILENT  ? "no call noticed the dead peer"
                  : WEXITSTATUS(st) == S_WRONG ? "its error does not name rank 1"
                                               : "setup failed");
}

START_TEST(t_connect_after_peer_died)
{
    const char *e = getenv("MSCCLPP_TEST_UCX_DEATH_ROUNDS");
    int rounds = e && atoi(e) > 0 ? atoi(e) : ROUNDS_DEFAULT;
    for (int i = 0; i < rounds; i++) round_run(i);
}
END_TEST

int main(void)
{
#ifndef MSCCLPP_HAVE_UCX
    printf("# skipped: the ucx transport is not built (configure found no UCX)\n");
    return 77;
#endif
    Suite *s = suite_create("ucx_death");
    TCase *tc = tcase_create("death");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, t_connect_after_peer_died);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? 1 : 0;
}
