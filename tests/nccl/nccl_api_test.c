/*
 * A program written against NCCL's own nccl.h, and nothing of libmscclpp: built once linked
 * with the real libnccl.so.2 (run with LD_PRELOAD=libmscclpp_nccl.so) and once linked with
 * -lmscclpp_nccl. On the host backend buffers are host memory and streams are NULL.
 *
 *   nccl_api_test ranks N     N forked ranks (the id goes from rank 0 through pipes): every
 *                             collective, several dtypes and ops, send/recv and gather/scatter
 *                             in groups, split, PreMulSum, registration, error paths
 *   nccl_api_test initall N   ncclCommInitAll in one process, a group over its communicators
 *   nccl_api_test fallback N  requests a selector sends to the real library (int64/uint64
 *                             reductions): checks the result the fake library of
 *                             tests/nccl/fake_nccl.c writes
 *   nccl_api_test nofallback N  the same requests fail with ncclInvalidUsage and say why
 *   nccl_api_test backtoback N  collectives of changing sizes and kinds back to back on the
 *                             same buffers, nothing between them (malloc'd, then ncclMemAlloc'd)
 *   nccl_api_test realloc N   zero-copy allreduce on ncclMemAlloc'd buffers freed and
 *                             allocated again at the same addresses
 *   nccl_api_test gate N      (linked build) calls on a stream held back by a host function
 *                             return before it runs them, and are right once it does
 *   nccl_api_test p2pnodes N  send/recv, gather and scatter with the ranks on two "nodes"
 *                             (MSCCLPP_NODE_ID): port channels between them
 *   nccl_api_test mismatch N  the last rank's count or dtype differs from the others': every
 *                             rank gets an error saying the ranks disagree, and the next
 *                             agreeing call is right (issue 22)
 *
 * Every element is checked; each failure prints rank, call and index, and the exit status is
 * non-zero.
 */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <nccl.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* the extension hook's types only (a header of libmscclpp_nccl's own, standalone) */
#include "../../include/mscclpp/nccl_ext.h"

static int g_rank = -1, g_fails;

#define FAIL(...)                                                                                \
    do {                                                                                         \
        fprintf(stderr, "rank %d: FAIL %s:%d: ", g_rank, __FILE__, __LINE__);                    \
        fprintf(stderr, __VA_ARGS__);                                                            \
        fprintf(stderr, "\n");                                                                   \
        g_fails++;                                                                               \
    } while (0)

#define NCCLCHECK(call)                                                                          \
    do {                                                                                         \
        ncclResult_t r_ = (call);                                                                \
        if (r_ != ncclSuccess) {                                                                 \
            FAIL("%s -> %d (%s): %s", #call, (int)r_, ncclGetErrorString(r_),                    \
                 ncclGetLastError(NULL));                                                        \
            return;                                                                              \
        }                                                                                        \
    } while (0)

