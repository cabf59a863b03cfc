/*
 * Element types of the interpreter: software conversions of the small floats (float16,
 * bfloat16, fp8 e4m3/e5m2) to and from float with round-to-nearest-even, and the X-macro
 * lists that generate one reduce function per (dtype, op).
 *
 * Low-precision floats are loaded to float, reduced in float and rounded once when stored.
 * Integer sums and products wrap (computed in unsigned arithmetic); 8-bit integers are
 * reduced in 32 bits and truncated, which gives the same wrapped result. fp8 e4m3 (OCP "fn":
 * no infinities) saturates to +-448; e5m2 overflows to infinity like IEEE types.
 */
#ifndef MSCCLPP_KERN_DTYPE_H
#define MSCCLPP_KERN_DTYPE_H

#include "kernels/common/kern_args.h"
#include "kernels/common/kern_port.h"

typedef union {
    float f;
    uint32_t u;
} kern_f32_bits_t;

KERN_FN float kern_bits_f32(uint32_t u)
{
    kern_f32_bits_t b;
    b.u = u;
    return b.f;
}
KERN_FN uint32_t kern_f32_bits(float f)
{
    kern_f32_bits_t b;
    b.f = f;
    return b.u;
}

/*
 * Small float (1 sign, ebits exponent, mbits mantissa, bias) -> float. `ieee`: the top
 * exponent means inf/NaN (f16, e5m2); otherwise only the all-ones code is NaN (e4m3).
 */
KERN_FN float kern_small_to_f32(uint32_t v, int ebits, int mbits, int bias, int ieee)
{
    uint32_t sign = (v >> (ebits + mbits)) & 1u;
    uint32_t e = (v >> mbits) & ((1u << ebits) - 1u);
    uint32_t m = v & ((1u << mbits) - 1u);
    uint32_t emax = (1u << ebits) - 1u;
    uint32_t bits;
    if (e == 0) {
        /* zero or subnormal: m * 2^(1 - bias - mbits), exact in float */
        float f = (float)m * kern_bits_f32((uint32_t)(127 + 1 - bias - mbits) << 23);
        return sign ? -f : f;
    }
    if (ieee && e == emax) {
        bits = (sign << 31) | 0x7f800000u | (m ? 0x400000u : 0u);
        return kern_bits_f32(bits);
    }
    if (!ieee && e == emax && m == (1u << mbits) - 1u) return kern_bits_f32(0x7fc00000u);
    bits = (sign << 31) | ((e - (uint32_t)bias + 127u) << 23) | (m << (23 - mbits));
    return kern_bits_f32(bits);
}

/* float -> small float, round to nearest even. `maxfin`: largest finite code (no sign). */
KERN_FN uint32_t kern_f32_to_small(float f, int ebits, int mbits, int bias, int ieee,
                                   uint32_t maxfin)
{
    uint32_t u = kern_f32_bits(f);
    uint32_t sign = (u >> 31) << (ebits + mbits);
    uint32_t a = u & 0x7fffffffu;
    uint32_t inf = ((1u << ebits) - 1u) << mbits;
    uint32_t nan = ieee ? (inf | (1u << (mbits - 1))) : (inf | ((1u << mbits) - 1u));
    uint32_t r;
    if (a > 0x7f800000u) return sign | nan;
    if (a == 0x7f800000u) return sign | (ieee ? inf : maxfin);
    if (a < 0x00800000u) return sign; /* float subnormals are far below every target's range */
    {
        int e = (int)(a >> 23) - 127 + bias; /* target biased exponent */
        uint32_t mant = (a & 0x7fffffu) | 0x800000u;
        int shift = 23 - mbits;
        uint32_t q, rem, half;
        if (e < 1) {
            shift += 1 - e;
            if (shift > 24) return sign; /* below half the smallest subnormal */
            e = 0;
        }
        q = mant >> shift;
        rem = mant & ((1u << shift) - 1u);
        half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        if (e == 0) {
            r = q; /* q == 1<<mbits is the smallest normal, encoded the same way */
        } else {
            if (q == (2u << mbits)) {
                q >>= 1;
                e++;
            }
            if (e > 255) e = 255;
            r = ((uint32_t)e << mbits) | (q & ((1u << mbits) - 1u));
        }
    }
    if (r > maxfin) r = ieee ? inf : maxfin;
    return sign | r;
}

/* float16: one instruction each on CUDA (sm_53+), the same rounding as the software path
 * (round to nearest even, overflow to infinity); only a NaN's payload bits may differ */
