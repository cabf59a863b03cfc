/*
 * HIP backend module: lifecycle, devices, streams, events, the interpreter launch and the
 * exported ops table. No multicast on AMD: those slots report UNSUPPORTED. Built twice when
 * the toolkits are there: for AMD (libmscclpp-hal-hip.so) and for NVIDIA GPUs through HIP's
 * NVIDIA platform (libmscclpp-hal-hipnv.so, hal/hipnv): the same source either way.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/config.h"
#include "base/wait.h"
#include "hal/hip/hip_internal.h"
#include "kernels/common/kern_entry.h"

#ifdef MSCCLPP_HAVE_KERN_HIP
/* kernels/hip; repeated here in case kern_entry.h does not declare it yet */
mscclpp_result_t kern_hip_launch(const void *args, size_t args_bytes, int nblocks, int nthreads,
                                 void *stream);
#endif

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool initialized;
static int ndevices;

mscclpp_result_t hip_rt_error(hipError_t err, const char *what, const char *file, int line)
{
    (void)hipGetLastError();
    mscclpp_result_t res = MSCCLPP_ERR_SYSTEM;
    if (err == hipErrorOutOfMemory) res = MSCCLPP_ERR_NO_MEMORY;
    if (err == hipErrorInvalidValue || err == hipErrorInvalidDevice) res = MSCCLPP_ERR_INVALID_ARG;
    return core_error(res, file, line, "%s: %s (%s, %d)", what, hipGetErrorString(err),
                      hipGetErrorName(err), (int)err);
}

mscclpp_result_t hip_require_init(const char *op)
{
    if (initialized) return MSCCLPP_OK;
    return ERR(MSCCLPP_ERR_UNSUPPORTED, "hip backend: %s called before a successful init()", op);
}

static bool hip_no_device(hipError_t err)
{
    return err == hipErrorNoDevice || err == hipErrorInsufficientDriver ||
           err == hipErrorNotInitialized || err == hipErrorNoBinaryForGpu;
}

static mscclpp_result_t hip_init(void)
{
    mscclpp_result_t res = MSCCLPP_OK;
    pthread_mutex_lock(&init_lock);
    if (!initialized) {
        int count = 0;
        hipError_t err = hipGetDeviceCount(&count);
        if (err != hipSuccess || count <= 0) {
            (void)hipGetLastError();
            if (err == hipSuccess || hip_no_device(err))
                res = core_error_quiet(MSCCLPP_ERR_UNSUPPORTED, "hip backend: no usable device (%s)",
                                       err == hipSuccess ? "0 devices" : hipGetErrorString(err));
            else
                res = hip_rt_error(err, "hipGetDeviceCount", __FILE__, __LINE__);
            INFO(SUBSYS_HAL, "%s", mscclpp_last_error());
        } else {
            ndevices = count;
            initialized = true;
        }
    }
    pthread_mutex_unlock(&init_lock);
    return res;
}

static void hip_fini(void)
{
    pthread_mutex_lock(&init_lock);
    initialized = false;
    pthread_mutex_unlock(&init_lock);
}

static mscclpp_result_t hip_device_count(int *count)
{
    CHECK_ARG(count != NULL);
    int n = 0;
    hipError_t err = hipGetDeviceCount(&n);
    if (err != hipSuccess) {
        (void)hipGetLastError();
        if (!hip_no_device(err)) return hip_rt_error(err, "hipGetDeviceCount", __FILE__, __LINE__);
        n = 0;
    }
    *count = n;
    return MSCCLPP_OK;
}

static mscclpp_result_t hip_device_set(int dev)
{
    HIP_REQUIRE_INIT();
    if (dev < 0 || dev >= ndevices)
        return ERR_ARG("hip device_set: device %d out of range [0, %d)", dev, ndevices);
    HIP_CHECK(hipSetDevice(dev));
    return MSCCLPP_OK;
}

static mscclpp_result_t hip_device_get(int *dev)
{
    CHECK_ARG(dev != NULL);
    HIP_REQUIRE_INIT();
    HIP_CHECK(hipGetDevice(dev));
    return MSCCLPP_OK;
}