#define EXPECT_ERR(call, code, text)                                                             \
    do {                                                                                         \
        ncclResult_t r_ = (call);                                                                \
        const char *m_ = ncclGetLastError(NULL);                                                 \
        if (r_ != (code))                                                                        \
            FAIL("%s -> %d, expected %d", #call, (int)r_, (int)(code));                          \
        else if (!m_ || !strstr(m_, text))                                                       \
            FAIL("%s: last error \"%s\" does not mention \"%s\"", #call, m_ ? m_ : "(null)",     \
                 text);                                                                          \
    } while (0)

/* ---- element access in double (every value used here is exact in every dtype) ---- */

static size_t dt_size(ncclDataType_t dt)
{
    switch (dt) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

static float h2f(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
}

static uint16_t f2h(float f)
{
    /* exact small values only: integers and halves up to 2048 */
    uint16_t s = f < 0 ? 0x8000 : 0;
    f = fabsf(f);
    if (f == 0) return s;
    int e;
    float m = frexpf(f, &e); /* f = m * 2^e, m in [0.5, 1) */
    int man = (int)lrintf(m * 2048.0f) - 1024; /* 10 bits below the implicit one */
    if (man == 1024) {
        man = 0;
        e++;
    }
    return (uint16_t)(s | ((e + 14) << 10) | man);
}

static double get(ncclDataType_t dt, const void *p, size_t i)
{
    switch (dt) {
    case ncclInt8: return ((const int8_t *)p)[i];
    case ncclUint8: return ((const uint8_t *)p)[i];
    case ncclInt32: return ((const int32_t *)p)[i];
    case ncclUint32: return ((const uint32_t *)p)[i];
    case ncclInt64: return (double)((const int64_t *)p)[i];
    case ncclUint64: return (double)((const uint64_t *)p)[i];
    case ncclFloat16: return h2f(((const uint16_t *)p)[i]);
    case ncclFloat32: return ((const float *)p)[i];
    case ncclFloat64: return ((const double *)p)[i];
    case ncclBfloat16: {
        uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    default: return NAN;
    }
}

static void set(ncclDataType_t dt, void *p, size_t i, double v)
{
    switch (dt) {
    case ncclInt8: ((int8_t *)p)[i] = (int8_t)v; break;
    case ncclUint8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case ncclInt32: ((int32_t *)p)[i] = (int32_t)v; break;
    case ncclUint32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case ncclInt64: ((int64_t *)p)[i] = (int64_t)v; break;
    case ncclUint64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case ncclFloat16: ((uint16_t *)p)[i] = f2h((float)v); break;
    case ncclFloat32: ((float *)p)[i] = (float)v; break;
    case ncclFloat64: ((double *)p)[i] = v; break;
    case ncclBfloat16: {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
        break;
    }
    default: break;
    }
}

/* Input of `rank` at index i: small positive integers so sums and products stay exact. */
static double val(int rank, size_t i)
{
    return (double)(1 + (rank + (int)(i % 5)) % 3);
}

static double combine(ncclRedOp_t op, double a, double b)
{
    switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return a > b ? a : b;
    case ncclMin: return a < b ? a : b;
    default: return a + b;
    }
}

static bool is_float(ncclDataType_t dt)
{
    return dt == ncclFloat16 || dt == ncclFloat32 || dt == ncclFloat64 || dt == ncclBfloat16;
}

/* The reduction of every rank's val() at index i, as NCCL defines op (avg as sum / n). */
static double expect_reduced(ncclRedOp_t op, ncclDataType_t dt, int n, size_t i)
{
    double acc = val(0, i);
    for (int r = 1; r < n; r++) acc = combine(op == ncclAvg ? ncclSum : op, acc, val(r, i));
    if (op == ncclAvg) acc = is_float(dt) ? acc / n : floor(acc / n);
    return acc;
}

static void *alloc(size_t count, ncclDataType_t dt)
{
    void *p = calloc(count ? count : 1, dt_size(dt));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static void fill(void *p, ncclDataType_t dt, size_t count, int rank)
{
    for (size_t i = 0; i < count; i++) set(dt, p, i, val(rank, i));
}

static bool near(double got, double want, ncclDataType_t dt, bool rounded)
{
    if (!rounded) return got == want;
    double tol = dt == ncclBfloat16 ? 1e-2 : dt == ncclFloat16 ? 2e-3 : 1e-6;
    return fabs(got - want) <= tol * fabs(want) + 1e-12;
}

/* Check count elements of p against want(i); report the first few mismatches. */
#define CHECK_ELEMS(what, p, dt, count, want_expr, rounded)                                     \
    do {                                                                                         \
        int bad_ = 0;                                                                            \
        for (size_t i = 0; i < (count); i++) {                                                   \
            double w_ = (want_expr), g_ = get((dt), (p), i);                                     \
            if (!near(g_, w_, (dt), (rounded)) && bad_++ < 3)                                    \
                FAIL("%s: element %zu is %g, expected %g", (what), i, g_, w_);                   \
        }                                                                                        \
    } while (0)

static const ncclDataType_t dtypes[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,
                                        ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16,
                                        ncclInt64,   ncclUint64};
static const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
static const char *const op_names[] = {"sum", "prod", "max", "min", "avg"};
static const size_t counts[] = {1, 1000, 70000};

/* ---- the collectives ---- */

static void t_allreduce(ncclComm_t comm, int rank, int n)
{
    for (size_t di = 0; di < sizeof dtypes / sizeof *dtypes; di++) {
        ncclDataType_t dt = dtypes[di];
        for (size_t oi = 0; oi < sizeof ops / sizeof *ops; oi++) {
            ncclRedOp_t op = ops[oi];
            size_t count = counts[(di + oi) % 3];
            char what[96];
            snprintf(what, sizeof what, "allreduce dt %d %s count %zu", (int)dt, op_names[oi],
                     count);
            void *s = alloc(count, dt), *r = alloc(count, dt);
            fill(s, dt, count, rank);
            NCCLCHECK(ncclAllReduce(s, r, count, dt, op, comm, NULL));
            bool rounded = op == ncclAvg && is_float(dt);
            CHECK_ELEMS(what, r, dt, count, expect_reduced(op, dt, n, i), rounded);
            /* in place */
            NCCLCHECK(ncclAllReduce(s, s, count, dt, op, comm, NULL));
            CHECK_ELEMS(what, s, dt, count, expect_reduced(op, dt, n, i), rounded);
            free(s);
            free(r);
        }
    }
}

static void t_broadcast_reduce(ncclComm_t comm, int rank, int n)
{
    ncclDataType_t dt = ncclFloat32;
    size_t count = 4097;
    for (int root = 0; root < n; root++) {
        char what[64];
        void *s = alloc(count, dt), *r = alloc(count, dt);
        fill(s, dt, count, rank);
        snprintf(what, sizeof what, "broadcast root %d", root);
        NCCLCHECK(ncclBroadcast(s, r, count, dt, root, comm, NULL));
        CHECK_ELEMS(what, r, dt, count, val(root, i), false);
        snprintf(what, sizeof what, "bcast root %d", root);
        NCCLCHECK(ncclBcast(s, count, ncclInt32 /* same width */, root, comm, NULL));
        CHECK_ELEMS(what, s, dt, count, val(root, i), false);
        /* reduce: only the root's recvbuff is written; other ranks pass NULL */
        fill(s, ncclInt32, count, rank);
        memset(r, 0, count * 4);
        snprintf(what, sizeof what, "reduce max root %d", root);
        NCCLCHECK(ncclReduce(s, rank == root ? r : NULL, count, ncclInt32, ncclMax, root, comm,
                             NULL));
        if (rank == root)
            CHECK_ELEMS(what, r, ncclInt32, count, expect_reduced(ncclMax, ncclInt32, n, i),
                        false);
        free(s);
        free(r);
    }
}

static void t_allgather_rs_a2a(ncclComm_t comm, int rank, int n)
{
    const ncclDataType_t dts[] = {ncclUint8, ncclFloat16, ncclInt64, ncclFloat64};
    for (size_t k = 0; k < sizeof dts / sizeof *dts; k++) {
        ncclDataType_t dt = dts[k];
        size_t count = k % 2 ? 1024 : 333;
        char what[64];
        /* allgather out of place and in place */
        void *s = alloc(count, dt), *r = alloc(count * n, dt);
        fill(s, dt, count, rank);
        snprintf(what, sizeof what, "allgather dt %d", (int)dt);
        NCCLCHECK(ncclAllGather(s, r, count, dt, comm, NULL));
        CHECK_ELEMS(what, r, dt, count * n, val((int)(i / count), i % count), false);
        memset(r, 0, count * n * dt_size(dt));
        fill((char *)r + rank * count * dt_size(dt), dt, count, rank);
        NCCLCHECK(ncclAllGather((char *)r + rank * count * dt_size(dt), r, count, dt, comm,
                                NULL));
        CHECK_ELEMS(what, r, dt, count * n, val((int)(i / count), i % count), false);
        free(s);
        free(r);
        /* alltoall: block b of rank r holds 100*r + b (+ position) */
        s = alloc(count * n, dt);
        r = alloc(count * n, dt);
        for (size_t i = 0; i < count * n; i++)
            set(dt, s, i, (double)((10 * rank + (int)(i / count)) % 60 + (int)(i % count % 4)));
        snprintf(what, sizeof what, "alltoall dt %d", (int)dt);
        NCCLCHECK(ncclAlltoAll(s, r, count, dt, comm, NULL));
        CHECK_ELEMS(what, r, dt, count * n,
                    (double)((10 * (int)(i / count) + rank) % 60 + (int)(i % count % 4)), false);
        free(s);
        free(r);
    }
    /* reduce-scatter, out of place and in place, on reducing dtypes */
    const ncclDataType_t rdts[] = {ncclFloat32, ncclInt32, ncclBfloat16};
    for (size_t k = 0; k < 3; k++) {
        ncclDataType_t dt = rdts[k];
        size_t count = 1000;
        char what[64];
        snprintf(what, sizeof what, "reducescatter dt %d", (int)dt);
        void *s = alloc(count * n, dt), *r = alloc(count, dt);
        fill(s, dt, count * n, rank);
        NCCLCHECK(ncclReduceScatter(s, r, count, dt, ncclSum, comm, NULL));
        CHECK_ELEMS(what, r, dt, count, expect_reduced(ncclSum, dt, n, rank * count + i), false);
        char *in = (char *)s + rank * count * dt_size(dt);
        NCCLCHECK(ncclReduceScatter(s, in, count, dt, ncclSum, comm, NULL));
        CHECK_ELEMS(what, in, dt, count, expect_reduced(ncclSum, dt, n, rank * count + i), false);
        free(s);
        free(r);
    }
}

static void t_p2p(ncclComm_t comm, int rank, int n)
{
    ncclDataType_t dt = ncclInt32;
    size_t count = 50000;
    /* a ring and an all-pairs exchange (self included) in one group */
    void *ring_s = alloc(count, dt), *ring_r = alloc(count, dt);
    void *pair_s = alloc(count * n, dt), *pair_r = alloc(count * n, dt);
    for (size_t i = 0; i < count; i++) set(dt, ring_s, i, (double)(rank * 1000 + (int)(i % 997)));
    for (size_t i = 0; i < count * n; i++)
        set(dt, pair_s, i, (double)(rank * 100 + (int)(i / count) * 10 + (int)(i % count % 7)));
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(ring_s, count, dt, (rank + 1) % n, comm, NULL));
    NCCLCHECK(ncclRecv(ring_r, count, dt, (rank + n - 1) % n, comm, NULL));
    for (int p = 0; p < n; p++) {
        NCCLCHECK(ncclSend((int32_t *)pair_s + p * count, count, dt, p, comm, NULL));
        NCCLCHECK(ncclRecv((int32_t *)pair_r + p * count, count, dt, p, comm, NULL));
    }
    NCCLCHECK(ncclGroupEnd());
    int prev = (rank + n - 1) % n;
    CHECK_ELEMS("ring send/recv", ring_r, dt, count, (double)(prev * 1000 + (int)(i % 997)),
                false);
    CHECK_ELEMS("all-pairs send/recv", pair_r, dt, count * n,
                (double)((int)(i / count) * 100 + rank * 10 + (int)(i % count % 7)), false);
    free(ring_s);
    free(ring_r);
    free(pair_s);
    free(pair_r);

    /* NCCL's all-to-all-v idiom (PyTorch's all_to_all_single with split sizes): one grouped
     * send and receive per peer, uneven counts packed in rank order, zero counts included */
    {
#define V_COUNT(src, dst) \
    (((src)*3 + (dst)*5) % 4 == 0 ? (size_t)0 : (size_t)(100 + ((src)*7 + (dst)) * 37))
        size_t stot = 0, rtot = 0;
        for (int p = 0; p < n; p++) {
            stot += V_COUNT(rank, p);
            rtot += V_COUNT(p, rank);
        }
        int32_t *vs = alloc(stot + 1, dt), *vr = alloc(rtot + 1, dt);
        for (size_t i = 0, at = 0; i < (size_t)n; at += V_COUNT(rank, (int)i), i++)
            for (size_t t = 0; t < V_COUNT(rank, (int)i); t++)
                set(dt, vs, at + t, (double)(rank * 100000 + (int)i * 1000 + (int)(t % 991)));
        for (size_t i = 0; i <= rtot; i++) set(dt, vr, i, -1.0);
        NCCLCHECK(ncclGroupStart());
        for (int p = 0, so = 0, ro = 0; p < n; p++) {
            NCCLCHECK(ncclSend(vs + so, V_COUNT(rank, p), dt, p, comm, NULL));
            NCCLCHECK(ncclRecv(vr + ro, V_COUNT(p, rank), dt, p, comm, NULL));
            so += (int)V_COUNT(rank, p);
            ro += (int)V_COUNT(p, rank);
        }
        NCCLCHECK(ncclGroupEnd());
        size_t bad = 0, first = 0;
        for (size_t p = 0, at = 0; p < (size_t)n; at += V_COUNT((int)p, rank), p++)
            for (size_t t = 0; t < V_COUNT((int)p, rank); t++)
                if (get(dt, vr, at + t) != (double)((int)p * 100000 + rank * 1000 + (int)(t % 991)))
                    first = bad++ ? first : at + t;
        if (get(dt, vr, rtot) != -1.0) first = bad++ ? first : rtot;
        if (bad)
            FAIL("all-to-all-v send/recv (uneven counts, zeros): %zu wrong, first at %zu", bad,
                 first);
        free(vs);
        free(vr);
#undef V_COUNT
    }

    /* gather and scatter for every root, two of them in one group */
    for (int root = 0; root < n; root++) {
        char what[64];
        void *s = alloc(count, dt), *g = alloc(count * n, dt);
        void *all = alloc(count * n, dt), *mine = alloc(count, dt);
        fill(s, dt, count, rank);
        for (size_t i = 0; i < count * n; i++) set(dt, all, i, (double)(root + (int)(i % 1009)));
        NCCLCHECK(ncclGroupStart());
        NCCLCHECK(ncclGather(s, rank == root ? g : NULL, count, dt, root, comm, NULL));
        NCCLCHECK(ncclScatter(rank == root ? all : NULL, mine, count, dt, root, comm, NULL));
        NCCLCHECK(ncclGroupEnd());
        snprintf(what, sizeof what, "gather root %d", root);
        if (rank == root)
            CHECK_ELEMS(what, g, dt, count * n, val((int)(i / count), i % count), false);
        snprintf(what, sizeof what, "scatter root %d", root);
        CHECK_ELEMS(what, mine, dt, count, (double)(root + (int)((rank * count + i) % 1009)),
                    false);
        free(s);
        free(g);
        free(all);
        free(mine);
    }
}

static void t_group_collectives(ncclComm_t comm, int rank, int n)
{
    /* collectives aggregated in one group, as frameworks do for bucketed gradients */
    size_t count = 2048;
    float *a = alloc(count, ncclFloat32), *b = alloc(count * n, ncclFloat32);
    double *c = alloc(count, ncclFloat64);
    fill(a, ncclFloat32, count, rank);
    fill(c, ncclFloat64, count, rank);
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(a, a, count, ncclFloat32, ncclSum, comm, NULL));
    NCCLCHECK(ncclGroupStart()); /* nested groups merge */
    NCCLCHECK(ncclAllGather(c, b, count / 2, ncclFloat32, comm, NULL));
    NCCLCHECK(ncclGroupEnd());
    NCCLCHECK(ncclGroupEnd());
    CHECK_ELEMS("grouped allreduce", a, ncclFloat32, count,
                expect_reduced(ncclSum, ncclFloat32, n, i), false);
    /* the allgather moved the doubles' bytes as count/2 floats per rank */
    for (int r = 0; r < n; r++) {
        double *blk = (double *)((char *)b + (size_t)r * count * 2);
        CHECK_ELEMS("grouped allgather", blk, ncclFloat64, count / 4, val(r, i), false);
    }
    free(a);
    free(b);
    free(c);
    /* the profiling names reach the same implementation */
    int32_t x[10], y[10];
    fill(x, ncclInt32, 10, rank);
    NCCLCHECK(pncclAllReduce(x, y, 10, ncclInt32, ncclMax, comm, NULL));
    CHECK_ELEMS("pncclAllReduce", y, ncclInt32, 10, expect_reduced(ncclMax, ncclInt32, n, i),
                false);
}

static void t_premulsum(ncclComm_t comm, int rank, int n)
{
    size_t count = 3000;
    ncclRedOp_t op_host, op_dev;
    float two = 2.0f;
    double *half = malloc(sizeof *half);
    *half = 0.5;
    NCCLCHECK(ncclRedOpCreatePreMulSum(&op_host, &two, ncclFloat32, ncclScalarHostImmediate,
                                       comm));
    two = 100.0f; /* host-immediate: read at creation, not now */
    NCCLCHECK(ncclRedOpCreatePreMulSum(&op_dev, half, ncclFloat64, ncclScalarDevice, comm));
    float *f = alloc(count, ncclFloat32), *fr = alloc(count, ncclFloat32);
    double *d = alloc(count, ncclFloat64), *dr = alloc(count, ncclFloat64);
    fill(f, ncclFloat32, count, rank);
    fill(d, ncclFloat64, count, rank);
    NCCLCHECK(ncclAllReduce(f, fr, count, ncclFloat32, op_host, comm, NULL));
    CHECK_ELEMS("premulsum x2 float", fr, ncclFloat32, count,
                2 * expect_reduced(ncclSum, ncclFloat32, n, i), false);
    *half = 0.25; /* device residence: read when the collective runs */
    NCCLCHECK(ncclAllReduce(d, dr, count, ncclFloat64, op_dev, comm, NULL));
    CHECK_ELEMS("premulsum x0.25 double (device scalar)", dr, ncclFloat64, count,
                0.25 * expect_reduced(ncclSum, ncclFloat64, n, i), false);
    /* the wrong dtype for the operator */
    EXPECT_ERR(ncclAllReduce(f, fr, count, ncclFloat32, op_dev, comm, NULL), ncclInvalidArgument,
               "created for");
    NCCLCHECK(ncclRedOpDestroy(op_host, comm));
    NCCLCHECK(ncclRedOpDestroy(op_dev, comm));
    EXPECT_ERR(ncclRedOpDestroy(op_dev, comm), ncclInvalidArgument, "not live");
    EXPECT_ERR(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument, "built-in");
    free(half);
    free(f);
    free(fr);
    free(d);
    free(dr);
}

static void t_memory(ncclComm_t comm, int rank, int n)
{
    size_t count = 10000;
    float *s = NULL, *r = NULL;
    NCCLCHECK(ncclMemAlloc((void **)&s, count * sizeof *s));
    NCCLCHECK(ncclMemAlloc((void **)&r, count * sizeof *r));
    void *hs, *hr;
    NCCLCHECK(ncclCommRegister(comm, s, count * sizeof *s, &hs));
    NCCLCHECK(ncclCommRegister(comm, r, count * sizeof *r, &hr));
    fill(s, ncclFloat32, count, rank);
    NCCLCHECK(ncclAllReduce(s, r, count, ncclFloat32, ncclMin, comm, NULL));
    CHECK_ELEMS("allreduce on ncclMemAlloc memory", r, ncclFloat32, count,
                expect_reduced(ncclMin, ncclFloat32, n, i), false);
    NCCLCHECK(ncclCommDeregister(comm, hs));
    NCCLCHECK(ncclCommDeregister(comm, hr));
    EXPECT_ERR(ncclCommDeregister(comm, &count), ncclInvalidArgument, "not a registration");
    NCCLCHECK(ncclMemFree(s));
    NCCLCHECK(ncclMemFree(r));
    int local;
    EXPECT_ERR(ncclMemFree(&local), ncclInvalidArgument, "ncclMemAlloc");
}

static void t_split(ncclComm_t comm, int rank, int n)
{
    /* two colors, keys reversing the order inside each */
    ncclComm_t sub = NULL;
    int color = rank % 2;
    NCCLCHECK(ncclCommSplit(comm, color, -rank, &sub, NULL));
    int members = 0, want_rank = 0;
    for (int r = 0; r < n; r++)
        if (r % 2 == color) {
            members++;
            if (r > rank) want_rank++; /* larger old rank = smaller key = earlier */
        }
    int cnt = -1, ur = -1;
    NCCLCHECK(ncclCommCount(sub, &cnt));
    NCCLCHECK(ncclCommUserRank(sub, &ur));
    if (cnt != members || ur != want_rank)
        FAIL("split color %d: count %d rank %d, expected %d and %d", color, cnt, ur, members,
             want_rank);
    int32_t x = rank, sum = -1;
    NCCLCHECK(ncclAllReduce(&x, &sum, 1, ncclInt32, ncclSum, sub, NULL));
    int want = 0;
    for (int r = 0; r < n; r++)
        if (r % 2 == color) want += r;
    if (sum != want) FAIL("allreduce on split color %d: %d, expected %d", color, sum, want);
    NCCLCHECK(ncclCommDestroy(sub));
    /* NCCL_SPLIT_NOCOLOR: this rank gets no communicator */
    ncclComm_t none = (ncclComm_t)&x;
    NCCLCHECK(ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 1, 0, &none, NULL));
    if (rank == 0 && none != NULL) FAIL("NOCOLOR split returned a communicator");
    if (rank != 0) {
        NCCLCHECK(ncclCommCount(none, &cnt));
        if (cnt != n - 1) FAIL("split without rank 0 has %d ranks, expected %d", cnt, n - 1);
        NCCLCHECK(ncclCommAbort(none));
    }
}

