/*
 * Several "nodes" on one machine (MSCCLPP_NODE_ID = node of rank r, UCX over loopback tcp
 * between them, as tests/multinode/test_multinode.c makes them), where plans reach some peers
 * through port channels (the proxy) and others through memory channels:
 *
 * - The launch fence through the proxy (kern_args.h, "Launch fence"): back-to-back calls of
 *   changing sizes, in one pair of allocations (one context, lowered again per size), on plans
 *   whose ranks reach each other only through port channels (2 nodes x 1) and on a plan mixing
 *   both (2 x 2), with and without a stream (on a stream, every call queued before one sync):
 *   every byte of every call checked. The same on one node (memory channels, no UCX): calls
 *   queued on a stream at moving offsets of their allocations (a caching allocator's pattern)
 *   once freed the lowered plans the earlier launches still read.
 * - A peer killed between two calls of different sizes (port channels only): the survivor's
 *   fence through its proxy fails naming it, within MSCCLPP_TIMEOUT + 1 s.
 * - A port transfer that fails in a rank's proxy (MSCCLPP_TEST_TRANSPORT_FAULT=put:N) while
 *   another block of that rank waits on a memory channel: that wait gives up on the failed
 *   proxy and the rank reports the transport's sentence; every other rank's wait (which the
 *   failure starves) times out naming the peer it waited for; no rank reports OK, none hangs,
 *   all within MSCCLPP_TIMEOUT + 1 s; with and without a stream.
 */
#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"
#include "transports/transport.h"

#define SETUP_TIMEOUT_S 30
#define TIMEOUT_S 3

/* ---- the launch fence through the proxy ------------------------------------------------- */

typedef struct {
    int per_node;
    const char *file; /* allgather plan, relative to the source tree */
    bool inplace;     /* an in-place plan: my input is my block of the output */
    bool rank0_still; /* rank 0 calls at offset 0 of its allocations every time, the others at
                       * moving offsets: only they flush their lowered plans (no stream) */
} fence_case_t;

/* Floats per rank of each call: shapes change on most calls (a fence), some repeat (none). */
static const size_t fence_counts[] = {1024, 16, 65536, 16, 7000, 1024, 1024, 8,
                                      65536, 4, 300, 65536, 65536, 40};
#define N_FENCE_CALLS (sizeof fence_counts / sizeof fence_counts[0])
#define FENCE_ALIGN 64 /* bytes: every call's buffers start at such an offset */

