/*
 * The ucx transport's staging through pinned host memory (issue 10 item 7), on the host backend:
 * MSCCLPP_UCX_STAGING=always runs the whole GPU path (bounce buffers, chunked puts, rendezvous
 * into a bounce, copy-in before the signal), with the HAL's copies, though "device memory" is
 * host memory here. Ranks are forked processes on forced node ids, UCX over tcp on loopback.
 * Every byte moved is checked.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "base/config.h"
#include "base/wire.h"
#include "core/core.h"
#include "hal/host/host.h"
#include "mscclpp/mscclpp.h"
#include "tests/multinode/mn_link.h"
#include "tests/unit/mp_harness.h"
#include "transports/transport.h"

#define CHUNK 65536 /* small staging chunks: a few MiB make many messages */

static void env_common(int rank, const char *tag, const char *staging)
{
    char node[32];
    snprintf(node, sizeof node, "%s-node-%d", tag, rank);
    setenv("MSCCLPP_NODE_ID", node, 1);
    setenv("UCX_TLS", "tcp", 1);
    setenv("UCX_NET_DEVICES", "lo", 0); /* see test_multinode.c use_tls */
    setenv("MSCCLPP_UCX_STAGING", staging, 1);
    /* every backend call a GPU could make wait for the running kernel, made by a proxy while
     * a launch runs, fails loudly (hal/host/host_check.c): the staged path's proxy-side copies
     * must be device <-> pinned on the transport's own stream */
    setenv("MSCCLPP_HAL_SYNC_CHECK", "1", 1);
    char chunk[32];
    snprintf(chunk, sizeof chunk, "%d", CHUNK);
    setenv("MSCCLPP_UCX_STAGE_CHUNK", chunk, 1);
}

/* ---- the copy the handler uses for memory an interpreter polls ---------------------------- */

START_TEST(t_copy_words)
{
    /* every alignment of source and destination, lengths around word multiples */
    static uint8_t src[256 + 16], dst[256 + 16];
    for (size_t i = 0; i < sizeof src; i++) src[i] = (uint8_t)(i * 7 + 1);
    for (int da = 0; da < 9; da++)
        for (int sa = 0; sa < 9; sa++)
            for (size_t len = 0; len <= 40; len++) {
                uint8_t *d = (uint8_t *)(((uintptr_t)dst + 15) & ~(uintptr_t)15) + da;
                memset(dst, 0xcc, sizeof dst);
                tp_copy_words(d, src + sa, len);
                for (size_t i = 0; i < len; i++)
                    ck_assert_msg(d[i] == src[sa + i], "dst+%d src+%d len %zu: byte %zu", da, sa,
                                  len, i);
                ck_assert_msg(d[len] == 0xcc, "wrote past the end (dst+%d len %zu)", da, len);
                if (da > 0) ck_assert_int_eq(d[-1], 0xcc);
            }
}
END_TEST

/* A writer copies packets (each 8-byte word: payload == flag, both the round) while a reader
 * polls: a word it reads is never half old, half new. */
#define TEAR_WORDS 512
static uint64_t tear_buf[TEAR_WORDS] __attribute__((aligned(64)));
static int tear_stop;

static void *tear_writer(void *arg)
{
    (void)arg;
    static uint64_t pkt[TEAR_WORDS + 1];
    for (uint32_t round = 1; !__atomic_load_n(&tear_stop, __ATOMIC_ACQUIRE); round++) {
        for (int i = 0; i < TEAR_WORDS; i++) pkt[i] = ((uint64_t)round << 32) | round;
        /* the source unaligned, as UCX's receive buffer may be */
        memmove((uint8_t *)pkt + 4, pkt, TEAR_WORDS * 8);
        tp_copy_words(tear_buf, (uint8_t *)pkt + 4, TEAR_WORDS * 8);
    }
    return NULL;
}