static void t_errors(ncclComm_t comm, int rank, int n)
{
    float b[4] = {0};
    EXPECT_ERR(ncclAllReduce(b, b, 4, ncclFloat32, ncclSum, NULL, NULL), ncclInvalidArgument,
               "comm is NULL");
    EXPECT_ERR(ncclAllReduce(b, b, 4, (ncclDataType_t)42, ncclSum, comm, NULL),
               ncclInvalidArgument, "datatype");
    EXPECT_ERR(ncclAllReduce(b, b, 4, ncclFloat32, (ncclRedOp_t)17, comm, NULL),
               ncclInvalidArgument, "not live");
    EXPECT_ERR(ncclAllReduce(NULL, b, 4, ncclFloat32, ncclSum, comm, NULL), ncclInvalidArgument,
               "sendbuff is NULL");
    EXPECT_ERR(ncclAllGather(b, NULL, 1, ncclFloat32, comm, NULL), ncclInvalidArgument,
               "recvbuff is NULL");
    EXPECT_ERR(ncclBroadcast(b, b, 4, ncclFloat32, n, comm, NULL), ncclInvalidArgument, "root");
    EXPECT_ERR(ncclReduce(b, b, 4, ncclFloat32, ncclSum, -1, comm, NULL), ncclInvalidArgument,
               "root");
    EXPECT_ERR(ncclSend(b, 4, ncclFloat32, n + 3, comm, NULL), ncclInvalidArgument, "peer");
    EXPECT_ERR(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupStart");
    /* a refused call inside a group fails the group, which then runs nothing */
    if (ncclGroupStart() != ncclSuccess) FAIL("ncclGroupStart");
    EXPECT_ERR(ncclRecv(b, 4, ncclFloat32, -2, comm, NULL), ncclInvalidArgument, "peer");
    EXPECT_ERR(ncclGroupEnd(), ncclInvalidArgument, "peer");
    int v = 0;
    EXPECT_ERR(ncclCommCount(comm, NULL), ncclInvalidArgument, "count is NULL");
    EXPECT_ERR(ncclCommCount(NULL, &v), ncclInvalidArgument, "comm is NULL");
    EXPECT_ERR(ncclGetVersion(NULL), ncclInvalidArgument, "version");
    EXPECT_ERR(ncclMemAlloc(NULL, 16), ncclInvalidArgument, "ptr is NULL");
    ncclComm_t c2;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    EXPECT_ERR(ncclCommInitRank(&c2, 2, id, 5), ncclInvalidArgument, "rank 5");
    ncclConfig_t bad;
    memset(&bad, 0, sizeof bad);
    EXPECT_ERR(ncclCommInitRankConfig(&c2, 2, id, 0, &bad), ncclInvalidArgument,
               "NCCL_CONFIG_INITIALIZER");
    for (int r = 0; r <= (int)ncclNumResults; r++)
        if (!ncclGetErrorString((ncclResult_t)r) || !*ncclGetErrorString((ncclResult_t)r))
            FAIL("ncclGetErrorString(%d) is empty", r);
    if (!strstr(ncclGetErrorString(ncclInvalidArgument), "invalid argument"))
        FAIL("ncclGetErrorString(ncclInvalidArgument) = %s",
             ncclGetErrorString(ncclInvalidArgument));
    (void)rank;
}

/*
 * A selector (include/mscclpp/nccl_ext.h) sends the 64-bit integer reductions to the real
 * library; everything else stays ours. dtype 10 and 11 are mscclpp_dtype_t's MSCCLPP_INT64 and
 * MSCCLPP_UINT64 (this program includes no libmscclpp header).
 */
static int int64_to_fallback(const mscclpp_nccl_request_t *q, void *user)
{
    (void)user;
    bool reduces = !strcmp(q->collective, "allreduce") || !strcmp(q->collective, "reducescatter");
    return reduces && (q->dtype == 10 || q->dtype == 11) ? MSCCLPP_NCCL_SELECT_FALLBACK
                                                         : MSCCLPP_NCCL_SELECT_DEFAULT;
}

/* Requests the selector above sends to the real library (found with dlsym: under LD_PRELOAD
 * the program built against the real libnccl.so.2 reaches our hook too). */
static void t_fallback(ncclComm_t comm, int rank, int n, bool have_fallback)
{
    int (*set_selector)(mscclpp_nccl_selector_fn, void *);
    *(void **)&set_selector = dlsym(RTLD_DEFAULT, "mscclpp_nccl_set_selector");
    if (!set_selector) {
        FAIL("mscclpp_nccl_set_selector is not in the process: %s", dlerror());
        return;
    }
    set_selector(int64_to_fallback, NULL);
    size_t count = 100;
    int64_t *s = alloc(count, ncclInt64), *r = alloc(count, ncclInt64);
    fill(s, ncclInt64, count, rank);
    ncclResult_t res = ncclAllReduce(s, r, count, ncclInt64, ncclSum, comm, NULL);
    if (!have_fallback) {
        const char *m = ncclGetLastError(comm);
        if (res != ncclInvalidUsage) FAIL("int64 allreduce without fallback -> %d", (int)res);
        else if (!strstr(m, "MSCCLPP_NCCL_LIB_PATH"))
            FAIL("int64 allreduce without fallback: \"%s\" does not say how to fix it", m);
    } else {
        if (res != ncclSuccess) FAIL("int64 allreduce via fallback -> %d: %s", (int)res,
                                     ncclGetLastError(comm));
        /* the fake library writes 7000 + rank into every element it receives */
        CHECK_ELEMS("fallback allreduce", r, ncclInt64, count, (double)(7000 + rank), false);
        /* a grouped reduce-scatter goes to the fake too; an int32 sum in the same group is
         * ours; the fallback is logged only once per process */
        memset(r, 0, count * 8);
        int32_t *q = alloc(count, ncclInt32);
        fill(q, ncclInt32, count, rank);
        res = ncclGroupStart();
        if (res == ncclSuccess)
            res = ncclReduceScatter(s, r, count / n, ncclUint64, ncclMax, comm, NULL);
        if (res == ncclSuccess) res = ncclAllReduce(q, q, count, ncclInt32, ncclSum, comm, NULL);
        ncclResult_t e = ncclGroupEnd();
        if (res != ncclSuccess || e != ncclSuccess)
            FAIL("grouped fallback -> %d/%d: %s", (int)res, (int)e, ncclGetLastError(comm));
        CHECK_ELEMS("fallback reducescatter", r, ncclInt64, count / n, (double)(7000 + rank),
                    false);
        CHECK_ELEMS("our allreduce beside the fallback", q, ncclInt32, count,
                    expect_reduced(ncclSum, ncclInt32, n, i), false);
        free(q);
    }
    /* data movement of 64-bit integers is ours either way */
    int64_t *g = alloc(count * n, ncclInt64);
    if (ncclAllGather(s, g, count, ncclInt64, comm, NULL) != ncclSuccess)
        FAIL("int64 allgather: %s", ncclGetLastError(comm));
    /* without the selector, 64-bit integer sums are ours */
    set_selector(NULL, NULL);
    fill(s, ncclInt64, count, rank);
    if (ncclAllReduce(s, r, count, ncclInt64, ncclSum, comm, NULL) != ncclSuccess)
        FAIL("int64 allreduce of ours: %s", ncclGetLastError(comm));
    else
        CHECK_ELEMS("int64 allreduce of ours", r, ncclInt64, count,
                    expect_reduced(ncclSum, ncclInt64, n, i), false);
    free(s);
    free(r);
    free(g);
}

#ifdef WITH_MSCCLPP_STREAM
/* The linked build only: on the host backend a cudaStream_t argument may be a stream of ours. */
#include <mscclpp/mscclpp.h>
static void t_our_stream(ncclComm_t comm, int rank, int n)
{
    mscclpp_stream_t st = NULL, w = NULL;
    if (mscclpp_stream_create(&st) != MSCCLPP_OK) {
        FAIL("mscclpp_stream_create: %s", mscclpp_last_error());
        return;
    }
    size_t count = 3000;
    float *a = alloc(count, ncclFloat32);
    fill(a, ncclFloat32, count, rank);
    NCCLCHECK(ncclAllReduce(a, a, count, ncclFloat32, ncclSum, comm, (cudaStream_t)(void *)st));
    if (mscclpp_stream_synchronize(st) != MSCCLPP_OK) FAIL("sync: %s", mscclpp_last_error());
    CHECK_ELEMS("allreduce on our stream", a, ncclFloat32, count,
                expect_reduced(ncclSum, ncclFloat32, n, i), false);
    /* the host backend has no native streams to wrap */
    if (mscclpp_stream_wrap(NULL, &w) != MSCCLPP_ERR_UNSUPPORTED ||
        !strstr(mscclpp_last_error(), "no native streams"))
        FAIL("mscclpp_stream_wrap on the host backend: \"%s\"", mscclpp_last_error());
    mscclpp_stream_destroy(st);
    free(a);
}

/*
 * Stream order (docs/nccl.md "Streams"): the stream is held back by a gate, a host function
 * queued on it first that blocks on a pipe. Every call below must return while the gate is
 * still closed, with no byte of its output written yet; once the test opens the gate, the
 * stream runs them in order and every element is right. A call that waited for the stream
 * would never return: a watchdog opens the gate after 20 s and the test fails naming it.
 */
typedef struct {
    int fd[2];
    volatile int opened_by_watchdog;
} gate_t;

static void gate_wait(void *arg)
{
    gate_t *g = arg;
    char c;
    while (read(g->fd[0], &c, 1) < 0 && errno == EINTR) {}
}

static void *gate_watchdog(void *arg)
{
    gate_t *g = arg;
    sleep(20);
    g->opened_by_watchdog = 1;
    if (write(g->fd[1], "w", 1) != 1) {}
    return NULL;
}

static void t_stream_gate(ncclComm_t comm, int rank, int n)
{
    mscclpp_stream_t st = NULL;
    if (mscclpp_stream_create(&st) != MSCCLPP_OK) {
        FAIL("mscclpp_stream_create: %s", mscclpp_last_error());
        return;
    }
    cudaStream_t cs = (cudaStream_t)(void *)st;
    const size_t count = 70000, odd = 1001; /* odd: staged (padded) */
    float *a = alloc(count, ncclFloat32), *b = alloc(count * (size_t)n, ncclFloat32);
    float *c = alloc(count, ncclFloat32), *d = alloc(count, ncclFloat32);
    float *e = alloc(odd, ncclFloat32), *f = alloc(odd, ncclFloat32);
    float *g = alloc(count, ncclFloat32), *h = alloc(count, ncclFloat32);
    int32_t *ring_s = alloc(count, ncclInt32), *ring_r = alloc(count, ncclInt32);
    int32_t *gat = alloc(count * (size_t)n, ncclInt32);
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    ncclRedOp_t premul;
    float three = 3.0f;
    NCCLCHECK(ncclRedOpCreatePreMulSum(&premul, &three, ncclFloat32, ncclScalarHostImmediate,
                                       comm));
    /* warm up at these sizes: contexts and staging are built (collectively) before the gate,
     * since a larger call than before rebuilds them, which waits for the stream */
    for (int k = 0; k < 2; k++) {
        NCCLCHECK(ncclAllReduce(a, c, count, ncclFloat32, ncclSum, comm, cs));
        NCCLCHECK(ncclAllGather(a, b, count, ncclFloat32, comm, cs));
        NCCLCHECK(ncclAllReduce(e, f, odd, ncclFloat32, ncclSum, comm, cs));
        NCCLCHECK(ncclAllReduce(a, d, count, ncclFloat32, ncclAvg, comm, cs));
        NCCLCHECK(ncclAllReduce(a, g, count, ncclFloat32, premul, comm, cs));
        NCCLCHECK(ncclBroadcast(a, h, count, ncclFloat32, 0, comm, cs));
        NCCLCHECK(ncclGroupStart());
        NCCLCHECK(ncclSend(ring_s, count, ncclInt32, next, comm, cs));
        NCCLCHECK(ncclRecv(ring_r, count, ncclInt32, prev, comm, cs));
        NCCLCHECK(ncclGather(ring_s, rank == 0 ? gat : NULL, count, ncclInt32, 0, comm, cs));
        NCCLCHECK(ncclGroupEnd());
    }
    if (mscclpp_stream_synchronize(st) != MSCCLPP_OK) FAIL("sync: %s", mscclpp_last_error());

    gate_t gate = {{-1, -1}, 0};
    if (pipe(gate.fd) != 0) {
        FAIL("pipe: %s", strerror(errno));
        return;
    }
    fill(a, ncclFloat32, count, rank);
    fill(e, ncclFloat32, odd, rank);
    for (size_t i = 0; i < count; i++) ring_s[i] = rank * 100000 + (int32_t)i;
    void *outs[] = {b, c, d, f, g, h, ring_r, gat};
    size_t lens[] = {count * (size_t)n, count, count, odd, count, count, count,
                     rank == 0 ? count * (size_t)n : 0};
    enum { NOUTS = 8 };
    for (int k = 0; k < NOUTS; k++) memset(outs[k], 0xa5, lens[k] * sizeof(float));
    if (mscclpp_stream_launch_host_func(st, gate_wait, &gate) != MSCCLPP_OK)
        FAIL("launch_host_func: %s", mscclpp_last_error());
    pthread_t dog;
    pthread_create(&dog, NULL, gate_watchdog, &gate);
    NCCLCHECK(ncclAllReduce(a, c, count, ncclFloat32, ncclSum, comm, cs));
    NCCLCHECK(ncclAllGather(a, b, count, ncclFloat32, comm, cs));
    NCCLCHECK(ncclAllReduce(e, f, odd, ncclFloat32, ncclSum, comm, cs));
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(a, d, count, ncclFloat32, ncclAvg, comm, cs));
    NCCLCHECK(ncclAllReduce(a, g, count, ncclFloat32, premul, comm, cs));
    NCCLCHECK(ncclBroadcast(a, h, count, ncclFloat32, 0, comm, cs));
    NCCLCHECK(ncclGroupEnd());
    /* point-to-point moves over channels, on the stream too: nothing arrives while it is held */
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(ring_s, count, ncclInt32, next, comm, cs));
    NCCLCHECK(ncclRecv(ring_r, count, ncclInt32, prev, comm, cs));
    NCCLCHECK(ncclGather(ring_s, rank == 0 ? gat : NULL, count, ncclInt32, 0, comm, cs));
    NCCLCHECK(ncclGroupEnd());
    ncclResult_t async = ncclInternalError;
    NCCLCHECK(ncclCommGetAsyncError(comm, &async));
    if (async != ncclSuccess) FAIL("async error %d while the stream is held", (int)async);
    int held = !gate.opened_by_watchdog;
    if (!held) FAIL("a call waited for the held stream (the watchdog opened the gate)");
    for (int k = 0; k < NOUTS && held; k++)
        for (size_t i = 0; i < lens[k]; i++) {
            uint32_t u;
            memcpy(&u, (const char *)outs[k] + 4 * i, 4);
            if (u != 0xa5a5a5a5u) {
                FAIL("output %d element %zu written before the stream reached the call", k, i);
                break;
            }
        }
    if (held && write(gate.fd[1], "o", 1) != 1) FAIL("opening the gate: %s", strerror(errno));
    if (mscclpp_stream_synchronize(st) != MSCCLPP_OK) FAIL("sync: %s", mscclpp_last_error());
    pthread_cancel(dog);
    pthread_join(dog, NULL);
    CHECK_ELEMS("gated allreduce", c, ncclFloat32, count,
                expect_reduced(ncclSum, ncclFloat32, n, i), false);
    for (int r = 0; r < n; r++)
        CHECK_ELEMS("gated allgather", b + (size_t)r * count, ncclFloat32, count, val(r, i),
                    false);
    CHECK_ELEMS("gated staged allreduce", f, ncclFloat32, odd,
                expect_reduced(ncclSum, ncclFloat32, n, i), false);
    CHECK_ELEMS("gated avg", d, ncclFloat32, count, expect_reduced(ncclAvg, ncclFloat32, n, i),
                true);
    CHECK_ELEMS("gated premulsum x3", g, ncclFloat32, count,
                3 * expect_reduced(ncclSum, ncclFloat32, n, i), false);
    CHECK_ELEMS("gated broadcast", h, ncclFloat32, count, val(0, i), false);
    CHECK_ELEMS("gated ring send/recv", ring_r, ncclInt32, count, (double)(prev * 100000 + (int)i),
                false);
    if (rank == 0)
        CHECK_ELEMS("gated gather", gat, ncclInt32, count * (size_t)n,
                    (double)((int)(i / count) * 100000 + (int)(i % count)), false);
    NCCLCHECK(ncclRedOpDestroy(premul, comm));
    close(gate.fd[0]);
    close(gate.fd[1]);
    mscclpp_stream_destroy(st);
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);
    free(f);
    free(g);
    free(h);
    free(ring_s);
    free(ring_r);
    free(gat);
}
#endif