static float fence_value(int rank, int call, size_t i)
{
    return (float)(rank * 1000003 + call * 7919 + (int)(i % 65521));
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Every float of call c's output. */
static int fence_check(int rank, int n, const char *file, const char *route, size_t c,
                       const void *out, int salt)
{
    const float *dst = out;
    size_t count = fence_counts[c];
    for (size_t i = 0; i < count * (size_t)n; i++) {
        float want = fence_value((int)(i / count), (int)c + salt, i % count);
        if (dst[i] != want)
            return MP_FAIL(rank, "%s, %s: call %zu (%zu floats per rank): out[%zu] = %g, want %g",
                           file, route, c, count, i, dst[i], want);
    }
    return 0;
}

static int fence_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    const fence_case_t *fc = arg;
    mscclpp_comm_t *comm = NULL;
    mp_set_timeout(SETUP_TIMEOUT_S);
    if (mp_join_node(rank, n, fc->per_node, "mixed", id, &comm)) return 1;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", getenv("MSCCLPP_TOP_SRCDIR"), fc->file);
    mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_plan_load_file(path, &plan));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    /* every call at its own offsets of one pair of allocations: one context */
    size_t in_off[N_FENCE_CALLS], out_off[N_FENCE_CALLS], in_total = 0, out_total = 0;
    for (size_t c = 0; c < N_FENCE_CALLS; c++) {
        in_off[c] = in_total;
        out_off[c] = out_total;
        in_total += round_up(fence_counts[c] * 4, FENCE_ALIGN);
        out_total += round_up(fence_counts[c] * 4 * (size_t)n, FENCE_ALIGN);
    }
    char *in = NULL, *out = NULL;
    MP_CHECK(rank, mscclpp_malloc(in_total, (void **)&in));
    MP_CHECK(rank, mscclpp_malloc(out_total, (void **)&out));
    mscclpp_stream_t s = NULL;
    MP_CHECK(rank, mscclpp_stream_create(&s));
    if (fc->rank0_still && rank == 0)
        for (size_t c = 0; c < N_FENCE_CALLS; c++) in_off[c] = out_off[c] = 0;
    for (int route = 0; route < (fc->rank0_still ? 1 : 2); route++) {
        /* route 0: no stream, a check after each call; 1: all queued on a stream */
        memset(out, 0xff, out_total);
        char *src[N_FENCE_CALLS];
        /* the inputs: all before the first call on a stream, else each before its call (a
         * still rank 0 reuses one place) */
        for (size_t c = 0; c < N_FENCE_CALLS; c++) {
            src[c] = fc->inplace ? out + out_off[c] + (size_t)rank * fence_counts[c] * 4
                                 : in + in_off[c];
            for (size_t i = 0; route && i < fence_counts[c]; i++)
                ((float *)src[c])[i] = fence_value(rank, (int)c + route * 100, i);
        }
        for (size_t c = 0; c < N_FENCE_CALLS; c++) {
            size_t count = fence_counts[c];
            for (size_t i = 0; !route && i < count; i++)
                ((float *)src[c])[i] = fence_value(rank, (int)c, i);
            MP_CHECK(rank, mscclpp_execute(ex, plan, src[c], out + out_off[c], count * 4,
                                           count * 4 * (size_t)n, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                                           route ? s : NULL));
            if (!route && fence_check(rank, n, fc->file, "no stream", c, out + out_off[c], 0))
                return 1;
        }
        if (route) {
            MP_CHECK(rank, mscclpp_stream_synchronize(s));
            for (size_t c = 0; c < N_FENCE_CALLS; c++)
                if (fence_check(rank, n, fc->file, "stream", c, out + out_off[c], 100)) return 1;
        }
    }
    mscclpp_bootstrap_t *boot = NULL;
    MP_CHECK(rank, mscclpp_comm_bootstrap(comm, &boot));
    MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
    MP_CHECK(rank, mscclpp_stream_destroy(s));
    MP_CHECK(rank, mscclpp_executor_destroy(ex));
    mscclpp_plan_destroy(plan);
    mscclpp_free(in);
    mscclpp_free(out);
    mscclpp_comm_destroy(comm);
    return 0;
}

static void run_fence(int n, fence_case_t fc)
{
    unsigned failed = 0;
    ck_assert_msg(mp_run(n, fence_body, &fc, 240, &failed) == 0, "%s: failed ranks 0x%x",
                  fc.file, failed);
}

/* 2 nodes x 1: port channels only (Simple, then LL packets relayed by the proxy) */
START_TEST(t_fence_port_simple)
{
    run_fence(2, (fence_case_t){1, "tests/multinode/plans/2x1/allgather.json"});
}
END_TEST
START_TEST(t_fence_port_packets)
{
    run_fence(2, (fence_case_t){1, "tests/multinode/programs/allgather_pkt_2x1.json", true});
}
END_TEST
/* one node (memory channels only, no UCX needed): the moving offsets alone, queued on a
 * stream, used to free lowered plans that queued launches still read */
START_TEST(t_offsets_one_node)
{
    run_fence(2, (fence_case_t){2, "plans/allgather_2.json"});
}
END_TEST
/*
 * Ranks that disagree on whether a call fences deadlock or read stale data. The decision was
 * the lowered plan's cache entry: a rank whose own offsets moved flushed its entries, malloc
 * gave the next shape's entry the same address, and that rank alone did not fence.
 */
START_TEST(t_fence_one_rank_moves)
{
    run_fence(2, (fence_case_t){2, "plans/allgather_2.json", false, true});
}
END_TEST
/* 2 nodes x 2: memory channels inside a node, port channels across */
START_TEST(t_fence_mixed)
{
    run_fence(4, (fence_case_t){2, "tests/multinode/plans/2x2/allgather.json"});
}
END_TEST

/*
 * A peer killed (SIGKILL) between two calls of different sizes, 2 nodes x 1 (port channels
 * only): the survivor's next call fences through its proxy first, and that fence fails, naming
 * the dead rank, within MSCCLPP_TIMEOUT + 1 s; with and without a stream, and with every buffer
 * staged through pinned host bounces (MSCCLPP_UCX_STAGING=always, 4 KiB chunks: the first call's
 * 16 KiB puts go in 4 messages each), the path GPU memory takes over this UCX.
 */
#define FENCE_VICTIM 1