START_TEST(t_copy_words_no_tear)
{
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, tear_writer, NULL), 0);
    for (int pass = 0; pass < 2000; pass++)
        for (int i = 0; i < TEAR_WORDS; i++) {
            uint64_t v = __atomic_load_n(&tear_buf[i], __ATOMIC_RELAXED);
            ck_assert_msg((uint32_t)v == (uint32_t)(v >> 32), "word %d torn: 0x%016llx", i,
                          (unsigned long long)v);
        }
    __atomic_store_n(&tear_stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
}
END_TEST

/* What auto decides by on a GPU backend: memory the CPU cannot read (GPU memory is reserved in
 * the address space without access, as this PROT_NONE mapping is) is staged. */
START_TEST(t_cpu_readable)
{
    static char host[4096];
    ck_assert(tp_cpu_readable(host, sizeof host));
    long page = sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    ck_assert(tp_cpu_readable(p, (size_t)page * 2));
    /* the last page without access: the range is not all readable */
    ck_assert_int_eq(mprotect(p + page, (size_t)page, PROT_NONE), 0);
    ck_assert(!tp_cpu_readable(p, (size_t)page * 2));
    ck_assert(!tp_cpu_readable(p + page, 8));
    ck_assert_int_eq(munmap(p, (size_t)page * 2), 0);
    ck_assert(!tp_cpu_readable(p, 8)); /* unmapped: no fault, just "no" */
}
END_TEST

/* ---- the decision ------------------------------------------------------------------------- */

static int decide_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    const char *mode = arg;
    env_common(rank, "decide", mode);
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    const tp_ops_t *ops = tp_ucx_ops();
    tp_ctx_t *ctx = NULL;
    mscclpp_result_t r = comm_tp_ctx(comm, ops, &ctx);
    if (!strcmp(mode, "bogus")) { /* a typo fails the context, naming the variable */
        if (r != MSCCLPP_ERR_INVALID_ARG || !strstr(mscclpp_last_error(), "MSCCLPP_UCX_STAGING"))
            return MP_FAIL(rank, "MSCCLPP_UCX_STAGING=bogus: %s: %s", mscclpp_result_string(r),
                           mscclpp_last_error());
        mscclpp_comm_destroy(comm);
        return 0;
    }
    MP_CHECK(rank, r);
    void *buf = NULL;
    MP_CHECK(rank, mscclpp_malloc(4096, &buf));
    tp_mem_t *m = NULL;
    MP_CHECK(rank, ops->mem_reg(ctx, buf, 4096, &m));
    bool want = !strcmp(mode, "always"); /* auto on the host backend: nothing to stage */
    if (tp_ucx_mem_staged(m) != want)
        return MP_FAIL(rank, "MSCCLPP_UCX_STAGING=%s: staged %d, want %d", mode,
                       tp_ucx_mem_staged(m), want);
    MP_CHECK(rank, ops->mem_dereg(ctx, m));
    mscclpp_free(buf);
    /* memory the CPU cannot read (as GPU memory is to a UCX without CUDA support): staged
     * with always; else handed to UCX as it is, which faulted or lost the puts: refused */
    long page = sysconf(_SC_PAGESIZE);
    void *gpu_like = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (gpu_like == MAP_FAILED) return MP_FAIL(rank, "mmap failed");
    m = NULL;
    r = ops->mem_reg(ctx, gpu_like, (size_t)page, &m);
    if (want ? r != MSCCLPP_OK || !tp_ucx_mem_staged(m)
             : r != MSCCLPP_ERR_UNSUPPORTED ||
                   !strstr(mscclpp_last_error(), "MSCCLPP_UCX_STAGING=auto") ||
                   !strstr(mscclpp_last_error(), "cannot read"))
        return MP_FAIL(rank, "MSCCLPP_UCX_STAGING=%s, memory the CPU cannot read: %s: %s", mode,
                       mscclpp_result_string(r), mscclpp_last_error());
    if (m) MP_CHECK(rank, ops->mem_dereg(ctx, m));
    munmap(gpu_like, (size_t)page);
    mscclpp_comm_destroy(comm);
    return 0;
}

