/*
 * A stand-in for the real libnccl.so.2 in the fallback test: it exports the entry points
 * libmscclpp_nccl resolves, appends one line per call to $FAKE_NCCL_LOG, and writes 7000 + rank
 * into every 8-byte element of a result so the test can tell who computed it.
 */
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ncclComm {
    int rank, nranks;
};

static void note(const char *call, size_t count, int dt, int op)
{
    const char *path = getenv("FAKE_NCCL_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f) return;
    fprintf(f, "%d %s count=%zu dtype=%d op=%d\n", (int)getpid(), call, count, dt, op);
    fclose(f);
}

static void mark(void *recv, size_t count, ncclDataType_t dt, ncclComm_t comm)
{
    if (dt != ncclInt64 && dt != ncclUint64) return;
    for (size_t i = 0; i < count; i++) ((int64_t *)recv)[i] = 7000 + comm->rank;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 'F', sizeof *id);
    note("ncclGetUniqueId", 0, -1, -1);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    if (id.internal[0] != 'F') return ncclInvalidArgument; /* rank 0's id must have arrived */
    *comm = calloc(1, sizeof **comm);
    (*comm)->rank = rank;
    (*comm)->nranks = nranks;
    note("ncclCommInitRank", (size_t)nranks, -1, rank);
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    note("ncclCommDestroy", 0, -1, -1);
    free(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    (void)comm;
    note("ncclCommFinalize", 0, -1, -1);
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *s, void *r, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t st)
{
    (void)s;
    (void)st;
    note("ncclAllReduce", count, dt, op);
    mark(r, count, dt, comm);
    return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *s, void *r, size_t count, ncclDataType_t dt,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t st)
{
    (void)s;
    (void)st;
    note("ncclReduceScatter", count, dt, op);
    mark(r, count, dt, comm);
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void)
{
    note("ncclGroupStart", 0, -1, -1);
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    note("ncclGroupEnd", 0, -1, -1);
    return ncclSuccess;
}
