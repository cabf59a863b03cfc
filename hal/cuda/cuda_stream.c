/*
 * CUDA backend streams, events and the interpreter launch. A NULL hal_stream_t is the legacy
 * default stream. Host waits poll with backoff so they stay bounded (config_backstop_ns: past
 * the kernel's own MSCCLPP_TIMEOUT, whose error names the peer): a plan kernel that waits for
 * a peer that never comes must not hang the caller.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "base/config.h"
#include "base/wait.h"
#include "hal/cuda/cuda_internal.h"
#include "kernels/common/kern_entry.h"

#ifdef MSCCLPP_HAVE_KERN_CUDA
/* kernels/cuda/kern_cuda.cu; repeated here in case kern_entry.h does not declare it yet */
mscclpp_result_t kern_cuda_launch(const void *args, size_t args_bytes, int nblocks, int nthreads,
                                  void *stream);
#endif

/* Poll `query` until it stops answering "not ready", with the one wait policy (base/wait.h). */
#define BOUNDED_WAIT(query, what, who, obj)                                                      \
    do {                                                                                         \
        uint64_t limit_ = config_backstop_ns(); /* the kernel's own timeout comes first */      \
        base_wait_t w_;                                                                          \
        base_wait_init(&w_, limit_, base_wait_spin(0));                                          \
        for (;;) {                                                                               \
            cudaError_t err_ = (query);                                                          \
            if (err_ == cudaSuccess) return MSCCLPP_OK;                                          \
            if (err_ != cudaErrorNotReady) return cuda_rt_error(err_, what, __FILE__, __LINE__); \
            if (!base_wait_pause_rel(&w_))                                                       \
                return ERR(MSCCLPP_ERR_TIMEOUT,                                                  \
                           "cuda %s: %s %p still busy after %llu ms (a kernel waiting for a "    \
                           "peer?)",                                                             \
                           who, what, (void *)(obj), (unsigned long long)(limit_ / 1000000u));   \
        }                                                                                        \
    } while (0)

mscclpp_result_t cuda_stream_wait(cudaStream_t s, const char *who)
{
    BOUNDED_WAIT(cudaStreamQuery(s), "cudaStreamQuery", who, s);
}