static int fence_kill_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    int on_stream = *(const int *)arg & 1, staged = *(const int *)arg >> 1;
    if (staged) {
        setenv("MSCCLPP_UCX_STAGING", "always", 1);
        setenv("MSCCLPP_UCX_STAGE_CHUNK", "4096", 1);
    }
    mscclpp_comm_t *comm = NULL;
    mp_set_timeout(SETUP_TIMEOUT_S);
    if (mp_join_node(rank, n, 1, "mixed", id, &comm)) return 1;
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/multinode/plans/2x1/allgather.json",
             getenv("MSCCLPP_TOP_SRCDIR"));
    mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_plan_load_file(path, &plan));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    float *in = NULL, *out = NULL;
    MP_CHECK(rank, mscclpp_malloc(4096 * 4, (void **)&in));
    MP_CHECK(rank, mscclpp_malloc(4096 * 4 * (size_t)n, (void **)&out));
    mscclpp_stream_t s = NULL;
    if (on_stream) MP_CHECK(rank, mscclpp_stream_create(&s));
    size_t count = 4096;
    for (size_t i = 0; i < count; i++) in[i] = fence_value(rank, 0, i);
    MP_CHECK(rank, mscclpp_execute(ex, plan, in, out, count * 4, count * 4 * (size_t)n,
                                   MSCCLPP_FLOAT32, MSCCLPP_SUM, s));
    if (s) MP_CHECK(rank, mscclpp_stream_synchronize(s));
    for (size_t i = 0; i < count * (size_t)n; i++)
        if (out[i] != fence_value((int)(i / count), 0, i % count))
            return MP_FAIL(rank, "call 1: out[%zu] = %g", i, out[i]);
    /* every rank is done with call 1 (its trailing flush waits on the peer) */
    if (mp_barrier_then_die(rank, comm, rank == FENCE_VICTIM)) return 1;
    mp_set_timeout(TIMEOUT_S); /* the next call, of another size, is lowered under it */
    count = 1000;
    double t0 = mp_now_s();
    mscclpp_result_t r = mscclpp_execute(ex, plan, in, out, count * 4, count * 4 * (size_t)n,
                                         MSCCLPP_FLOAT32, MSCCLPP_SUM, s);
    if (r == MSCCLPP_OK && s) r = mscclpp_stream_synchronize(s);
    double dt = mp_now_s() - t0;
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
    const char *route = s ? (staged ? "stream, staged" : "stream")
                          : (staged ? "no stream, staged" : "no stream");
    char dead[32];
    snprintf(dead, sizeof dead, "rank %d", FENCE_VICTIM);
    if (r == MSCCLPP_OK) return MP_FAIL(rank, "%s: a call with rank %d dead returned OK", route,
                                        FENCE_VICTIM);
    if (dt > TIMEOUT_S + 1.0)
        return MP_FAIL(rank, "%s: the error took %.2f s: %s", route, dt, msg);
    /* Usually the launch's fence meets the dead peer. When this rank's proxy noticed the death
     * (UCX endpoint timeout) before the call, the call fails before launching, with the
     * proxy's own sentence: either way the dead peer must be named. */
    if (!strstr(msg, dead) ||
        (!strstr(msg, "in the launch fence") && !strstr(msg, "proxy of rank")))
        return MP_FAIL(rank, "%s: the error names neither the launch fence nor the proxy, or "
                       "not %s: %s", route, dead, msg);
    if (strstr(msg, ",:")) /* the fence's place ended in a comma, before the proxy's ": " */
        return MP_FAIL(rank, "%s: a stray comma in the message: %s", route, msg);
    printf("# %s: rank %d: %s in %.2f s: %s\n", route, rank, mscclpp_result_string(r), dt, msg);
    if (s) mscclpp_stream_destroy(s);
    mscclpp_executor_destroy(ex);
    mscclpp_plan_destroy(plan);
    mscclpp_free(in);
    mscclpp_free(out);
    mscclpp_comm_destroy(comm);
    return 0;
}

START_TEST(t_fence_port_kill)
{
    int mode = _i; /* bit 0: on a stream; bit 1: staged */
    unsigned failed = 0;
    mp_run(2, fence_kill_body, &mode, 120, &failed);
    ck_assert_msg(failed == 1u << FENCE_VICTIM, "%s%s: failed ranks 0x%x, want only the victim",
                  mode & 1 ? "stream" : "no stream", mode & 2 ? ", staged" : "", failed);
}
END_TEST

/* ---- a failed proxy seen by a memory-channel wait ----------------------------------------- */