static mscclpp_result_t hip_device_props(int dev, hal_device_props_t *props)
{
    CHECK_ARG(props != NULL);
    HIP_REQUIRE_INIT();
    if (dev < 0 || dev >= ndevices)
        return ERR_ARG("hip device_props: device %d out of range [0, %d)", dev, ndevices);
    hipDeviceProp_t p;
    HIP_CHECK(hipGetDeviceProperties(&p, dev));
    memset(props, 0, sizeof *props);
    snprintf(props->name, sizeof props->name, "%.*s", (int)sizeof props->name - 1, p.name);
    /* "gfx90a:sramecc+:xnack-": the target features after ':' are not part of the arch */
    snprintf(props->arch, sizeof props->arch, "%.*s", (int)strcspn(p.gcnArchName, ":"),
             p.gcnArchName);
    props->warp_size = p.warpSize; /* 64 on CDNA */
    props->multiprocessors = p.multiProcessorCount;
    props->max_threads_per_block = p.maxThreadsPerBlock;
    props->kernel_max_threads = KERN_HIP_MAX_THREADS;
    props->total_memory = p.totalGlobalMem;
    props->ipc = true;
    props->multicast = false;
    props->graphs = true;
    props->host_memory = false;
    return MSCCLPP_OK;
}

/* ----- streams and events ------------------------------------------------------------------- */

/* Poll until not "not ready" with the one wait policy (base/wait.h); bounded by
 * config_backstop_ns, past the kernel's own MSCCLPP_TIMEOUT (whose error names the peer). */
static mscclpp_result_t bounded_wait(hipStream_t s, hipEvent_t e, const char *who)
{
    uint64_t limit = config_backstop_ns(); /* the kernel's own timeout comes first */
    base_wait_t w;
    base_wait_init(&w, limit, base_wait_spin(0));
    for (;;) {
        hipError_t err = e ? hipEventQuery(e) : hipStreamQuery(s);
        if (err == hipSuccess) return MSCCLPP_OK;
        if (err != hipErrorNotReady)
            return hip_rt_error(err, e ? "hipEventQuery" : "hipStreamQuery", __FILE__, __LINE__);
        if (!base_wait_pause_rel(&w))
            return ERR(MSCCLPP_ERR_TIMEOUT,
                       "hip %s: %s %p still busy after %llu ms (a kernel waiting for a peer?)",
                       who, e ? "event" : "stream", e ? (void *)e : (void *)s,
                       (unsigned long long)(limit / 1000000u));
    }
}

mscclpp_result_t hip_stream_wait(hipStream_t s, const char *who) { return bounded_wait(s, NULL, who); }

static mscclpp_result_t hip_stream_create(hal_stream_t *s)
{
    CHECK_ARG(s != NULL);
    HIP_REQUIRE_INIT();
    hipStream_t hs;
    HIP_CHECK(hipStreamCreateWithFlags(&hs, hipStreamNonBlocking));
    *s = (hal_stream_t)(void *)hs;
    return MSCCLPP_OK;
}

static mscclpp_result_t hip_stream_destroy(hal_stream_t s)
{
    CHECK_ARG(s != NULL);
    HIP_REQUIRE_INIT();
    HIP_CHECK(hipStreamDestroy(hip_stream(s)));
    return MSCCLPP_OK;
}

static mscclpp_result_t hip_stream_sync(hal_stream_t s)
{
    HIP_REQUIRE_INIT();
    return bounded_wait(hip_stream(s), NULL, "stream_sync");
}

static mscclpp_result_t hip_stream_capturing(hal_stream_t s, bool *capturing)
{
    CHECK_ARG(capturing != NULL);
    HIP_REQUIRE_INIT();
    hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
    HIP_CHECK(hipStreamIsCapturing(hip_stream(s), &status));
    *capturing = status != hipStreamCaptureStatusNone;
    return MSCCLPP_OK;
}

