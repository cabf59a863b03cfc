/*
 * A port channel's transport failing after the launch that issued the operation has ended
 * (issue 8: no error lost). The fault is injected with MSCCLPP_TEST_TRANSPORT_FAULT=put:N
 * (transports/transport.c, test only): rank 0's Nth put fails inside its proxy thread.
 *
 * The plan (written here): 2 ranks on one node (the ipc transport), each puts its input into
 * the peer's scratch through a port channel and copies it to its own output. With no flush,
 * the kernel is done as soon as the trigger is in the FIFO; the put runs later, in the proxy.
 * Every way the caller can learn of the failure must report it with the transport's sentence
 * and the peer: the synchronous call itself, mscclpp_stream_synchronize, and
 * mscclpp_executor_get_async_error; and every later call says the executor is broken.
 * A second plan flushes after the put, so the kernel itself sees the proxy fail: its message
 * ("the proxy failed (port channel 0 to rank 1)") must carry the transport's sentence too.
 * t_peer_left: a peer that finished its last call and exited must not fail a slower rank that
 * needs nothing more from it (3 ranks over ucx; see left_json).
 * t_destroy_flush_logged: the flush of a port context's links on destroy logs its failure.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"

#define COUNT 1024 /* floats per rank */
#define TIMEOUT_S 5

enum { MODE_SYNC, MODE_STREAM, MODE_ASYNC, MODE_FLUSH, MODE__COUNT };
static const char *const mode_name[] = {"call without stream", "stream sync", "async query",
                                        "flush on a stream"};

/* Rank r: copy i[0] to o[r] and put i[0] into the peer's scratch chunk r (then flush). */
static char *plan_json(int flush)
{
    char *buf = malloc(8192);
    size_t len = 0;
    len += (size_t)snprintf(buf + len, 8192 - len,
        "{\"format\": \"mscclpp-plan/1\", \"name\": \"port_fault%s\", \"collective\": "
        "\"allgather\", \"protocol\": \"Simple\", \"inplace\": false, \"reuse_resources\": false, "
        "\"num_threads_per_block\": 1024, \"use_double_scratch_buffer\": false, "
        "\"buffer_alignment\": 16, \"min_message_size\": 0, "
        "\"max_message_size\": 18446744073709551615, \"gpus\": [", flush ? "_flush" : "");
    for (int r = 0; r < 2; r++)
        len += (size_t)snprintf(buf + len, 8192 - len,
            "%s{\"id\": %d, \"input_chunks\": 1, \"output_chunks\": 2, \"scratch_chunks\": 2, "
            "\"channels\": [{\"channel_type\": \"port\", \"connected_to\": [%d]}], "
            "\"remote_buffers\": [{\"rank\": %d, \"type\": \"s\", \"access_channel_types\": "
            "[\"port\"]}], \"semaphores\": [], \"threadblocks\": [{\"id\": 0, \"ops\": ["
            "{\"name\": \"copy\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], "
            "\"dst_buff\": [{\"type\": \"o\", \"index\": %d, \"size\": 1}]}, "
            "{\"name\": \"put\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], "
            "\"dst_buff\": [{\"buffer_id\": 0, \"index\": %d, \"size\": 1}], \"channel_ids\": "
            "[0], \"channel_type\": \"port\"}%s], "
            "\"channels\": [{\"channel_type\": \"port\", \"channel_ids\": [0]}], "
            "\"remote_buffer_refs\": [{\"access_channel_type\": \"port\", "
            "\"remote_buffer_ids\": [0]}]}]}",
            r ? ", " : "", r, 1 - r, 1 - r, r, r,
            flush ? ", {\"name\": \"flush\", \"channel_ids\": [0], \"channel_type\": \"port\"}"
                  : "");
    snprintf(buf + len, 8192 - len, "]}");
    return buf;
}

static int names(int rank, const char *what, const char *msg, const char *const *words, int n)
{
    for (int i = 0; i < n; i++)
        if (!strstr(msg, words[i]))
            return MP_FAIL(rank, "%s: the message does not name '%s': %s", what, words[i], msg);
    return 0;
}

/* One rank's objects for the one-node cases: a comm (ipc), the test plan, an executor and its
 * shared buffers, the input filled with rank * 10000 + i. */