START_TEST(t_decision)
{
    static char *modes[] = {"auto", "always", "never", "bogus"};
    ck_assert_int_eq(mp_run(2, decide_body, modes[_i], 60, NULL), 0);
}
END_TEST

/* ---- a staged put and its signal ----------------------------------------------------------- */

/* Many chunks, an odd size: a small eager put, then rendezvous messages into bounces, the
 * signal in the last one. */
#define ORDER_BYTES (4 * 1024 * 1024 + 13)
#define ORDER_TAIL 100

/* The receiver's progress, in a thread of its own as the proxy's is: the main thread only
 * polls the counter, so it can see a counter stored before the data. */
typedef struct {
    const tp_ops_t *ops;
    tp_ctx_t *ctx;
    int stop;
    mscclpp_result_t res;
    char err[512];
} prog_t;

static void *prog_main(void *arg)
{
    prog_t *p = arg;
    while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
        mscclpp_result_t r = p->ops->progress(p->ctx);
        if (r != MSCCLPP_OK && p->res == MSCCLPP_OK) {
            snprintf(p->err, sizeof p->err, "%s", mscclpp_last_error());
            p->res = r;
        }
        sched_yield();
    }
    return NULL;
}

static uint8_t pattern(size_t i, int round) { return (uint8_t)(i * 13 + round * 7 + 1); }

/* A rank of a transport-level test: its communicator (env_common for `tag`, staging always)
 * and its ucx link to the other rank. 0, or the failure's code. */
static int stage_link_open(int rank, int n, const mscclpp_unique_id_t *id, const char *tag,
                           mscclpp_comm_t **comm, port_link_t *link)
{
    env_common(rank, tag, "always");
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, comm));
    MP_CHECK(rank, mn_link_open(*comm, "ucx", 1 - rank, link));
    return 0;
}

/* Its end: a barrier, the link closed, its two registrations and their buffers freed. */
static int stage_link_close(int rank, mscclpp_comm_t *comm, port_link_t *link, tp_mem_t *mbuf,
                            tp_mem_t *mcnt, void *buf, void *counter)
{
    const tp_ops_t *ops = link->ops;
    tp_ctx_t *ctx = link->ctx;
    MP_CHECK(rank, mscclpp_bootstrap_barrier(comm->boot));
    port_link_close(link);
    MP_CHECK(rank, ops->mem_dereg(ctx, mbuf));
    MP_CHECK(rank, ops->mem_dereg(ctx, mcnt));
    mscclpp_free(buf);
    mscclpp_free(counter);
    mscclpp_comm_destroy(comm);
    return 0;
}

/*
 * Rank 0 puts into rank 1's staged buffer and signals its staged counter; rank 1 may see the
 * counter only once every byte is in place. Storing the signal when the last rendezvous
 * receive completed, before its bounce was copied in, failed the first check below in every
 * run (checked by moving the copy after the store; with the counter not staged, also by
 * finishing the receive as soon as its copy was queued).
 */
#define ORDER_LATE 2 /* order_body's mode: two signals into one word (t_late_signal_order) */

