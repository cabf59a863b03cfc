/*
 * A native allreduce for the host backend, in plain C (docs/python.md, "Native algorithms").
 *
 * Every rank sees every rank's input and scratch (MSCCLPP_NATIVE_PEER_MEMORY): it reduces its
 * own slice of all inputs into its scratch (reduce-scatter), then copies every rank's reduced
 * slice out of their scratch (all-gather). Host-side barriers order the phases, so in-place
 * calls are safe: nobody writes an output before every input has been read.
 *
 * Build: gcc -O2 -shared -fPIC -I<prefix>/include allreduce_native.c -o allreduce_native.so
 * (or mscclpp.compile_native("allreduce_native", "allreduce_native.c") from Python).
 */
#include <stdint.h>
#include <string.h>

#include <mscclpp/native.h>

#define SCRATCH_BYTES (4u << 20) /* one rank's reduced slice; bounds the message size */

/* out[i] = a[0][i] op a[1][i] op ... for one element type */
#define REDUCE_FN(T, NAME)                                                                     \
    static void NAME(T *out, void *const *in, size_t off, size_t n, int nin,                   \
                     mscclpp_redop_t op)                                                       \
    {                                                                                          \
        for (size_t i = 0; i < n; i++) {                                                       \
            T acc = ((const T *)in[0])[off + i];                                               \
            for (int r = 1; r < nin; r++) {                                                    \
                T v = ((const T *)in[r])[off + i];                                             \
                switch (op) {                                                                  \
                case MSCCLPP_PROD: acc = (T)(acc * v); break;                                  \
                case MSCCLPP_MIN: acc = v < acc ? v : acc; break;                              \
                case MSCCLPP_MAX: acc = v > acc ? v : acc; break;                              \
                default: acc = (T)(acc + v); break;                                            \
                }                                                                              \
            }                                                                                  \
            out[i] = acc;                                                                      \
        }                                                                                      \
    }
REDUCE_FN(float, reduce_f32)
REDUCE_FN(double, reduce_f64)
REDUCE_FN(int32_t, reduce_i32)
REDUCE_FN(uint32_t, reduce_u32)
REDUCE_FN(int8_t, reduce_i8)
REDUCE_FN(uint8_t, reduce_u8)

static mscclpp_result_t allreduce(const mscclpp_native_call_t *c)
{
    const mscclpp_native_services_t *s = c->services;
    size_t es;
    switch (c->dtype) {
    case MSCCLPP_FLOAT32: case MSCCLPP_INT32: case MSCCLPP_UINT32: es = 4; break;
    case MSCCLPP_FLOAT64: es = 8; break;
    case MSCCLPP_INT8: case MSCCLPP_UINT8: es = 1; break;
    default:
        return s->report_error(MSCCLPP_ERR_UNSUPPORTED, "dtype %d is not implemented", c->dtype);
    }
    if (strcmp(c->backend, "host") != 0)
        return s->report_error(MSCCLPP_ERR_UNSUPPORTED, "this C version runs on the host "
                               "backend only (allreduce_native_cuda.cu is the CUDA one), not on "
                               "%s", c->backend);
    if (c->input_bytes != c->output_bytes || c->input_bytes % es)
        return s->report_error(MSCCLPP_ERR_INVALID_ARG, "input %zu and output %zu bytes must be "
                               "equal and whole elements", c->input_bytes, c->output_bytes);
    size_t count = c->input_bytes / es, n = (size_t)c->nranks;
    size_t chunk = (count + n - 1) / n;
    if (chunk * es > c->scratch_bytes)
        return s->report_error(MSCCLPP_ERR_UNSUPPORTED, "%zu elements per rank do not fit the "
                               "%zu-byte scratch", chunk, c->scratch_bytes);
    size_t lo = (size_t)c->rank * chunk < count ? (size_t)c->rank * chunk : count;
    size_t hi = lo + chunk < count ? lo + chunk : count;

    mscclpp_result_t r = s->barrier(c); /* every input is ready */
    if (r != MSCCLPP_OK) return r;
    void *out = c->scratch;
    void *const *in = c->peer_input;
    size_t len = hi - lo;
    switch (c->dtype) {
    case MSCCLPP_FLOAT32: reduce_f32(out, in, lo, len, c->nranks, c->op); break;
    case MSCCLPP_FLOAT64: reduce_f64(out, in, lo, len, c->nranks, c->op); break;
    case MSCCLPP_INT32: reduce_i32(out, in, lo, len, c->nranks, c->op); break;
    case MSCCLPP_UINT32: reduce_u32(out, in, lo, len, c->nranks, c->op); break;
    case MSCCLPP_INT8: reduce_i8(out, in, lo, len, c->nranks, c->op); break;
    default: reduce_u8(out, in, lo, len, c->nranks, c->op); break;
    }
    if ((r = s->barrier(c)) != MSCCLPP_OK) return r; /* every slice reduced, every input read */
    for (size_t p = 0; p < n; p++) {
        size_t plo = p * chunk < count ? p * chunk : count;
        size_t phi = plo + chunk < count ? plo + chunk : count;
        memcpy((char *)c->output + plo * es, c->peer_scratch[p], (phi - plo) * es);
    }
    return s->barrier(c); /* every slice copied out: the scratch is free for the next call */
}

static const mscclpp_native_algorithm_t algorithms[] = {
    {
        .name = "native_allreduce_c",
        .collective = "allreduce",
        .flags = MSCCLPP_NATIVE_INPLACE | MSCCLPP_NATIVE_OUT_OF_PLACE | MSCCLPP_NATIVE_PEER_MEMORY,
        .max_message_size = SCRATCH_BYTES, /* a rank's slice is at most the whole message */
        .scratch_bytes = SCRATCH_BYTES,
        .nblocks = 1,
        .execute = allreduce,
    },
};

MSCCLPP_NATIVE_MODULE(algorithms)
