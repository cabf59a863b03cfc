/*
 * Transports and port channels on the host backend, ranks as forked processes. "Nodes" are
 * made with MSCCLPP_NODE_ID (rank r on node r / L), which is what node detection falls back to
 * where network namespaces cannot be made; tests/multinode/run-netns.sh runs the same plans
 * with one network namespace per node. Every element moved is checked.
 */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/config.h"
#include "base/debug.h"
#include "base/wire.h"
#include "base/wait.h"
#include "core/core.h"
#include "core/proxy.h"
#include "mscclpp/mscclpp.h"
#include "tests/multinode/mn_link.h"
#include "tests/unit/mp_harness.h"
#include "transports/tp_check.h"
#include "transports/transport.h"

/*
 * UCX over tcp between forced-id "nodes" of one host: loopback only, unless the caller chose.
 * Other jobs on a shared machine add and remove veth/bridge interfaces; a worker address that
 * listed one gone by the time a peer connected made ucp_ep_create fail ("Destination is
 * unreachable") now and then.
 */
static void use_tls(const char *tls)
{
    setenv("UCX_TLS", tls, 1);
    if (strstr(tls, "tcp")) setenv("UCX_NET_DEVICES", "lo", 0);
}

/* ---- tables and registration ------------------------------------------------------------- */

START_TEST(t_tables)
{
    for (int i = 0; i < TP__COUNT; i++) {
        const char *bad = NULL;
        ck_assert_msg(tp_ops_check(tp_get(i), &bad) == MSCCLPP_OK, "%s: %s", tp_get(i)->name,
                      bad ? bad : "?");
    }
    ck_assert_ptr_eq(tp_by_bit(MSCCLPP_TRANSPORT_UCX), tp_get(TP_UCX));
    /* a table with a NULL slot is refused, naming the slot */
    tp_ops_t broken = *tp_get(TP_IB);
    broken.flush = NULL;
    const char *bad = NULL;
    ck_assert_int_eq(tp_ops_check(&broken, &bad), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_str_eq(bad, "flush");
    /* ib here: no device (or not built); its data path answers UNSUPPORTED, never crashes */
    char why[256];
    ck_assert_int_ne(tp_status(TP_IB, why, sizeof why), MSCCLPP_OK);
    ck_assert_msg(strstr(why, "no RDMA device") || strstr(why, "not built") ||
                      strstr(why, "not implemented"), "ib: %s", why);
    tp_ctx_t *ctx = NULL;
    ck_assert_int_eq(tp_get(TP_IB)->init(NULL, &ctx), MSCCLPP_ERR_UNSUPPORTED);
    ck_assert_ptr_null(ctx);
    ck_assert_msg(strstr(mscclpp_last_error(), "no RDMA device") ||
                      strstr(mscclpp_last_error(), "init"), "%s", mscclpp_last_error());
    /* MSCCLPP_TRANSPORTS excludes by name */
    setenv("MSCCLPP_TRANSPORTS", "ipc", 1);
    ck_assert_int_ne(tp_status(TP_UCX, why, sizeof why), MSCCLPP_OK);
    ck_assert_ptr_nonnull(strstr(why, "MSCCLPP_TRANSPORTS"));
    unsetenv("MSCCLPP_TRANSPORTS");
}
END_TEST

static int register_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    void *buf = NULL;
    MP_CHECK(rank, mscclpp_malloc(4096, &buf));
    mscclpp_regmem_t *m = NULL;
    /* ib cannot work here: registering for it is an error now (it used to return OK) */
    mscclpp_result_t r = mscclpp_register_memory(comm, buf, 4096, MSCCLPP_TRANSPORT_IB, &m);
    if (r != MSCCLPP_ERR_UNSUPPORTED || m != NULL)
        return MP_FAIL(rank, "register for ib: %s", mscclpp_result_string(r));
    if (!strstr(mscclpp_last_error(), "ib"))
        return MP_FAIL(rank, "message does not name the transport: %s", mscclpp_last_error());
    if (tp_built(TP_UCX)) {
        MP_CHECK(rank, mscclpp_register_memory(comm, buf, 4096, MSCCLPP_TRANSPORT_UCX, &m));
        mscclpp_regmem_destroy(m);
    }
    /* only ib allowed between two nodes: no transport, and the message says why */
    setenv("MSCCLPP_TRANSPORTS", "ib", 1);
    const tp_ops_t *ops = NULL;
    r = tp_select(&comm->world, 1 - rank, &ops);
    unsetenv("MSCCLPP_TRANSPORTS");
    if (r != MSCCLPP_ERR_UNSUPPORTED || !strstr(mscclpp_last_error(), "ib: "))
        return MP_FAIL(rank, "select with ib only: %s: %s", mscclpp_result_string(r),
                       mscclpp_last_error());
    /* default: ucx between nodes (ib has no device here) */
    if (tp_built(TP_UCX)) {
        MP_CHECK(rank, tp_select(&comm->world, 1 - rank, &ops));
        if (ops != tp_get(TP_UCX)) return MP_FAIL(rank, "selected %s between nodes", ops->name);
    }
    /* node detection: two forced node ids are two nodes */
    int nlocal = 0;
    MP_CHECK(rank, mscclpp_comm_local_size(comm, &nlocal));
    if (nlocal != 1) return MP_FAIL(rank, "%d ranks on my node, expected 1", nlocal);
    mscclpp_free(buf);
    mscclpp_comm_destroy(comm);
    return 0;
}

static int forced_node_wrap(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    char node[32];
    snprintf(node, sizeof node, "test-node-%d", rank);
    setenv("MSCCLPP_NODE_ID", node, 1);
    return register_body(rank, n, id, arg);
}

START_TEST(t_register)
{
    ck_assert_int_eq(mp_run(2, forced_node_wrap, NULL, 60, NULL), 0);
}
END_TEST

/* ---- the port channel C API -------------------------------------------------------------- */

#define PC_BYTES (256 * 1024 + 12)