/* ---- back-to-back calls and zero-copy ---- */

/* The int32 input of rank r at element i in step it: small enough that sums never overflow. */
/* Two int32 buffers of `cap` elements each: ncclMemAlloc'd and registered when `zc` (so the
 * plans run on them, zero-copy), else malloc'd (staged). false (and a FAIL) when NCCL refused. */
typedef struct {
    int32_t *a, *b;
    void *ha, *hb;
    bool zc;
} buf_pair_t;

static bool pair_alloc(ncclComm_t comm, size_t cap, bool zc, buf_pair_t *p)
{
    memset(p, 0, sizeof *p);
    p->zc = zc;
    if (!zc) {
        p->a = alloc(cap, ncclInt32);
        p->b = alloc(cap, ncclInt32);
        return true;
    }
    ncclResult_t r = ncclMemAlloc((void **)&p->a, cap * 4);
    if (r == ncclSuccess) r = ncclMemAlloc((void **)&p->b, cap * 4);
    if (r == ncclSuccess) r = ncclCommRegister(comm, p->a, cap * 4, &p->ha);
    if (r == ncclSuccess) r = ncclCommRegister(comm, p->b, cap * 4, &p->hb);
    if (r != ncclSuccess)
        FAIL("ncclMemAlloc/ncclCommRegister of %zu bytes -> %d: %s", cap * 4, (int)r,
             ncclGetLastError(NULL));
    return r == ncclSuccess;
}

