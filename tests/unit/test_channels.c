/*
 * Communicator, registered memory, semaphores and memory channels on the host backend, with
 * ranks as forked processes: every byte moved is checked.
 */
#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"

#define SLOT 4099 /* bytes each rank sends each peer: odd on purpose */

static uint8_t pattern(int from, int to, size_t i) { return (uint8_t)(from * 31 + to * 7 + i * 13); }

/* Every rank puts SLOT bytes into every peer's receive buffer at slot [rank], signals, waits
 * for all peers, checks every byte; then gets each peer's send buffer back and checks it. */
static int all_pairs_body(int rank, int nranks, const mscclpp_unique_id_t *id, void *arg)
{
    int relaxed = arg != NULL;
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, nranks, &comm));
    int r = -1, n = -1;
    MP_CHECK(rank, mscclpp_comm_rank(comm, &r));
    MP_CHECK(rank, mscclpp_comm_size(comm, &n));
    if (r != rank || n != nranks) return MP_FAIL(rank, "rank/size %d/%d", r, n);

    uint8_t *send = NULL, *recv = NULL;
    size_t bytes = (size_t)SLOT * nranks;
    MP_CHECK(rank, mscclpp_malloc(bytes, (void **)&send));
    MP_CHECK(rank, mscclpp_malloc(bytes, (void **)&recv));
    memset(recv, 0xee, bytes);
    for (int p = 0; p < nranks; p++)
        for (size_t i = 0; i < SLOT; i++) send[(size_t)p * SLOT + i] = pattern(rank, p, i);

    mscclpp_regmem_t *mine_recv = NULL, *mine_send = NULL;
    MP_CHECK(rank, mscclpp_register_memory(comm, recv, bytes, MSCCLPP_TRANSPORT_IPC, &mine_recv));
    MP_CHECK(rank, mscclpp_register_memory(comm, send, bytes, MSCCLPP_TRANSPORT_IPC, &mine_send));
    mscclpp_regmem_t *peer_recv[64] = {0}, *peer_send[64] = {0};
    mscclpp_semaphore_t *sem[64] = {0};
    mscclpp_memory_channel_t *put_ch[64] = {0}, *get_ch[64] = {0};
    for (int p = 0; p < nranks; p++) {
        if (p == rank) continue;
        MP_CHECK(rank, mscclpp_regmem_send(comm, mine_recv, p, 1));
        MP_CHECK(rank, mscclpp_regmem_send(comm, mine_send, p, 2));
    }
    for (int p = 0; p < nranks; p++) {
        if (p == rank) continue;
        MP_CHECK(rank, mscclpp_regmem_recv(comm, p, 1, &peer_recv[p]));
        MP_CHECK(rank, mscclpp_regmem_recv(comm, p, 2, &peer_send[p]));
        if (mscclpp_regmem_rank(peer_recv[p]) != p || mscclpp_regmem_size(peer_recv[p]) != bytes)
            return MP_FAIL(rank, "peer %d registration: rank %d size %zu", p,
                           mscclpp_regmem_rank(peer_recv[p]), mscclpp_regmem_size(peer_recv[p]));
        MP_CHECK(rank, mscclpp_semaphore_create(comm, p, 3, &sem[p]));
        MP_CHECK(rank, mscclpp_memory_channel_create(sem[p], peer_recv[p], send, &put_ch[p]));
        MP_CHECK(rank, mscclpp_memory_channel_create(sem[p], peer_send[p], recv, &get_ch[p]));
    }
    /* round 1: put my slot for p into p's recv[rank], then signal */
    for (int p = 0; p < nranks; p++) {
        if (p == rank) continue;
        MP_CHECK(rank, mscclpp_memory_channel_put(put_ch[p], (size_t)rank * SLOT,
                                                  (size_t)p * SLOT, SLOT));
        MP_CHECK(rank, mscclpp_memory_channel_flush(put_ch[p]));
        MP_CHECK(rank, relaxed ? mscclpp_memory_channel_relaxed_signal(put_ch[p])
                               : mscclpp_memory_channel_signal(put_ch[p]));
    }
    for (int p = 0; p < nranks; p++) {
        if (p == rank) continue;
        if (relaxed) {
            MP_CHECK(rank, mscclpp_memory_channel_relaxed_wait(put_ch[p]));
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
        } else {
            MP_CHECK(rank, mscclpp_memory_channel_wait(put_ch[p]));
        }
    }
    for (int p = 0; p < nranks; p++) {
        if (p == rank) continue;
        for (size_t i = 0; i < SLOT; i++)
            if (recv[(size_t)p * SLOT + i] != pattern(p, rank, i))
                return MP_FAIL(rank, "put from %d: byte %zu is %u, want %u", p, i,
                               recv[(size_t)p * SLOT + i], pattern(p, rank, i));
    }
    /* round 2: get p's send slot for me into my recv[p] (after everyone finished checking) */
    mscclpp_bootstrap_t *boot = NULL;
    MP_CHECK(rank, mscclpp_comm_bootstrap(comm, &boot));
    MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
    memset(recv, 0, bytes);
    for (int p = 0; p < nranks; p++) {
        if (p == rank) continue;
        MP_CHECK(rank, mscclpp_memory_channel_get(get_ch[p], (size_t)rank * SLOT,
                                                  (size_t)p * SLOT, SLOT));
        for (size_t i = 0; i < SLOT; i++)
            if (recv[(size_t)p * SLOT + i] != pattern(p, rank, i))
                return MP_FAIL(rank, "get from %d: byte %zu wrong", p, i);
    }
    /* out-of-range puts are refused, not performed */
    for (int p = 0; p < nranks; p++) {
        if (p == rank) continue;
        if (mscclpp_memory_channel_put(put_ch[p], bytes - 1, 0, 2) != MSCCLPP_ERR_INVALID_ARG)
            return MP_FAIL(rank, "out-of-range put accepted");
        break;
    }
    MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
    for (int p = 0; p < nranks; p++) {
        mscclpp_memory_channel_destroy(put_ch[p]);
        mscclpp_memory_channel_destroy(get_ch[p]);
        mscclpp_semaphore_destroy(sem[p]);
        mscclpp_regmem_destroy(peer_recv[p]);
        mscclpp_regmem_destroy(peer_send[p]);
    }
    mscclpp_regmem_destroy(mine_recv);
    mscclpp_regmem_destroy(mine_send);
    MP_CHECK(rank, mscclpp_free(send));
    MP_CHECK(rank, mscclpp_free(recv));
    MP_CHECK(rank, mscclpp_comm_destroy(comm));
    return 0;
}