/*
 * 2 nodes x 2 (node 0: ranks 0, 1; node 1: ranks 2, 3), an allgather-shaped chain: every rank
 * copies its input to its output chunk; rank 0 puts its input into rank 2's scratch through a
 * port channel and signals it; rank 2 waits for that, copies it to its output chunk 0 and
 * signals rank 3 (memory channel); rank 3 waits and signals rank 1 (port channel); rank 1
 * waits and signals rank 0 (memory channel), whose second block waits for that. When rank 0's
 * put fails in its proxy, its signal is never sent: rank 0's memory-channel wait can only end
 * by seeing the proxy's failure, and every other rank starves.
 */
#define COPY_OWN                                                                               \
    "{\"name\": \"copy\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], "      \
    "\"dst_buff\": [{\"type\": \"o\", \"index\": @OWN@, \"size\": 1}]}"
#define SIG(t) "{\"name\": \"signal\", \"channel_ids\": [0], \"channel_type\": \"" t "\"}"
#define WAIT(t) "{\"name\": \"wait\", \"channel_ids\": [0], \"channel_type\": \"" t "\"}"
#define CHAIN_RANKS 4
#define CHAIN_FAULT_RANK 0
/* the peer each rank's starved wait names (rank 0's names the put's peer instead) */
static const int chain_waits_for[CHAIN_RANKS] = {1, 3, 0, 2};

static char *chain_plan(void)
{
    /* per rank: memory peer, port peer, its blocks' ops */
    static const char *const blocks[CHAIN_RANKS] = {
        /* rank 0: put + signal through the port channel; a second block waits on memory */
        "{\"id\": 0, \"ops\": [" COPY_OWN ", {\"name\": \"put\", \"src_buff\": [{\"type\": \"i\", "
        "\"index\": 0, \"size\": 1}], \"dst_buff\": [{\"buffer_id\": 0, \"index\": 0, \"size\": "
        "1}], \"channel_ids\": [0], \"channel_type\": \"port\"}, " SIG("port") "], "
        "\"channels\": [{\"channel_type\": \"port\", \"channel_ids\": [0]}], "
        "\"remote_buffer_refs\": [{\"access_channel_type\": \"port\", \"remote_buffer_ids\": "
        "[0]}]}, "
        "{\"id\": 1, \"ops\": [" WAIT("memory") "], \"channels\": [{\"channel_type\": \"memory\", "
        "\"channel_ids\": [0]}]}",
        /* rank 1: wait for rank 3 (port), signal rank 0 (memory) */
        "{\"id\": 0, \"ops\": [" COPY_OWN ", " WAIT("port") ", " SIG("memory") "], \"channels\": "
        "[{\"channel_type\": \"memory\", \"channel_ids\": [0]}, {\"channel_type\": \"port\", "
        "\"channel_ids\": [0]}]}",
        /* rank 2: wait for rank 0 (port), take its data, signal rank 3 (memory) */
        "{\"id\": 0, \"ops\": [" COPY_OWN ", " WAIT("port") ", {\"name\": \"copy\", \"src_buff\": "
        "[{\"type\": \"s\", \"index\": 0, \"size\": 1}], \"dst_buff\": [{\"type\": \"o\", "
        "\"index\": 0, \"size\": 1}]}, " SIG("memory") "], \"channels\": [{\"channel_type\": "
        "\"memory\", \"channel_ids\": [0]}, {\"channel_type\": \"port\", \"channel_ids\": [0]}]}",
        /* rank 3: wait for rank 2 (memory), signal rank 1 (port) */
        "{\"id\": 0, \"ops\": [" COPY_OWN ", " WAIT("memory") ", " SIG("port") "], \"channels\": "
        "[{\"channel_type\": \"memory\", \"channel_ids\": [0]}, {\"channel_type\": \"port\", "
        "\"channel_ids\": [0]}]}",
    };
    static const int mem_peer[CHAIN_RANKS] = {1, 0, 3, 2}, port_peer[CHAIN_RANKS] = {2, 3, 0, 1};
    size_t cap = 16384, len = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    len += (size_t)snprintf(buf + len, cap - len,
        "{\"format\": \"mscclpp-plan/1\", \"name\": \"mixed_chain\", \"collective\": "
        "\"allgather\", \"protocol\": \"Simple\", \"inplace\": false, \"reuse_resources\": false, "
        "\"num_threads_per_block\": 256, \"use_double_scratch_buffer\": false, "
        "\"buffer_alignment\": 16, \"min_message_size\": 0, "
        "\"max_message_size\": 18446744073709551615, \"gpus\": [");
    for (int r = 0; r < CHAIN_RANKS; r++) {
        char own[16];
        snprintf(own, sizeof own, "%d", r);
        len += (size_t)snprintf(buf + len, cap - len,
            "%s{\"id\": %d, \"input_chunks\": 1, \"output_chunks\": %d, \"scratch_chunks\": 1, "
            "\"channels\": [{\"channel_type\": \"memory\", \"connected_to\": [%d]}, "
            "{\"channel_type\": \"port\", \"connected_to\": [%d]}], \"remote_buffers\": [%s], "
            "\"semaphores\": [], \"threadblocks\": [",
            r ? ", " : "", r, CHAIN_RANKS, mem_peer[r], port_peer[r],
            r == CHAIN_FAULT_RANK ? "{\"rank\": 2, \"type\": \"s\", \"access_channel_types\": "
                                    "[\"port\"]}" : "");
        /* COPY_OWN stands for "own chunk": replace the placeholder with this rank's index */
        const char *b = blocks[r];
        for (const char *p = b; *p; p++) {
            if (!strncmp(p, "@OWN@", 5)) {
                len += (size_t)snprintf(buf + len, cap - len, "%s", own);
                p += 4;
            } else if (len + 1 < cap) {
                buf[len++] = *p;
                buf[len] = 0;
            }
        }
        len += (size_t)snprintf(buf + len, cap - len, "]}");
    }
    snprintf(buf + len, cap - len, "]}");
    return buf;
}