static mscclpp_result_t hip_event_create(hal_event_t *e)
{
    CHECK_ARG(e != NULL);
    HIP_REQUIRE_INIT();
    hipEvent_t he;
    HIP_CHECK(hipEventCreateWithFlags(&he, hipEventDefault));
    *e = (hal_event_t)(void *)he;
    return MSCCLPP_OK;
}

static mscclpp_result_t hip_event_destroy(hal_event_t e)
{
    CHECK_ARG(e != NULL);
    HIP_REQUIRE_INIT();
    HIP_CHECK(hipEventDestroy((hipEvent_t)(void *)e));
    return MSCCLPP_OK;
}

static mscclpp_result_t hip_event_record(hal_event_t e, hal_stream_t s)
{
    CHECK_ARG(e != NULL);
    HIP_REQUIRE_INIT();
    HIP_CHECK(hipEventRecord((hipEvent_t)(void *)e, hip_stream(s)));
    return MSCCLPP_OK;
}

static mscclpp_result_t hip_event_sync(hal_event_t e)
{
    CHECK_ARG(e != NULL);
    HIP_REQUIRE_INIT();
    return bounded_wait(NULL, (hipEvent_t)(void *)e, "event_sync");
}

static mscclpp_result_t hip_event_elapsed_ms(hal_event_t start, hal_event_t end, float *ms)
{
    CHECK_ARG(start != NULL);
    CHECK_ARG(end != NULL);
    CHECK_ARG(ms != NULL);
    HIP_REQUIRE_INIT();
    HIP_CHECK(hipEventElapsedTime(ms, (hipEvent_t)(void *)start, (hipEvent_t)(void *)end));
    return MSCCLPP_OK;
}

static mscclpp_result_t hip_stream_wait_event(hal_stream_t s, hal_event_t e)
{
    CHECK_ARG(e != NULL);
    HIP_REQUIRE_INIT();
    HIP_CHECK(hipStreamWaitEvent(hip_stream(s), (hipEvent_t)(void *)e, 0));
    return MSCCLPP_OK;
}

static mscclpp_result_t hip_launch_scale(const void *args, size_t args_bytes, hal_stream_t s)
{
    CHECK_ARG(args != NULL && args_bytes > 0);
    HIP_REQUIRE_INIT();
#ifdef MSCCLPP_HAVE_KERN_HIP
    if (kern_hip_scale_launch(args, args_bytes, (void *)hip_stream(s)) != MSCCLPP_OK) {
        hipError_t e = hipGetLastError();
        return ERR(MSCCLPP_ERR_SYSTEM, "hip: launching the scaling kernel: %s",
                   hipGetErrorString(e));
    }
    if (!s) return hip_stream_wait(NULL, "launch_scale");
    return MSCCLPP_OK;
#else
    return ERR(MSCCLPP_ERR_UNSUPPORTED,
               "hip launch_scale: this build has no HIP kernels (kernels/libkern_hip.la)");
#endif
}

#ifndef MSCCLPP_HIPNV_API
/* hipLaunchHostFunc is declared by HIP 5.2's headers but not exported by its libamdhip64 (a
 * direct reference made the module fail to load there): it is looked up when the library has
 * it, else the host function runs from a stream callback (same order on the stream; not
 * capturable, as such HIP cannot capture host nodes anyway). */
typedef hipError_t (*hip_launch_host_func_fn)(hipStream_t, hipHostFn_t, void *);
static hip_launch_host_func_fn hip_lhf;
static pthread_once_t hip_lhf_once = PTHREAD_ONCE_INIT;
static void hip_lhf_find(void)
{
    hip_lhf = (hip_launch_host_func_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "hipLaunchHostFunc");
}

typedef struct {
    hal_host_fn_t fn;
    void *arg;
} hip_host_call_t;

static void hip_host_call(hipStream_t stream, hipError_t status, void *user)
{
    (void)stream;
    hip_host_call_t *c = user;
    /* like hipLaunchHostFunc, the function runs once its turn comes, whatever came before it
     * (an earlier failure is reported by the stream's next sync) */
    (void)status;
    c->fn(c->arg);
    free(c);
}
#endif