static void run_all_pairs(int nranks, void *arg)
{
    unsigned failed = 0;
    int f = mp_run(nranks, all_pairs_body, arg, 120, &failed);
    ck_assert_msg(f == 0, "%d of %d ranks failed (mask 0x%x)", f, nranks, failed);
}

START_TEST(t_all_pairs_2) { run_all_pairs(2, NULL); }
END_TEST
START_TEST(t_all_pairs_4) { run_all_pairs(4, NULL); }
END_TEST
START_TEST(t_all_pairs_8) { run_all_pairs(8, NULL); }
END_TEST
START_TEST(t_all_pairs_relaxed_4) { run_all_pairs(4, (void *)1); }
END_TEST

/* Many signals in a row: counters carry over and waits consume one each (ping-pong). */
static int pingpong_body(int rank, int nranks, const mscclpp_unique_id_t *id, void *arg)
{
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, nranks, &comm));
    int peer = 1 - rank;
    uint64_t *buf = NULL;
    MP_CHECK(rank, mscclpp_malloc(4096, (void **)&buf));
    buf[0] = 0;
    mscclpp_regmem_t *mine = NULL, *theirs = NULL;
    MP_CHECK(rank, mscclpp_register_memory(comm, buf, 4096, MSCCLPP_TRANSPORT_IPC, &mine));
    MP_CHECK(rank, mscclpp_regmem_send(comm, mine, peer, 0));
    MP_CHECK(rank, mscclpp_regmem_recv(comm, peer, 0, &theirs));
    mscclpp_semaphore_t *sem = NULL;
    MP_CHECK(rank, mscclpp_semaphore_create(comm, peer, 0, &sem));
    mscclpp_memory_channel_t *ch = NULL;
    MP_CHECK(rank, mscclpp_memory_channel_create(sem, theirs, buf, &ch));
    for (uint64_t i = 1; i <= 2000; i++) {
        if ((i & 1) == (uint64_t)rank) {
            buf[1] = i;
            MP_CHECK(rank, mscclpp_memory_channel_put(ch, 0, 8, 8));
            MP_CHECK(rank, mscclpp_memory_channel_signal(ch));
        } else {
            MP_CHECK(rank, mscclpp_memory_channel_wait(ch));
            if (buf[0] != i) return MP_FAIL(rank, "round %llu saw %llu", (unsigned long long)i,
                                            (unsigned long long)buf[0]);
        }
    }
    mscclpp_memory_channel_destroy(ch);
    mscclpp_semaphore_destroy(sem);
    mscclpp_regmem_destroy(theirs);
    mscclpp_regmem_destroy(mine);
    mscclpp_free(buf);
    mscclpp_comm_destroy(comm);
    return 0;
}