typedef struct {
    int stream;
    int reported; /* ranks that have their error (shared between the forked ranks) */
} chain_arg_t;

static float chain_value(int rank, size_t i) { return (float)(rank * 100003 + (int)i); }

#define CHAIN_COUNT 4096 /* floats per rank */

static int chain_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    chain_arg_t *ca = arg;
    /* rank 0's second put (the second call's) fails in its proxy */
    if (rank == CHAIN_FAULT_RANK) setenv("MSCCLPP_TEST_TRANSPORT_FAULT", "put:2", 1);
    mscclpp_comm_t *comm = NULL;
    mp_set_timeout(SETUP_TIMEOUT_S);
    if (mp_join_node(rank, n, 2, "mixed", id, &comm)) return 1;
    char *json = chain_plan();
    if (!json) return MP_FAIL(rank, "out of memory");
    mscclpp_plan_t *plan = NULL;
    mscclpp_result_t r = mscclpp_plan_load_string(json, strlen(json), &plan);
    if (r != MSCCLPP_OK) {
        MP_FAIL(rank, "the chain plan: %s\n%s", mscclpp_last_error(), json);
        free(json);
        return 1;
    }
    free(json);
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    float *in = NULL, *out = NULL;
    MP_CHECK(rank, mscclpp_malloc(CHAIN_COUNT * 4, (void **)&in));
    MP_CHECK(rank, mscclpp_malloc(CHAIN_COUNT * 4 * (size_t)n, (void **)&out));
    mscclpp_stream_t s = NULL;
    if (ca->stream) MP_CHECK(rank, mscclpp_stream_create(&s));
    mscclpp_bootstrap_t *boot = NULL;
    MP_CHECK(rank, mscclpp_comm_bootstrap(comm, &boot));

    /* call 1 (setup timeout): the chain works, and moves rank 0's input to rank 2 */
    size_t count = CHAIN_COUNT;
    for (size_t i = 0; i < count; i++) in[i] = chain_value(rank, i);
    memset(out, 0, count * 4 * (size_t)n);
    MP_CHECK(rank, mscclpp_execute(ex, plan, in, out, count * 4, count * 4 * (size_t)n,
                                   MSCCLPP_FLOAT32, MSCCLPP_SUM, s));
    if (s) MP_CHECK(rank, mscclpp_stream_synchronize(s));
    for (size_t i = 0; i < count; i++) {
        if (out[(size_t)rank * count + i] != chain_value(rank, i))
            return MP_FAIL(rank, "call 1: own chunk [%zu] = %g", i, out[(size_t)rank * count + i]);
        if (rank == 2 && out[i] != chain_value(0, i))
            return MP_FAIL(rank, "call 1: rank 0's chunk [%zu] = %g, want %g", i, out[i],
                           chain_value(0, i));
    }
    MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));

    /* call 2, of another size (lowered under the short timeout; it fences first, through
     * both kinds of channel): rank 0's put fails */
    mp_set_timeout(TIMEOUT_S);
    count = CHAIN_COUNT / 2;
    double t0 = mp_now_s();
    r = mscclpp_execute(ex, plan, in, out, count * 4, count * 4 * (size_t)n, MSCCLPP_FLOAT32,
                        MSCCLPP_SUM, s);
    if (r == MSCCLPP_OK && s) r = mscclpp_stream_synchronize(s);
    double dt = mp_now_s() - t0;
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
    const char *route = s ? "stream" : "no stream";
    if (r == MSCCLPP_OK) return MP_FAIL(rank, "%s: call 2 returned OK", route);
    if (dt > TIMEOUT_S + 1.0)
        return MP_FAIL(rank, "%s: call 2 failed after %.2f s (MSCCLPP_TIMEOUT %d): %s", route, dt,
                       TIMEOUT_S, msg);
    if (rank == CHAIN_FAULT_RANK) {
        /* the memory-channel wait (block 1, op 0) gave up on its own proxy, which says why:
         * the transport and the peer of the put that failed */
        const char *const words[] = {"block 1 op 0 (wait)", "proxy failed", "ucx transport",
                                     "put #2 to rank 2 failed"};
        for (size_t i = 0; i < sizeof words / sizeof *words; i++)
            if (!strstr(msg, words[i]))
                return MP_FAIL(rank, "%s: the error does not say '%s': %s", route, words[i],
                               msg);
    } else {
        char peer[32];
        snprintf(peer, sizeof peer, "from rank %d", chain_waits_for[rank]);
        if (r != MSCCLPP_ERR_TIMEOUT || !strstr(msg, peer))
            return MP_FAIL(rank, "%s: %s, want a timeout waiting %s: %s", route,
                           mscclpp_result_string(r), peer, msg);
    }
    printf("# %s: rank %d: %s in %.2f s: %s\n", route, rank, mscclpp_result_string(r), dt, msg);
    mscclpp_result_t async = MSCCLPP_OK;
    MP_CHECK(rank, mscclpp_executor_get_async_error(ex, &async));
    if (async == MSCCLPP_OK) return MP_FAIL(rank, "%s: the async query says OK", route);
    /* tear down once every rank has its error: a rank that leaves early is another failure */
    __atomic_add_fetch(&ca->reported, 1, __ATOMIC_ACQ_REL);
    for (int i = 0; i < 20000 && __atomic_load_n(&ca->reported, __ATOMIC_ACQUIRE) < n; i++)
        usleep(1000);
    if (s) mscclpp_stream_destroy(s);
    mscclpp_executor_destroy(ex);
    mscclpp_plan_destroy(plan);
    mscclpp_free(in);
    mscclpp_free(out);
    mscclpp_comm_destroy(comm);
    return 0;
}