static mscclpp_result_t hip_launch_host_func(hal_host_fn_t fn, void *arg, hal_stream_t s)
{
    CHECK_ARG(fn != NULL);
    HIP_REQUIRE_INIT();
    if (!s) {
        CHECK(hip_stream_wait(NULL, "launch_host_func"));
        fn(arg);
        return MSCCLPP_OK;
    }
#ifdef MSCCLPP_HIPNV_API
    HIP_CHECK(hipLaunchHostFunc(hip_stream(s), fn, arg));
#else
    pthread_once(&hip_lhf_once, hip_lhf_find);
    if (hip_lhf) {
        HIP_CHECK(hip_lhf(hip_stream(s), fn, arg));
        return MSCCLPP_OK;
    }
    hip_host_call_t *c = malloc(sizeof *c);
    if (!c) return ERR(MSCCLPP_ERR_NO_MEMORY, "hip launch_host_func: out of memory");
    c->fn = fn;
    c->arg = arg;
    hipError_t e = hipStreamAddCallback(hip_stream(s), hip_host_call, c, 0);
    if (e != hipSuccess) free(c);
    HIP_CHECK(e);
#endif
    return MSCCLPP_OK;
}

static mscclpp_result_t hip_launch(const void *args, size_t args_bytes, int nblocks, int nthreads,
                                   hal_stream_t s)
{
    CHECK_ARG(args != NULL);
    CHECK_ARG(args_bytes > 0);
    CHECK_ARG(nblocks > 0);
    CHECK_ARG(nthreads > 0);
    if (nthreads > KERN_HIP_MAX_THREADS)
        return ERR_ARG("hip launch: %d threads per block; the interpreter kernel takes at most %d "
                       "(its __launch_bounds__, hal_device_props_t.kernel_max_threads)",
                       nthreads, KERN_HIP_MAX_THREADS);
    HIP_REQUIRE_INIT();
#ifdef MSCCLPP_HAVE_KERN_HIP
    return kern_hip_launch(args, args_bytes, nblocks, nthreads, (void *)hip_stream(s));
#else
    return ERR(MSCCLPP_ERR_UNSUPPORTED,
               "hip launch: this build has no HIP interpreter (kernels/libkern_hip.la)");
#endif
}

/* ----- capture and graphs (as hal/cuda/cuda_stream.c) --------------------------------------- */

#define HIP_SETUP_DEVICES 64
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;
static hipStream_t setup_streams[HIP_SETUP_DEVICES];

hipStream_t hip_setup_stream(void)
{
    hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
    hipError_t err = hipStreamIsCapturing(NULL, &status);
    if (err == hipSuccess && status == hipStreamCaptureStatusNone) return NULL;
    (void)hipGetLastError();
    int dev = 0;
    if (hipGetDevice(&dev) != hipSuccess || dev < 0 || dev >= HIP_SETUP_DEVICES) {
        (void)hipGetLastError();
        return NULL;
    }
    pthread_mutex_lock(&setup_lock);
    if (!setup_streams[dev] &&
        hipStreamCreateWithFlags(&setup_streams[dev], hipStreamNonBlocking) != hipSuccess) {
        (void)hipGetLastError();
        setup_streams[dev] = NULL;
    }
    hipStream_t s = setup_streams[dev];
    pthread_mutex_unlock(&setup_lock);
    return s;
}

struct hal_graph {
    hipGraph_t graph;
    hipGraphExec_t exec;
};

static mscclpp_result_t hip_stream_begin_capture(hal_stream_t s)
{
    HIP_REQUIRE_INIT();
    if (!s) return ERR_ARG("hip stream_begin_capture: the null stream cannot be captured");
    HIP_CHECK(hipStreamBeginCapture(hip_stream(s), hipStreamCaptureModeGlobal));
    return MSCCLPP_OK;
}