typedef struct {
    mscclpp_comm_t *comm;
    mscclpp_plan_t *plan;
    mscclpp_executor_t *ex;
    float *in, *out;
} pf_rank_t;

static int pf_open(pf_rank_t *f, int rank, int n, const mscclpp_unique_id_t *id, int flush)
{
    memset(f, 0, sizeof *f);
    if (mp_join_node(rank, n, n, "port-fault", id, &f->comm)) return 1; /* one node: ipc */
    char *json = plan_json(flush);
    mscclpp_result_t lr = mscclpp_plan_load_string(json, strlen(json), &f->plan);
    free(json);
    MP_CHECK(rank, lr);
    MP_CHECK(rank, mscclpp_executor_create(f->comm, &f->ex));
    MP_CHECK(rank, mscclpp_malloc(COUNT * sizeof(float), (void **)&f->in));
    MP_CHECK(rank, mscclpp_malloc(2 * COUNT * sizeof(float), (void **)&f->out));
    for (int i = 0; i < COUNT; i++) f->in[i] = (float)(rank * 10000 + i);
    return 0;
}

/* One call of the test plan on `s` (NULL: synchronous). */
static mscclpp_result_t pf_execute(pf_rank_t *f, mscclpp_stream_t s)
{
    return mscclpp_execute(f->ex, f->plan, f->in, f->out, COUNT * sizeof(float),
                           2 * COUNT * sizeof(float), MSCCLPP_FLOAT32, MSCCLPP_SUM, s);
}

static void pf_close(pf_rank_t *f)
{
    if (f->ex) mscclpp_executor_destroy(f->ex); /* first: the destroy may still use the rest */
    if (f->plan) mscclpp_plan_destroy(f->plan);
    if (f->in) mscclpp_free(f->in);
    if (f->out) mscclpp_free(f->out);
    if (f->comm) mscclpp_comm_destroy(f->comm);
    memset(f, 0, sizeof *f);
}

static int fault_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    int mode = *(int *)arg;
    mp_set_timeout(TIMEOUT_S);
    /* rank 0's second put fails: the first call works, the second fails after its launch */
    if (rank == 0) setenv("MSCCLPP_TEST_TRANSPORT_FAULT", "put:2", 1);
    pf_rank_t f;
    if (pf_open(&f, rank, n, id, mode == MODE_FLUSH)) return 1;
    mscclpp_executor_t *ex = f.ex;
    const float *in = f.in;
    float *out = f.out;
    mscclpp_stream_t s = NULL;
    if (mode != MODE_SYNC) MP_CHECK(rank, mscclpp_stream_create(&s));

    /* call 1: every put works */
    memset(out, 0, 2 * COUNT * sizeof(float));
    MP_CHECK(rank, pf_execute(&f, s));
    if (s) MP_CHECK(rank, mscclpp_stream_synchronize(s));
    for (int i = 0; i < COUNT; i++)
        if (out[rank * COUNT + i] != in[i])
            return MP_FAIL(rank, "call 1: out[%d] = %g, want %g", rank * COUNT + i,
                           out[rank * COUNT + i], in[i]);
    mscclpp_bootstrap_t *boot = NULL;
    MP_CHECK(rank, mscclpp_comm_bootstrap(f.comm, &boot));
    MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));

    /* call 2: rank 0's put fails in its proxy */
    const char *const want[] = {"put #2 to rank 1 failed", "MSCCLPP_TEST_TRANSPORT_FAULT",
                                "ipc transport", "rank 0"};
    double t0 = mp_now_s();
    mscclpp_result_t r = pf_execute(&f, s);
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
    if (rank == 1) {
        if (r == MSCCLPP_OK && s) r = mscclpp_stream_synchronize(s);
        if (r != MSCCLPP_OK) return MP_FAIL(rank, "call 2 on the healthy rank: %s", msg);
    } else if (mode == MODE_SYNC) {
        /* the synchronous call hands every trigger to the transport before it returns */
        if (r != MSCCLPP_ERR_REMOTE)
            return MP_FAIL(rank, "%s: call 2 returned %s, want MSCCLPP_ERR_REMOTE: %s",
                           mode_name[mode], mscclpp_result_string(r), msg);
        if (names(rank, mode_name[mode], msg, want, 4)) return 1;
    } else {
        if (r != MSCCLPP_OK) /* a launch on a stream returns before its triggers are done */
            return MP_FAIL(rank, "%s: call 2's launch: %s", mode_name[mode], msg);
        if (mode == MODE_ASYNC) {
            mscclpp_result_t async = MSCCLPP_OK;
            while (async == MSCCLPP_OK && mp_now_s() - t0 < TIMEOUT_S + 1.0) {
                MP_CHECK(rank, mscclpp_executor_get_async_error(ex, &async));
                if (async == MSCCLPP_OK) usleep(2000);
            }
            r = async;
        } else {
            r = mscclpp_stream_synchronize(s);
        }
        snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
        if (r != MSCCLPP_ERR_REMOTE)
            return MP_FAIL(rank, "%s: got %s, want MSCCLPP_ERR_REMOTE: %s", mode_name[mode],
                           mscclpp_result_string(r), msg);
        if (names(rank, mode_name[mode], msg, want, 4)) return 1;
        if (mode == MODE_FLUSH) {
            /* the kernel's own record names the op and the channel; the proxy adds why */
            const char *const kern[] = {"the proxy failed (port channel 0 to rank 1)",
                                        "op 2 (flush)"};
            if (names(rank, mode_name[mode], msg, kern, 2)) return 1;
        }
    }
    if (rank == 0) {
        double dt = mp_now_s() - t0;
        if (dt > TIMEOUT_S + 1.0)
            return MP_FAIL(rank, "%s: the error took %.2f s", mode_name[mode], dt);
        printf("# %s: rank 0 got %s in %.3f s: %s\n", mode_name[mode], mscclpp_result_string(r),
               dt, msg);
        /* every later call: broken, with the original sentence */
        r = pf_execute(&f, s);
        snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
        if (r != MSCCLPP_ERR_REMOTE || !strstr(msg, "broken by an earlier error") ||
            !strstr(msg, "put #2 to rank 1 failed"))
            return MP_FAIL(rank, "%s: call 3 returned %s: %s", mode_name[mode],
                           mscclpp_result_string(r), msg);
    }
    MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
    if (s) mscclpp_stream_destroy(s);
    pf_close(&f);
    return 0;
}

