/*
 * Under mpiexec: an MPI bootstrap, a communicator, and memory channels between every pair of
 * ranks; each rank puts a distinct pattern into every peer, signals, waits, checks every byte;
 * then one default-plan allreduce through the executor, checked too.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mscclpp/mscclpp.h"
#include "mscclpp/mscclpp_mpi.h"

#define SLOT 12345

static int rank_g;

#define TRY(call)                                                                        \
    do {                                                                                 \
        mscclpp_result_t r_ = (call);                                                    \
        if (r_ != MSCCLPP_OK) {                                                          \
            fprintf(stderr, "rank %d: %s:%d: %s -> %s: %s\n", rank_g, __FILE__, __LINE__, \
                    #call, mscclpp_result_string(r_), mscclpp_last_error());             \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                \
        }                                                                                \
    } while (0)

static uint8_t pattern(int from, int to, size_t i) { return (uint8_t)(from * 29 + to * 3 + i * 7); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    rank_g = rank;
    if (n > 64) {
        MPI_Finalize();
        return 77;
    }
    mscclpp_bootstrap_t *boot = NULL;
    TRY(mscclpp_bootstrap_create_mpi(MPI_COMM_WORLD, &boot));
    mscclpp_comm_t *comm = NULL;
    TRY(mscclpp_comm_create(boot, &comm));

    size_t bytes = (size_t)SLOT * n;
    uint8_t *send = NULL, *recv = NULL;
    TRY(mscclpp_malloc(bytes, (void **)&send));
    TRY(mscclpp_malloc(bytes, (void **)&recv));
    memset(recv, 0, bytes);
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < SLOT; i++) send[(size_t)p * SLOT + i] = pattern(rank, p, i);
    mscclpp_regmem_t *mine = NULL, *theirs[64] = {0};
    mscclpp_semaphore_t *sem[64] = {0};
    mscclpp_memory_channel_t *ch[64] = {0};
    TRY(mscclpp_register_memory(comm, recv, bytes, MSCCLPP_TRANSPORT_IPC, &mine));
    for (int p = 0; p < n; p++)
        if (p != rank) TRY(mscclpp_regmem_send(comm, mine, p, 7));
    for (int p = 0; p < n; p++) {
        if (p == rank) continue;
        TRY(mscclpp_regmem_recv(comm, p, 7, &theirs[p]));
        TRY(mscclpp_semaphore_create(comm, p, 8, &sem[p]));
        TRY(mscclpp_memory_channel_create(sem[p], theirs[p], send, &ch[p]));
    }
    for (int p = 0; p < n; p++) {
        if (p == rank) continue;
        TRY(mscclpp_memory_channel_put(ch[p], (size_t)rank * SLOT, (size_t)p * SLOT, SLOT));
        TRY(mscclpp_memory_channel_signal(ch[p]));
    }
    for (int p = 0; p < n; p++)
        if (p != rank) TRY(mscclpp_memory_channel_wait(ch[p]));
    long wrong = 0;
    for (int p = 0; p < n; p++) {
        if (p == rank) continue;
        for (size_t i = 0; i < SLOT; i++)
            if (recv[(size_t)p * SLOT + i] != pattern(p, rank, i)) wrong++;
    }

    /* one allreduce with the default plans (MSCCLPP_PLAN_DIR from make check) */
    mscclpp_executor_t *ex = NULL;
    TRY(mscclpp_executor_create(comm, &ex));
    size_t count = 1000;
    float *a = NULL, *b = NULL;
    TRY(mscclpp_malloc(count * sizeof(float), (void **)&a));
    TRY(mscclpp_malloc(count * sizeof(float), (void **)&b));
    for (size_t i = 0; i < count; i++) a[i] = (float)(rank + (int)(i % 7));
    mscclpp_result_t r = mscclpp_allreduce(ex, a, b, count, MSCCLPP_FLOAT32, MSCCLPP_SUM, NULL);
    if (r == MSCCLPP_ERR_UNSUPPORTED) {
        if (rank == 0) fprintf(stderr, "no default plan for %d ranks: %s\n", n, mscclpp_last_error());
    } else {
        TRY(r);
        for (size_t i = 0; i < count; i++) {
            float want = (float)(n * (n - 1) / 2 + n * (int)(i % 7));
            if (b[i] != want) wrong++;
        }
    }
    long total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%d ranks: %ld wrong bytes/elements\n", n, total);

    mscclpp_executor_destroy(ex);
    for (int p = 0; p < n; p++) {
        mscclpp_memory_channel_destroy(ch[p]);
        mscclpp_semaphore_destroy(sem[p]);
        mscclpp_regmem_destroy(theirs[p]);
    }
    mscclpp_regmem_destroy(mine);
    mscclpp_free(a);
    mscclpp_free(b);
    mscclpp_free(send);
    mscclpp_free(recv);
    TRY(mscclpp_bootstrap_barrier(boot));
    mscclpp_comm_destroy(comm);
    mscclpp_bootstrap_destroy(boot);
    MPI_Finalize();
    return total ? 1 : 0;
}
