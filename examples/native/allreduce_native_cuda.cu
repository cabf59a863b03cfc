/*
 * The CUDA version of allreduce_native.c: the same reduce-scatter + all-gather over every
 * rank's input and scratch, mapped into this process by the library (CUDA IPC), with the
 * kernels on the caller's stream and host barriers between the phases. Built by
 * mscclpp.compile_native("allreduce_native_cuda", "allreduce_native_cuda.cu") with nvcc.
 *
 * Simple rather than fast: each phase ends with a stream sync and a bootstrap barrier (a
 * device-side flag exchange through peer_scratch would avoid both). float32 only.
 */
#ifndef NATIVE_ALGO_NAME /* allreduce_native_hip.hip includes this file with HIP's names */
#include <cuda_runtime.h>
#define NATIVE_ALGO_NAME "native_allreduce_cuda"
#endif
#include <stdint.h>

#include <mscclpp/native.h>

#define SCRATCH_BYTES (4u << 20)
#define MAX_RANKS 16

struct peers {
    const float *in[MAX_RANKS];
    const float *scratch[MAX_RANKS];
};

__global__ void reduce_slice(struct peers p, int n, float *out, size_t lo, size_t len, int op)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < len;
         i += (size_t)gridDim.x * blockDim.x) {
        float acc = p.in[0][lo + i];
        for (int r = 1; r < n; r++) {
            float v = p.in[r][lo + i];
            acc = op == MSCCLPP_PROD ? acc * v
                : op == MSCCLPP_MIN  ? fminf(acc, v)
                : op == MSCCLPP_MAX  ? fmaxf(acc, v)
                                     : acc + v;
        }
        out[i] = acc;
    }
}

__global__ void gather_slices(struct peers p, int n, float *out, size_t chunk, size_t count)
{
    for (int r = 0; r < n; r++) {
        size_t lo = r * chunk < count ? r * chunk : count;
        size_t hi = lo + chunk < count ? lo + chunk : count;
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < hi - lo;
             i += (size_t)gridDim.x * blockDim.x)
            out[lo + i] = p.scratch[r][i];
    }
}

static mscclpp_result_t cuda_check(const mscclpp_native_call_t *c, cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return MSCCLPP_OK;
    return c->services->report_error(MSCCLPP_ERR_SYSTEM, "%s: %s", what, cudaGetErrorString(e));
}

static mscclpp_result_t phase_end(const mscclpp_native_call_t *c, cudaStream_t s)
{
    mscclpp_result_t r = cuda_check(c, cudaGetLastError(), "kernel launch");
    if (r == MSCCLPP_OK) r = cuda_check(c, cudaStreamSynchronize(s), "stream sync");
    return r == MSCCLPP_OK ? c->services->barrier(c) : r;
}

static mscclpp_result_t allreduce(const mscclpp_native_call_t *c)
{
    if (c->dtype != MSCCLPP_FLOAT32)
        return c->services->report_error(MSCCLPP_ERR_UNSUPPORTED, "dtype %d: float32 only",
                                         c->dtype);
    if (c->nranks > MAX_RANKS)
        return c->services->report_error(MSCCLPP_ERR_UNSUPPORTED, "at most %d ranks", MAX_RANKS);
    cudaStream_t s = (cudaStream_t)c->stream;
    size_t count = c->input_bytes / sizeof(float), n = (size_t)c->nranks;
    size_t chunk = (count + n - 1) / n;
    if (chunk * sizeof(float) > c->scratch_bytes)
        return c->services->report_error(MSCCLPP_ERR_UNSUPPORTED, "message too large");
    struct peers p;
    for (int r = 0; r < c->nranks; r++) {
        p.in[r] = (const float *)c->peer_input[r];
        p.scratch[r] = (const float *)c->peer_scratch[r];
    }
    size_t lo = c->rank * chunk < count ? c->rank * chunk : count;
    size_t hi = lo + chunk < count ? lo + chunk : count;
    int blocks = c->nblocks > 0 ? c->nblocks : 8;
    int threads = c->nthreads_per_block > 0 ? c->nthreads_per_block : 512;
    mscclpp_result_t r = cuda_check(c, cudaStreamSynchronize(s), "stream sync");
    if (r == MSCCLPP_OK) r = c->services->barrier(c); /* every input is ready */
    if (r != MSCCLPP_OK) return r;
    reduce_slice<<<blocks, threads, 0, s>>>(p, c->nranks, (float *)c->scratch, lo, hi - lo,
                                            (int)c->op);
    if ((r = phase_end(c, s)) != MSCCLPP_OK) return r;
    gather_slices<<<blocks, threads, 0, s>>>(p, c->nranks, (float *)c->output, chunk, count);
    return phase_end(c, s);
}

/* host code only: hipcc's device pass must not see host function pointers */
#if !defined(__HIP_DEVICE_COMPILE__)
static const mscclpp_native_algorithm_t algorithms[] = {
    {
        NATIVE_ALGO_NAME, "allreduce",
        MSCCLPP_NATIVE_INPLACE | MSCCLPP_NATIVE_OUT_OF_PLACE | MSCCLPP_NATIVE_PEER_MEMORY,
        0, MAX_RANKS, 0, SCRATCH_BYTES, SCRATCH_BYTES, 8, 512, NULL, allreduce, NULL,
    },
};

MSCCLPP_NATIVE_MODULE(algorithms)
#endif
