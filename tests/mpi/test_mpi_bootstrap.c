/*
 * Bootstrap under mpiexec: the MPI bootstrap, and the TCP bootstrap created from a unique id that
 * rank 0 broadcasts with MPI_Bcast. Every byte moved is checked. Exit 0 when every rank passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mscclpp/mscclpp_mpi.h"

static int rank, nranks, failures;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "[rank %d] %s:%d: %s: ", rank, __FILE__, __LINE__, #cond);             \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " (last error: %s)\n", mscclpp_last_error());                          \
            failures++;                                                                            \
            return;                                                                                \
        }                                                                                          \
    } while (0)
#define EXPECT_OK(expr) EXPECT((expr) == MSCCLPP_OK, "%s", #expr)

static unsigned char pat(int a, int b, int c, size_t i)
{
    return (unsigned char)(a * 131 + b * 37 + c * 11 + (int)(i * 7) + (int)(i >> 9));
}

static void check_allgather(mscclpp_bootstrap_t *b, size_t sz)
{
    unsigned char *buf = malloc(nranks * sz);
    EXPECT(buf != NULL, "malloc");
    memset(buf, 0xee, nranks * sz);
    for (size_t i = 0; i < sz; i++) buf[rank * sz + i] = pat(rank, (int)sz, 2, i);
    EXPECT_OK(mscclpp_bootstrap_allgather(b, buf, sz));
    for (int r = 0; r < nranks; r++)
        for (size_t i = 0; i < sz; i++)
            if (buf[r * sz + i] != pat(r, (int)sz, 2, i)) {
                free(buf);
                EXPECT(0, "allgather %zu B/rank: slot %d byte %zu wrong", sz, r, i);
            }
    free(buf);
}

static const struct {
    int tag;
    size_t len;
} msgs[] = {{0, 16}, {5, 100}, {5, 3}, {17, 1u << 20}, {3, 0}};
static const int recv_order[] = {3, 4, 1, 2, 0};

static void check_pairs(mscclpp_bootstrap_t *b)
{
    size_t nm = sizeof msgs / sizeof msgs[0];
    unsigned char *buf = malloc(1u << 20);
    EXPECT(buf != NULL, "malloc");
    for (int d = 1; d < nranks; d++) {
        int peer = (rank + d) % nranks;
        for (size_t k = 0; k < nm; k++) {
            for (size_t i = 0; i < msgs[k].len; i++) buf[i] = pat(rank, peer, (int)k, i);
            /* MPI: a send completes only once matched for large sizes; receive in between. */
            EXPECT_OK(mscclpp_bootstrap_send(b, buf, msgs[k].len, peer, msgs[k].tag));
        }
    }
    for (int d = 1; d < nranks; d++) {
        int peer = (rank + nranks - d) % nranks;
        for (size_t j = 0; j < nm; j++) {
            size_t k = (size_t)recv_order[j];
            memset(buf, 0xee, msgs[k].len);
            EXPECT_OK(mscclpp_bootstrap_recv(b, buf, msgs[k].len, peer, msgs[k].tag));
            for (size_t i = 0; i < msgs[k].len; i++)
                if (buf[i] != pat(peer, rank, (int)k, i)) {
                    free(buf);
                    EXPECT(0, "message %zu from rank %d: byte %zu wrong", k, peer, i);
                }
        }
    }
    free(buf);
}

/* Sends that block until matched (MPI rendezvous) need the peers to be receiving: pair up. */
static void check_pairs_ordered(mscclpp_bootstrap_t *b, int blocking_sends)
{
    if (!blocking_sends) {
        check_pairs(b);
        return;
    }
    size_t nm = sizeof msgs / sizeof msgs[0];
    unsigned char *buf = malloc(1u << 20);
    EXPECT(buf != NULL, "malloc");
    for (int a = 0; a < nranks; a++)
        for (int c = 0; c < nranks; c++) {
            if (a == c || (rank != a && rank != c)) continue;
            if (rank == a) {
                for (size_t k = 0; k < nm; k++) {
                    for (size_t i = 0; i < msgs[k].len; i++) buf[i] = pat(a, c, (int)k, i);
                    EXPECT_OK(mscclpp_bootstrap_send(b, buf, msgs[k].len, c, msgs[k].tag));
                }
            } else {
                /* The in-order receive of the same tags: MPI matches (peer, tag) in order. */
                for (size_t k = 0; k < nm; k++) {
                    memset(buf, 0xee, msgs[k].len);
                    EXPECT_OK(mscclpp_bootstrap_recv(b, buf, msgs[k].len, a, msgs[k].tag));
                    for (size_t i = 0; i < msgs[k].len; i++)
                        if (buf[i] != pat(a, c, (int)k, i)) {
                            free(buf);
                            EXPECT(0, "message %zu from rank %d: byte %zu wrong", k, a, i);
                        }
                }
            }
        }
    free(buf);
}