START_TEST(t_pingpong)
{
    ck_assert_int_eq(mp_run(2, pingpong_body, NULL, 120, NULL), 0);
}
END_TEST

/* Rank 1 dies before signalling: rank 0's wait must return a timeout, not hang. */
static int dead_peer_body(int rank, int nranks, const mscclpp_unique_id_t *id, void *arg)
{
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, nranks, &comm));
    int peer = 1 - rank;
    void *buf = NULL;
    MP_CHECK(rank, mscclpp_malloc(4096, &buf));
    mscclpp_regmem_t *mine = NULL, *theirs = NULL;
    MP_CHECK(rank, mscclpp_register_memory(comm, buf, 4096, MSCCLPP_TRANSPORT_IPC, &mine));
    MP_CHECK(rank, mscclpp_regmem_send(comm, mine, peer, 0));
    MP_CHECK(rank, mscclpp_regmem_recv(comm, peer, 0, &theirs));
    mscclpp_semaphore_t *sem = NULL;
    MP_CHECK(rank, mscclpp_semaphore_create(comm, peer, 0, &sem));
    mscclpp_memory_channel_t *ch = NULL;
    MP_CHECK(rank, mscclpp_memory_channel_create(sem, theirs, buf, &ch));
    mscclpp_bootstrap_t *boot = NULL;
    MP_CHECK(rank, mscclpp_comm_bootstrap(comm, &boot));
    MP_CHECK(rank, mscclpp_bootstrap_barrier(boot)); /* both sides have mapped everything */
    if (rank == 1) raise(SIGKILL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    mscclpp_result_t r = mscclpp_memory_channel_wait(ch);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (r != MSCCLPP_ERR_TIMEOUT) return MP_FAIL(rank, "wait returned %s", mscclpp_result_string(r));
    if (!strstr(mscclpp_last_error(), "rank 0") || !strstr(mscclpp_last_error(), "rank 1"))
        return MP_FAIL(rank, "timeout message does not name the ranks: %s", mscclpp_last_error());
    if (s > 10) return MP_FAIL(rank, "wait took %.1f s", s);
    return 0;
}

START_TEST(t_dead_peer_times_out)
{
    setenv("MSCCLPP_TIMEOUT", "2", 1);
    unsigned failed = 0;
    mp_run(2, dead_peer_body, NULL, 60, &failed);
    ck_assert_msg((failed & 1u) == 0, "rank 0 did not report the timeout properly");
    ck_assert_msg((failed & 2u) != 0, "rank 1 should have died");
}
END_TEST

/* Registrations survive a serialize/deserialize round trip; damaged encodings are refused. */
static int wire_body(int rank, int nranks, const mscclpp_unique_id_t *id, void *arg)
{
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, nranks, &comm));
    uint8_t *buf = NULL;
    MP_CHECK(rank, mscclpp_malloc(8192, (void **)&buf));
    mscclpp_regmem_t *m = NULL, *back = NULL;
    MP_CHECK(rank, mscclpp_register_memory(comm, buf + 100, 1000, MSCCLPP_TRANSPORT_IPC, &m));
    uint8_t wire[512];
    size_t len = 0;
    if (mscclpp_regmem_serialize(m, wire, 8, &len) != MSCCLPP_ERR_INVALID_ARG || len <= 8)
        return MP_FAIL(rank, "short buffer not reported (len %zu)", len);
    MP_CHECK(rank, mscclpp_regmem_serialize(m, wire, sizeof wire, &len));
    MP_CHECK(rank, mscclpp_regmem_deserialize(comm, wire, len, &back));
    if (mscclpp_regmem_ptr(back) != buf + 100 || mscclpp_regmem_size(back) != 1000)
        return MP_FAIL(rank, "round trip gave %p/%zu", mscclpp_regmem_ptr(back),
                       mscclpp_regmem_size(back));
    mscclpp_regmem_destroy(back);
    back = NULL;
    if (mscclpp_regmem_deserialize(comm, wire, len - 1, &back) == MSCCLPP_OK)
        return MP_FAIL(rank, "truncated encoding accepted");
    uint8_t bad[512];
    memcpy(bad, wire, len);
    bad[0] ^= 0xff;
    if (mscclpp_regmem_deserialize(comm, bad, len, &back) != MSCCLPP_ERR_REMOTE)
        return MP_FAIL(rank, "bad magic accepted");
    memcpy(bad, wire, len);
    bad[4] = 99;
    if (mscclpp_regmem_deserialize(comm, bad, len, &back) != MSCCLPP_ERR_REMOTE ||
        !strstr(mscclpp_last_error(), "version"))
        return MP_FAIL(rank, "bad version not named: %s", mscclpp_last_error());
    /* registering memory that is not from mscclpp_malloc, or past its end, is an error */
    static char not_ours[64];
    if (mscclpp_register_memory(comm, not_ours, 64, 0, &back) != MSCCLPP_ERR_INVALID_ARG)
        return MP_FAIL(rank, "foreign memory registered");
    if (mscclpp_register_memory(comm, buf, 1u << 30, 0, &back) != MSCCLPP_ERR_INVALID_ARG)
        return MP_FAIL(rank, "oversized registration accepted");
    mscclpp_regmem_destroy(m);
    mscclpp_free(buf);
    mscclpp_comm_destroy(comm);
    return 0;
}