static void pair_free(ncclComm_t comm, buf_pair_t *p)
{
    if (!p->zc) {
        free(p->a);
        free(p->b);
        return;
    }
    NCCLCHECK(ncclCommDeregister(comm, p->ha));
    NCCLCHECK(ncclCommDeregister(comm, p->hb));
    NCCLCHECK(ncclMemFree(p->a));
    NCCLCHECK(ncclMemFree(p->b));
}

static int32_t b2b_val(int r, size_t i, int it) { return (r + 1) * 1000 + (int32_t)(i % 997) + it; }

/*
 * Back-to-back collectives of changing sizes and kinds on the same two buffers, with nothing
 * between them but this rank's own check of every element (no barrier, no sleep): allreduce of
 * 32 B, 1 KiB and 70 KiB, allgather, reduce-scatter (out of place and in place), interleaved,
 * every step with new values. `zc`: buffers from ncclMemAlloc, registered (zero-copy), else
 * malloc (staged).
 */
static void t_back_to_back(ncclComm_t comm, int rank, int n, bool zc)
{
    const size_t cap = 70 * 1024 / 4 * 4; /* int32 elements: room for every step below */
    buf_pair_t bufs;
    if (!pair_alloc(comm, cap, zc, &bufs)) return;
    int32_t *a = bufs.a, *b = bufs.b;
    /* kind: 0 allreduce, 1 allgather, 2 reduce-scatter, 3 reduce-scatter in place;
     * count: elements per rank for 1-3 */
    static const struct {
        int kind;
        size_t count;
    } steps[] = {{0, 8},    {0, 256}, {0, 17920}, {1, 64},  {0, 8},   {2, 256}, {0, 17920},
                 {1, 4096}, {0, 256}, {3, 64},    {0, 8},   {2, 4096}, {1, 8},  {0, 17920},
                 {3, 1024}, {0, 8}};
    const int nsteps = (int)(sizeof steps / sizeof *steps);
    const char *mem = zc ? "ncclMemAlloc" : "malloc";
    for (int it = 0; it < 6 * nsteps && !g_fails; it++) {
        int kind = steps[it % nsteps].kind;
        size_t count = steps[it % nsteps].count, bad = 0, first = 0;
        int32_t got = 0, want = 0;
        if (kind == 0) {
            for (size_t i = 0; i < count; i++) a[i] = b2b_val(rank, i, it);
            NCCLCHECK(ncclAllReduce(a, b, count, ncclInt32, ncclSum, comm, NULL));
            for (size_t i = 0; i < count; i++) {
                int32_t w = 0;
                for (int r = 0; r < n; r++) w += b2b_val(r, i, it);
                if (b[i] != w && !bad++) first = i, got = b[i], want = w;
            }
        } else if (kind == 1) {
            for (size_t i = 0; i < count; i++) a[i] = b2b_val(rank, i, it);
            NCCLCHECK(ncclAllGather(a, b, count, ncclInt32, comm, NULL));
            for (size_t i = 0; i < count * (size_t)n; i++) {
                int32_t w = b2b_val((int)(i / count), i % count, it);
                if (b[i] != w && !bad++) first = i, got = b[i], want = w;
            }
        } else {
            for (size_t i = 0; i < count * (size_t)n; i++) a[i] = b2b_val(rank, i, it);
            int32_t *out = kind == 2 ? b : a + (size_t)rank * count;
            NCCLCHECK(ncclReduceScatter(a, out, count, ncclInt32, ncclSum, comm, NULL));
            for (size_t i = 0; i < count; i++) {
                int32_t w = 0;
                for (int r = 0; r < n; r++) w += b2b_val(r, (size_t)rank * count + i, it);
                if (out[i] != w && !bad++) first = i, got = out[i], want = w;
            }
        }
        if (bad)
            FAIL("back-to-back (%s) step %d: kind %d count %zu: %zu wrong elements, first %zu "
                 "is %d, expected %d", mem, it, kind, count, bad, first, (int)got, (int)want);
    }
    /* then uint8 allreduces alternating with nothing but the check between them (the
     * sizes of tests/unit/test_executor.c's size cycle, which failed without the fence) */
    static const size_t cycle[] = {32, 32, 1024, 1024, 70016, 70016, 8, 4096, 200, 70016, 2048};
    uint8_t *a8 = (uint8_t *)a, *b8 = (uint8_t *)b;
    for (int it = 0; it < 300 && !g_fails; it++) {
        size_t count = cycle[(size_t)it % (sizeof cycle / sizeof *cycle)];
        for (size_t i = 0; i < count; i++) a8[i] = (uint8_t)(rank + i + (size_t)it);
        NCCLCHECK(ncclAllReduce(a8, b8, count, ncclUint8, ncclSum, comm, NULL));
        for (size_t i = 0; i < count; i++) {
            uint8_t w = 0;
            for (int r = 0; r < n; r++) w = (uint8_t)(w + r + i + (size_t)it);
            if (b8[i] != w) {
                FAIL("back-to-back (%s) uint8 allreduce %d of %zu bytes: byte %zu is %u, "
                     "expected %u", mem, it, count, i, b8[i], w);
                break;
            }
        }
    }
    pair_free(comm, &bufs);
}