START_TEST(t_put_fails_after_launch)
{
    int mode = _i;
    unsigned failed = 0;
    ck_assert_msg(mp_run(2, fault_body, &mode, 60, &failed) == 0, "%s: failed ranks 0x%x",
                  mode_name[mode], failed);
}
END_TEST

/* A malformed knob injects nothing (and says so); a put count never reached changes nothing. */
static int no_fault_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    setenv("MSCCLPP_TEST_TRANSPORT_FAULT", arg, 1);
    pf_rank_t f;
    if (pf_open(&f, rank, n, id, 1)) return 1;
    for (int call = 0; call < 3; call++) MP_CHECK(rank, pf_execute(&f, NULL));
    if (mp_barrier_then_die(rank, f.comm, false)) return 1;
    pf_close(&f);
    return 0;
}

/*
 * exec_port_destroy flushes each link locally before closing it (1141b53); nothing is left to
 * return that flush's error to, but it must not vanish: rank 0's first flush (the destroy's:
 * the plan has no flush op) is injected to fail, and its log (INFO, EXEC) must name the peer
 * and the transport's sentence. Before: nothing was logged.
 */
static void flush_log_path(char *log, size_t cap)
{
    snprintf(log, cap, "/tmp/mscclpp-pfflush-%d.log", (int)getpid());
}

/* before rank 0 makes the unique id: the logger reads its settings at its first line */
static int destroy_flush_setup(int rank)
{
    if (rank != 0) return 0;
    char log[64];
    flush_log_path(log, sizeof log);
    setenv("MSCCLPP_TEST_TRANSPORT_FAULT", "flush:1", 1);
    setenv("MSCCLPP_DEBUG", "INFO", 1);
    setenv("MSCCLPP_DEBUG_SUBSYS", "EXEC", 1);
    setenv("MSCCLPP_DEBUG_FILE", log, 1);
    return 0;
}

