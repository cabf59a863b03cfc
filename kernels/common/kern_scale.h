/*
 * Elementwise scaling on a stream: dst[i] = src[i] * scalar, or dst[i] = src[i] / divisor.
 * What NCCL's PreMulSum (scale every rank's input before the sum) and ncclAvg (divide the sum
 * by the ranks) need of the device, stream-ordered and capturable, for
 * mscclpp_scale_async (hal/hal_api.c). One source for gcc (a host stream task), nvcc and hipcc
 * (kernels/cuda/kern_scale.cu, kernels/hip/kern_scale.hip), with kern_dtype.h's conversions.
 *
 * Arithmetic as the host's (nccl/nccl_util.c): integers multiply and divide in their own type
 * (C truncation), float16 and bfloat16 in float, rounded once; the fp8 types go through float
 * too. The scalar is given in the dtype: its bytes in `scalar`, or, when scalar_ptr is not
 * NULL, read from there when the work runs (NCCL's ncclScalarDevice).
 */
#ifndef MSCCLPP_KERN_SCALE_H
#define MSCCLPP_KERN_SCALE_H

#include "kernels/common/kern_dtype.h"

typedef struct {
    void *dst;
    const void *src;
    uint64_t count;
    const void *scalar_ptr; /* device (or host-mapped) address of the scalar, or NULL */
    uint64_t scalar;        /* else the scalar's bytes, in dtype, little-endian */
    int32_t dtype;          /* KERN_DT_* */
    int32_t divisor;        /* > 0: divide by it instead */
} kern_scale_args_t;

/* The scalar's bytes: from the argument or from memory. */
KERN_FN uint64_t kern_scale_scalar(const kern_scale_args_t *a)
{
    uint64_t v = 0;
    uint32_t n = kern_dtype_size((uint32_t)a->dtype), k;
    if (!a->scalar_ptr) return a->scalar;
    for (k = 0; k < n && k < 8; k++)
        v |= (uint64_t)((const uint8_t *)a->scalar_ptr)[k] << (8 * k);
    return v;
}

/* products wrap (computed unsigned), quotients truncate */
#define KERN_SCALE_INT(T)                                                                       \
    do {                                                                                        \
        const T *s_ = (const T *)a->src;                                                        \
        T *d_ = (T *)a->dst;                                                                    \
        T m_ = (T)bits;                                                                         \
        for (i = first; i < a->count; i += step)                                                \
            d_[i] = a->divisor > 0 ? (T)(s_[i] / (T)a->divisor)                                 \
                                   : (T)((uint32_t)s_[i] * (uint32_t)m_);                       \
    } while (0)

#define KERN_SCALE_INT64(T)                                                                     \
    do {                                                                                        \
        const T *s_ = (const T *)a->src;                                                        \
        T *d_ = (T *)a->dst;                                                                    \
        T m_ = (T)bits;                                                                         \
        for (i = first; i < a->count; i += step)                                                \
            d_[i] = a->divisor > 0 ? (T)(s_[i] / (T)a->divisor)                                 \
                                   : (T)((uint64_t)s_[i] * (uint64_t)m_);                       \
    } while (0)

#define KERN_SCALE_SMALL(LOAD, STORE)                                                           \
    do {                                                                                        \
        const uint16_t *s_ = (const uint16_t *)a->src;                                          \
        uint16_t *d_ = (uint16_t *)a->dst;                                                      \
        float m_ = LOAD((uint16_t)bits);                                                        \
        for (i = first; i < a->count; i += step) {                                              \
            float x_ = LOAD(s_[i]);                                                             \
            d_[i] = STORE(a->divisor > 0 ? x_ / (float)a->divisor : x_ * m_);                   \
        }                                                                                       \
    } while (0)

#define KERN_SCALE_FP8(LOAD, STORE)                                                             \
    do {                                                                                        \
        const uint8_t *s_ = (const uint8_t *)a->src;                                            \
        uint8_t *d_ = (uint8_t *)a->dst;                                                        \
        float m_ = LOAD((uint8_t)bits);                                                         \
        for (i = first; i < a->count; i += step) {                                              \
            float x_ = LOAD(s_[i]);                                                             \
            d_[i] = STORE(a->divisor > 0 ? x_ / (float)a->divisor : x_ * m_);                   \
        }                                                                                       \
    } while (0)

/* Elements first, first + step, ... of the work (one thread's share). */
KERN_FN void kern_scale_range(const kern_scale_args_t *a, uint64_t first, uint64_t step)
{
    uint64_t bits = kern_scale_scalar(a), i;
    switch (a->dtype) {
    case KERN_DT_F32: {
        const float *s = (const float *)a->src;
        float *d = (float *)a->dst;
        float m = kern_bits_f32((uint32_t)bits);
        for (i = first; i < a->count; i += step)
            d[i] = a->divisor > 0 ? s[i] / (float)a->divisor : s[i] * m;
        break;
    }
    case KERN_DT_F64: {
        const double *s = (const double *)a->src;
        double *d = (double *)a->dst;
        union {
            uint64_t u;
            double f;
        } m;
        m.u = bits;
        for (i = first; i < a->count; i += step)
            d[i] = a->divisor > 0 ? s[i] / (double)a->divisor : s[i] * m.f;
        break;
    }
    case KERN_DT_F16: KERN_SCALE_SMALL(kern_f16_to_f32, kern_f32_to_f16); break;
    case KERN_DT_BF16: KERN_SCALE_SMALL(kern_bf16_to_f32, kern_f32_to_bf16); break;
    case KERN_DT_E4M3: KERN_SCALE_FP8(kern_e4m3_to_f32, kern_f32_to_e4m3); break;
    case KERN_DT_E5M2: KERN_SCALE_FP8(kern_e5m2_to_f32, kern_f32_to_e5m2); break;
    case KERN_DT_I32: KERN_SCALE_INT(int32_t); break;
    case KERN_DT_U32: KERN_SCALE_INT(uint32_t); break;
    case KERN_DT_I8: KERN_SCALE_INT(int8_t); break;
    case KERN_DT_U8: KERN_SCALE_INT(uint8_t); break;
    case KERN_DT_I64: KERN_SCALE_INT64(int64_t); break;
    case KERN_DT_U64: KERN_SCALE_INT64(uint64_t); break;
    default: break; /* checked by the caller */
    }
}

#endif /* MSCCLPP_KERN_SCALE_H */
