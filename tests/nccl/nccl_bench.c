/*
 * ncclAllReduce through libmscclpp_nccl against mscclpp_allreduce called directly and MPI's
 * MPI_Allreduce, in the same processes (mpiexec -n N; docs/performance.md, "NCCL API").
 *
 *   mpiexec -n 2 tests/nccl/nccl_bench [-b 8] [-e 64M] [-n 200]
 *
 * Per size (float sums, doubling from -b to -e): the NCCL API on malloc'd buffers (staged),
 * on ncclMemAlloc'd buffers (zero-copy when the library does it), mscclpp_allreduce on
 * mscclpp_malloc'd buffers, and MPI_Allreduce on malloc'd buffers. Each is checked once, then
 * timed over the same number of back-to-back calls after a warm-up; the time is the slowest
 * rank's mean per call. Run it with LD_PRELOAD=<another libmscclpp_nccl.so> to time another
 * build of the library in the same way. Exit status non-zero on a wrong element or an error.
 */
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mscclpp/mscclpp.h>

static int g_rank;

#define DIE(...)                                                                                 \
    do {                                                                                         \
        fprintf(stderr, "rank %d: ", g_rank);                                                    \
        fprintf(stderr, __VA_ARGS__);                                                            \
        fprintf(stderr, "\n");                                                                   \
        MPI_Abort(MPI_COMM_WORLD, 1);                                                            \
    } while (0)
#define NC(call)                                                                                 \
    do {                                                                                         \
        ncclResult_t r_ = (call);                                                                \
        if (r_ != ncclSuccess) DIE("%s: %s", #call, ncclGetLastError(NULL));                    \
    } while (0)
#define MC(call)                                                                                 \
    do {                                                                                         \
        mscclpp_result_t r_ = (call);                                                            \
        if (r_ != MSCCLPP_OK) DIE("%s: %s", #call, mscclpp_last_error());                        \
    } while (0)

static size_t parse_size(const char *s)
{
    char *end;
    size_t v = strtoull(s, &end, 10);
    if (*end == 'K' || *end == 'k') v <<= 10;
    if (*end == 'M' || *end == 'm') v <<= 20;
    return v;
}

enum { M_STAGED, M_MEMALLOC, M_DIRECT, M_MPI, NMETHODS };
static const char *const names[] = {"nccl_malloc", "nccl_memalloc", "mscclpp", "mpi"};

typedef struct {
    ncclComm_t nc;
    mscclpp_executor_t *ex;
    float *in[NMETHODS], *out[NMETHODS];
} ctx_t;

static void call(ctx_t *c, int m, size_t count)
{
    switch (m) {
    case M_STAGED:
    case M_MEMALLOC:
        NC(ncclAllReduce(c->in[m], c->out[m], count, ncclFloat32, ncclSum, c->nc, NULL));
        break;
    case M_DIRECT:
        MC(mscclpp_allreduce(c->ex, c->in[m], c->out[m], count, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                             NULL));
        break;
    default:
        if (MPI_Allreduce(c->in[m], c->out[m], (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD))
            DIE("MPI_Allreduce failed");
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int n;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t lo = 8, hi = 64u << 20;
    int iters = 200;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-b")) lo = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-e")) hi = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
    }
    if (lo < 4) lo = 4;

    ctx_t c = {0};
    ncclUniqueId id;
    if (g_rank == 0) NC(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    NC(ncclCommInitRank(&c.nc, n, id, g_rank));
    mscclpp_unique_id_t mid;
    if (g_rank == 0) MC(mscclpp_get_unique_id(&mid));
    MPI_Bcast(&mid, sizeof mid, MPI_BYTE, 0, MPI_COMM_WORLD);
    mscclpp_comm_t *mc = NULL;
    MC(mscclpp_comm_init_rank(&mid, g_rank, n, &mc));
    MC(mscclpp_executor_create(mc, &c.ex));

    c.in[M_STAGED] = malloc(hi);
    c.out[M_STAGED] = malloc(hi);
    c.in[M_MPI] = malloc(hi);
    c.out[M_MPI] = malloc(hi);
    if (!c.in[M_STAGED] || !c.out[M_STAGED] || !c.in[M_MPI] || !c.out[M_MPI]) DIE("no memory");
    NC(ncclMemAlloc((void **)&c.in[M_MEMALLOC], hi));
    NC(ncclMemAlloc((void **)&c.out[M_MEMALLOC], hi));
    MC(mscclpp_malloc(hi, (void **)&c.in[M_DIRECT]));
    MC(mscclpp_malloc(hi, (void **)&c.out[M_DIRECT]));

    if (g_rank == 0) {
        printf("# %d ranks, %s backend; us per call (slowest rank's mean)\n", n,
               mscclpp_backend_name());
        printf("%12s", "bytes");
        for (int m = 0; m < NMETHODS; m++) printf(" %14s", names[m]);
        printf("\n");
    }
    for (size_t bytes = lo; bytes <= hi; bytes *= 2) {
        size_t count = bytes / 4;
        int it = iters;
        if (bytes >= (1u << 20)) it = (int)(iters * (double)(1u << 20) / (double)bytes) + 5;
        int warm = it / 10 + 2;
        double us[NMETHODS];
        for (int m = 0; m < NMETHODS; m++) {
            for (size_t i = 0; i < count; i++) c.in[m][i] = (float)((g_rank + 1) * (i % 64 + 1));
            call(&c, m, count);
            for (size_t i = 0; i < count; i++) {
                float want = (float)((i % 64 + 1) * (size_t)n * (size_t)(n + 1) / 2);
                if (c.out[m][i] != want)
                    DIE("%s %zu bytes: element %zu is %g, expected %g", names[m], bytes, i,
                        (double)c.out[m][i], (double)want);
            }
            for (int w = 0; w < warm; w++) call(&c, m, count);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int k = 0; k < it; k++) call(&c, m, count);
            double t = (MPI_Wtime() - t0) / it * 1e6, tmax = 0;
            MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            us[m] = tmax;
        }
        if (g_rank == 0) {
            printf("%12zu", bytes);
            for (int m = 0; m < NMETHODS; m++) printf(" %14.2f", us[m]);
            printf("\n");
            fflush(stdout);
        }
    }
    NC(ncclMemFree(c.in[M_MEMALLOC]));
    NC(ncclMemFree(c.out[M_MEMALLOC]));
    mscclpp_free(c.in[M_DIRECT]);
    mscclpp_free(c.out[M_DIRECT]);
    free(c.in[M_STAGED]);
    free(c.out[M_STAGED]);
    free(c.in[M_MPI]);
    free(c.out[M_MPI]);
    NC(ncclCommDestroy(c.nc));
    MC(mscclpp_executor_destroy(c.ex));
    MC(mscclpp_comm_destroy(mc));
    MPI_Finalize();
    return 0;
}
