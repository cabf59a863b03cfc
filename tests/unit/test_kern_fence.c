/*
 * The launch fence's records (kern_args.h, "Launch fence"), driven function by function on the
 * host build of the interpreter: two ranks joined by one memory channel, each with its
 * 128-byte counter slot, its launch state and its signature. Rank 1 changed its call and
 * fences; rank 0 repeats its previous call, runs its ops and finds rank 1's record as one of
 * its waits polls.
 *
 * Seen on an H200 (CUDA, 2 ranks under MPS, test_exec_agree's one-sided cases): the fencing
 * rank passed its fence and ran a call its peer had refused (it returned OK, or timed out in
 * its ops). Every lane of each waiting warp of the peer polls at the same count, so several
 * threads found the record at once and each answered it (clear the record word, signature,
 * record word); the fence read one answer, then the next one's clear, and took the change for
 * "the peer moved on past its fence, so it agreed". Both halves are here: one answer per
 * launch (t_one_answer), and a record written again under the reader is not agreement
 * (t_rewritten_answer); each failed before its fix.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "kernels/common/kern_interp.h"

#define FLAG 2u /* the launch after one agreeing call */

typedef struct {
    kern_plan_t h;
    uint32_t fence_ids[1]; /* one fence channel: memory channel 0 */
} mini_plan_t;

typedef struct {
    _Alignas(128) uint64_t slot[16]; /* my counter slot: the peer writes its records here */
    uint64_t expected;
    uint64_t last_sig[KERN_EXEC_WORDS];
    kern_chan_t chan;
    mini_plan_t plan;
    kern_state_t st;
    kern_blk_t b;
} rank_t;

static rank_t ranks[2];

/* Rank r's launch: flag FLAG, its own signature (rank 1 changed the size), not failed. */
static void rank_init(int r)
{
    rank_t *k = &ranks[r];
    memset(k, 0, sizeof *k);
    k->chan.inbound = k->slot;
    k->chan.remote = ranks[1 - r].slot;
    k->chan.expected = &k->expected;
    k->chan.peer = 1 - r;
    k->plan.h.magic = KERN_PLAN_MAGIC;
    k->plan.h.bytes = sizeof k->plan;
    k->plan.h.rank = r;
    k->plan.h.n_fence = 1;
    k->plan.h.off_fence = (uint32_t)offsetof(mini_plan_t, fence_ids);
    k->plan.h.off_ports = (uint32_t)sizeof k->plan; /* none */
    k->st.magic = KERN_STATE_MAGIC;
    k->b.st = &k->st;
    k->b.p = &k->plan.h;
    k->b.chans = &k->chan;
    k->b.flag = FLAG;
    k->b.spin = 8;
    k->b.a.rank = r;
    k->b.a.timeout_ns = 2000000000ull;
    k->b.a.last_sig = k->last_sig;
    k->b.a.sig[0] = 1 | (1ull << 40); /* allreduce, context 1 */
    k->b.a.sig[1] = k->b.a.sig[2] = r ? 4096 : 1024;
    k->b.a.sig[3] = 0x1234;
}

/* A thread of rank r's launch, at op `op` (-1: the fence) */
static kern_ctx_t ctx_of(int r, int tid, int op, int fenced)
{
    kern_ctx_t c;
    memset(&c, 0, sizeof c);
    c.b = &ranks[r].b;
    c.tid = tid;
    c.nth = 2;
    c.op = op;
    c.fenced = fenced;
    return c;
}

static void check_mismatch(int r, uint64_t rec)
{
    const kern_error_t *e = &ranks[r].st.err;
    ck_assert_msg(e->code == KERN_ERR_INVALID_ARG && e->what == KERN_WAIT_MISMATCH,
                  "rank %d: error %d, what %u: the disagreement was not found", r, e->code,
                  e->what);
    ck_assert_int_eq(e->peer, 1 - r);
    ck_assert_uint_eq(e->seen, rec);
    ck_assert_uint_eq(e->peer_sig[1], ranks[1 - r].b.a.sig[1]);
}

/*
 * Two threads of rank 0 find rank 1's fence record in the same poll (on a GPU: lanes of one
 * warp, or warps that poll at the same count): both fail the launch, and its answer is written
 * once. Before the fix each wrote it (t_rewritten_answer: what the fence then did).
 */