static mscclpp_result_t hip_stream_end_capture(hal_stream_t s, hal_graph_t *graph)
{
    CHECK_ARG(graph != NULL);
    *graph = NULL;
    HIP_REQUIRE_INIT();
    if (!s) return ERR_ARG("hip stream_end_capture: the null stream cannot be captured");
    mscclpp_result_t res = MSCCLPP_OK;
    struct hal_graph *g = calloc(1, sizeof *g);
    hipGraph_t hg = NULL;
    hipError_t err = hipStreamEndCapture(hip_stream(s), &hg);
    if (err != hipSuccess) {
        res = hip_rt_error(err, "hipStreamEndCapture", __FILE__, __LINE__);
        goto fail;
    }
    if (!g) {
        res = ERR(MSCCLPP_ERR_NO_MEMORY, "hip stream_end_capture: out of memory");
        goto fail;
    }
    err = hipGraphInstantiate(&g->exec, hg, NULL, NULL, 0);
    if (err != hipSuccess) {
        res = hip_rt_error(err, "hipGraphInstantiate", __FILE__, __LINE__);
        goto fail;
    }
    g->graph = hg;
    *graph = g;
    return MSCCLPP_OK;
fail:
    if (hg) (void)hipGraphDestroy(hg);
    free(g);
    return res;
}

static mscclpp_result_t hip_graph_launch(hal_graph_t graph, hal_stream_t s)
{
    CHECK_ARG(graph != NULL);
    HIP_REQUIRE_INIT();
    HIP_CHECK(hipGraphLaunch(graph->exec, hip_stream(s)));
    return MSCCLPP_OK;
}

static mscclpp_result_t hip_graph_destroy(hal_graph_t graph)
{
    if (!graph) return MSCCLPP_OK;
    HIP_REQUIRE_INIT();
    hipError_t e1 = hipGraphExecDestroy(graph->exec);
    hipError_t e2 = hipGraphDestroy(graph->graph);
    free(graph);
    if (e1 != hipSuccess) return hip_rt_error(e1, "hipGraphExecDestroy", __FILE__, __LINE__);
    if (e2 != hipSuccess) return hip_rt_error(e2, "hipGraphDestroy", __FILE__, __LINE__);
    return MSCCLPP_OK;
}

/* Setup slots run with the thread's capture mode relaxed, as in the CUDA module
 * (hal/cuda/cuda_module.c): a collective called first inside a capture builds what it needs
 * outside the graph. HIP_RELAXED(slot, params, args) defines relaxed_<slot>. */
#define HIP_RELAXED(slot, params, args)                           \
    static mscclpp_result_t relaxed_##slot params                 \
    {                                                             \
        hipStreamCaptureMode mode_ = hipStreamCaptureModeRelaxed; \
        (void)hipThreadExchangeStreamCaptureMode(&mode_);         \
        mscclpp_result_t r_ = hip_##slot args;                    \
        (void)hipThreadExchangeStreamCaptureMode(&mode_);         \
        return r_;                                                \
    }
HIP_RELAXED(mem_alloc, (size_t bytes, void **ptr), (bytes, ptr))
HIP_RELAXED(mem_alloc_shareable, (size_t bytes, void **ptr), (bytes, ptr))
HIP_RELAXED(mem_free, (void *ptr), (ptr))
HIP_RELAXED(host_alloc, (size_t bytes, void **ptr), (bytes, ptr))
HIP_RELAXED(host_free, (void *ptr), (ptr))
HIP_RELAXED(mem_range, (const void *ptr, void **base, size_t *size), (ptr, base, size))
HIP_RELAXED(mem_info, (const void *ptr, hal_mem_info_t *info), (ptr, info))
HIP_RELAXED(memcpy_sync, (void *dst, const void *src, size_t bytes), (dst, src, bytes))
HIP_RELAXED(memset_sync, (void *dst, int value, size_t bytes), (dst, value, bytes))
HIP_RELAXED(mem_export, (void *base, hal_mem_handle_t *handle), (base, handle))
HIP_RELAXED(mem_import, (const hal_mem_handle_t *handle, void **base), (handle, base))
HIP_RELAXED(mem_unimport, (void *base), (base))
HIP_RELAXED(stream_sync, (hal_stream_t s), (s))
#undef HIP_RELAXED