static int destroy_flush_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mp_set_timeout(TIMEOUT_S);
    char log[64];
    flush_log_path(log, sizeof log);
    pf_rank_t f;
    if (pf_open(&f, rank, n, id, 0)) return 1;
    MP_CHECK(rank, pf_execute(&f, NULL));
    if (mp_barrier_then_die(rank, f.comm, false)) return 1;
    mscclpp_executor_destroy(f.ex); /* the flush under test */
    f.ex = NULL;
    int rc = 0;
    if (rank == 0) {
        FILE *fp = fopen(log, "r");
        char line[2048];
        int found = 0;
        while (fp && !found && fgets(line, sizeof line, fp))
            found = strstr(line, "flushing the link to rank 1") && strstr(line, "flush #1") &&
                    strstr(line, "MSCCLPP_TEST_TRANSPORT_FAULT");
        if (fp) fclose(fp);
        unlink(log);
        if (!found)
            rc =
                MP_FAIL(rank, "no INFO line for the failed flush of the link to rank 1 in %s", log);
    }
    pf_close(&f);
    return rc;
}

START_TEST(t_destroy_flush_logged)
{
    mp_child_setup = destroy_flush_setup;
    int failed = mp_run(2, destroy_flush_body, NULL, 60, NULL);
    mp_child_setup = NULL;
    ck_assert_int_eq(failed, 0);
}
END_TEST

/*
 * A peer that finished and left (issue 22, board 2026-11-26 08:00): 3 ranks as 3 nodes (ucx
 * over tcp). Rank 1 exchanges its input with rank 0 and, its call done, destroys everything and
 * exits. Rank 0's launch still waits (for rank 2, whose signal is 3 s late) and
 * then flushes its put to rank 1. Rank 0 needs nothing more from rank 1: its call must
 * succeed with rank 1's data, although rank 1's connection closed under it (before: the proxy
 * failed the launch, "connection to rank 1 failed ... is rank 1 alive?").
 */
static char *left_json(void)
{
    const char *tail_ops[3] = {
        /* rank 0: needs rank 1's signal, answers it, waits for rank 2, flushes to rank 1 */
        "{\"name\": \"wait\", \"channel_ids\": [0], \"channel_type\": \"port\"}, "
        "{\"name\": \"put\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], "
        "\"dst_buff\": [{\"buffer_id\": 0, \"index\": 0, \"size\": 1}], \"channel_ids\": [0], "
        "\"channel_type\": \"port\"}, "
        "{\"name\": \"signal\", \"channel_ids\": [0], \"channel_type\": \"port\"}, "
        "{\"name\": \"wait\", \"channel_ids\": [1], \"channel_type\": \"port\"}, "
        "{\"name\": \"flush\", \"channel_ids\": [0], \"channel_type\": \"port\"}",
        /* rank 1: puts its input into rank 0's output, signals, waits for rank 0's answer */
        "{\"name\": \"put\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], "
        "\"dst_buff\": [{\"buffer_id\": 0, \"index\": 0, \"size\": 1}], \"channel_ids\": [0], "
        "\"channel_type\": \"port\"}, "
        "{\"name\": \"signal\", \"channel_ids\": [0], \"channel_type\": \"port\"}, "
        "{\"name\": \"flush\", \"channel_ids\": [0], \"channel_type\": \"port\"}, "
        "{\"name\": \"wait\", \"channel_ids\": [0], \"channel_type\": \"port\"}",
        /* rank 2: one signal to rank 0 */
        "{\"name\": \"signal\", \"channel_ids\": [0], \"channel_type\": \"port\"}"};
    const char *peers[3] = {"[1, 2]", "[0]", "[0]"};
    const char *tb_chans[3] = {"[0, 1]", "[0]", "[0]"};
    char *buf = malloc(16384);
    size_t len = (size_t)snprintf(buf, 16384,
        "{\"format\": \"mscclpp-plan/1\", \"name\": \"peer_left\", \"collective\": \"custom\", "
        "\"protocol\": \"Simple\", \"inplace\": false, \"reuse_resources\": false, "
        "\"num_threads_per_block\": 1024, \"use_double_scratch_buffer\": false, "
        "\"buffer_alignment\": 16, \"min_message_size\": 0, "
        "\"max_message_size\": 18446744073709551615, \"gpus\": [");
    for (int r = 0; r < 3; r++) {
        const char *rb = r == 2 ? "" : "{\"rank\": %d, \"type\": \"o\", \"access_channel_types\": [\"port\"]}";
        char rbuf[160];
        snprintf(rbuf, sizeof rbuf, rb, 1 - r);
        len += (size_t)snprintf(buf + len, 16384 - len,
            "%s{\"id\": %d, \"input_chunks\": 1, \"output_chunks\": 1, \"scratch_chunks\": 0, "
            "\"channels\": [{\"channel_type\": \"port\", \"connected_to\": %s}], "
            "\"remote_buffers\": [%s], \"semaphores\": [], \"threadblocks\": [{\"id\": 0, "
            "\"ops\": [%s], \"channels\": [{\"channel_type\": \"port\", \"channel_ids\": %s}], "
            "\"remote_buffer_refs\": [%s]}]}",
            r ? ", " : "", r, peers[r], rbuf, tail_ops[r], tb_chans[r],
            r == 2 ? "" : "{\"access_channel_type\": \"port\", \"remote_buffer_ids\": [0]}");
    }
    snprintf(buf + len, 16384 - len, "]}");
    return buf;
}