static int order_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    /* the counter staged too (1, always), or host memory as auto makes the port counters on a
     * GPU backend (0): then only the order of the receive's bookkeeping protects the data */
    bool late = *(const int *)arg == ORDER_LATE, counter_staged = *(const int *)arg == 1;
    mscclpp_comm_t *comm = NULL;
    port_link_t link;
    int f = stage_link_open(rank, n, id, "stage", &comm, &link);
    if (f) return f;
    const tp_ops_t *ops = link.ops;
    tp_ctx_t *ctx = link.ctx;
    tp_ep_t *ep = link.ep;
    uint8_t *buf = NULL;
    uint64_t *counter = NULL;
    MP_CHECK(rank, mscclpp_malloc(ORDER_BYTES, (void **)&buf));
    MP_CHECK(rank, mscclpp_malloc(64, (void **)&counter));
    memset(buf, 0, ORDER_BYTES);
    memset(counter, 0, 64);
    tp_mem_t *mbuf = NULL, *mcnt = NULL;
    MP_CHECK(rank, ops->mem_reg(ctx, buf, ORDER_BYTES, &mbuf));
    if (!counter_staged) setenv("MSCCLPP_UCX_STAGING", "never", 1);
    MP_CHECK(rank, ops->mem_reg(ctx, counter, 64, &mcnt));
    setenv("MSCCLPP_UCX_STAGING", "always", 1);
    if (!tp_ucx_mem_staged(mbuf) || tp_ucx_mem_staged(mcnt) != counter_staged)
        return MP_FAIL(rank, "staged: buffer %d counter %d, want 1 %d", tp_ucx_mem_staged(mbuf),
                       tp_ucx_mem_staged(mcnt), counter_staged);
    MP_CHECK(rank, mn_link_exchange(comm, &link, 9, mbuf, buf, ORDER_BYTES, mcnt, counter, 64));
    tp_rmem_t *rbuf = link.theirs.buf[0], *rcnt = link.theirs.counters;
    prog_t prog = {ops, ctx, 0, MSCCLPP_OK, ""};
    pthread_t t;
    if (rank == 1 && pthread_create(&t, NULL, prog_main, &prog) != 0)
        return MP_FAIL(rank, "pthread_create failed");
    const size_t big = ORDER_BYTES - ORDER_TAIL;
    for (int round = 0; round < 6; round++) {
        if (rank == 0) {
            for (size_t i = 0; i < ORDER_BYTES; i++) buf[i] = pattern(i, round);
            MP_CHECK(rank, mscclpp_bootstrap_barrier(comm->boot));
            /* the small eager put first; the signal then rides the big put's last message, a
             * rendezvous one (65449 bytes), received into a bounce */
            MP_CHECK(rank, ops->put(ep, rbuf, big, mbuf, big, ORDER_TAIL));
            MP_CHECK(rank, ops->put(ep, rbuf, 0, mbuf, 0, big));
            if (late) { /* word 1 twice: riding the put, then alone right behind */
                MP_CHECK(rank, ops->signal(ep, rcnt, 8, 2 * (uint64_t)round + 1));
                MP_CHECK(rank, ops->signal(ep, rcnt, 8, 2 * (uint64_t)round + 2));
            }
            MP_CHECK(rank, ops->signal(ep, rcnt, 0, (uint64_t)round + 1));
            MP_CHECK(rank, ops->flush(ep, config_timeout_ns(), TP_FLUSH_REMOTE));
        } else {
            MP_CHECK(rank, mscclpp_bootstrap_barrier(comm->boot));
            uint64_t t0 = (uint64_t)time(NULL);
            while (__atomic_load_n(&counter[0], __ATOMIC_ACQUIRE) < (uint64_t)round + 1) {
                if (__atomic_load_n(&prog.res, __ATOMIC_RELAXED) != MSCCLPP_OK)
                    return MP_FAIL(rank, "progress failed: %s", prog.err);
                if ((uint64_t)time(NULL) - t0 > 60)
                    return MP_FAIL(rank, "round %d: no signal in 60 s", round);
            }
            /* first the ends of every chunk, at once: a copy-in still under way after the
             * signal is caught here (the full check below takes longer than a copy) */
            for (size_t c = 0; c < ORDER_BYTES; c += CHUNK) {
                size_t last = c + CHUNK - 1 < ORDER_BYTES ? c + CHUNK - 1 : ORDER_BYTES - 1;
                size_t at[2] = {c, last};
                for (int k = 0; k < 2; k++)
                    if (buf[at[k]] != pattern(at[k], round))
                        return MP_FAIL(rank, "round %d: byte %zu (chunk %zu) is stale: the "
                                       "signal came before the staged copy-in", round, at[k],
                                       c / CHUNK);
            }
            for (size_t i = ORDER_BYTES; i-- > 0;)
                if (buf[i] != pattern(i, round))
                    return MP_FAIL(rank, "round %d: byte %zu of %d is %u, want %u", round, i,
                                   ORDER_BYTES, buf[i], pattern(i, round));
            if (late) {
                usleep(20000); /* what was held back with the first signal is applied now */
                uint64_t v = __atomic_load_n(&counter[1], __ATOMIC_ACQUIRE);
                if (v != 2 * (uint64_t)round + 2)
                    return MP_FAIL(rank, "round %d: word 1 is %llu, want %d (the value sent "
                                   "last): the signal that rode the rendezvous put was applied "
                                   "after the one sent behind it", round,
                                   (unsigned long long)v, 2 * round + 2);
            }
        }
        MP_CHECK(rank, mscclpp_bootstrap_barrier(comm->boot)); /* checked before the next */
    }
    if (rank == 1) {
        __atomic_store_n(&prog.stop, 1, __ATOMIC_RELEASE);
        pthread_join(t, NULL);
        if (prog.res != MSCCLPP_OK) return MP_FAIL(rank, "progress failed: %s", prog.err);
    }
    return stage_link_close(rank, comm, &link, mbuf, mcnt, buf, counter);
}