START_TEST(t_proxy_fails_memory_waits)
{
    chain_arg_t *ca = mmap(NULL, sizeof *ca, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                           -1, 0);
    ck_assert_ptr_ne(ca, MAP_FAILED);
    ca->stream = _i;
    ca->reported = 0;
    unsigned failed = 0;
    int nf = mp_run(CHAIN_RANKS, chain_body, ca, 120, &failed);
    munmap(ca, sizeof *ca);
    ck_assert_msg(nf == 0, "%s: failed ranks 0x%x", _i ? "stream" : "no stream", failed);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mixed");
    TCase *tc = tcase_create("mixed");
    tcase_set_timeout(tc, 300);
    /* MIXED_ONLY=<test name> runs one test (debugging) */
    const char *only = getenv("MIXED_ONLY");
#define ADD(t) if (!only || !strcmp(only, #t)) tcase_add_test(tc, t)
    ADD(t_offsets_one_node);
    ADD(t_fence_one_rank_moves);
    /* between the forced nodes only UCX carries port channels (no RDMA device here) */
    if (tp_built(TP_UCX)) {
        ADD(t_fence_port_simple);
        ADD(t_fence_port_packets);
        ADD(t_fence_mixed);
        if (!only || !strcmp(only, "t_fence_port_kill"))
            tcase_add_loop_test(tc, t_fence_port_kill, 0, 4);
        if (!only || !strcmp(only, "t_proxy_fails_memory_waits"))
            tcase_add_loop_test(tc, t_proxy_fails_memory_waits, 0, 2);
    } else {
        printf("# built without UCX: the tests across forced nodes are skipped (no transport "
               "between them)\n");
    }
#undef ADD
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