static int port_api_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    const char *tls = arg; /* NULL: one node (ipc); else UCX_TLS, two nodes */
    char node[32];
    snprintf(node, sizeof node, "pc-node-%d", tls ? rank : 0);
    setenv("MSCCLPP_NODE_ID", node, 1);
    if (tls) use_tls(tls);
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    uint8_t *send = NULL, *recv = NULL;
    MP_CHECK(rank, mscclpp_malloc(PC_BYTES, (void **)&send));
    MP_CHECK(rank, mscclpp_malloc(PC_BYTES, (void **)&recv));
    for (size_t i = 0; i < PC_BYTES; i++) send[i] = (uint8_t)(rank * 101 + i * 7);
    memset(recv, 0, PC_BYTES);
    int peer = 1 - rank;
    mscclpp_port_channel_t *ch = NULL;
    MP_CHECK(rank, mscclpp_port_channel_create(comm, peer, 5, recv, PC_BYTES, send, PC_BYTES, &ch));
    const char *want = tls ? "ucx" : "ipc";
    if (strcmp(mscclpp_port_channel_transport(ch), want) != 0)
        return MP_FAIL(rank, "transport %s, want %s", mscclpp_port_channel_transport(ch), want);
    for (int round = 0; round < 3; round++) {
        /* halves in two puts with offsets, then one signal */
        size_t h = PC_BYTES / 2;
        MP_CHECK(rank, mscclpp_port_channel_put(ch, 0, 0, h));
        MP_CHECK(rank, mscclpp_port_channel_put(ch, h, h, PC_BYTES - h));
        MP_CHECK(rank, mscclpp_port_channel_signal(ch));
        MP_CHECK(rank, mscclpp_port_channel_wait(ch));
        for (size_t i = 0; i < PC_BYTES; i++)
            if (recv[i] != (uint8_t)(peer * 101 + i * 7 + round))
                return MP_FAIL(rank, "round %d byte %zu: %u", round, i, recv[i]);
        MP_CHECK(rank, mscclpp_port_channel_flush(ch));
        for (size_t i = 0; i < PC_BYTES; i++) send[i]++;
        /* the peer has checked this round before either side overwrites its buffer */
        MP_CHECK(rank, mscclpp_port_channel_signal(ch));
        MP_CHECK(rank, mscclpp_port_channel_wait(ch));
    }
    /* a put outside the peer's buffer is refused before it leaves */
    if (mscclpp_port_channel_put(ch, PC_BYTES - 4, 0, 8) != MSCCLPP_ERR_INVALID_ARG)
        return MP_FAIL(rank, "an out-of-range put was accepted");
    MP_CHECK(rank, mscclpp_bootstrap_barrier(comm->boot));
    MP_CHECK(rank, mscclpp_port_channel_destroy(ch));
    mscclpp_comm_destroy(comm);
    return 0;
}

START_TEST(t_port_api_ipc) { ck_assert_int_eq(mp_run(2, port_api_body, NULL, 120, NULL), 0); }
END_TEST
START_TEST(t_port_api_tcp)
{
    ck_assert_int_eq(mp_run(2, port_api_body, (void *)"tcp", 120, NULL), 0);
}
END_TEST

/* ---- plans with port channels -------------------------------------------------------------- */

typedef struct {
    int per_node;     /* ranks per node (MSCCLPP_NODE_ID = r / per_node) */
    const char *tls;  /* UCX_TLS, or NULL */
    const char *transports; /* MSCCLPP_TRANSPORTS, or NULL */
    const char *kind; /* "allgather" or "allreduce" */
    int kill_rank;    /* >= 0: this rank exits after the first call; the others must fail */
    const char *layout; /* plans/multinode/<layout>/ ("2x1"); NULL: from the nodes */
    const char *file;   /* else: this plan, relative to the source tree */
    bool inplace;       /* in-place allgather: my input is my block of the output */
    int linger_ms;      /* the last rank keeps its executor (and proxy) this long after the
                         * others destroyed theirs */
    const char *log_dir; /* rank r's stderr goes to <log_dir>/rank<r>.log */
} plan_case_t;

static float value(int rank, size_t i) { return (float)((rank + 1) * 1000 + (int)(i % 997)); }

