/*
 * mscclpp-bench data helpers (see bench_data.h). Everything here is host code and independent
 * of the library's own conversions, so the check is a second opinion on the reduce kernels.
 */
#include "tools/bench_data.h"

#include <math.h>
#include <string.h>
#include <strings.h>

static const char *const coll_names[BENCH_COLL_COUNT] = {
    [BENCH_ALLREDUCE] = "allreduce", [BENCH_ALLGATHER] = "allgather",
    [BENCH_REDUCESCATTER] = "reducescatter", [BENCH_ALLTOALL] = "alltoall",
    [BENCH_BROADCAST] = "broadcast",
};

const char *bench_coll_name(bench_coll_t coll)
{
    return coll >= 0 && coll < BENCH_COLL_COUNT ? coll_names[coll] : "unknown";
}

int bench_coll_parse(const char *name)
{
    for (int c = 0; c < BENCH_COLL_COUNT; c++)
        if (strcmp(name, coll_names[c]) == 0) return c;
    return -1;
}

int bench_coll_reduces(bench_coll_t coll)
{
    return coll == BENCH_ALLREDUCE || coll == BENCH_REDUCESCATTER;
}

double bench_busbw_factor(bench_coll_t coll, int nranks)
{
    double n = nranks;
    switch (coll) {
    case BENCH_ALLREDUCE: return 2.0 * (n - 1) / n;
    case BENCH_ALLGATHER:
    case BENCH_REDUCESCATTER:
    case BENCH_ALLTOALL: return (n - 1) / n;
    default: return 1.0;
    }
}

static const char *const dtype_names[MSCCLPP_DTYPE_COUNT] = {
    [MSCCLPP_FLOAT32] = "float",    [MSCCLPP_FLOAT16] = "half",   [MSCCLPP_BFLOAT16] = "bfloat16",
    [MSCCLPP_INT32] = "int32",      [MSCCLPP_UINT32] = "uint32",  [MSCCLPP_INT8] = "int8",
    [MSCCLPP_UINT8] = "uint8",      [MSCCLPP_FLOAT64] = "double", [MSCCLPP_FP8_E4M3] = "fp8e4m3",
    [MSCCLPP_FP8_E5M2] = "fp8e5m2", [MSCCLPP_INT64] = "int64",    [MSCCLPP_UINT64] = "uint64",
};

int bench_dtype_parse(const char *name)
{
    static const struct {
        const char *alias;
        mscclpp_dtype_t dtype;
    } aliases[] = {
        {"float32", MSCCLPP_FLOAT32},   {"fp32", MSCCLPP_FLOAT32},
        {"float16", MSCCLPP_FLOAT16},   {"fp16", MSCCLPP_FLOAT16},
        {"bf16", MSCCLPP_BFLOAT16},     {"float64", MSCCLPP_FLOAT64},
        {"int", MSCCLPP_INT32},         {"fp8_e4m3", MSCCLPP_FP8_E4M3},
        {"fp8_e5m2", MSCCLPP_FP8_E5M2},
    };
    for (int d = 0; d < MSCCLPP_DTYPE_COUNT; d++)
        if (strcasecmp(name, dtype_names[d]) == 0) return d;
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (strcasecmp(name, aliases[i].alias) == 0) return aliases[i].dtype;
    return -1;
}

const char *bench_dtype_name(mscclpp_dtype_t dtype)
{
    return dtype >= 0 && dtype < MSCCLPP_DTYPE_COUNT ? dtype_names[dtype] : "unknown";
}

static const char *const redop_names[BENCH_NOPS] = {"sum", "prod", "min", "max", "avg"};

int bench_redop_parse(const char *name)
{
    for (int op = 0; op < BENCH_NOPS; op++)
        if (strcasecmp(name, redop_names[op]) == 0) return op;
    return -1;
}

const char *bench_redop_name(mscclpp_redop_t op)
{
    return (int)op >= 0 && (int)op < BENCH_NOPS ? redop_names[op] : "unknown";
}

/* --- small floating-point formats ----------------------------------------------------------- */

typedef struct {
    int ebits, mbits, bias;
    int fn; /* e4m3 "fn": no infinities, the all-ones pattern is the only NaN, max 448 */
} minifloat_t;

