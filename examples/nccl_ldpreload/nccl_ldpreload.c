/*
 * The DSL behind the NCCL API: a plain NCCL program (this file knows only nccl.h), linked with
 * NVIDIA's libnccl.so.2, run with libmscclpp_nccl.so preloaded and a plan compiled from
 * allpairs_allreduce.py in MSCCLPP_NCCL_PLAN_DIR. ncclAllReduce then runs that plan (see
 * run.sh, and docs/nccl.md):
 *
 *   LD_PRELOAD=libmscclpp_nccl.so MSCCLPP_NCCL_PLAN_DIR=plans ./nccl_ldpreload 2
 *
 * On the host backend the buffers are host memory and the stream is NULL; on a GPU they would
 * be cudaMalloc'd and the stream the caller's.
 */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define COUNT (1 << 16)
#define ITERS 3

static int rank_main(int rank, int n, ncclUniqueId id)
{
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) {
        fprintf(stderr, "rank %d: ncclCommInitRank: %s\n", rank, ncclGetLastError(NULL));
        return 1;
    }
    float *send = malloc(COUNT * sizeof *send), *recv = malloc(COUNT * sizeof *recv);
    int wrong = 0;
    for (int it = 0; it < ITERS && send && recv; it++) {
        for (int i = 0; i < COUNT; i++) send[i] = (float)(rank + i % 10 + it);
        if (ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, NULL) != ncclSuccess) {
            fprintf(stderr, "rank %d: ncclAllReduce: %s\n", rank, ncclGetLastError(comm));
            wrong++;
            break;
        }
        for (int i = 0; i < COUNT; i++) /* sum over ranks of rank + i%10 + it */
            if (recv[i] != (float)(n * (n - 1) / 2 + n * (i % 10 + it)) && wrong++ < 3)
                fprintf(stderr, "rank %d: element %d is %g\n", rank, i, recv[i]);
    }
    if (!wrong) printf("rank %d: %d allreduces of %d floats correct\n", rank, ITERS, COUNT);
    free(send);
    free(recv);
    ncclCommDestroy(comm);
    return wrong != 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2;
    if (n < 1 || n > 8) return 2;
    int fds[2];
    if (pipe(fds) != 0) return 2;
    for (int r = 0; r < n; r++) {
        if (fork() == 0) {
            ncclUniqueId id;
            if (r == 0) { /* rank 0 makes the id; the others read it from the pipe */
                if (ncclGetUniqueId(&id) != ncclSuccess) _exit(1);
                for (int p = 1; p < n; p++)
                    if (write(fds[1], &id, sizeof id) != (ssize_t)sizeof id) _exit(1);
            } else if (read(fds[0], &id, sizeof id) != (ssize_t)sizeof id) {
                _exit(1);
            }
            int rc = rank_main(r, n, id);
            fflush(stdout); /* _exit does not flush */
            _exit(rc);
        }
    }
    int failed = 0, st;
    while (wait(&st) > 0) failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    return failed;
}