START_TEST(t_staged_put_signal_order)
{
    static const int counter_staged[] = {1, 0};
    ck_assert_int_eq(mp_run(2, order_body, (void *)&counter_staged[_i], 180, NULL), 0);
}
END_TEST

/*
 * Signals held back behind a rendezvous receive keep their send order (order_body's mode
 * ORDER_LATE): rank 0 stores two values into word 1 of rank 1's counters, the first riding
 * the big put's last (rendezvous) message, the second alone right behind it, then signals
 * word 0; rank 1 must end with the second value in word 1. The receiver held the second back while the rendezvous receive was
 * open and applied the rendezvous message's own signal after it, when its data was in: the word
 * ended with the first value. That left a launch-fence record overwritten by the clearing store
 * before it (test_mixed t_fence_port_packets timed out 3-4 runs in 12 beside busy loops); a
 * counter could go back to a smaller total the same way.
 */
START_TEST(t_late_signal_order)
{
    static const int mode = ORDER_LATE;
    ck_assert_int_eq(mp_run(2, order_body, (void *)&mode, 180, NULL), 0);
}
END_TEST

/* ---- the default multi-node plans, staged ---------------------------------------------------- */

typedef struct {
    int per_node;
    const char *kind;
    const char *file; /* a plan of the source tree instead of the default one; in-place */
} plan_case_t;

static float value(int rank, size_t i) { return (float)((rank + 1) * 1000 + (int)(i % 997)); }