START_TEST(t_regmem_wire) { ck_assert_int_eq(mp_run(1, wire_body, NULL, 60, NULL), 0); }
END_TEST

START_TEST(t_bad_arguments)
{
    mscclpp_comm_t *comm = NULL;
    mscclpp_regmem_t *m = NULL;
    mscclpp_semaphore_t *s = NULL;
    mscclpp_memory_channel_t *ch = NULL;
    mscclpp_unique_id_t id;
    int x;
    ck_assert_int_eq(mscclpp_comm_create(NULL, &comm), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_comm_init_rank(NULL, 0, 1, &comm), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_comm_init_rank(&id, 2, 2, &comm), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_comm_init_rank(&id, 0, 0, &comm), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_comm_init_rank(&id, 0, 1, NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_comm_rank(NULL, &x), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_comm_size(NULL, &x), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_comm_local_size(NULL, &x), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_comm_bootstrap(NULL, NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_comm_destroy(NULL), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_register_memory(NULL, &x, 4, 0, &m), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_regmem_send(NULL, m, 0, 0), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_regmem_recv(NULL, 0, 0, &m), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_regmem_serialize(NULL, NULL, 0, NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_regmem_deserialize(NULL, &x, 4, &m), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_ptr_null(mscclpp_regmem_ptr(NULL));
    ck_assert_uint_eq(mscclpp_regmem_size(NULL), 0);
    ck_assert_int_eq(mscclpp_regmem_rank(NULL), -1);
    ck_assert_int_eq(mscclpp_regmem_destroy(NULL), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_semaphore_create(NULL, 0, 0, &s), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_semaphore_destroy(NULL), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_memory_channel_create(NULL, NULL, NULL, &ch), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_memory_channel_put(NULL, 0, 0, 1), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_memory_channel_get(NULL, 0, 0, 1), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_memory_channel_signal(NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_memory_channel_relaxed_signal(NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_memory_channel_wait(NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_memory_channel_relaxed_wait(NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_memory_channel_flush(NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_memory_channel_destroy(NULL), MSCCLPP_OK);
    ck_assert_str_eq(mscclpp_result_string(MSCCLPP_ERR_TIMEOUT), "MSCCLPP_ERR_TIMEOUT");
    ck_assert_ptr_nonnull(mscclpp_last_error());
}
END_TEST

/* A rank cannot pair a semaphore with itself. */
static int self_sem_body(int rank, int nranks, const mscclpp_unique_id_t *id, void *arg)
{
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, nranks, &comm));
    mscclpp_semaphore_t *s = NULL;
    if (mscclpp_semaphore_create(comm, rank, 0, &s) != MSCCLPP_ERR_INVALID_ARG)
        return MP_FAIL(rank, "self semaphore accepted");
    if (mscclpp_semaphore_create(comm, nranks, 0, &s) != MSCCLPP_ERR_INVALID_ARG)
        return MP_FAIL(rank, "out-of-range peer accepted");
    mscclpp_comm_destroy(comm);
    return 0;
}

START_TEST(t_self_semaphore) { ck_assert_int_eq(mp_run(2, self_sem_body, NULL, 60, NULL), 0); }
END_TEST

int main(void)
{
    Suite *s = suite_create("channels");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, t_bad_arguments);
    tcase_add_test(tc, t_regmem_wire);
    tcase_add_test(tc, t_self_semaphore);
    tcase_add_test(tc, t_all_pairs_2);
    tcase_add_test(tc, t_all_pairs_4);
    tcase_add_test(tc, t_all_pairs_8);
    tcase_add_test(tc, t_all_pairs_relaxed_4);
    tcase_add_test(tc, t_pingpong);
    tcase_add_test(tc, t_dead_peer_times_out);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