static int plan_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    const plan_case_t *pc = arg;
    char node[32];
    if (pc->log_dir) {
        char log[4200];
        snprintf(log, sizeof log, "%s/rank%d.log", pc->log_dir, rank);
        if (!freopen(log, "w", stderr)) return MP_FAIL(rank, "cannot open %s", log);
        setvbuf(stderr, NULL, _IONBF, 0);
    }
    snprintf(node, sizeof node, "test-node-%d", rank / pc->per_node);
    setenv("MSCCLPP_NODE_ID", node, 1);
    if (pc->tls) use_tls(pc->tls);
    if (pc->transports) setenv("MSCCLPP_TRANSPORTS", pc->transports, 1);
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    int nlocal = 0;
    MP_CHECK(rank, mscclpp_comm_local_size(comm, &nlocal));
    if (nlocal != pc->per_node)
        return MP_FAIL(rank, "%d ranks on my node, expected %d", nlocal, pc->per_node);
    char path[4096];
    char layout[16];
    snprintf(layout, sizeof layout, "%dx%d", n / pc->per_node, pc->per_node);
    if (pc->file)
        snprintf(path, sizeof path, "%s/%s", getenv("MSCCLPP_TOP_SRCDIR"), pc->file);
    else {
        snprintf(path, sizeof path, "%s/plans/multinode/%s/%s.json",
                 getenv("MSCCLPP_TOP_SRCDIR"), pc->layout ? pc->layout : layout, pc->kind);
        /* retired from plans/ (the made plans serve that layout): kept as a fixture */
        if (access(path, R_OK) != 0)
            snprintf(path, sizeof path, "%s/tests/multinode/plans/%s/%s.json",
                     getenv("MSCCLPP_TOP_SRCDIR"), pc->layout ? pc->layout : layout, pc->kind);
    }
    mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_plan_load_file(path, &plan));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    bool ag = !strcmp(pc->kind, "allgather");
    const size_t counts[] = {1024, 7 * 1024 + 3 * n, 256 * 1024, 16};
    /* one pair of buffers for every call: one context, lowered again per size */
    float *in = NULL, *out = NULL;
    MP_CHECK(rank, mscclpp_malloc(256 * 1024 * 4, (void **)&in));
    MP_CHECK(rank, mscclpp_malloc(256 * 1024 * 4 * (size_t)n, (void **)&out));
    float *in0 = in; /* in-place calls point `in` into `out` */
    for (int call = 0; call < 4; call++) {
        size_t count = counts[call] / (size_t)n * (size_t)n; /* allreduce: whole chunks per rank */
        if (count == 0) count = (size_t)n;
        size_t in_count = count, out_count = ag ? count * (size_t)n : count;
        /* a default Simple plan leaves the small sizes to its packet plan (min_message_size) */
        uint64_t msg = (ag ? out_count : in_count) * 4;
        if ((msg < mscclpp_plan_min_message_size(plan) ||
             msg > mscclpp_plan_max_message_size(plan)) && pc->kill_rank < 0)
            continue;
        memset(out, 0xff, out_count * 4);
        if (pc->inplace) in = out + (size_t)rank * count;
        for (size_t i = 0; i < in_count; i++) in[i] = value(rank, i);
        if (pc->kill_rank >= 0 && call == 1) {
            /* every rank done with call 0 first: its trailing flush waits on the peer's
             * acknowledgement, so a peer dying right after its own call 0 failed that flush */
            mscclpp_bootstrap_t *boot = NULL;
            MP_CHECK(rank, mscclpp_comm_bootstrap(comm, &boot));
            MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
            if (rank == pc->kill_rank) _exit(0); /* a dead rank: no cleanup, no goodbye */
            mscclpp_result_t r = mscclpp_execute(ex, plan, in, out, in_count * 4, out_count * 4,
                                                 MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL);
            char want[32];
            snprintf(want, sizeof want, "rank %d", pc->kill_rank);
            if (r == MSCCLPP_OK) return MP_FAIL(rank, "execute succeeded with rank %d dead",
                                                pc->kill_rank);
            if (!strstr(mscclpp_last_error(), want))
                return MP_FAIL(rank, "the error does not name %s: %s", want, mscclpp_last_error());
            fprintf(stderr, "rank %d: expected failure: %s\n", rank, mscclpp_last_error());
            mscclpp_executor_destroy(ex); /* the proxy thread must stop */
            return 0;
        }
        MP_CHECK(rank, mscclpp_execute(ex, plan, in, out, in_count * 4, out_count * 4,
                                       MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
        for (size_t i = 0; i < out_count; i++) {
            float want;
            if (ag) {
                want = value((int)(i / count), i % count);
            } else {
                want = 0;
                for (int r = 0; r < n; r++) want += value(r, i);
            }
            if (out[i] != want)
                return MP_FAIL(rank, "%s call %d (%zu elements): out[%zu] = %g, want %g",
                               pc->kind, call, count, i, out[i], want);
        }
    }
    mscclpp_free(in0);
    mscclpp_free(out);
    MP_CHECK(rank, mscclpp_bootstrap_barrier(((struct mscclpp_comm *)comm)->boot));
    /* the others close their endpoints while this rank's proxy still polls them */
    if (pc->linger_ms > 0 && rank == n - 1) usleep((useconds_t)pc->linger_ms * 1000);
    mscclpp_executor_destroy(ex);
    mscclpp_plan_destroy(plan);
    mscclpp_comm_destroy(comm);
    return 0;
}

static void run_case(int n, plan_case_t pc)
{
    ck_assert_int_eq(mp_run(n, plan_body, &pc, 240, NULL), 0);
}

/* ---- the default plans through the collective API: packet and Simple plans by size ---------- */

/* Sizes of one run, in float elements per rank block: the packet plans' range (8 B up to their
 * largest message), the Simple plans' right above it, back to back in changing order (each
 * change of size or plan goes through the launch fence), then one size many times in a row
 * (LL flags advance, scratch halves alternate, no fence). Every value depends on the call, so a
 * packet left over from an earlier call is caught. */
#define API_ITERS 24

static float api_value(int rank, size_t i, int call)
{
    return (float)((rank + 1) * 1000 + (int)((i + 13 * (size_t)call) % 997));
}

static int api_check(int rank, const char *what, int call, size_t i, float got, float want)
{
    return MP_FAIL(rank, "%s call %d: element %zu = %g, want %g", what, call, i, got, want);
}

static int api_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    const plan_case_t *pc = arg;
    char node[32], dir[4096];
    snprintf(node, sizeof node, "api-node-%d", rank / pc->per_node);
    setenv("MSCCLPP_NODE_ID", node, 1);
    snprintf(dir, sizeof dir, "%s/plans", getenv("MSCCLPP_TOP_SRCDIR"));
    setenv("MSCCLPP_PLAN_DIR", dir, 1);
    use_tls("tcp");
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    /* the packet plans' largest message, from the registry */
    const mscclpp_plan_t *pkt[3] = {NULL, NULL, NULL}, *simple = NULL;
    const char *colls[3] = {"allreduce", "allgather", "reducescatter"};
    for (int c = 0; c < 3; c++) {
        MP_CHECK(rank, mscclpp_executor_select_plan(ex, colls[c], 0, 8 * (uint64_t)n, NULL,
                                                    &pkt[c]));
        if (!strstr(mscclpp_plan_name(pkt[c]), "_pkt"))
            return MP_FAIL(rank, "%s of %d bytes: plan %s, not a packet plan", colls[c], 8 * n,
                           mscclpp_plan_name(pkt[c]));
        uint64_t top = mscclpp_plan_max_message_size(pkt[c]);
        MP_CHECK(rank, mscclpp_executor_select_plan(ex, colls[c], 0, top + 1, NULL, &simple));
        /* allreduce: the Simple plan serves from right above (a shipped one starts there, a
         * made one, where plans/multinode/ has none, at 0: chosen after the packet plan);
         * allgather, reducescatter: it serves every size (the calls the packet plan's layout
         * refuses), registered after it */
        uint64_t lo = c == 0 ? top + 1 : 0;
        if (strstr(mscclpp_plan_name(simple), "_pkt") || mscclpp_plan_min_message_size(simple) > lo)
            return MP_FAIL(rank, "%s of %llu bytes: plan %s (min %llu), not the Simple plan "
                           "that takes over from the packet plan", colls[c],
                           (unsigned long long)(top + 1), mscclpp_plan_name(simple),
                           (unsigned long long)mscclpp_plan_min_message_size(simple));
    }
    size_t top_ar = mscclpp_plan_max_message_size(pkt[0]) / 4; /* floats */
    size_t top_blk = mscclpp_plan_max_message_size(pkt[1]) / 4 / (size_t)n;
    size_t blocks[] = {2, top_blk, 1, top_blk + 1, 37, 4 * top_blk, 2, 2, 2, 2, 2, 2,
                       2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
    size_t max_blk = 4 * top_blk + top_ar;
    float *in = NULL, *out = NULL;
    MP_CHECK(rank, mscclpp_malloc(max_blk * (size_t)n * 4, (void **)&in));
    MP_CHECK(rank, mscclpp_malloc(max_blk * (size_t)n * 4, (void **)&out));
    for (int call = 0; call < API_ITERS; call++) {
        /* allreduce: around its own boundary (whole-buffer counts, not per rank) */
        size_t ar = call == 1 ? top_ar : call == 3 ? top_ar + 1 : blocks[call] * (size_t)n;
        for (size_t i = 0; i < ar; i++) in[i] = api_value(rank, i, call);
        memset(out, 0xff, ar * 4);
        MP_CHECK(rank, mscclpp_allreduce(ex, in, out, ar, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
        for (size_t i = 0; i < ar; i++) {
            float want = 0;
            for (int r = 0; r < n; r++) want += api_value(r, i, call);
            if (out[i] != want) return api_check(rank, "allreduce", call, i, out[i], want);
        }
        size_t b = blocks[call];
        for (size_t i = 0; i < b; i++) in[i] = api_value(rank, i, call);
        memset(out, 0xff, b * (size_t)n * 4);
        MP_CHECK(rank, mscclpp_allgather(ex, in, out, b, MSCCLPP_FLOAT32, NULL));
        for (size_t i = 0; i < b * (size_t)n; i++) {
            float want = api_value((int)(i / b), i % b, call);
            if (out[i] != want) return api_check(rank, "allgather", call, i, out[i], want);
        }
        for (size_t i = 0; i < b * (size_t)n; i++) in[i] = api_value(rank, i, call);
        memset(out, 0xff, b * 4);
        MP_CHECK(rank, mscclpp_reducescatter(ex, in, out, b, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                                             NULL));
        for (size_t i = 0; i < b; i++) {
            float want = 0;
            for (int r = 0; r < n; r++) want += api_value(r, (size_t)rank * b + i, call);
            if (out[i] != want) return api_check(rank, "reducescatter", call, i, out[i], want);
        }
    }
    /* 61 float16 per rank: 122-byte rank blocks are not whole packet words, which the packet
     * allgather refuses; the collective call must fall to the Simple plan of the same size
     * (INVALID_ARG from the packet plan before) */
    uint16_t *hin = (uint16_t *)in, *hout = (uint16_t *)out;
    for (int call = 0; call < 3; call++) {
        for (size_t i = 0; i < 61; i++) hin[i] = (uint16_t)(rank * 2003 + i * 7 + call);
        memset(hout, 0xff, 61 * 2 * (size_t)n);
        MP_CHECK(rank, mscclpp_allgather(ex, hin, hout, 61, MSCCLPP_FLOAT16, NULL));
        for (size_t i = 0; i < 61 * (size_t)n; i++) {
            uint16_t want = (uint16_t)((int)(i / 61) * 2003 + (i % 61) * 7 + call);
            if (hout[i] != want)
                return MP_FAIL(rank, "float16 allgather call %d: element %zu = 0x%04x, want "
                               "0x%04x", call, i, hout[i], want);
        }
    }
    mscclpp_free(in);
    mscclpp_free(out);
    MP_CHECK(rank, mscclpp_bootstrap_barrier(((struct mscclpp_comm *)comm)->boot));
    mscclpp_executor_destroy(ex);
    mscclpp_comm_destroy(comm);
    return 0;
}

/* 2 nodes x 1 and 2 x 2 (forced node ids, UCX over tcp): the packet plans serve the small
 * sizes, the Simple plans the rest, in one executor, back to back */
START_TEST(t_collectives_pkt_2x1_tcp)
{
    ck_assert_int_eq(mp_run(2, api_body, &(plan_case_t){1}, 240, NULL), 0);
}
END_TEST
START_TEST(t_collectives_pkt_2x2_tcp)
{
    ck_assert_int_eq(mp_run(4, api_body, &(plan_case_t){2}, 240, NULL), 0);
}
END_TEST

/* 2 nodes x 1: port channels only, over UCX's tcp transport (forced) */
START_TEST(t_allgather_2x1_tcp) { run_case(2, (plan_case_t){1, "tcp", NULL, "allgather", -1}); }
END_TEST
START_TEST(t_allreduce_2x1_tcp) { run_case(2, (plan_case_t){1, "tcp", NULL, "allreduce", -1}); }
END_TEST
/* the same plans with UCX free to pick shared memory (posix/sysv) */
START_TEST(t_allgather_2x1_shm)
{
    run_case(2, (plan_case_t){1, "posix,sysv,self", NULL, "allgather", -1});
}
END_TEST
/* 2 nodes x 2: memory channels inside each node, port channels across (CI's target case) */
START_TEST(t_allgather_2x2_tcp) { run_case(4, (plan_case_t){2, "tcp", NULL, "allgather", -1}); }
END_TEST
START_TEST(t_allreduce_2x2_tcp) { run_case(4, (plan_case_t){2, "tcp", NULL, "allreduce", -1}); }
END_TEST
/* port channels between ranks of one node: the ipc transport (a copy by the proxy) */
START_TEST(t_allgather_port_ipc)
{
    run_case(2, (plan_case_t){2, NULL, NULL, "allgather", -1, "2x1"});
}
END_TEST
/* The shared put/signal argument checks of every transport (transports/tp_check.h). */
START_TEST(t_range_checks)
{
    ck_assert_int_eq(tp_check_put("ucx", 1, 0, 64, 0, 64, 64), MSCCLPP_OK);
    ck_assert_int_eq(tp_check_put("ucx", 1, 64, 64, 0, 64, 0), MSCCLPP_OK); /* empty at the end */
    ck_assert_int_eq(tp_check_put("ucx", 1, 8, 64, 0, 64, 57), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(tp_check_put("ucx", 1, 0, 64, 8, 64, 57), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(tp_check_put("ucx", 1, 65, 64, 0, 64, 0), MSCCLPP_ERR_INVALID_ARG);
    /* offset + bytes wrapping around 2^64 is refused, not taken as small */
    ck_assert_int_eq(tp_check_put("ib", 3, 8, 64, 0, 64, UINT64_MAX - 4), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_msg(strstr(mscclpp_last_error(), "ib put to rank 3"), "%s", mscclpp_last_error());
    ck_assert_int_eq(tp_check_signal("ipc", 2, 56, 64), MSCCLPP_OK);
    ck_assert_int_eq(tp_check_signal("ipc", 2, 60, 64), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(tp_check_signal("ipc", 2, 12, 64), MSCCLPP_ERR_INVALID_ARG); /* unaligned */
    ck_assert_int_eq(tp_check_signal("ipc", 2, UINT64_MAX, 64), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_msg(strstr(mscclpp_last_error(), "ipc signal to rank 2"), "%s",
                  mscclpp_last_error());
}
END_TEST

/* ---- the proxy's idle wait ---------------------------------------------------------------- */

typedef struct {
    long tid;      /* the proxy thread, as its progress callback sees it */
    int progress;  /* calls of the progress callback (atomic) */
    int handled;   /* triggers executed (atomic) */
    uint64_t last; /* fst of the last trigger */
} idle_probe_t;

static mscclpp_result_t idle_handle(void *arg, uint64_t fst, uint64_t snd)
{
    idle_probe_t *q = arg;
    (void)snd;
    q->last = fst;
    __atomic_add_fetch(&q->handled, 1, __ATOMIC_RELEASE);
    return MSCCLPP_OK;
}

static mscclpp_result_t idle_progress(void *arg)
{
    idle_probe_t *q = arg;
    __atomic_store_n(&q->tid, (long)syscall(SYS_gettid), __ATOMIC_RELAXED);
    __atomic_add_fetch(&q->progress, 1, __ATOMIC_RELEASE);
    return MSCCLPP_OK;
}

static long read_long(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1) v = -1;
        fclose(f);
    }
    return v;
}

/*
 * An idle proxy backs off by the one wait policy (base/wait.h): it keeps driving progress, it
 * sleeps with the fine timer slack (the proxy's own back-off kept Linux's 50 us slack, so each
 * of its sleeps overshot by 50 us or more), and a trigger pushed while it sleeps is executed.
 */
START_TEST(t_proxy_idle_wait)
{
    idle_probe_t q = {0};
    proxy_t *p = NULL;
    ck_assert_int_eq(
        proxy_create(hal_host_ops(), 16, 64, idle_handle, idle_progress, NULL, &q, "test", &p),
        MSCCLPP_OK);
    /* long enough to pass the spin and yield phases even on a loaded machine */
    for (int i = 0; i < 200 && __atomic_load_n(&q.progress, __ATOMIC_ACQUIRE) < 2000; i++)
        usleep(10000);
    ck_assert_int_ge(__atomic_load_n(&q.progress, __ATOMIC_ACQUIRE), 200);
    long tid = __atomic_load_n(&q.tid, __ATOMIC_RELAXED);
    char path[96];
    snprintf(path, sizeof path, "/proc/%ld/timerslack_ns", tid);
    long slack = read_long(path);
    if (slack < 0) {
        proxy_destroy(p);
        printf("t_proxy_idle_wait: %s is not readable here; timer slack not checked\n", path);
    } else {
        ck_assert_msg(slack == (long)BASE_WAIT_TIMER_SLACK_NS,
                      "idle proxy thread %ld sleeps with a timer slack of %ld ns, not %lu", tid,
                      slack, (unsigned long)BASE_WAIT_TIMER_SLACK_NS);
        snprintf(path, sizeof path, "/proc/self/task/%ld/comm", tid);
        FILE *f = fopen(path, "r");
        char comm[32] = "";
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(comm, sizeof comm, f));
        fclose(f);
        ck_assert_str_eq(comm, PROXY_THREAD_NAME "\n");
    }
    if (slack >= 0) {
        /* a trigger pushed into the sleeping proxy (as kern_port_push does) is executed */
        kern_fifo_t *f = proxy_fifo(p);
        kern_trigger_t *slot = (kern_trigger_t *)(f + 1);
        __atomic_store_n(&slot->fst, 0x1234, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->snd, KERN_TRIG_VALID | KERN_TRIG_SIGNAL, __ATOMIC_RELEASE);
        for (int i = 0; i < 1000 && __atomic_load_n(&f->tail, __ATOMIC_ACQUIRE) < 1; i++)
            usleep(1000);
        ck_assert_uint_eq(__atomic_load_n(&f->tail, __ATOMIC_ACQUIRE), 1);
        ck_assert_int_eq(__atomic_load_n(&q.handled, __ATOMIC_ACQUIRE), 1);
        ck_assert_uint_eq(q.last, 0x1234);
        ck_assert_int_eq(proxy_error(p), MSCCLPP_OK);
        proxy_destroy(p);
    }
}
END_TEST

/* The idle proxy arms before it sleeps (on the descriptors its arm callback gives, a pipe
 * here), and an error of the arm callback is the proxy's error, with its message. */
typedef struct {
    int fd;
    int armed; /* atomic */
    int fail;  /* atomic: 1 -> the next arm fails */
} arm_probe_t;

static mscclpp_result_t arm_progress(void *arg)
{
    (void)arg;
    return MSCCLPP_OK;
}

static mscclpp_result_t arm_fds(void *arg, struct pollfd *fds, int cap, int *n)
{
    arm_probe_t *a = arg;
    __atomic_add_fetch(&a->armed, 1, __ATOMIC_RELEASE);
    if (__atomic_load_n(&a->fail, __ATOMIC_ACQUIRE))
        return ERR(MSCCLPP_ERR_REMOTE, "arm probe: transport event fd broke");
    ck_assert_int_ge(cap, 1);
    fds[0].fd = a->fd;
    fds[0].events = POLLIN;
    fds[0].revents = 0;
    *n = 1;
    return MSCCLPP_OK;
}

START_TEST(t_proxy_arm)
{
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    arm_probe_t a = {pfd[0], 0, 0};
    proxy_t *p = NULL;
    ck_assert_int_eq(
        proxy_create(hal_host_ops(), 16, 64, idle_handle, arm_progress, arm_fds, &a, "arm", &p),
        MSCCLPP_OK);
    for (int i = 0; i < 500 && __atomic_load_n(&a.armed, __ATOMIC_ACQUIRE) < 10; i++)
        usleep(10000);
    ck_assert_int_ge(__atomic_load_n(&a.armed, __ATOMIC_ACQUIRE), 10); /* it sleeps armed */
    ck_assert_int_eq(proxy_error(p), MSCCLPP_OK);
    __atomic_store_n(&a.fail, 1, __ATOMIC_RELEASE);
    mscclpp_result_t r = MSCCLPP_OK;
    for (int i = 0; i < 500 && (r = proxy_error(p)) == MSCCLPP_OK; i++) usleep(10000);
    ck_assert_int_eq(r, MSCCLPP_ERR_REMOTE);
    ck_assert_msg(strstr(mscclpp_last_error(), "event fd broke") &&
                      strstr(mscclpp_last_error(), "proxy of arm"),
                  "%s", mscclpp_last_error());
    proxy_destroy(p);
    close(pfd[0]);
    close(pfd[1]);
    /* a descriptor that is not open (a number far above any this test opens): the proxy says
     * so instead of busy-looping on it */
    arm_probe_t b = {1 << 20, 0, 0};
    ck_assert_int_eq(
        proxy_create(hal_host_ops(), 16, 64, idle_handle, arm_progress, arm_fds, &b, "nval", &p),
        MSCCLPP_OK);
    for (int i = 0; i < 500 && (r = proxy_error(p)) == MSCCLPP_OK; i++) usleep(10000);
    ck_assert_int_eq(r, MSCCLPP_ERR_SYSTEM);
    ck_assert_msg(strstr(mscclpp_last_error(), "event fd"), "%s", mscclpp_last_error());
    proxy_destroy(p);
}
END_TEST

/* LL packets over port channels (port rppkt, MSCCL++'s multi-node packet allgather): the
 * packets formatted in scratch go to the next node by one proxy put and are polled there */
#define PKT_PLAN(l) "tests/multinode/programs/allgather_pkt_" l ".json"
START_TEST(t_allgather_pkt_2x1_tcp)
{
    run_case(2, (plan_case_t){1, "tcp", NULL, "allgather", -1, NULL, PKT_PLAN("2x1"), true});
}
END_TEST
START_TEST(t_allgather_pkt_2x2_tcp)
{
    run_case(4, (plan_case_t){2, "tcp", NULL, "allgather", -1, NULL, PKT_PLAN("2x2"), true});
}
END_TEST
/* port ppkt: relays packets this rank formatted (cpkt) in its scratch; the plan is
 * allgather_pkt_2x1 with rppkt renamed ppkt */
START_TEST(t_allgather_ppkt_2x1_tcp)
{
    run_case(2, (plan_case_t){1, "tcp", NULL, "allgather", -1, NULL,
                              "tests/multinode/allgather_ppkt_port_2x1.json", true});
}
END_TEST
/* the same packets between ranks of one node: the ipc transport's proxy copy */
START_TEST(t_allgather_pkt_port_ipc)
{
    run_case(2, (plan_case_t){2, NULL, NULL, "allgather", -1, NULL, PKT_PLAN("2x1"), true});
}
END_TEST
/*
 * Two forced-id "nodes" on this machine (one boot id): the port setup counts the peer as a
 * poller of this machine, so the interpreter's spin is sized for 2 ranks x (block + proxy)
 * (on 2 cores the shared-core spin) and not for this node's single rank. Before, each rank's
 * interpreter spun the own-core spin (2000 polls) while its proxy waited for that core.
 */
START_TEST(t_machine_spin)
{
    char dir[] = "/tmp/mscclpp-spin-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    setenv("MSCCLPP_DEBUG", "INFO", 1);
    unsetenv("MSCCLPP_HOST_SPIN");
    run_case(2, (plan_case_t){1, "tcp", NULL, "allreduce", -1, NULL, NULL, false, 0, dir});
    unsetenv("MSCCLPP_DEBUG");
    char want[64];
    snprintf(want, sizeof want, "%u (interpreter)", (unsigned)base_wait_spin(2 * 2));
    for (int r = 0; r < 2; r++) {
        char path[128], line[1024];
        snprintf(path, sizeof path, "%s/rank%d.log", dir, r);
        FILE *f = fopen(path, "r");
        ck_assert_msg(f != NULL, "no log of rank %d", r);
        int found = 0;
        while (fgets(line, sizeof line, f))
            if (strstr(line, "share this machine")) {
                ck_assert_msg(strstr(line, "1 port peer(s)") && strstr(line, want),
                              "rank %d: %s", r, line);
                found++;
            }
        fclose(f);
        unlink(path);
        ck_assert_msg(found > 0, "rank %d did not count its peer as sharing this machine", r);
    }
    rmdir(dir);
}
END_TEST

/* A good run's shutdown is quiet: peers closing their endpoints first (the last rank's proxy
 * still polling them for a while) print no WARN, on any rank. */
START_TEST(t_shutdown_quiet)
{
    char dir[] = "/tmp/mscclpp-quiet-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    run_case(2, (plan_case_t){1, "tcp", NULL, "allgather", -1, NULL, NULL, false, 1500, dir});
    for (int r = 0; r < 2; r++) {
        char path[128], line[1024];
        snprintf(path, sizeof path, "%s/rank%d.log", dir, r);
        FILE *f = fopen(path, "r");
        ck_assert_msg(f != NULL, "no log of rank %d", r);
        int warns = 0;
        while (fgets(line, sizeof line, f))
            if (strstr(line, "WARN")) {
                fprintf(stderr, "rank %d: %s", r, line);
                warns++;
            }
        fclose(f);
        unlink(path);
        ck_assert_msg(warns == 0, "rank %d printed %d WARN lines at a normal shutdown", r, warns);
    }
    rmdir(dir);
}
END_TEST
/* a killed rank: every other rank fails within MSCCLPP_TIMEOUT, naming it */
START_TEST(t_kill)
{
    setenv("MSCCLPP_TIMEOUT", "10", 1);
    run_case(2, (plan_case_t){1, "tcp", NULL, "allgather", 1});
}
END_TEST

/* MN_ONLY=<test name> runs one test (debugging) */
#define ADD(tc, t)                                                                             \
    do {                                                                                       \
        if (!getenv("MN_ONLY") || !strcmp(getenv("MN_ONLY"), #t)) tcase_add_test(tc, t);       \
    } while (0)
/*
 * The hot window (MSCCLPP_PROXY_HOT_US): after a trigger the idle proxy keeps polling without
 * arming its event fds or sleeping for that long, then sleeps armed again; with 0 it arms at
 * once. Before the window existed the proxy armed and slept right after every trigger, and a
 * trigger pushed meanwhile waited for the end of its sleep (the interpreter cannot wake it).
 */
static mscclpp_result_t hot_handle(void *arg, uint64_t fst, uint64_t snd)
{
    (void)arg, (void)fst, (void)snd;
    return MSCCLPP_OK;
}

static void push_trigger(proxy_t *p, uint64_t pos)
{
    kern_fifo_t *f = proxy_fifo(p);
    kern_trigger_t *slot = (kern_trigger_t *)(f + 1) + (pos & (f->size - 1));
    __atomic_store_n(&slot->fst, 0x77, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->snd, KERN_TRIG_VALID | KERN_TRIG_SIGNAL, __ATOMIC_RELEASE);
    for (int i = 0; i < 5000 && __atomic_load_n(&f->tail, __ATOMIC_ACQUIRE) <= pos; i++)
        usleep(1000);
    ck_assert_uint_eq(__atomic_load_n(&f->tail, __ATOMIC_ACQUIRE), pos + 1);
}

START_TEST(t_proxy_hot)
{
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    arm_probe_t a = {pfd[0], 0, 0};
    proxy_t *p = NULL;
    setenv("MSCCLPP_PROXY_HOT_US", "400000", 1); /* 0.4 s: far above any scheduling delay */
    ck_assert_int_eq(
        proxy_create(hal_host_ops(), 16, 64, hot_handle, arm_progress, arm_fds, &a, "hot", &p),
        MSCCLPP_OK);
    /* hot from its start, then armed once the window passed */
    for (int i = 0; i < 300 && __atomic_load_n(&a.armed, __ATOMIC_ACQUIRE) == 0; i++)
        usleep(10000);
    ck_assert_int_gt(__atomic_load_n(&a.armed, __ATOMIC_ACQUIRE), 0);
    for (uint64_t k = 0; k < 2; k++) {
        push_trigger(p, k);
        int before = __atomic_load_n(&a.armed, __ATOMIC_ACQUIRE);
        usleep(150000); /* well inside the window */
        ck_assert_msg(__atomic_load_n(&a.armed, __ATOMIC_ACQUIRE) == before,
                      "the proxy armed (to sleep) %d times within its hot window",
                      __atomic_load_n(&a.armed, __ATOMIC_ACQUIRE) - before);
        for (int i = 0; i < 300 && __atomic_load_n(&a.armed, __ATOMIC_ACQUIRE) == before; i++)
            usleep(10000);
        ck_assert_int_gt(__atomic_load_n(&a.armed, __ATOMIC_ACQUIRE), before); /* cold again */
    }
    ck_assert_int_eq(proxy_error(p), MSCCLPP_OK);
    proxy_destroy(p);
    /* 0: armed (sleeping) soon after a trigger */
    setenv("MSCCLPP_PROXY_HOT_US", "0", 1);
    arm_probe_t b = {pfd[0], 0, 0};
    ck_assert_int_eq(
        proxy_create(hal_host_ops(), 16, 64, hot_handle, arm_progress, arm_fds, &b, "cold", &p),
        MSCCLPP_OK);
    push_trigger(p, 0);
    int before = __atomic_load_n(&b.armed, __ATOMIC_ACQUIRE);
    /* it arms after its spin and its 64 yields (base/wait.h); under load each yield may hand
     * the core over for a whole slice of a busy thread (ms), so the bound is in time, not
     * polls (300 polls of 1 ms failed once at load 18) */
    double until = mp_now_s() + 5.0;
    while (__atomic_load_n(&b.armed, __ATOMIC_ACQUIRE) == before && mp_now_s() < until)
        usleep(1000);
    ck_assert_int_gt(__atomic_load_n(&b.armed, __ATOMIC_ACQUIRE), before);
    proxy_destroy(p);
    unsetenv("MSCCLPP_PROXY_HOT_US");
    close(pfd[0]);
    close(pfd[1]);
}
END_TEST

/*
 * What a handler handed to its transport leaves before the proxy stops: a transport may hold a
 * put back until its next call (ucx: "progress included"), and a caller that saw the trigger
 * handled (proxy_drain) may destroy the proxy at once (a context dropped to grow, an executor
 * destroyed right after a call). The proxy used to leave its loop on `stop` without another
 * progress call, and the held-back put was freed by the link's close: its peer waited for it
 * forever (test_multinode t_allgather_pkt_2x1_tcp, once at load 275). Here the handler returns
 * only after the stop is set, so the window that load opened is open every time.
 */
typedef struct {
    int in_handler; /* atomic */
    int release;    /* atomic */
    int handled;    /* atomic */
    int after;      /* atomic: progress calls after the handler returned */
} stop_probe_t;

static mscclpp_result_t stop_handle(void *arg, uint64_t fst, uint64_t snd)
{
    (void)fst, (void)snd;
    stop_probe_t *sp = arg;
    __atomic_store_n(&sp->in_handler, 1, __ATOMIC_RELEASE);
    double until = mp_now_s() + 10.0;
    while (!__atomic_load_n(&sp->release, __ATOMIC_ACQUIRE) && mp_now_s() < until) usleep(1000);
    __atomic_store_n(&sp->handled, 1, __ATOMIC_RELEASE);
    return MSCCLPP_OK;
}

static mscclpp_result_t stop_progress(void *arg)
{
    stop_probe_t *sp = arg;
    if (__atomic_load_n(&sp->handled, __ATOMIC_ACQUIRE))
        __atomic_add_fetch(&sp->after, 1, __ATOMIC_RELEASE);
    return MSCCLPP_OK;
}

static void *destroy_proxy(void *arg)
{
    proxy_destroy(arg);
    return NULL;
}

START_TEST(t_proxy_progress_on_stop)
{
    stop_probe_t sp = {0, 0, 0, 0};
    proxy_t *p = NULL;
    ck_assert_int_eq(proxy_create(hal_host_ops(), 16, 64, stop_handle, stop_progress, NULL, &sp,
                                  "stop", &p),
                     MSCCLPP_OK);
    kern_fifo_t *f = proxy_fifo(p);
    kern_trigger_t *slot = (kern_trigger_t *)(f + 1);
    __atomic_store_n(&slot->fst, 0x77, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->snd, KERN_TRIG_VALID | KERN_TRIG_SIGNAL, __ATOMIC_RELEASE);
    double until = mp_now_s() + 10.0;
    while (!__atomic_load_n(&sp.in_handler, __ATOMIC_ACQUIRE) && mp_now_s() < until) usleep(1000);
    ck_assert_int_eq(__atomic_load_n(&sp.in_handler, __ATOMIC_ACQUIRE), 1);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, destroy_proxy, p), 0);
    usleep(100000); /* proxy_destroy has set the stop and waits for the thread */
    __atomic_store_n(&sp.release, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    ck_assert_msg(__atomic_load_n(&sp.after, __ATOMIC_ACQUIRE) >= 1,
                  "the proxy stopped without a progress call after its last handler");
}
END_TEST

/* ---- the ucx transport's messages (a put, a put with its signal, a signal) ----------------- */

/* Not a multiple of any chunk or word: a rendezvous-sized put plus a small eager one. */
#define ORDER_BYTES (4 * 1024 * 1024 + 13)
#define ORDER_TAIL 100

/*
 * A large put (UCX rendezvous: the data follows the header later) then a small put and the
 * signal (eager, one message, may arrive first): the peer sees the signal only once every byte
 * of both puts is in place. Before the receiver held signals back behind its rendezvous receives
 * from the same sender, the small message's counter landed first and the check below read
 * bytes of the previous round.
 */
static int ucx_order_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    char node[32];
    snprintf(node, sizeof node, "order-node-%d", rank);
    setenv("MSCCLPP_NODE_ID", node, 1);
    use_tls("tcp");
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    uint8_t *send = NULL, *recv = NULL;
    MP_CHECK(rank, mscclpp_malloc(ORDER_BYTES, (void **)&send));
    MP_CHECK(rank, mscclpp_malloc(ORDER_BYTES, (void **)&recv));
    int peer = 1 - rank;
    mscclpp_port_channel_t *ch = NULL;
    MP_CHECK(rank, mscclpp_port_channel_create(comm, peer, 7, recv, ORDER_BYTES, send,
                                               ORDER_BYTES, &ch));
    for (int round = 0; round < 4; round++) {
        for (size_t i = 0; i < ORDER_BYTES; i++) send[i] = (uint8_t)(rank * 31 + i * 13 + round);
        const size_t big = ORDER_BYTES - ORDER_TAIL;
        MP_CHECK(rank, mscclpp_port_channel_put(ch, 0, 0, big));
        MP_CHECK(rank, mscclpp_port_channel_put(ch, big, big, ORDER_TAIL));
        MP_CHECK(rank, mscclpp_port_channel_signal(ch));
        MP_CHECK(rank, mscclpp_port_channel_wait(ch));
        for (size_t i = 0; i < ORDER_BYTES; i++)
            if (recv[i] != (uint8_t)(peer * 31 + i * 13 + round))
                return MP_FAIL(rank, "round %d: byte %zu of %d is %u, want %u (the signal came "
                               "before the data)", round, i, ORDER_BYTES, recv[i],
                               (uint8_t)(peer * 31 + i * 13 + round));
        MP_CHECK(rank, mscclpp_port_channel_flush(ch));
        /* both checked this round before either overwrites its send buffer */
        MP_CHECK(rank, mscclpp_port_channel_signal(ch));
        MP_CHECK(rank, mscclpp_port_channel_wait(ch));
    }
    MP_CHECK(rank, mscclpp_bootstrap_barrier(comm->boot));
    MP_CHECK(rank, mscclpp_port_channel_destroy(ch));
    mscclpp_free(send);
    mscclpp_free(recv);
    mscclpp_comm_destroy(comm);
    return 0;
}

START_TEST(t_ucx_rndv_signal_order)
{
    ck_assert_int_eq(mp_run(2, ucx_order_body, NULL, 180, NULL), 0);
}
END_TEST

/* Drives a UCX context's progress from a thread until told to stop (errors ignored: a
 * failed peer or a dropped message makes every later progress call fail too). */
typedef struct {
    const tp_ops_t *ops;
    tp_ctx_t *ctx;
    int stop; /* __atomic: the polling thread is done */
} progress_drive_t;

static void *progress_drive(void *arg)
{
    progress_drive_t *d = arg;
    while (!__atomic_load_n(&d->stop, __ATOMIC_ACQUIRE)) {
        (void)d->ops->progress(d->ctx); /* fails once the peer is gone: keep driving */
        usleep(200);
    }
    return NULL;
}

/*
 * A message whose destination is not memory the receiver registered (here: a region rank 1
 * deregistered after rank 0 unpacked its key) is dropped, and the receiver's progress fails
 * with an error naming the sender, instead of writing wherever the header points.
 */
static int ucx_stray_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    char node[32];
    snprintf(node, sizeof node, "stray-node-%d", rank);
    setenv("MSCCLPP_NODE_ID", node, 1);
    use_tls("tcp");
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    static uint8_t region[4096] __attribute__((aligned(64)));
    static uint64_t counter[8] __attribute__((aligned(64)));
    int peer = 1 - rank;
    port_link_t link;
    MP_CHECK(rank, mn_link_open(comm, "ucx", peer, &link));
    const tp_ops_t *ops = link.ops;
    tp_ctx_t *ctx = link.ctx;
    tp_ep_t *ep = link.ep;
    tp_mem_t *mem = NULL, *cnt = NULL;
    MP_CHECK(rank, ops->mem_reg(ctx, region, sizeof region, &mem));
    MP_CHECK(rank, ops->mem_reg(ctx, counter, sizeof counter, &cnt));
    MP_CHECK(rank, mn_link_exchange(comm, &link, 9, mem, region, sizeof region, cnt, counter,
                                    sizeof counter));
    tp_rmem_t *rregion = link.theirs.buf[0], *rcnt = link.theirs.counters;
    progress_drive_t d = {.ops = ops, .ctx = ctx};
    pthread_t th;
    bool driving = false;
    memset(region, 0x5a, sizeof region);
    if (rank == 1) MP_CHECK(rank, ops->mem_dereg(ctx, mem)); /* no longer ours to write */
    MP_CHECK(rank, mscclpp_bootstrap_barrier(comm->boot));
    if (rank == 0) {
        static uint8_t src[4096];
        tp_mem_t *msrc = NULL;
        memset(src, 0xee, sizeof src);
        MP_CHECK(rank, ops->mem_reg(ctx, src, sizeof src, &msrc));
        MP_CHECK(rank, ops->put(ep, rregion, 128, msrc, 0, 256));
        MP_CHECK(rank, ops->signal(ep, rcnt, 0, 1));
        /* sent, then the remote flush only once rank 1 has seen the drop: its reply must not
         * depend on the message and the flush arriving within one progress call of rank 1 */
        MP_CHECK(rank, ops->flush(ep, config_timeout_ns(), TP_FLUSH_LOCAL));
        MP_CHECK(rank, mscclpp_bootstrap_barrier(comm->boot));
        MP_CHECK(rank, ops->flush(ep, config_timeout_ns(), TP_FLUSH_REMOTE));
        MP_CHECK(rank, ops->mem_dereg(ctx, msrc));
    } else {
        mscclpp_result_t res = MSCCLPP_OK;
        for (int i = 0; i < 10000 && res == MSCCLPP_OK; i++) {
            res = ops->progress(ctx);
            if (res == MSCCLPP_OK) usleep(1000);
        }
        if (res != MSCCLPP_ERR_REMOTE)
            return MP_FAIL(rank, "progress returned %d after a stray message, want REMOTE", res);
        const char *msg = mscclpp_last_error();
        if (!strstr(msg, "from rank 0") || !strstr(msg, "outside our registered memory"))
            return MP_FAIL(rank, "the error does not name the sender and the cause: %s", msg);
        for (size_t i = 0; i < sizeof region; i++)
            if (region[i] != 0x5a) return MP_FAIL(rank, "byte %zu of the region was written", i);
        if (__atomic_load_n(&counter[0], __ATOMIC_ACQUIRE) != 0)
            return MP_FAIL(rank, "the signal of the dropped put was applied");
        /* rank 0's remote flush is a round trip through our worker: keep driving it while
         * the barriers wait (seen once: rank 0's flush timed out after rank 1 stopped) */
        if (pthread_create(&th, NULL, progress_drive, &d) != 0) return MP_FAIL(rank, "pthread_create");
        driving = true;
        MP_CHECK(rank, mscclpp_bootstrap_barrier(comm->boot));
    }
    MP_CHECK(rank, mscclpp_bootstrap_barrier(comm->boot));
    if (driving) {
        __atomic_store_n(&d.stop, 1, __ATOMIC_RELEASE);
        pthread_join(th, NULL);
    }
    port_link_close(&link);
    if (rank == 0) ops->mem_dereg(ctx, mem);
    ops->mem_dereg(ctx, cnt);
    mscclpp_comm_destroy(comm);
    return 0;
}

START_TEST(t_ucx_stray_message)
{
    ck_assert_int_eq(mp_run(2, ucx_stray_body, NULL, 120, NULL), 0);
}
END_TEST


/*
 * A peer's death seen by two threads at once (board 09:25, rel-sys): executor contexts share a
 * communicator's UCX worker, so one proxy thread drives the worker - where UCX calls our error
 * handler, which marks the endpoint failed - while another asks the endpoint for its status
 * (or puts, signals, flushes) without the worker's lock. Rank 1 is killed after the set-up;
 * on rank 0 a thread drives progress while the test's thread polls ep_status, until the death
 * shows (bounded). The status must name rank 1. Under TSan (scripts/sanitize.sh --tsan runs
 * this suite) the endpoint's failure word written by one thread and read by the other was a
 * data race while it was a plain (volatile) field; it is atomic now.
 */
static int ucx_death_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mscclpp_comm_t *comm = NULL;
    if (mp_join_node(rank, n, 1, "death", id, &comm)) return 1;
    static uint8_t region[4096] __attribute__((aligned(64)));
    static uint64_t counter[8] __attribute__((aligned(64)));
    port_link_t link;
    MP_CHECK(rank, mn_link_open(comm, "ucx", 1 - rank, &link));
    const tp_ops_t *ops = link.ops;
    tp_mem_t *mem = NULL, *cnt = NULL;
    MP_CHECK(rank, ops->mem_reg(link.ctx, region, sizeof region, &mem));
    MP_CHECK(rank, ops->mem_reg(link.ctx, counter, sizeof counter, &cnt));
    MP_CHECK(rank, mn_link_exchange(comm, &link, 9, mem, region, sizeof region, cnt, counter,
                                    sizeof counter));
    if (mp_barrier_then_die(rank, comm, rank == 1)) return 1;
    progress_drive_t d = {.ops = ops, .ctx = link.ctx};
    pthread_t th;
    if (pthread_create(&th, NULL, progress_drive, &d) != 0) return MP_FAIL(rank, "pthread_create");
    mscclpp_result_t st = MSCCLPP_OK;
    double until = mp_now_s() + 20;
    while ((st = ops->ep_status(link.ep)) == MSCCLPP_OK && mp_now_s() < until) usleep(100);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
    __atomic_store_n(&d.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    if (st == MSCCLPP_OK) return MP_FAIL(rank, "the endpoint of the killed rank 1 is still fine");
    if (!mp_names_rank(msg, 1)) return MP_FAIL(rank, "the error does not name rank 1: %s", msg);
    port_link_close(&link);
    ops->mem_dereg(link.ctx, mem);
    ops->mem_dereg(link.ctx, cnt);
    mscclpp_comm_destroy(comm);
    return 0;
}

START_TEST(t_ucx_death_two_threads)
{
    unsigned failed = 0;
    mp_run(2, ucx_death_body, NULL, 120, &failed);
    ck_assert_msg(!(failed & 1u), "rank 0 failed (see its lines above)");
}
END_TEST


static Suite *suite(void)
{
    Suite *s = suite_create("multinode");
    TCase *tc = tcase_create("transports");
    tcase_set_timeout(tc, 300);
    ADD(tc, t_tables);
    ADD(tc, t_register);
    ADD(tc, t_range_checks);
    ADD(tc, t_proxy_idle_wait);
    ADD(tc, t_proxy_arm);
    ADD(tc, t_proxy_hot);
    ADD(tc, t_proxy_progress_on_stop);
    ADD(tc, t_port_api_ipc);
    if (tp_built(TP_UCX)) ADD(tc, t_port_api_tcp);
    if (tp_built(TP_UCX)) ADD(tc, t_ucx_rndv_signal_order);
    if (tp_built(TP_UCX)) ADD(tc, t_ucx_stray_message);
    if (tp_built(TP_UCX)) ADD(tc, t_ucx_death_two_threads);
    suite_add_tcase(s, tc);
    TCase *pc = tcase_create("port_channels");
    tcase_set_timeout(pc, 300);
    if (tp_built(TP_UCX)) {
        ADD(pc, t_allgather_2x1_tcp);
        ADD(pc, t_allreduce_2x1_tcp);
        ADD(pc, t_allgather_2x1_shm);
        ADD(pc, t_allgather_2x2_tcp);
        ADD(pc, t_allreduce_2x2_tcp);
        ADD(pc, t_kill);
        ADD(pc, t_allgather_pkt_2x1_tcp);
        ADD(pc, t_allgather_pkt_2x2_tcp);
        ADD(pc, t_allgather_ppkt_2x1_tcp);
        ADD(pc, t_collectives_pkt_2x1_tcp);
        ADD(pc, t_collectives_pkt_2x2_tcp);
        ADD(pc, t_shutdown_quiet);
        ADD(pc, t_machine_spin);
    }
    ADD(pc, t_allgather_port_ipc);
    ADD(pc, t_allgather_pkt_port_ipc);
    suite_add_tcase(s, pc);
    return s;
}

int main(void)
{
    /* every proxy call a GPU could block in while the launch waits for it (memcpy_sync on the
     * NULL stream, a copy from the stack, an allocation) fails the launch loudly
     * (hal/host/host_check.c): the port channels over ipc made their puts with memcpy_sync */
    setenv("MSCCLPP_HAL_SYNC_CHECK", "1", 1);
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