/*
 * Send/recv of growing sizes on the same buffers, as tests/gpu/torch_nccl.py issues them through
 * PyTorch (whose caching allocator hands the same addresses back): at each size a ring
 * (grouped send + receive) and, with an even rank count, pairs (send then receive, or receive
 * then send, each alone). The buffers move inside their allocations from call to call, each
 * rank its own way (the caching allocator's offsets differ per rank): a rank's buffer may be
 * new while its peer's is the one of an earlier call. On an H200 the 512 B ring after the 64 B
 * pairs delivered only the first 64 B. `zc`: ncclMemAlloc'd and registered, else malloc.
 */
static void t_p2p_sizes(ncclComm_t comm, int rank, int n, bool zc)
{
    static const size_t counts_p2p[] = {2, 16, 128, 1024, 8192, 65536, 16, 2, 65536, 128};
    const size_t cap = 65536 + 256;
    buf_pair_t bufs;
    if (!pair_alloc(comm, cap, zc, &bufs)) return;
    int32_t *s0 = bufs.a, *r0 = bufs.b;
    const char *mem = zc ? "ncclMemAlloc" : "malloc";
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n, peer = rank ^ 1;
    for (size_t k = 0; k < sizeof counts_p2p / sizeof *counts_p2p && !g_fails; k++) {
        const size_t count = counts_p2p[k];
        for (int pass = 0; pass < 2 && !g_fails; pass++) {
            const bool ring = pass == 0;
            if (!ring && n % 2) break;
            const int from = ring ? prev : peer;
            /* offsets (elements): the send buffer moves on odd ranks only, the receive
             * buffer on every rank, with another period */
            int32_t *s = s0 + (rank % 2 ? (k % 2) * 64 : 0), *r = r0 + ((k + pass) % 3) * 32;
            for (size_t i = 0; i < count; i++) s[i] = b2b_val(rank, i, (int)(k * 2) + pass);
            for (size_t i = 0; i < count; i++) r[i] = -1;
            if (ring) {
                NCCLCHECK(ncclGroupStart());
                NCCLCHECK(ncclSend(s, count, ncclInt32, next, comm, NULL));
                NCCLCHECK(ncclRecv(r, count, ncclInt32, prev, comm, NULL));
                NCCLCHECK(ncclGroupEnd());
            } else if (rank % 2 == 0) {
                NCCLCHECK(ncclSend(s, count, ncclInt32, peer, comm, NULL));
                NCCLCHECK(ncclRecv(r, count, ncclInt32, peer, comm, NULL));
            } else {
                NCCLCHECK(ncclRecv(r, count, ncclInt32, peer, comm, NULL));
                NCCLCHECK(ncclSend(s, count, ncclInt32, peer, comm, NULL));
            }
            size_t bad = 0, first = 0;
            for (size_t i = 0; i < count; i++)
                if (r[i] != b2b_val(from, i, (int)(k * 2) + pass) && !bad++) first = i;
            if (bad)
                FAIL("send/recv of growing sizes (%s): %s of %zu elements (step %zu): %zu "
                     "wrong, first [%zu] is %d, expected %d", mem, ring ? "ring" : "pair", count,
                     k, bad, first, (int)r[first], (int)b2b_val(from, first, (int)(k * 2) + pass));
        }
    }
    pair_free(comm, &bufs);
}