START_TEST(t_one_answer)
{
    rank_init(0);
    rank_init(1);
    kern_ctx_t f = ctx_of(1, 0, -1, 1);
    kern_rec_write(&f, 0, KERN_REC_FENCE); /* rank 1's fence record, in rank 0's slot */
    kern_ctx_t t0 = ctx_of(0, 0, 1, 0), t1 = ctx_of(0, 1, 1, 0);
    /* both passed kern_spin_check's look at the error record before either failed */
    ck_assert_int_eq(kern_fence_poll(&t0), 1);
    ck_assert_int_eq(kern_fence_poll(&t1), 1);
    ck_assert_int_eq(t0.failed && t1.failed && t0.answer && t1.answer, 1);
    check_mismatch(0, KERN_REC(KERN_REC_FENCE, FLAG));
    ck_assert_int_eq(ranks[0].st.err.op, 1); /* begun without the fence */
    /* the blocks end: the first answers */
    uint64_t *rec = &ranks[1].slot[KERN_REC_WORD];
    kern_fence_answer(&t0);
    ck_assert_uint_eq(*rec, KERN_REC(KERN_REC_ANSWER, FLAG));
    *rec = 0; /* what a second writer's first store would be seen as */
    kern_fence_answer(&t1);
    ck_assert_msg(*rec == 0, "a second thread wrote the launch's answer again (record word %#llx)",
                  (unsigned long long)*rec);
    /* rank 1's fence fails on the answer at once */
    *rec = KERN_REC(KERN_REC_ANSWER, FLAG);
    uint64_t t = base_now_ns();
    kern_fence_wait(&f, 0);
    ck_assert_msg(base_now_ns() - t < 1000000000ull, "the fence waited %.2f s for the answer",
                  (double)(base_now_ns() - t) / 1e9);
    check_mismatch(1, KERN_REC(KERN_REC_ANSWER, FLAG));
    /* the next launch of the context may answer again (one answer per launch) */
    ranks[0].b.flag = ranks[1].b.flag = FLAG + 1;
    memset(&ranks[0].st.err, 0, sizeof ranks[0].st.err);
    f = ctx_of(1, 0, -1, 1);
    kern_rec_write(&f, 0, KERN_REC_FENCE);
    t0 = ctx_of(0, 0, 1, 0);
    ck_assert_int_eq(kern_fence_poll(&t0), 1);
    kern_fence_answer(&t0);
    ck_assert_uint_eq(*rec, KERN_REC(KERN_REC_ANSWER, FLAG + 1));
}
END_TEST

/* Rank 0's answering threads, as before the fix: each writes the whole record. */
static atomic_int writers_stop;
static atomic_long rewrites;

static void *answer_again(void *arg)
{
    (void)arg;
    kern_ctx_t w = ctx_of(0, 1, 1, 0);
    while (!atomic_load_explicit(&writers_stop, memory_order_relaxed)) {
        kern_rec_write(&w, 0, KERN_REC_ANSWER);
        atomic_fetch_add_explicit(&rewrites, 1, memory_order_relaxed);
        /* the record stands a while (most of the fence's reads find it whole) */
        for (volatile int i = 0; i < 100; i++) {
        }
    }
    return NULL;
}

/*
 * Rank 1's fence reads rank 0's answer while another thread of rank 0 writes the same answer
 * again (clear the record word, signature, record word): however the reads fall, the fence
 * must fail on the disagreement; it must never take the cleared word for agreement. Before the
 * fix, some tries passed the fence (kern_rec_read said "changed: the peer moved on").
 */
START_TEST(t_rewritten_answer)
{
    rank_init(0);
    rank_init(1);
    kern_ctx_t w = ctx_of(0, 0, 1, 0);
    kern_rec_write(&w, 0, KERN_REC_ANSWER);
    atomic_store(&writers_stop, 0);
    atomic_store(&rewrites, 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, answer_again, NULL), 0);
    long tries = 0, contested = 0, passed = 0, other = 0;
    uint64_t t0 = base_now_ns(), dt = 0;
    /* 0.5 s of tries, and 20000 of them with a rewrite while they read (both threads on a core
     * at once, however loaded the machine), at most 10 s */
    while ((dt < 500000000ull || contested < 20000) && dt < 10000000000ull) {
        long before = atomic_load_explicit(&rewrites, memory_order_relaxed);
        memset(&ranks[1].st.err, 0, sizeof ranks[1].st.err);
        ranks[1].last_sig[KERN_EXEC_FAILED] = 0;
        kern_ctx_t f = ctx_of(1, 0, -1, 1);
        kern_fence_wait(&f, 0);
        const kern_error_t *e = &ranks[1].st.err;
        if (e->code == 0) passed++;
        else if (e->code != KERN_ERR_INVALID_ARG || e->what != KERN_WAIT_MISMATCH) other++;
        tries++;
        contested += atomic_load_explicit(&rewrites, memory_order_relaxed) != before;
        dt = base_now_ns() - t0;
    }
    atomic_store(&writers_stop, 1);
    pthread_join(th, NULL);
    printf("# t_rewritten_answer: %ld tries (%ld with a rewrite during them), %ld rewrites: %ld "
           "passed the fence, %ld other errors\n",
           tries, contested, (long)atomic_load(&rewrites), passed, other);
    ck_assert_msg(passed == 0 && other == 0,
                  "%ld of %ld fences passed on an answer that was being written again, %ld failed "
                  "otherwise",
                  passed, tries, other);
}
END_TEST