static int plan_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    const plan_case_t *pc = arg;
    env_common(rank / pc->per_node, "plan", "always");
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    char path[4096];
    if (pc->file)
        snprintf(path, sizeof path, "%s/%s", getenv("MSCCLPP_TOP_SRCDIR"), pc->file);
    else {
        snprintf(path, sizeof path, "%s/plans/multinode/%dx%d/%s.json",
                 getenv("MSCCLPP_TOP_SRCDIR"), n / pc->per_node, pc->per_node, pc->kind);
        /* retired from plans/ (the made plans serve that layout): kept as a fixture */
        if (access(path, R_OK) != 0)
            snprintf(path, sizeof path, "%s/tests/multinode/plans/%dx%d/%s.json",
                     getenv("MSCCLPP_TOP_SRCDIR"), n / pc->per_node, pc->per_node, pc->kind);
    }
    mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_plan_load_file(path, &plan));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    bool ag = !strncmp(pc->kind, "allgather", 9), rs = !strncmp(pc->kind, "reducescatter", 13);
    /* bytes per rank's chunk: 8 B and 1 KiB + a word (eager, the packet plans' range), 64 KiB
     * + odd words (rendezvous, one chunk), 1 MiB + a word (many chunks, a short last one); a
     * plan runs the sizes inside its message range (the Simple ones leave small messages to
     * the packet plans), at least one */
    const size_t sizes[] = {8, 1024 + 4, 64 * 1024 + 12, 1024 * 1024 + 4};
    int ran = 0;
    const size_t max_count = (1024 * 1024 + 4) / 4;
    float *in = NULL, *out = NULL;
    MP_CHECK(rank, mscclpp_malloc(max_count * 4 * (size_t)n, (void **)&in));
    MP_CHECK(rank, mscclpp_malloc(max_count * 4 * (size_t)n, (void **)&out));
    float *in0 = in;
    for (int call = 0; call < (int)(sizeof sizes / sizeof sizes[0]); call++) {
        size_t count = sizes[call] / 4; /* elements of one rank's chunk */
        if (pc->file) in = out + (size_t)rank * count; /* in-place allgather */
        size_t in_count = ag ? count : count * (size_t)n;
        size_t out_count = rs ? count : count * (size_t)n;
        uint64_t msg = (ag ? out_count : in_count) * 4;
        if (msg < mscclpp_plan_min_message_size(plan) || msg > mscclpp_plan_max_message_size(plan))
            continue;
        ran++;
        memset(out, 0xff, out_count * 4);
        for (size_t i = 0; i < in_count; i++) in[i] = value(rank, i);
        MP_CHECK(rank, mscclpp_execute(ex, plan, in, out, in_count * 4, out_count * 4,
                                       MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL));
        for (size_t i = 0; i < out_count; i++) {
            float want = 0;
            if (ag) {
                want = value((int)(i / count), i % count);
            } else {
                size_t at = rs ? (size_t)rank * count + i : i;
                for (int r = 0; r < n; r++) want += value(r, at);
            }
            if (out[i] != want)
                return MP_FAIL(rank, "%s %dx%d call %d (%zu bytes per rank): out[%zu] = %g, "
                               "want %g", pc->kind, n / pc->per_node, pc->per_node, call,
                               count * 4, i, out[i], want);
        }
    }
    if (ran == 0)
        return MP_FAIL(rank, "%s: no size of the test lies in the plan's range", path);
    /* every bounce buffer and the copy stream were made at registration, none by the proxy
     * while a launch ran (on a GPU a pinned allocation there may wait for that very launch) */
    if (tp_ucx_stage_late_allocs() != 0)
        return MP_FAIL(rank, "%s: %llu staging allocation(s) made by the proxy during the calls",
                       path, (unsigned long long)tp_ucx_stage_late_allocs());
    if (host_check_refused() != 0)
        return MP_FAIL(rank, "%s: the proxy made %llu backend call(s) a GPU could block in "
                       "during a launch (MSCCLPP_HAL_SYNC_CHECK)", path,
                       (unsigned long long)host_check_refused());
    mscclpp_free(in0);
    mscclpp_free(out);
    MP_CHECK(rank, mscclpp_bootstrap_barrier(comm->boot));
    mscclpp_executor_destroy(ex);
    mscclpp_plan_destroy(plan);
    mscclpp_comm_destroy(comm);
    return 0;
}

/*
 * The plans made for the job (executor/made.c) through the collective API, staged: the 2x1
 * LL-packet allreduce (port ppkt of a scratch image, packets polled in staged scratch) that
 * timed out on one H200 under MPS (gpu-check alltoallv step, test_made 2x1), then a 1 MiB
 * allreduce (a Simple made plan, rendezvous chunks) and a packet allgather. Every element is
 * checked, and the proxy made no staging allocation during the calls.
 */