/* Multicast: none on AMD; the typed stubs of hal/hal.h (hal/hal_stub.c is compiled in). */
HAL_DEFINE_STUBS("hip")

static const hal_ops_t hip_ops = {
    .size = sizeof(hal_ops_t),
    .abi_version = HAL_ABI_VERSION,
    .name = "hip",
    .init = hip_init,
    .fini = hip_fini,
    .device_count = hip_device_count,
    .device_set = hip_device_set,
    .device_get = hip_device_get,
    .device_props = hip_device_props,
    .mem_alloc = relaxed_mem_alloc,
    .mem_alloc_shareable = relaxed_mem_alloc_shareable,
    .mem_free = relaxed_mem_free,
    .host_alloc = relaxed_host_alloc,
    .host_free = relaxed_host_free,
    .mem_range = relaxed_mem_range,
    .mem_info = relaxed_mem_info,
    .memcpy_sync = relaxed_memcpy_sync,
    .memset_sync = relaxed_memset_sync,
    .memcpy_async = hip_memcpy_async,
    .memset_async = hip_memset_async,
    .mem_export = relaxed_mem_export,
    .mem_import = relaxed_mem_import,
    .mem_unimport = relaxed_mem_unimport,
    .mc_granularity = hal_stub_mc_granularity,
    .mc_create = hal_stub_mc_create,
    .mc_import = hal_stub_mc_import,
    .mc_bind = hal_stub_mc_bind,
    .mc_free = hal_stub_mc_free,
    .stream_create = hip_stream_create,
    .stream_destroy = hip_stream_destroy,
    .stream_sync = relaxed_stream_sync,
    .stream_capturing = hip_stream_capturing,
    .stream_begin_capture = hip_stream_begin_capture,
    .stream_end_capture = hip_stream_end_capture,
    .graph_launch = hip_graph_launch,
    .graph_destroy = hip_graph_destroy,
    .event_create = hip_event_create,
    .event_destroy = hip_event_destroy,
    .event_record = hip_event_record,
    .event_sync = hip_event_sync,
    .event_elapsed_ms = hip_event_elapsed_ms,
    .stream_wait_event = hip_stream_wait_event,
    .launch = hip_launch,
    .launch_scale = hip_launch_scale,
    .launch_host_func = hip_launch_host_func,
};

/** Module entry (HAL_MODULE_ENTRY). */
__attribute__((visibility("default"))) const hal_ops_t *mscclpp_hal_module(void)
{
    return &hip_ops;
}

/* What this build is (HAL_MODULE_BUILD): the same sources serve AMD (hipcc, libamdhip64) and
 * NVIDIA (hal/hipnv's mapping onto the CUDA runtime, nvcc: libmscclpp-hal-hipnv.so). */
#ifndef MSCCLPP_HIP_TARGETS
#define MSCCLPP_HIP_TARGETS "?"
#endif
static pthread_once_t build_once = PTHREAD_ONCE_INIT;
static char build_text[160];

static void build_describe(void)
{
#ifdef MSCCLPP_HIPNV_API
    snprintf(build_text, sizeof build_text,
             "HIP on NVIDIA (hal/hipnv over CUDA runtime %d.%d; kernel: nvcc, targets %s)",
             CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, MSCCLPP_HIP_TARGETS);
#else
    snprintf(build_text, sizeof build_text, "HIP on AMD (HIP %d.%d; kernel: hipcc, targets %s)",
             HIP_VERSION_MAJOR, HIP_VERSION_MINOR, MSCCLPP_HIP_TARGETS);
#endif
}

/** Module description (HAL_MODULE_BUILD). */
__attribute__((visibility("default"))) const char *mscclpp_hal_module_build(void)
{
    pthread_once(&build_once, build_describe);
    return build_text;
}