mscclpp_result_t cuda_stream_create(hal_stream_t *s)
{
    CHECK_ARG(s != NULL);
    CUDA_REQUIRE_INIT();
    cudaStream_t cs;
    /* non-blocking: never serialized behind the legacy default stream of other libraries */
    CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    *s = (hal_stream_t)(void *)cs;
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_stream_destroy(hal_stream_t s)
{
    CHECK_ARG(s != NULL);
    CUDA_REQUIRE_INIT();
    CUDA_CHECK(cudaStreamDestroy(cuda_stream(s)));
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_stream_sync(hal_stream_t s)
{
    CUDA_REQUIRE_INIT();
    return cuda_stream_wait(cuda_stream(s), "stream_sync");
}

mscclpp_result_t cuda_stream_capturing(hal_stream_t s, bool *capturing)
{
    CHECK_ARG(capturing != NULL);
    CUDA_REQUIRE_INIT();
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(cuda_stream(s), &status));
    /* "invalidated" is still a capture in progress: work queued now would not run */
    *capturing = status != cudaStreamCaptureStatusNone;
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_event_create(hal_event_t *e)
{
    CHECK_ARG(e != NULL);
    CUDA_REQUIRE_INIT();
    cudaEvent_t ce;
    CUDA_CHECK(cudaEventCreateWithFlags(&ce, cudaEventDefault)); /* with timing */
    *e = (hal_event_t)(void *)ce;
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_event_destroy(hal_event_t e)
{
    CHECK_ARG(e != NULL);
    CUDA_REQUIRE_INIT();
    CUDA_CHECK(cudaEventDestroy((cudaEvent_t)(void *)e));
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_event_record(hal_event_t e, hal_stream_t s)
{
    CHECK_ARG(e != NULL);
    CUDA_REQUIRE_INIT();
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)(void *)e, cuda_stream(s)));
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_event_sync(hal_event_t e)
{
    CHECK_ARG(e != NULL);
    CUDA_REQUIRE_INIT();
    BOUNDED_WAIT(cudaEventQuery((cudaEvent_t)(void *)e), "cudaEventQuery", "event_sync", e);
}

mscclpp_result_t cuda_event_elapsed_ms(hal_event_t start, hal_event_t end, float *ms)
{
    CHECK_ARG(start != NULL);
    CHECK_ARG(end != NULL);
    CHECK_ARG(ms != NULL);
    CUDA_REQUIRE_INIT();
    CUDA_CHECK(cudaEventElapsedTime(ms, (cudaEvent_t)(void *)start, (cudaEvent_t)(void *)end));
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_launch(const void *args, size_t args_bytes, int nblocks, int nthreads,
                             hal_stream_t s)
{
    CHECK_ARG(args != NULL);
    CHECK_ARG(args_bytes > 0);
    CHECK_ARG(nblocks > 0);
    CHECK_ARG(nthreads > 0);
    if (nthreads > KERN_CUDA_MAX_THREADS)
        return ERR_ARG("cuda launch: %d threads per block; the interpreter kernel takes at most %d "
                       "(its __launch_bounds__, hal_device_props_t.kernel_max_threads)",
                       nthreads, KERN_CUDA_MAX_THREADS);
    CUDA_REQUIRE_INIT();
    cuda_mps_check(); /* first launch per device: warn if ranks share it without MPS */
#ifdef MSCCLPP_HAVE_KERN_CUDA
    return kern_cuda_launch(args, args_bytes, nblocks, nthreads, (void *)cuda_stream(s));
#else
    return ERR(MSCCLPP_ERR_UNSUPPORTED,
               "cuda launch: this build has no CUDA interpreter (kernels/libkern_cuda.la)");
#endif
}

mscclpp_result_t cuda_launch_scale(const void *args, size_t args_bytes, hal_stream_t s)
{
    CHECK_ARG(args != NULL && args_bytes > 0);
    CUDA_REQUIRE_INIT();
#ifdef MSCCLPP_HAVE_KERN_CUDA
    if (kern_cuda_scale_launch(args, args_bytes, (void *)cuda_stream(s)) != MSCCLPP_OK)
        return cuda_rt_error(cudaGetLastError(), "launching the scaling kernel", __FILE__,
                             __LINE__);
    if (!s) return cuda_stream_wait(0, "launch_scale"); /* NULL: done now, as elsewhere */
    return MSCCLPP_OK;
#else
    return ERR(MSCCLPP_ERR_UNSUPPORTED,
               "cuda launch_scale: this build has no CUDA kernels (kernels/libkern_cuda.la)");
#endif
}

mscclpp_result_t cuda_launch_host_func(hal_host_fn_t fn, void *arg, hal_stream_t s)
{
    CHECK_ARG(fn != NULL);
    CUDA_REQUIRE_INIT();
    if (!s) { /* like the other NULL-stream operations: now, in the calling thread */
        CHECK(cuda_stream_wait(0, "launch_host_func"));
        fn(arg);
        return MSCCLPP_OK;
    }
    CUDA_CHECK(cudaLaunchHostFunc(cuda_stream(s), fn, arg));
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_stream_wait_event(hal_stream_t s, hal_event_t e)
{
    CHECK_ARG(e != NULL);
    CUDA_REQUIRE_INIT();
    CUDA_CHECK(cudaStreamWaitEvent(cuda_stream(s), (cudaEvent_t)(void *)e, 0));
    return MSCCLPP_OK;
}

/* ----- capture and graphs -------------------------------------------------------------------- */

#define CUDA_SETUP_DEVICES 64
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaStream_t setup_streams[CUDA_SETUP_DEVICES];

cudaStream_t cuda_setup_stream(void)
{
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    /* the legacy stream reports cudaErrorStreamCaptureImplicit when using it would join a
     * capture of a blocking stream */
    cudaError_t err = cudaStreamIsCapturing(0, &status);
    if (err == cudaSuccess && status == cudaStreamCaptureStatusNone) return 0;
    (void)cudaGetLastError();
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= CUDA_SETUP_DEVICES) {
        (void)cudaGetLastError();
        return 0; /* the caller's copy then reports what CUDA says */
    }
    pthread_mutex_lock(&setup_lock);
    if (!setup_streams[dev] &&
        cudaStreamCreateWithFlags(&setup_streams[dev], cudaStreamNonBlocking) != cudaSuccess) {
        (void)cudaGetLastError();
        setup_streams[dev] = 0;
    }
    cudaStream_t s = setup_streams[dev];
    pthread_mutex_unlock(&setup_lock);
    return s;
}

/* An instantiated graph and the graph it was made from. */
struct hal_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
};

mscclpp_result_t cuda_stream_begin_capture(hal_stream_t s)
{
    CUDA_REQUIRE_INIT();
    if (!s) return ERR_ARG("cuda stream_begin_capture: the legacy stream cannot be captured");
    /* global mode, as torch.cuda.graph: calls that are unsafe during a capture fail in any
     * thread, so a mistake shows here rather than as a graph that replays wrong */
    CUDA_CHECK(cudaStreamBeginCapture(cuda_stream(s), cudaStreamCaptureModeGlobal));
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_stream_end_capture(hal_stream_t s, hal_graph_t *graph)
{
    CHECK_ARG(graph != NULL);
    *graph = NULL;
    CUDA_REQUIRE_INIT();
    if (!s) return ERR_ARG("cuda stream_end_capture: the legacy stream cannot be captured");
    mscclpp_result_t res = MSCCLPP_OK;
    struct hal_graph *g = calloc(1, sizeof *g);
    cudaGraph_t cg = NULL;
    /* always ends the capture, also an invalidated one (which returns an error) */
    cudaError_t err = cudaStreamEndCapture(cuda_stream(s), &cg);
    if (err != cudaSuccess) {
        res = cuda_rt_error(err, "cudaStreamEndCapture", __FILE__, __LINE__);
        goto fail;
    }
    if (!g) {
        res = ERR(MSCCLPP_ERR_NO_MEMORY, "cuda stream_end_capture: out of memory");
        goto fail;
    }
    CUDA_CHECK_GOTO(cudaGraphInstantiate(&g->exec, cg, 0), res, fail);
    g->graph = cg;
    *graph = g;
    return MSCCLPP_OK;
fail:
    if (cg) (void)cudaGraphDestroy(cg);
    free(g);
    return res;
}

mscclpp_result_t cuda_graph_launch(hal_graph_t graph, hal_stream_t s)
{
    CHECK_ARG(graph != NULL);
    CUDA_REQUIRE_INIT();
    CUDA_CHECK(cudaGraphLaunch(graph->exec, cuda_stream(s)));
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_graph_destroy(hal_graph_t graph)
{
    if (!graph) return MSCCLPP_OK;
    CUDA_REQUIRE_INIT();
    /* CUDA defers the release of an executable graph until its launches are done */
    cudaError_t e1 = cudaGraphExecDestroy(graph->exec);
    cudaError_t e2 = cudaGraphDestroy(graph->graph);
    free(graph);
    if (e1 != cudaSuccess) return cuda_rt_error(e1, "cudaGraphExecDestroy", __FILE__, __LINE__);
    if (e2 != cudaSuccess) return cuda_rt_error(e2, "cudaGraphDestroy", __FILE__, __LINE__);
    return MSCCLPP_OK;
}