static int left_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    char node[32];
    snprintf(node, sizeof node, "peer-left-node-%d", rank); /* a node each: ucx */
    setenv("MSCCLPP_NODE_ID", node, 1);
    setenv("MSCCLPP_TIMEOUT", "20", 1);
    setenv("UCX_TLS", "tcp", 1);
    setenv("UCX_NET_DEVICES", "lo", 1);
    /* UCX finds a peer gone by its keepalive (20 s by default): make it find out at once */
    setenv("UCX_KEEPALIVE_INTERVAL", "100ms", 1);
    /* rank 2's signal of the second call is 3 s late: rank 0 waits for it, rank 1 leaves */
    if (rank == 2) setenv("MSCCLPP_TEST_TRANSPORT_FAULT", "signal:2:3000", 1);
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    char *json = left_json();
    mscclpp_plan_t *plan = NULL;
    mscclpp_result_t lr = mscclpp_plan_load_string(json, strlen(json), &plan);
    free(json);
    MP_CHECK(rank, lr);
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    float *in = NULL, *out = NULL;
    MP_CHECK(rank, mscclpp_malloc(COUNT * sizeof(float), (void **)&in));
    MP_CHECK(rank, mscclpp_malloc(COUNT * sizeof(float), (void **)&out));
    for (int i = 0; i < COUNT; i++) in[i] = (float)(rank * 10000 + i);
    size_t b = COUNT * sizeof(float);
    mscclpp_bootstrap_t *boot = NULL;
    MP_CHECK(rank, mscclpp_comm_bootstrap(comm, &boot));
    for (int call = 0; call < 2; call++) {
        if (call == 1) MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
        memset(out, 0, b);
        double t0 = mp_now_s();
        mscclpp_result_t r = mscclpp_execute(ex, plan, in, out, b, b, MSCCLPP_FLOAT32,
                                             MSCCLPP_SUM, NULL);
        if (r != MSCCLPP_OK)
            return MP_FAIL(rank, "call %d (%.2f s): %s", call, mp_now_s() - t0,
                           mscclpp_last_error());
        for (int i = 0; rank < 2 && i < COUNT; i++)
            if (out[i] != (float)((1 - rank) * 10000 + i))
                return MP_FAIL(rank, "call %d: out[%d] = %g, want %g", call, i, out[i],
                               (double)((1 - rank) * 10000 + i));
        if (rank == 0 && call == 1) printf("# rank 0: call 1 done in %.2f s\n", mp_now_s() - t0);
    }
    /* rank 1 exits at once (its last call is done), with no destroy: a destroy waits for the
     * others; the others leave once rank 0 is done */
    if (rank == 1) _exit(0);
    if (rank != 1) MP_CHECK(rank, mscclpp_bootstrap_send(boot, "x", 1, rank ? 0 : 2, 77));
    if (rank != 1) {
        char x;
        MP_CHECK(rank, mscclpp_bootstrap_recv(boot, &x, 1, rank ? 0 : 2, 77));
    }
    mscclpp_executor_destroy(ex);
    mscclpp_plan_destroy(plan);
    mscclpp_free(in);
    mscclpp_free(out);
    mscclpp_comm_destroy(comm);
    return 0;
}

START_TEST(t_peer_left)
{
    ck_assert_int_eq(mp_run(3, left_body, NULL, 90, NULL), 0);
}
END_TEST