#if defined(KERN_CUDA)
KERN_FN float kern_f16_to_f32(uint16_t v)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)v));
    return f;
}
KERN_FN uint16_t kern_f32_to_f16(float f)
{
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return (uint16_t)h;
}
#else
KERN_FN float kern_f16_to_f32(uint16_t v) { return kern_small_to_f32(v, 5, 10, 15, 1); }
KERN_FN uint16_t kern_f32_to_f16(float f)
{
    return (uint16_t)kern_f32_to_small(f, 5, 10, 15, 1, 0x7bffu);
}
#endif
KERN_FN float kern_bf16_to_f32(uint16_t v) { return kern_bits_f32((uint32_t)v << 16); }
KERN_FN uint16_t kern_f32_to_bf16(float f)
{
    uint32_t u = kern_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
KERN_FN float kern_e4m3_to_f32(uint8_t v) { return kern_small_to_f32(v, 4, 3, 7, 0); }
KERN_FN uint8_t kern_f32_to_e4m3(float f)
{
    return (uint8_t)kern_f32_to_small(f, 4, 3, 7, 0, 0x7eu);
}
KERN_FN float kern_e5m2_to_f32(uint8_t v) { return kern_small_to_f32(v, 5, 2, 15, 1); }
KERN_FN uint8_t kern_f32_to_e5m2(float f)
{
    return (uint8_t)kern_f32_to_small(f, 5, 2, 15, 1, 0x7bu);
}

/*
 * X(DT, ST, AT, UT, LOAD, STORE): storage type, accumulator type, the type sums and products
 * are computed in (unsigned for integers: wrap-around, no undefined overflow), and the
 * conversions storage -> accumulator -> storage.
 */
#define KERN_LD_SAME(v) (v)
#define KERN_DTYPE_LIST(X)                                                                     \
    X(F32, float, float, float, KERN_LD_SAME, (float))                                        \
    X(F16, uint16_t, float, float, kern_f16_to_f32, kern_f32_to_f16)                          \
    X(BF16, uint16_t, float, float, kern_bf16_to_f32, kern_f32_to_bf16)                       \
    X(I32, int32_t, int32_t, uint32_t, KERN_LD_SAME, (int32_t))                               \
    X(U32, uint32_t, uint32_t, uint32_t, KERN_LD_SAME, (uint32_t))                            \
    X(I8, int8_t, int32_t, uint32_t, (int32_t), (int8_t))                                     \
    X(U8, uint8_t, uint32_t, uint32_t, (uint32_t), (uint8_t))                                 \
    X(F64, double, double, double, KERN_LD_SAME, (double))                                    \
    X(E4M3, uint8_t, float, float, kern_e4m3_to_f32, kern_f32_to_e4m3)                        \
    X(E5M2, uint8_t, float, float, kern_e5m2_to_f32, kern_f32_to_e5m2)                        \
    X(I64, int64_t, int64_t, uint64_t, KERN_LD_SAME, (int64_t))                               \
    X(U64, uint64_t, uint64_t, uint64_t, KERN_LD_SAME, (uint64_t))

#define KERN_RED_OP_SUM(AT, UT, a, b) ((AT)((UT)(a) + (UT)(b)))
#define KERN_RED_OP_PROD(AT, UT, a, b) ((AT)((UT)(a) * (UT)(b)))
#define KERN_RED_OP_MIN(AT, UT, a, b) ((b) < (a) ? (b) : (a))
#define KERN_RED_OP_MAX(AT, UT, a, b) ((b) > (a) ? (b) : (a))

/* Expand G(DT, ST, AT, UT, LOAD, STORE, OP) for every op of one dtype. */
#define KERN_FOR_OPS(G, DT, ST, AT, UT, LOAD, STORE)                                           \
    G(DT, ST, AT, UT, LOAD, STORE, SUM)                                                        \
    G(DT, ST, AT, UT, LOAD, STORE, PROD)                                                       \
    G(DT, ST, AT, UT, LOAD, STORE, MIN)                                                        \
    G(DT, ST, AT, UT, LOAD, STORE, MAX)

KERN_FN uint32_t kern_dtype_size(uint32_t dt)
{
    switch (dt) {
    case KERN_DT_F64:
    case KERN_DT_I64:
    case KERN_DT_U64: return 8;
    case KERN_DT_F32:
    case KERN_DT_I32:
    case KERN_DT_U32: return 4;
    case KERN_DT_F16:
    case KERN_DT_BF16: return 2;
    default: return 1;
    }
}

#endif /* MSCCLPP_KERN_DTYPE_H */
