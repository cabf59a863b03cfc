/* Host-side element conversions for the conformance reference (independent of kernels/). */
#ifndef MSCCLPP_CONF_REF_H
#define MSCCLPP_CONF_REF_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "mscclpp/mscclpp.h"

/* Encode v (finite, in range) with `mant` mantissa bits, exponent bias `bias`, `ebits`
 * exponent bits, rounding to nearest even; subnormals handled; no infinities produced. */
static inline uint32_t conf_encode(double v, int ebits, int mant, int bias)
{
    uint32_t sign = v < 0 ? 1u : 0u;
    double a = fabs(v);
    if (a == 0) return sign << (ebits + mant);
    int e = (int)floor(log2(a));
    if (e < 1 - bias) e = 1 - bias; /* subnormal range */
    double scaled = a / ldexp(1.0, e - mant); /* integer-ish mantissa incl. hidden bit */
    double r = nearbyint(scaled);             /* ties to even in the default mode */
    if (r >= ldexp(1.0, mant + 1)) {          /* rounding overflowed the mantissa */
        r /= 2;
        e++;
    }
    uint32_t m = (uint32_t)r;
    uint32_t biased = (m >> mant) ? (uint32_t)(e + bias) : 0u;
    return (sign << (ebits + mant)) | (biased << mant) | (m & ((1u << mant) - 1));
}

static inline double conf_decode(uint32_t bits, int ebits, int mant, int bias)
{
    uint32_t sign = (bits >> (ebits + mant)) & 1u;
    uint32_t e = (bits >> mant) & ((1u << ebits) - 1);
    uint32_t m = bits & ((1u << mant) - 1);
    double v = e ? ldexp(1.0 + (double)m / (1u << mant), (int)e - bias)
                 : ldexp((double)m / (1u << mant), 1 - bias);
    return sign ? -v : v;
}

static inline void conf_store(mscclpp_dtype_t dt, void *p, double v)
{
    switch (dt) {
    case MSCCLPP_FLOAT32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case MSCCLPP_FLOAT64: memcpy(p, &v, 8); break;
    case MSCCLPP_FLOAT16: { uint16_t h = (uint16_t)conf_encode(v, 5, 10, 15); memcpy(p, &h, 2); break; }
    case MSCCLPP_BFLOAT16: { uint16_t h = (uint16_t)conf_encode(v, 8, 7, 127); memcpy(p, &h, 2); break; }
    case MSCCLPP_FP8_E4M3: *(uint8_t *)p = (uint8_t)conf_encode(v, 4, 3, 7); break;
    case MSCCLPP_FP8_E5M2: *(uint8_t *)p = (uint8_t)conf_encode(v, 5, 2, 15); break;
    case MSCCLPP_INT32: { int32_t x = (int32_t)(int64_t)v; memcpy(p, &x, 4); break; }
    case MSCCLPP_UINT32: { uint32_t x = (uint32_t)(int64_t)v; memcpy(p, &x, 4); break; }
    case MSCCLPP_INT8: *(int8_t *)p = (int8_t)(int64_t)v; break;
    case MSCCLPP_UINT8: *(uint8_t *)p = (uint8_t)(int64_t)v; break;
    case MSCCLPP_INT64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    case MSCCLPP_UINT64: { uint64_t x = (uint64_t)(int64_t)v; memcpy(p, &x, 8); break; }
    default: break;
    }
}

static inline double conf_load(mscclpp_dtype_t dt, const void *p)
{
    switch (dt) {
    case MSCCLPP_FLOAT32: { float f; memcpy(&f, p, 4); return f; }
    case MSCCLPP_FLOAT64: { double d; memcpy(&d, p, 8); return d; }
    case MSCCLPP_FLOAT16: { uint16_t h; memcpy(&h, p, 2); return conf_decode(h, 5, 10, 15); }
    case MSCCLPP_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); return conf_decode(h, 8, 7, 127); }
    case MSCCLPP_FP8_E4M3: return conf_decode(*(const uint8_t *)p, 4, 3, 7);
    case MSCCLPP_FP8_E5M2: return conf_decode(*(const uint8_t *)p, 5, 2, 15);
    case MSCCLPP_INT32: { int32_t x; memcpy(&x, p, 4); return x; }
    case MSCCLPP_UINT32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case MSCCLPP_INT8: return *(const int8_t *)p;
    case MSCCLPP_UINT8: return *(const uint8_t *)p;
    case MSCCLPP_INT64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case MSCCLPP_UINT64: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
    default: return NAN;
    }
}

/* The value v becomes once stored in dt. */
static inline double conf_round(mscclpp_dtype_t dt, double v)
{
    uint8_t tmp[8];
    conf_store(dt, tmp, v);
    return conf_load(dt, tmp);
}

/* ---- the reference of a collective (both conformance suites) ---- */

/* Input element i of rank r, chosen so sums, products, min and max are exact or nearly so in
 * every type (small integers; products of powers of two). */
static inline double conf_input(mscclpp_dtype_t dt, mscclpp_redop_t op, int r, size_t i)
{
    bool is_unsigned = dt == MSCCLPP_UINT32 || dt == MSCCLPP_UINT8 || dt == MSCCLPP_UINT64;
    if (op == MSCCLPP_PROD) {
        static const double vals[] = {1, 2, 1, -1, 2, 1, -1, 1};
        double v = vals[(r * 3 + i * 5) % 8];
        return is_unsigned ? fabs(v) : v;
    }
    int v = (int)((r * 7 + i * 3 + i / 7) % 5);
    return is_unsigned ? (double)v : (double)(v - 2);
}

static inline double conf_combine(mscclpp_redop_t op, double a, double b)
{
    switch (op) {
    case MSCCLPP_PROD: return a * b;
    case MSCCLPP_MIN: return a < b ? a : b;
    case MSCCLPP_MAX: return a > b ? a : b;
    default: return a + b;
    }
}

static inline double conf_tolerance(mscclpp_dtype_t dt, int n, double expected)
{
    double eps;
    switch (dt) {
    case MSCCLPP_FLOAT16: eps = 1.0 / 1024; break;
    case MSCCLPP_BFLOAT16: eps = 1.0 / 128; break;
    case MSCCLPP_FP8_E4M3: eps = 1.0 / 8; break;
    case MSCCLPP_FP8_E5M2: eps = 1.0 / 4; break;
    case MSCCLPP_FLOAT32: eps = 1.0 / (1 << 23); break;
    default: return 0; /* integers and float64 here are exact */
    }
    return eps * n * (1 + fabs(expected));
}

/* Wrap an exact value the way the integer types of the reduction do. */
static inline double conf_wrap(mscclpp_dtype_t dt, double v)
{
    switch (dt) {
    case MSCCLPP_INT8: return (double)(int8_t)(int64_t)v;
    case MSCCLPP_UINT8: return (double)(uint8_t)(int64_t)v;
    case MSCCLPP_INT32: return (double)(int32_t)(int64_t)v;
    case MSCCLPP_UINT32: return (double)(uint32_t)(int64_t)v;
    default: return v;
    }
}

#endif