/*
 * A proxy stuck inside a transport call (its put held 8 s by MSCCLPP_TEST_TRANSPORT_FAULT=
 * put:1:8000 on both ranks): the plan made for 2 nodes of 1 rank (LL packets put over a port
 * channel, no signal) times out waiting for the peer's packets on both ranks, as on one H200
 * under MPS (test_made 2x1), where the peers' view cannot tell a put never made from one
 * lost. The message must say that this rank's own proxy holds the put: for how long, to whom.
 */
static int stuck_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    char node[32];
    snprintf(node, sizeof node, "stuck-node-%d", rank); /* a node each: ucx */
    setenv("MSCCLPP_NODE_ID", node, 1);
    setenv("MSCCLPP_TIMEOUT", "2", 1);
    setenv("UCX_TLS", "tcp", 1);
    setenv("UCX_NET_DEVICES", "lo", 1);
    setenv("MSCCLPP_TEST_TRANSPORT_FAULT", "put:1:8000", 1);
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    float *in = NULL, *out = NULL;
    MP_CHECK(rank, mscclpp_malloc(64 * sizeof(float), (void **)&in));
    MP_CHECK(rank, mscclpp_malloc(64 * sizeof(float), (void **)&out));
    const mscclpp_plan_t *sel = NULL;
    MP_CHECK(rank, mscclpp_executor_choose_plan(ex, "allreduce", 0, 64 * sizeof(float), &sel,
                                                NULL));
    if (strcmp(mscclpp_plan_name(sel), "made_allreduce_pkt_2x1"))
        return MP_FAIL(rank, "chose plan '%s', want made_allreduce_pkt_2x1",
                       mscclpp_plan_name(sel));
    double t0 = mp_now_s();
    mscclpp_result_t r = mscclpp_allreduce(ex, in, out, 64, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL);
    double took = mp_now_s() - t0;
    char peer[32];
    snprintf(peer, sizeof peer, "to rank %d", 1 - rank);
    const char *msg = mscclpp_last_error();
    if (r != MSCCLPP_ERR_TIMEOUT || !strstr(msg, "LL packets") ||
        !strstr(msg, "proxy has been inside one ucx transport call") ||
        !strstr(msg, "a put of") || !strstr(msg, peer) || took > 7.0)
        return MP_FAIL(rank, "want a packet timeout naming this rank's stuck put %s within "
                       "7 s, got %s after %.1f s: %s", peer, mscclpp_result_string(r), took, msg);
    printf("# rank %d: %s\n", rank, msg);
    fflush(stdout);
    mscclpp_free(in);
    mscclpp_free(out);
    _exit(0); /* the executor is broken and its proxy still inside the put: no tidy exit */
}

START_TEST(t_proxy_stuck)
{
    char empty[] = "/tmp/mscclpp-stuck-XXXXXX"; /* no plan files: the made plans serve */
    ck_assert_ptr_nonnull(mkdtemp(empty));
    setenv("MSCCLPP_PLAN_DIR", empty, 1);
    setenv("MSCCLPP_TUNING_FILE", "none", 1);
    int f = mp_run(2, stuck_body, NULL, 60, NULL);
    unsetenv("MSCCLPP_PLAN_DIR");
    unsetenv("MSCCLPP_TUNING_FILE");
    rmdir(empty);
    ck_assert_int_eq(f, 0);
}
END_TEST

START_TEST(t_knob_off)
{
    static const char *const specs[] = {"put:1000", "put", "put:0", "wire:1", "put:2x"};
    ck_assert_int_eq(mp_run(2, no_fault_body, (void *)specs[_i], 60, NULL), 0);
}
END_TEST

int main(void)
{
    setenv("MSCCLPP_HAL", "host", 1);
    setenv("MSCCLPP_HAL_SYNC_CHECK", "1", 1); /* hal/host/host_check.c: proxies' calls */
    Suite *s = suite_create("port_fault");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, t_put_fails_after_launch, 0, MODE__COUNT);
    tcase_add_loop_test(tc, t_knob_off, 0, 5);
    tcase_add_test(tc, t_peer_left);
    tcase_add_test(tc, t_destroy_flush_logged);
    tcase_add_test(tc, t_proxy_stuck);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