static int made_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    env_common(rank, "made", "always");
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    const size_t counts[] = {61 * 2, 256 * 1024 + 2}; /* elements of the allreduce */
    float *in = NULL, *out = NULL;
    MP_CHECK(rank, mscclpp_malloc(counts[1] * 4, (void **)&in));
    MP_CHECK(rank, mscclpp_malloc(counts[1] * 4, (void **)&out));
    for (int call = 0; call < 3; call++) {
        bool ag = call == 2;
        size_t count = ag ? 61 : counts[call];
        size_t out_count = ag ? count * (size_t)n : count;
        memset(out, 0xff, out_count * 4);
        for (size_t i = 0; i < count; i++) in[i] = value(rank, i);
        double t0 = mp_now_s();
        mscclpp_result_t r =
            ag ? mscclpp_allgather(ex, in, out, count, MSCCLPP_FLOAT32, NULL)
               : mscclpp_allreduce(ex, in, out, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL);
        if (r != MSCCLPP_OK)
            return MP_FAIL(rank, "made %s of %zu floats: %s after %.1f s: %s",
                           ag ? "allgather" : "allreduce", count, mscclpp_result_string(r),
                           mp_now_s() - t0, mscclpp_last_error());
        for (size_t i = 0; i < out_count; i++) {
            float want = ag ? value((int)(i / count), i % count) : value(0, i) + value(1, i);
            if (out[i] != want)
                return MP_FAIL(rank, "made %s of %zu floats: out[%zu] = %g, want %g",
                               ag ? "allgather" : "allreduce", count, i, out[i], want);
        }
    }
    if (tp_ucx_stage_late_allocs() != 0)
        return MP_FAIL(rank, "made plans: %llu staging allocation(s) made by the proxy during "
                       "the calls", (unsigned long long)tp_ucx_stage_late_allocs());
    if (host_check_refused() != 0)
        return MP_FAIL(rank, "made plans: the proxy made %llu backend call(s) a GPU could block "
                       "in during a launch (MSCCLPP_HAL_SYNC_CHECK)",
                       (unsigned long long)host_check_refused());
    mscclpp_free(in);
    mscclpp_free(out);
    MP_CHECK(rank, mscclpp_bootstrap_barrier(comm->boot));
    mscclpp_executor_destroy(ex);
    mscclpp_comm_destroy(comm);
    return 0;
}

START_TEST(t_made_staged)
{
    /* no plan files: the collectives run the plans made for the job */
    char empty[] = "/tmp/mscclpp-staging-made-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(empty));
    setenv("MSCCLPP_PLAN_DIR", empty, 1);
    setenv("MSCCLPP_TUNING_FILE", "none", 1);
    int f = mp_run(2, made_body, NULL, 240, NULL);
    unsetenv("MSCCLPP_PLAN_DIR");
    unsetenv("MSCCLPP_TUNING_FILE");
    rmdir(empty);
    ck_assert_int_eq(f, 0);
}
END_TEST

static const plan_case_t plan_cases[] = {
    {1, "allreduce", NULL}, {1, "allgather", NULL}, {1, "reducescatter", NULL},
    {2, "allreduce", NULL}, {2, "allgather", NULL}, {2, "reducescatter", NULL},
    /* the packet plans for small messages (LL over port channels, staged scratch) */
    {1, "allreduce-pkt", NULL}, {1, "allgather-pkt", NULL}, {1, "reducescatter-pkt", NULL},
    {2, "allreduce-pkt", NULL},
    /* LL packets relayed over a port channel (ppkt), polled in staged scratch */
    {1, "allgather", "tests/multinode/allgather_ppkt_port_2x1.json"},
    /* MSCCL++'s multi-node packet allgather (rppkt) */
    {2, "allgather", "tests/multinode/programs/allgather_pkt_2x2.json"},
};

START_TEST(t_plans_staged)
{
    const plan_case_t *pc = &plan_cases[_i];
    ck_assert_int_eq(mp_run(2 * pc->per_node, plan_body, (void *)pc, 240, NULL), 0);
}
END_TEST

/* ---- the context's lock: a call that waits for it is bounded and names the holder ------- */

typedef struct {
    tp_ctx_t *ctx;
    _Atomic int in;
} holder_t;