static const minifloat_t fmt_half = {5, 10, 15, 0};
static const minifloat_t fmt_bf16 = {8, 7, 127, 0};
static const minifloat_t fmt_e4m3 = {4, 3, 7, 1};
static const minifloat_t fmt_e5m2 = {5, 2, 15, 0};

static double mini_decode(const minifloat_t *f, uint32_t bits)
{
    uint32_t emax = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
    int sign = (bits >> (f->ebits + f->mbits)) & 1;
    uint32_t e = (bits >> f->mbits) & emax, m = bits & mmask;
    double v;
    if (f->fn && e == emax && m == mmask)
        v = NAN;
    else if (!f->fn && e == emax)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, 1 - f->bias - f->mbits);
    else
        v = ldexp((double)((1u << f->mbits) | m), (int)e - f->bias - f->mbits);
    return sign ? -v : v;
}

static uint32_t mini_encode(const minifloat_t *f, double v)
{
    uint32_t emax = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
    uint32_t sign = signbit(v) ? 1u << (f->ebits + f->mbits) : 0;
    uint32_t nan = f->fn ? (emax << f->mbits) | mmask : (emax << f->mbits) | (1u << (f->mbits - 1));
    uint32_t inf = f->fn ? nan : emax << f->mbits;
    if (isnan(v)) return nan;
    double a = fabs(v);
    if (a == 0) return sign;
    if (isinf(a)) return sign | inf;
    int e2;
    frexp(a, &e2); /* a = frac * 2^e2, frac in [0.5, 1) */
    int e = e2 - 1 + f->bias;
    uint32_t m;
    if (e >= 1) {
        double r = nearbyint(ldexp(a, f->mbits - (e2 - 1))); /* in [2^mbits, 2^(mbits+1)] */
        if (r >= (double)(2u << f->mbits)) {
            r = (double)(1u << f->mbits);
            e++;
        }
        m = (uint32_t)r & mmask;
    } else {
        double r = nearbyint(ldexp(a, f->bias - 1 + f->mbits));
        if (r >= (double)(1u << f->mbits)) {
            e = 1;
            m = 0;
        } else {
            e = 0;
            m = (uint32_t)r;
        }
    }
    /* Past the largest finite value: infinity, or NaN for e4m3fn (it has no infinity). */
    if ((!f->fn && (uint32_t)e >= emax) || (f->fn && ((uint32_t)e > emax ||
                                                      ((uint32_t)e == emax && m == mmask))))
        return sign | inf;
    return sign | ((uint32_t)e << f->mbits) | m;
}