static void test_mpi_bootstrap(void)
{
    mscclpp_bootstrap_t *b = NULL;
    EXPECT(mscclpp_bootstrap_create_mpi(MPI_COMM_NULL, &b) == MSCCLPP_ERR_INVALID_ARG, "null comm");
    EXPECT(mscclpp_bootstrap_create_mpi(MPI_COMM_WORLD, NULL) == MSCCLPP_ERR_INVALID_ARG,
           "null out");
    EXPECT_OK(mscclpp_bootstrap_create_mpi(MPI_COMM_WORLD, &b));
    int r = -1, s = -1;
    EXPECT_OK(mscclpp_bootstrap_rank(b, &r));
    EXPECT_OK(mscclpp_bootstrap_size(b, &s));
    EXPECT(r == rank && s == nranks, "rank %d size %d", r, s);
    check_allgather(b, 1);
    check_allgather(b, 13);
    check_allgather(b, 70001);
    /* Small messages complete eagerly; out-of-order receives of those. */
    unsigned char x[4] = {1, 2, 3, 4}, y[4];
    int peer = (rank + 1) % nranks, from = (rank + nranks - 1) % nranks;
    for (int t = 0; t < 3; t++) {
        x[0] = (unsigned char)(rank + 10 * t);
        EXPECT_OK(mscclpp_bootstrap_send(b, x, sizeof x, peer, 40 + t));
    }
    for (int t = 2; t >= 0; t--) {
        EXPECT_OK(mscclpp_bootstrap_recv(b, y, sizeof y, from, 40 + t));
        EXPECT(y[0] == (unsigned char)(from + 10 * t) && y[3] == 4, "tag %d content", 40 + t);
    }
    check_pairs_ordered(b, 1);
    EXPECT_OK(mscclpp_bootstrap_barrier(b));
    EXPECT(mscclpp_bootstrap_send(b, x, 1, peer, -1) == MSCCLPP_ERR_INVALID_ARG, "negative tag");
    EXPECT(mscclpp_bootstrap_send(b, x, 1, rank, 1) == MSCCLPP_ERR_INVALID_ARG, "self");
    /* Size mismatch: rank 0 sends 4 bytes, rank 1 asks for 2; the stream goes on. */
    const unsigned char z[4] = {9, 8, 7, 6};
    if (rank == 0) {
        EXPECT_OK(mscclpp_bootstrap_send(b, x, 4, 1, 9));
        EXPECT_OK(mscclpp_bootstrap_send(b, z, 4, 1, 9));
    } else if (rank == 1) {
        EXPECT(mscclpp_bootstrap_recv(b, y, 2, 0, 9) == MSCCLPP_ERR_INVALID_ARG, "short recv");
        EXPECT(strstr(mscclpp_last_error(), "4 bytes, expected 2") != NULL, "message sizes");
        EXPECT_OK(mscclpp_bootstrap_recv(b, y, 4, 0, 9));
        EXPECT(memcmp(z, y, 4) == 0, "the next message is intact after a mismatch");
    }
    EXPECT_OK(mscclpp_bootstrap_barrier(b));
    /* A receive nobody sends to ends with a timeout (a probe: the bootstrap stays usable). */
    if (rank == 1) {
        setenv("MSCCLPP_TIMEOUT", "0.5", 1);
        double t0 = MPI_Wtime();
        mscclpp_result_t res = mscclpp_bootstrap_recv(b, y, 4, 0, 77);
        unsetenv("MSCCLPP_TIMEOUT");
        EXPECT(res == MSCCLPP_ERR_TIMEOUT, "unsent message gave %s", mscclpp_result_string(res));
        EXPECT(strstr(mscclpp_last_error(), "from rank 0") != NULL, "names the peer");
        EXPECT(MPI_Wtime() - t0 < 3, "took %.1f s", MPI_Wtime() - t0);
    }
    EXPECT_OK(mscclpp_bootstrap_barrier(b));
    EXPECT_OK(mscclpp_bootstrap_destroy(b));
}

static void test_tcp_over_mpi(void)
{
    mscclpp_unique_id_t id;
    memset(&id, 0, sizeof id);
    int ok = 1;
    if (rank == 0) ok = mscclpp_get_unique_id(&id) == MSCCLPP_OK;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    EXPECT(ok, "rank 0 could not create a unique id");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    mscclpp_bootstrap_t *b = NULL;
    EXPECT_OK(mscclpp_bootstrap_create(&id, rank, nranks, &b));
    check_allgather(b, 1);
    check_allgather(b, 4097);
    check_pairs(b); /* TCP sends never wait for the receiver */
    EXPECT_OK(mscclpp_bootstrap_barrier(b));
    EXPECT_OK(mscclpp_bootstrap_destroy(b));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks < 2) {
        if (rank == 0) printf("needs at least 2 ranks\n");
        MPI_Finalize();
        return 77;
    }
    test_mpi_bootstrap();
    test_tcp_over_mpi();
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_mpi_bootstrap: %d ranks, %d failures\n", nranks, total);
    MPI_Finalize();
    return total ? 1 : 0;
}