static void *hold_main(void *arg)
{
    holder_t *h = arg;
    (void)prctl(PR_SET_NAME, "lock-holder", 0, 0, 0); /* the name the error must give */
    atomic_store(&h->in, 1);
    (void)tp_ucx_hold_lock(h->ctx, "a test's wait inside its call", 3000);
    return NULL;
}

/*
 * Rank 0's put waits for the transport's lock while another thread holds it for 3 s (as a
 * flush, or a staging copy that waits for a kernel, does): with MSCCLPP_TIMEOUT=1 it fails
 * within about a second, naming the holder and what it does there, instead of sitting in a
 * futex wait (the put of 976 bytes that did so for 30 s on one H200).
 */
static int lock_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mscclpp_comm_t *comm = NULL;
    port_link_t link;
    int f = stage_link_open(rank, n, id, "lock", &comm, &link);
    if (f) return f;
    const tp_ops_t *ops = link.ops;
    uint8_t *buf = NULL;
    uint64_t *counter = NULL;
    MP_CHECK(rank, mscclpp_malloc(4096, (void **)&buf));
    MP_CHECK(rank, mscclpp_malloc(64, (void **)&counter));
    tp_mem_t *mbuf = NULL, *mcnt = NULL;
    MP_CHECK(rank, ops->mem_reg(link.ctx, buf, 4096, &mbuf));
    MP_CHECK(rank, ops->mem_reg(link.ctx, counter, 64, &mcnt));
    MP_CHECK(rank, mn_link_exchange(comm, &link, 11, mbuf, buf, 4096, mcnt, counter, 64));
    if (rank == 0) {
        holder_t h = {link.ctx, 0};
        pthread_t t;
        if (pthread_create(&t, NULL, hold_main, &h) != 0) return MP_FAIL(rank, "pthread_create");
        while (!atomic_load(&h.in)) usleep(1000);
        usleep(100000); /* it holds the lock now */
        setenv("MSCCLPP_TIMEOUT", "1", 1);
        double t0 = mp_now_s();
        mscclpp_result_t r = ops->put(link.ep, link.theirs.buf[0], 0, mbuf, 0, 976);
        double took = mp_now_s() - t0;
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
        unsetenv("MSCCLPP_TIMEOUT");
        pthread_join(t, NULL);
        if (r != MSCCLPP_ERR_TIMEOUT || took > 2.5 || !strstr(msg, "put to rank 1") ||
            !strstr(msg, "transport's lock") || !strstr(msg, "lock-holder") ||
            !strstr(msg, "a test's wait inside its call"))
            return MP_FAIL(rank, "want a put timing out after about 1 s, naming the lock's "
                           "holder and what it does; got %s after %.1f s: %s",
                           mscclpp_result_string(r), took, msg);
        printf("# rank 0: %s\n", msg);
        fflush(stdout);
        MP_CHECK(rank, ops->progress(link.ctx)); /* the lock is free again */
    }
    return stage_link_close(rank, comm, &link, mbuf, mcnt, buf, counter);
}

START_TEST(t_lock_wait_bounded)
{
    ck_assert_int_eq(mp_run(2, lock_body, NULL, 60, NULL), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("staging");
    TCase *tc = tcase_create("staging");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, t_copy_words);
    tcase_add_test(tc, t_copy_words_no_tear);
    tcase_add_test(tc, t_cpu_readable);
    if (tp_built(TP_UCX)) {
        tcase_add_loop_test(tc, t_decision, 0, 4);
        tcase_add_loop_test(tc, t_staged_put_signal_order, 0, 2);
        tcase_add_test(tc, t_late_signal_order);
        tcase_add_loop_test(tc, t_plans_staged, 0,
                            (int)(sizeof plan_cases / sizeof plan_cases[0]));
        tcase_add_test(tc, t_made_staged);
        tcase_add_test(tc, t_lock_wait_bounded);
    }
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