double bench_load(mscclpp_dtype_t dtype, const void *buf, size_t i)
{
    const unsigned char *p = buf;
    switch (dtype) {
    case MSCCLPP_FLOAT32: {
        float v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    case MSCCLPP_FLOAT64: {
        double v;
        memcpy(&v, p + 8 * i, 8);
        return v;
    }
    case MSCCLPP_FLOAT16:
    case MSCCLPP_BFLOAT16: {
        uint16_t v;
        memcpy(&v, p + 2 * i, 2);
        return mini_decode(dtype == MSCCLPP_FLOAT16 ? &fmt_half : &fmt_bf16, v);
    }
    case MSCCLPP_INT32: {
        int32_t v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    case MSCCLPP_UINT32: {
        uint32_t v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    case MSCCLPP_INT64: {
        int64_t v;
        memcpy(&v, p + 8 * i, 8);
        return (double)v;
    }
    case MSCCLPP_UINT64: {
        uint64_t v;
        memcpy(&v, p + 8 * i, 8);
        return (double)v;
    }
    case MSCCLPP_INT8: return (int8_t)p[i];
    case MSCCLPP_UINT8: return p[i];
    case MSCCLPP_FP8_E4M3: return mini_decode(&fmt_e4m3, p[i]);
    case MSCCLPP_FP8_E5M2: return mini_decode(&fmt_e5m2, p[i]);
    default: return NAN;
    }
}

void bench_store(mscclpp_dtype_t dtype, void *buf, size_t i, double v)
{
    unsigned char *p = buf;
    /* Integers wrap like the fixed-width arithmetic of the kernels (modulo 2^bits). */
    uint64_t w = isfinite(v) ? (uint64_t)(int64_t)v : 0;
    switch (dtype) {
    case MSCCLPP_FLOAT32: {
        float f = (float)v;
        memcpy(p + 4 * i, &f, 4);
        break;
    }
    case MSCCLPP_FLOAT64: memcpy(p + 8 * i, &v, 8); break;
    case MSCCLPP_FLOAT16:
    case MSCCLPP_BFLOAT16: {
        uint16_t h = (uint16_t)mini_encode(dtype == MSCCLPP_FLOAT16 ? &fmt_half : &fmt_bf16, v);
        memcpy(p + 2 * i, &h, 2);
        break;
    }
    case MSCCLPP_INT32:
    case MSCCLPP_UINT32: {
        uint32_t u = (uint32_t)w;
        memcpy(p + 4 * i, &u, 4);
        break;
    }
    case MSCCLPP_INT64:
    case MSCCLPP_UINT64: memcpy(p + 8 * i, &w, 8); break;
    case MSCCLPP_INT8:
    case MSCCLPP_UINT8: p[i] = (unsigned char)w; break;
    case MSCCLPP_FP8_E4M3: p[i] = (unsigned char)mini_encode(&fmt_e4m3, v); break;
    case MSCCLPP_FP8_E5M2: p[i] = (unsigned char)mini_encode(&fmt_e5m2, v); break;
    default: break;
    }
}

/* --- input pattern -------------------------------------------------------------------------- */

static uint32_t mix(uint32_t rank, uint64_t idx)
{
    uint32_t h = (uint32_t)idx * 2654435761u ^ (uint32_t)(idx >> 32) * 40503u;
    h ^= rank * 0x9E3779B9u + 0x7F4A7C15u;
    h ^= h >> 16;
    h *= 0x7FEB352Du;
    h ^= h >> 15;
    h *= 0x846CA68Bu;
    h ^= h >> 16;
    return h;
}

static int dtype_unsigned(mscclpp_dtype_t dtype)
{
    return dtype == MSCCLPP_UINT8 || dtype == MSCCLPP_UINT32 || dtype == MSCCLPP_UINT64;
}

double bench_pattern(mscclpp_dtype_t dtype, mscclpp_redop_t op, int reduce, int rank, size_t idx)
{
    if (op == BENCH_AVG) op = MSCCLPP_SUM; /* a sum, divided afterwards */
    if (reduce && op == MSCCLPP_PROD) {
        /* Mostly 1, a 2 on every fourth rank of an element (so at most ceil(n/4) factors of 2:
           products stay far from int8 overflow), and -1 sprinkled in for signed types. */
        if ((idx + (size_t)rank) % 4 == 0) return 2;
        if (!dtype_unsigned(dtype) && (idx * 3 + (size_t)rank) % 7 == 1) return -1;
        return 1;
    }
    int lo, hi;
    if (reduce && op == MSCCLPP_SUM) {
        /* Sums of a few ranks stay exact (e5m2 holds integers up to 8, e4m3 up to 16). */
        switch (dtype) {
        case MSCCLPP_UINT8:
        case MSCCLPP_UINT32:
        case MSCCLPP_UINT64: lo = 0, hi = 6; break;
        case MSCCLPP_FP8_E5M2: lo = -1, hi = 1; break;
        case MSCCLPP_FP8_E4M3: lo = -2, hi = 2; break;
        default: lo = -3, hi = 3; break;
        }
    } else {
        /* Copies, min and max: as wide as the type holds exactly, so misplaced blocks show. */
        switch (dtype) {
        case MSCCLPP_INT8: lo = -100, hi = 100; break;
        case MSCCLPP_UINT8: lo = 0, hi = 120; break; /* below the poison byte 0x7B = 123 */
        case MSCCLPP_FP8_E4M3: lo = -16, hi = 16; break;
        case MSCCLPP_FP8_E5M2: lo = -8, hi = 8; break;
        case MSCCLPP_BFLOAT16: lo = -256, hi = 256; break;
        case MSCCLPP_FLOAT16: lo = -2048, hi = 2048; break;
        case MSCCLPP_UINT32:
        case MSCCLPP_UINT64: lo = 0, hi = 2000000; break;
        default: lo = -1000000, hi = 1000000; break;
        }
    }
    return lo + (int)(mix((uint32_t)rank, idx) % (uint32_t)(hi - lo + 1));
}

void bench_fill(bench_coll_t coll, mscclpp_dtype_t dtype, mscclpp_redop_t op, int rank, void *buf,
                size_t count)
{
    int reduce = bench_coll_reduces(coll);
    for (size_t k = 0; k < count; k++)
        bench_store(dtype, buf, k, bench_pattern(dtype, op, reduce, rank, k));
}

int bench_shape(bench_coll_t coll, size_t bytes, size_t esize, int nranks, bench_shape_t *shape)
{
    size_t n = bytes / esize, block;
    switch (coll) {
    case BENCH_ALLGATHER:
        block = n / (size_t)nranks;
        shape->send_count = block;
        shape->recv_count = block * (size_t)nranks;
        break;
    case BENCH_REDUCESCATTER:
        block = n / (size_t)nranks;
        shape->send_count = block * (size_t)nranks;
        shape->recv_count = block;
        break;
    case BENCH_ALLTOALL:
        block = n / (size_t)nranks;
        shape->send_count = shape->recv_count = block * (size_t)nranks;
        break;
    default:
        block = n;
        shape->send_count = shape->recv_count = n;
        break;
    }
    shape->block = block;
    return block > 0;
}

size_t bench_shape_bytes(bench_coll_t coll, const bench_shape_t *shape, size_t esize)
{
    return (coll == BENCH_ALLGATHER ? shape->recv_count : shape->send_count) * esize;
}

double bench_tolerance(mscclpp_dtype_t dtype)
{
    switch (dtype) {
    case MSCCLPP_FLOAT32: return 0x1p-23;
    case MSCCLPP_FLOAT64: return 0x1p-52;
    case MSCCLPP_FLOAT16: return 0x1p-10;
    case MSCCLPP_BFLOAT16: return 0x1p-7;
    case MSCCLPP_FP8_E4M3: return 0x1p-3;
    case MSCCLPP_FP8_E5M2: return 0x1p-2;
    default: return 0;
    }
}

static double reduce2(mscclpp_redop_t op, double a, double b)
{
    switch (op) {
    case MSCCLPP_PROD: return a * b;
    case MSCCLPP_MIN: return a < b ? a : b;
    case MSCCLPP_MAX: return a > b ? a : b;
    default: return a + b;
    }
}

size_t bench_check(bench_coll_t coll, mscclpp_dtype_t dtype, mscclpp_redop_t op, int rank,
                   int nranks, int root, const bench_shape_t *shape, const void *out)
{
    int reduce = bench_coll_reduces(coll);
    double eps = reduce ? bench_tolerance(dtype) * nranks : 0;
    unsigned char tmp[8];
    size_t wrong = 0, block = shape->block;
    for (size_t j = 0; j < shape->recv_count; j++) {
        double want;
        switch (coll) {
        case BENCH_ALLREDUCE:
        case BENCH_REDUCESCATTER: {
            size_t idx = coll == BENCH_ALLREDUCE ? j : (size_t)rank * block + j;
            want = bench_pattern(dtype, op, 1, 0, idx);
            for (int r = 1; r < nranks; r++)
                want = reduce2(op, want, bench_pattern(dtype, op, 1, r, idx));
            /* The ideal result in the dtype: rounded for floats, wrapped for integers. */
            bench_store(dtype, tmp, 0, want);
            want = bench_load(dtype, tmp, 0);
            if (op == BENCH_AVG) { /* that sum divided: integers truncate toward zero */
                want = bench_tolerance(dtype) > 0 ? want / nranks : trunc(want / nranks);
                bench_store(dtype, tmp, 0, want);
                want = bench_load(dtype, tmp, 0);
            }
            break;
        }
        case BENCH_ALLGATHER:
            want = bench_pattern(dtype, op, 0, (int)(j / block), j % block);
            break;
        case BENCH_ALLTOALL:
            want = bench_pattern(dtype, op, 0, (int)(j / block), (size_t)rank * block + j % block);
            break;
        default: want = bench_pattern(dtype, op, 0, root, j); break;
        }
        double got = bench_load(dtype, out, j);
        if (isnan(got) || fabs(got - want) > eps * (1 + fabs(want))) wrong++;
    }
    return wrong;
}
