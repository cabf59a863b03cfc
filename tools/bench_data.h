/*
 * mscclpp-bench data helpers: collectives by name, element encoding for every dtype (including
 * half, bfloat16 and the fp8 formats, done in software), the deterministic input pattern each
 * rank fills, and the host-side check of a collective's output against the expected result.
 */
#ifndef MSCCLPP_TOOLS_BENCH_DATA_H
#define MSCCLPP_TOOLS_BENCH_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/mscclpp.h"

typedef enum {
    BENCH_ALLREDUCE = 0,
    BENCH_ALLGATHER,
    BENCH_REDUCESCATTER,
    BENCH_ALLTOALL,
    BENCH_BROADCAST,
    BENCH_COLL_COUNT
} bench_coll_t;

/** Byte that poisons output buffers before a checked call (never a value the pattern makes). */
#define BENCH_POISON 0x7B

const char *bench_coll_name(bench_coll_t coll);
/** Collective from its name ("allreduce", ...); -1 if unknown. */
int bench_coll_parse(const char *name);
/** True for collectives that reduce (allreduce, reducescatter). */
int bench_coll_reduces(bench_coll_t coll);
/** nccl-tests bus-bandwidth factor: busbw = algbw * factor. */
double bench_busbw_factor(bench_coll_t coll, int nranks);

/** Dtype from its bench name ("float", "half", "bfloat16", "fp8e4m3", ...); -1 if unknown. */
int bench_dtype_parse(const char *name);
/** Short name in the nccl-tests style ("float", "half", "bfloat16", "fp8e4m3", ...). */
const char *bench_dtype_name(mscclpp_dtype_t dtype);
/**
 * -o avg, NCCL's ncclAvg: the sum divided by the ranks (integers truncate), an op of the bench
 * past mscclpp_redop_t: the bench sums and then scales the result on the same stream
 * (mscclpp_scale_async), and times both.
 */
#define BENCH_AVG ((mscclpp_redop_t)MSCCLPP_REDOP_COUNT)
#define BENCH_NOPS (MSCCLPP_REDOP_COUNT + 1)
/** Reduction op from "sum", "prod", "min", "max", "avg"; -1 if unknown. */
int bench_redop_parse(const char *name);
/** "sum", "prod", "min", "max" or "avg". */
const char *bench_redop_name(mscclpp_redop_t op);

/** Element `i` of `buf` as a double (exact for every dtype). */
double bench_load(mscclpp_dtype_t dtype, const void *buf, size_t i);
/** Store `v` as element `i` of `buf` (rounded to nearest even; integers wrap). */
void bench_store(mscclpp_dtype_t dtype, void *buf, size_t i, double v);

/**
 * Element `idx` of the send buffer of `rank`: a small integer exact in `dtype`. Reductions get
 * a narrow range (sums of a few ranks stay exact; products stay small), copies a wide one.
 */
double bench_pattern(mscclpp_dtype_t dtype, mscclpp_redop_t op, int reduce, int rank, size_t idx);

/** Fill `count` elements of `buf` with `rank`'s input for the collective. */
void bench_fill(bench_coll_t coll, mscclpp_dtype_t dtype, mscclpp_redop_t op, int rank, void *buf,
                size_t count);

/** Shape of one call: element counts of both buffers and of one per-rank block. */
typedef struct {
    size_t send_count, recv_count; /* elements of the send and receive buffers */
    size_t block;                  /* per-rank block (allgather input, reducescatter output,
                                      alltoall block); the whole count otherwise */
} bench_shape_t;

/**
 * The call shape for `bytes` (nccl-tests size: allgather output, reducescatter input, buffer
 * size otherwise), rounded down to what the collective needs. Returns 0 if nothing is left.
 */
int bench_shape(bench_coll_t coll, size_t bytes, size_t esize, int nranks, bench_shape_t *shape);

/** Bytes the nccl-tests size column shows for a shape. */
size_t bench_shape_bytes(bench_coll_t coll, const bench_shape_t *shape, size_t esize);

/**
 * Count the elements of `out` (recv_count elements as `rank` received them) that differ from
 * the expected result; floating-point reductions allow eps * nranks * (1 + |expected|).
 */
size_t bench_check(bench_coll_t coll, mscclpp_dtype_t dtype, mscclpp_redop_t op, int rank,
                   int nranks, int root, const bench_shape_t *shape, const void *out);

/** Relative tolerance used for reductions in `dtype` (0 for integers). */
double bench_tolerance(mscclpp_dtype_t dtype);

#endif /* MSCCLPP_TOOLS_BENCH_DATA_H */