/*
 * Zero-copy across ncclMemFree: allreduce on ncclMemAlloc'd buffers, free them, allocate the
 * same sizes again (the same addresses, as the allocator usually hands back) and allreduce
 * new values. A context kept from the first buffers would use the peers' old memory. Sizes
 * from a packet plan's to the largest Simple one's.
 */
static void t_realloc(ncclComm_t comm, int rank, int n)
{
    static const size_t counts_rl[] = {8, 1024, 65536, 262144};
    int same = 0;
    for (size_t k = 0; k < sizeof counts_rl / sizeof *counts_rl; k++) {
        size_t count = counts_rl[k];
        void *prev_a = NULL, *prev_b = NULL;
        for (int round = 0; round < 3; round++) {
            int32_t *a = NULL, *b = NULL;
            NCCLCHECK(ncclMemAlloc((void **)&a, count * 4));
            NCCLCHECK(ncclMemAlloc((void **)&b, count * 4));
            bool again = a == prev_a && b == prev_b;
            same += again;
            prev_a = a;
            prev_b = b;
            int it = 100 * round + (int)k;
            for (size_t i = 0; i < count; i++) a[i] = b2b_val(rank, i, it);
            NCCLCHECK(ncclAllReduce(a, b, count, ncclInt32, ncclSum, comm, NULL));
            size_t bad = 0, first = 0;
            for (size_t i = 0; i < count; i++) {
                int32_t w = 0;
                for (int r = 0; r < n; r++) w += b2b_val(r, i, it);
                if (b[i] != w && !bad++) first = i;
            }
            if (bad)
                FAIL("allreduce of %zu int32 on buffers allocated again (round %d, same address "
                     "%s): %zu wrong, first %zu is %d", count, round,
                     again ? "yes" : "no", bad, first, (int)b[first]);
            NCCLCHECK(ncclMemFree(a));
            NCCLCHECK(ncclMemFree(b));
            /* allgather (a DSL plan that writes the peers' outputs, when the test loads it) */
            size_t per = count / (size_t)n / 16 * 16 + 16;
            NCCLCHECK(ncclMemAlloc((void **)&a, per * 4));
            NCCLCHECK(ncclMemAlloc((void **)&b, per * 4 * (size_t)n));
            for (size_t i = 0; i < per; i++) a[i] = b2b_val(rank, i, it + 1);
            NCCLCHECK(ncclAllGather(a, b, per, ncclInt32, comm, NULL));
            bad = 0;
            for (size_t i = 0; i < per * (size_t)n; i++)
                if (b[i] != b2b_val((int)(i / per), i % per, it + 1) && !bad++) first = i;
            if (bad)
                FAIL("allgather of %zu int32 per rank on buffers allocated again (round %d): "
                     "%zu wrong, first %zu is %d, expected %d", per, round, bad, first,
                     (int)b[first], (int)b2b_val((int)(first / per), first % per, it + 1));
            NCCLCHECK(ncclMemFree(a));
            NCCLCHECK(ncclMemFree(b));
        }
    }
    /* said so the test shows it exercised the case it is about */
    if (rank == 0) {
        printf("realloc: %d of 8 allreduce reallocations came back at the same addresses\n", same);
        fflush(stdout); /* the rank ends with _exit */
    }
    /* registered malloc memory cannot be shared: staged, still correct */
    size_t count = 4096;
    int32_t *a = alloc(count, ncclInt32), *b = alloc(count, ncclInt32);
    void *ha, *hb;
    NCCLCHECK(ncclCommRegister(comm, a, count * 4, &ha));
    NCCLCHECK(ncclCommRegister(comm, b, count * 4, &hb));
    for (size_t i = 0; i < count; i++) a[i] = b2b_val(rank, i, 7);
    NCCLCHECK(ncclAllReduce(a, b, count, ncclInt32, ncclSum, comm, NULL));
    for (size_t i = 0; i < count; i++) {
        int32_t w = 0;
        for (int r = 0; r < n; r++) w += b2b_val(r, i, 7);
        if (b[i] != w) {
            FAIL("allreduce on registered malloc memory: element %zu is %d, expected %d", i,
                 (int)b[i], (int)w);
            break;
        }
    }
    NCCLCHECK(ncclCommDeregister(comm, ha));
    NCCLCHECK(ncclCommDeregister(comm, hb));
    free(a);
    free(b);
}

/* ---- ranks that disagree ---- */

/* One allreduce of `count` x dt (sum) from fresh buffers; checks the sum when want_ok. */
static ncclResult_t mismatch_call(ncclComm_t comm, int n, size_t count, ncclDataType_t dt,
                                  bool want_ok, const char *what)
{
    void *s = alloc(count, dt), *r = alloc(count, dt);
    fill(s, dt, count, g_rank);
    ncclResult_t res = ncclAllReduce(s, r, count, dt, ncclSum, comm, NULL);
    if (want_ok && res != ncclSuccess)
        FAIL("%s: ncclAllReduce -> %d: %s", what, (int)res, ncclGetLastError(NULL));
    else if (want_ok) CHECK_ELEMS(what, r, dt, count, expect_reduced(ncclSum, dt, n, i), false);
    free(s);
    free(r);
    return res;
}

/* The last rank disagrees with the others (count, then dtype, each as the first call of a
 * shape and as a repeat of an agreeing call): an error on every rank that names the
 * disagreement, never success with wrong data; then the agreeing call is right. */