/* A record of the peer's later launch still passes the fence (the peer agreed, ended its
 * launch and fenced its next one before we read), and a cleared word alone never does. */
START_TEST(t_later_record)
{
    rank_init(0);
    rank_init(1);
    ranks[1].b.a.timeout_ns = 50000000ull; /* 50 ms */
    kern_ctx_t f = ctx_of(1, 0, -1, 1);
    kern_fence_wait(&f, 0); /* nothing there: times out */
    ck_assert_int_eq(ranks[1].st.err.code, KERN_ERR_TIMEOUT);
    ck_assert_uint_eq(ranks[1].st.err.what, KERN_WAIT_FENCE);
    rank_init(1);
    ranks[0].b.flag = FLAG + 1;
    ranks[0].b.a.sig[1] = ranks[0].b.a.sig[2] = 8192; /* its next call */
    kern_ctx_t n = ctx_of(0, 0, -1, 1);
    kern_rec_write(&n, 0, KERN_REC_FENCE);
    f = ctx_of(1, 0, -1, 1);
    kern_fence_wait(&f, 0);
    ck_assert_int_eq(ranks[1].st.err.code, 0);
}
END_TEST

/*
 * The whole exchange under threads, as a GPU runs it: rank 0's launch has NTH threads that
 * all find rank 1's fence record in the same poll (they wait for it to appear, then poll at
 * once, as a warp's lanes do), each fails the launch and goes to answer; rank 1's fence waits
 * on its own thread. Every round, rank 1's fence must fail on the disagreement. (On this 2-core
 * machine it passed before the fix too: host threads rarely overlap as a GPU's lanes do; the
 * two tests above fail before it. Here for the election under ThreadSanitizer.)
 */
#define NTH 6
static pthread_barrier_t round_start;

static void *rank0_thread(void *arg)
{
    int tid = (int)(intptr_t)arg;
    kern_ctx_t t = ctx_of(0, tid, 1, 0);
    const uint64_t want = KERN_REC(KERN_REC_FENCE, ranks[0].b.flag);
    pthread_barrier_wait(&round_start);
    uint64_t t0 = base_now_ns();
    while (__atomic_load_n(&ranks[0].slot[KERN_REC_WORD], __ATOMIC_ACQUIRE) != want)
        if (base_now_ns() - t0 > 2000000000ull) return (void *)1;
    if (!kern_fence_poll(&t)) return (void *)1;
    if (t.answer) kern_fence_answer(&t);
    return NULL;
}

START_TEST(t_answer_threads)
{
    int rounds = 0, passed = 0, other = 0;
    uint64_t t0 = base_now_ns();
    rank_init(0);
    rank_init(1);
    while (rounds < 300 || (base_now_ns() - t0 < 500000000ull && rounds < 5000)) {
        /* a new launch of both ranks: the next flag, no error */
        uint32_t flag = FLAG + (uint32_t)rounds;
        for (int r = 0; r < 2; r++) {
            memset(&ranks[r].st.err, 0, sizeof ranks[r].st.err);
            ranks[r].last_sig[KERN_EXEC_FAILED] = 0;
            ranks[r].b.flag = flag;
        }
        pthread_t th[NTH];
        ck_assert_int_eq(pthread_barrier_init(&round_start, NULL, NTH + 1), 0);
        for (int i = 0; i < NTH; i++)
            ck_assert_int_eq(pthread_create(&th[i], NULL, rank0_thread, (void *)(intptr_t)i), 0);
        pthread_barrier_wait(&round_start);
        kern_ctx_t f = ctx_of(1, 0, -1, 1);
        kern_rec_write(&f, 0, KERN_REC_FENCE);
        kern_fence_wait(&f, 0);
        int stuck = 0;
        for (int i = 0; i < NTH; i++) {
            void *rv;
            pthread_join(th[i], &rv);
            stuck += rv != NULL;
        }
        pthread_barrier_destroy(&round_start);
        ck_assert_msg(!stuck, "round %d: %d threads of rank 0 did not find the record", rounds,
                      stuck);
        const kern_error_t *e = &ranks[1].st.err;
        if (e->code == 0) passed++;
        else if (e->code != KERN_ERR_INVALID_ARG || e->what != KERN_WAIT_MISMATCH) other++;
        rounds++;
    }
    printf("# t_answer_threads: %d rounds of %d threads: %d fences passed, %d other errors\n",
           rounds, NTH, passed, other);
    ck_assert_msg(passed == 0 && other == 0,
                  "%d of %d fences passed against a peer that refused the call, %d failed "
                  "otherwise",
                  passed, rounds, other);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kern_fence");
    TCase *tc = tcase_create("fence");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, t_one_answer);
    tcase_add_test(tc, t_rewritten_answer);
    tcase_add_test(tc, t_later_record);
    tcase_add_test(tc, t_answer_threads);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