static void t_mismatch(ncclComm_t comm, int rank, int n)
{
    const bool odd = rank == n - 1;
    struct {
        const char *what;
        size_t count;
        ncclDataType_t dt;
        bool warm;
    } cases[] = {
        {"count 1024 vs 2048", odd ? 2048 : 1024, ncclFloat32, false},
        {"count 1024 vs 2048 after an agreeing call", odd ? 2048 : 1024, ncclFloat32, true},
        {"float32 vs int32", 1024, odd ? ncclInt32 : ncclFloat32, false},
        {"float32 vs int32 after an agreeing call", 1024, odd ? ncclInt32 : ncclFloat32, true},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        if (cases[k].warm &&
            mismatch_call(comm, n, 1024, ncclFloat32, true, "agreeing call") != ncclSuccess)
            return;
        ncclResult_t res = mismatch_call(comm, n, cases[k].count, cases[k].dt, false, "");
        const char *m = ncclGetLastError(NULL);
        if (res == ncclSuccess)
            FAIL("%s: the ranks disagree and ncclAllReduce returned ncclSuccess", cases[k].what);
        else if (!m || !strstr(m, "disagree"))
            FAIL("%s: ncclAllReduce -> %d, the last error does not say the ranks disagree: %s",
                 cases[k].what, (int)res, m ? m : "(null)");
        else printf("rank %d: %s: %d: %s\n", rank, cases[k].what, (int)res, m);
        char what[160];
        snprintf(what, sizeof what, "the agreeing call after \"%s\"", cases[k].what);
        if (mismatch_call(comm, n, 1024, ncclFloat32, true, what) != ncclSuccess) return;
    }
}

/* ---- driver ---- */

static int run_rank(const char *mode, int rank, int n, ncclUniqueId id)
{
    g_rank = rank;
    if (!strcmp(mode, "p2pnodes")) {
        /* two "nodes" on this machine (MSCCLPP_NODE_ID): port channels between them */
        char node[32];
        snprintf(node, sizeof node, "nccl-test-node-%d", rank % 2);
        setenv("MSCCLPP_NODE_ID", node, 1);
    }
    ncclComm_t comm = NULL;
    ncclResult_t res;
    if (rank % 2) {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        res = ncclCommInitRankConfig(&comm, n, id, rank, &cfg);
    } else {
        res = ncclCommInitRank(&comm, n, id, rank);
    }
    if (res != ncclSuccess) {
        FAIL("ncclCommInitRank -> %d: %s", (int)res, ncclGetLastError(NULL));
        return 1;
    }
    int cnt = -1, ur = -1, dev = -1, ver = 0;
    ncclResult_t async = ncclInternalError;
    if (ncclCommCount(comm, &cnt) || ncclCommUserRank(comm, &ur) ||
        ncclCommCuDevice(comm, &dev) || ncclGetVersion(&ver) ||
        ncclCommGetAsyncError(comm, &async))
        FAIL("communicator queries failed: %s", ncclGetLastError(comm));
    if (cnt != n || ur != rank || dev < 0 || ver < 22800 || async != ncclSuccess)
        FAIL("count %d rank %d device %d version %d async %d", cnt, ur, dev, ver, (int)async);

    if (!strcmp(mode, "ranks")) {
        t_allreduce(comm, rank, n);
        t_broadcast_reduce(comm, rank, n);
        t_allgather_rs_a2a(comm, rank, n);
        t_p2p(comm, rank, n);
        t_group_collectives(comm, rank, n);
        t_premulsum(comm, rank, n);
        t_memory(comm, rank, n);
        t_split(comm, rank, n);
        t_errors(comm, rank, n);
#ifdef WITH_MSCCLPP_STREAM
        t_our_stream(comm, rank, n);
#endif
    } else if (!strcmp(mode, "backtoback")) {
        t_back_to_back(comm, rank, n, false);
        t_back_to_back(comm, rank, n, true);
    } else if (!strcmp(mode, "p2psizes")) {
        t_p2p_sizes(comm, rank, n, false);
        t_p2p_sizes(comm, rank, n, true);
    } else if (!strcmp(mode, "realloc")) {
        t_realloc(comm, rank, n);
    } else if (!strcmp(mode, "p2pnodes")) {
        t_p2p(comm, rank, n);
#ifdef WITH_MSCCLPP_STREAM
    } else if (!strcmp(mode, "gate")) {
        t_stream_gate(comm, rank, n);
#endif
    } else if (!strcmp(mode, "mismatch")) {
        t_mismatch(comm, rank, n);
    } else {
        t_fallback(comm, rank, n, !strcmp(mode, "fallback"));
    }
    if (ncclCommFinalize(comm) != ncclSuccess)
        FAIL("ncclCommFinalize: %s", ncclGetLastError(comm));
    if (ncclCommDestroy(comm) != ncclSuccess) FAIL("ncclCommDestroy: %s", ncclGetLastError(NULL));
    return g_fails ? 1 : 0;
}

typedef struct {
    ncclComm_t comm;
    int rank, n;
    float *buf;
} initall_arg_t;

static int run_initall(int n)
{
    g_rank = 0;
    ncclComm_t comms[8];
    if (n > 8) n = 8;
    ncclResult_t res = ncclCommInitAll(comms, n, NULL);
    if (res != ncclSuccess) {
        FAIL("ncclCommInitAll(%d) -> %d: %s", n, (int)res, ncclGetLastError(NULL));
        return 1;
    }
    size_t count = 5000;
    float *bufs[8];
    for (int r = 0; r < n; r++) {
        int ur = -1;
        if (ncclCommUserRank(comms[r], &ur) != ncclSuccess || ur != r)
            FAIL("comm %d has rank %d", r, ur);
        bufs[r] = alloc(count, ncclFloat32);
        fill(bufs[r], ncclFloat32, count, r);
    }
    /* one thread drives every rank: the group lets them progress together */
    res = ncclGroupStart();
    for (int r = 0; r < n && res == ncclSuccess; r++)
        res = ncclAllReduce(bufs[r], bufs[r], count, ncclFloat32, ncclMax, comms[r], NULL);
    ncclResult_t e = ncclGroupEnd();
    if (res != ncclSuccess || e != ncclSuccess)
        FAIL("grouped allreduce over ncclCommInitAll comms -> %d/%d: %s", (int)res, (int)e,
             ncclGetLastError(NULL));
    for (int r = 0; r < n; r++) {
        CHECK_ELEMS("initall allreduce", bufs[r], ncclFloat32, count,
                    expect_reduced(ncclMax, ncclFloat32, n, i), false);
        free(bufs[r]);
        if (ncclCommDestroy(comms[r]) != ncclSuccess) FAIL("destroy %d", r);
    }
    return g_fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr,
                "usage: %s ranks|initall|backtoback|realloc|gate|p2pnodes|mismatch|fallback|"
                "nofallback N\n",
                argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    int n = atoi(argv[2]);
    if (n < 1 || n > 16) {
        fprintf(stderr, "N must be 1..16\n");
        return 2;
    }
    if (!strcmp(mode, "initall")) return run_initall(n);

    /* rank 0 makes the id and hands it to the others through one pipe each */
    int (*pipes)[2] = calloc((size_t)n, sizeof *pipes);
    for (int r = 1; r < n; r++)
        if (pipe(pipes[r]) != 0) return 2;
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] < 0) return 2;
        if (pids[r] == 0) {
            ncclUniqueId id;
            if (r == 0) {
                g_rank = 0;
                ncclResult_t res = ncclGetUniqueId(&id);
                if (res != ncclSuccess) {
                    FAIL("ncclGetUniqueId -> %d: %s", (int)res, ncclGetLastError(NULL));
                    memset(&id, 0, sizeof id); /* the others fail to join, within the timeout */
                }
                for (int p = 1; p < n; p++)
                    if (write(pipes[p][1], &id, sizeof id) != (ssize_t)sizeof id) _exit(2);
            } else if (read(pipes[r][0], &id, sizeof id) != (ssize_t)sizeof id) {
                _exit(2);
            }
            _exit(run_rank(mode, r, n, id));
        }
    }
    int failed = 0;
    for (int r = 0; r < n; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "rank %d: %s %d\n", r, WIFEXITED(st) ? "exit" : "signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            failed = 1;
        }
    }
    free(pipes);
    free(pids);
    return failed;
}
