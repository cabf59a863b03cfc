/* CUDA backend module: lifecycle, devices, driver entry points and the exported ops table. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/config.h"
#include "hal/cuda/cuda_internal.h"
#include "hal/fd_broker.h"
#include "kernels/common/kern_entry.h"

cuda_driver_t cuda_drv;

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool initialized;
static bool force_cumem; /* MSCCLPP_CUDA_SHAREABLE=cumem: no legacy fallback */
static int ndevices;

/* Per device, probed at init: what sharing and multicast it supports. */
#define CUDA_MAX_DEVICES 64
static struct {
    bool vmm_fd;    /* cuMem with POSIX fd handles */
    bool multicast; /* CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED */
} dev_caps[CUDA_MAX_DEVICES];

/* ----- errors ------------------------------------------------------------------------------- */

static mscclpp_result_t cuda_map_result(int is_oom, int is_arg)
{
    if (is_oom) return MSCCLPP_ERR_NO_MEMORY;
    if (is_arg) return MSCCLPP_ERR_INVALID_ARG;
    return MSCCLPP_ERR_SYSTEM;
}

mscclpp_result_t cuda_rt_error(cudaError_t err, const char *what, const char *file, int line)
{
    (void)cudaGetLastError(); /* clear a non-sticky error so it does not resurface later */
    mscclpp_result_t res = cuda_map_result(err == cudaErrorMemoryAllocation,
                                           err == cudaErrorInvalidValue ||
                                               err == cudaErrorInvalidDevicePointer ||
                                               err == cudaErrorInvalidDevice);
    return core_error(res, file, line, "%s: %s (%s, %d)", what, cudaGetErrorString(err),
                      cudaGetErrorName(err), (int)err);
}

mscclpp_result_t cuda_drv_error(CUresult err, const char *what, const char *file, int line)
{
    const char *str = NULL;
    if (!cuda_drv.get_error_string || cuda_drv.get_error_string(err, &str) != CUDA_SUCCESS ||
        !str)
        str = "unknown driver error";
    mscclpp_result_t res =
        cuda_map_result(err == CUDA_ERROR_OUT_OF_MEMORY, err == CUDA_ERROR_INVALID_VALUE);
    if (err == CUDA_ERROR_NOT_SUPPORTED) res = MSCCLPP_ERR_UNSUPPORTED;
    return core_error(res, file, line, "%s: %s (CUresult %d)", what, str, (int)err);
}

mscclpp_result_t cuda_require_init(const char *op)
{
    if (initialized) return MSCCLPP_OK;
    return ERR(MSCCLPP_ERR_UNSUPPORTED, "cuda backend: %s called before a successful init()", op);
}

/* ----- driver entry points ------------------------------------------------------------------ */

static bool fetch(const char *symbol, unsigned version, void **fn)
{
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    *fn = NULL;
    cudaError_t err =
        cudaGetDriverEntryPointByVersion(symbol, fn, version, cudaEnableDefault, &found);
    if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || !*fn) {
        (void)cudaGetLastError();
        *fn = NULL;
        TRACE(SUBSYS_HAL, "cuda: driver entry point %s (ABI %u) not available", symbol, version);
        return false;
    }
    return true;
}

#define FETCH(field, symbol, version) fetch(symbol, version, (void **)&cuda_drv.field)

mscclpp_result_t cuda_driver_load(void)
{
    memset(&cuda_drv, 0, sizeof cuda_drv);
    cuda_drv.have_base = FETCH(get_error_string, "cuGetErrorString", 6000) &
                         FETCH(device_get, "cuDeviceGet", 2000) &
                         FETCH(device_get_attribute, "cuDeviceGetAttribute", 2000) &
                         FETCH(mem_get_address_range, "cuMemGetAddressRange", 3020);
    /* optional: without them the application's own memory is not shared (it is staged) */
    (void)FETCH(pointer_get_attributes, "cuPointerGetAttributes", 7000);
    (void)FETCH(mem_retain_handle, "cuMemRetainAllocationHandle", 11000);
    cuda_drv.have_vmm = FETCH(mem_create, "cuMemCreate", 10020) &
                        FETCH(mem_release, "cuMemRelease", 10020) &
                        FETCH(mem_address_reserve, "cuMemAddressReserve", 10020) &
                        FETCH(mem_address_free, "cuMemAddressFree", 10020) &
                        FETCH(mem_map, "cuMemMap", 10020) & FETCH(mem_unmap, "cuMemUnmap", 10020) &
                        FETCH(mem_set_access, "cuMemSetAccess", 10020) &
                        FETCH(mem_get_granularity, "cuMemGetAllocationGranularity", 10020) &
                        FETCH(mem_export, "cuMemExportToShareableHandle", 10020) &
                        FETCH(mem_import, "cuMemImportFromShareableHandle", 10020);
    cuda_drv.have_mc = cuda_drv.have_vmm & FETCH(mc_create, "cuMulticastCreate", 12010) &
                       FETCH(mc_add_device, "cuMulticastAddDevice", 12010) &
                       FETCH(mc_bind_mem, "cuMulticastBindMem", 12010) &
                       FETCH(mc_unbind, "cuMulticastUnbind", 12010) &
                       FETCH(mc_get_granularity, "cuMulticastGetGranularity", 12010);
    if (!cuda_drv.have_base)
        return ERR(MSCCLPP_ERR_SYSTEM, "cuda backend: the driver lacks cuDeviceGetAttribute or "
                                       "cuMemGetAddressRange");
    return MSCCLPP_OK;
}

static int drv_attr(CUdevice dev, CUdevice_attribute attr)
{
    int v = 0;
    if (cuda_drv.device_get_attribute(&v, attr, dev) != CUDA_SUCCESS) return 0;
    return v;
}

/* ----- lifecycle ---------------------------------------------------------------------------- */

/* What cudaGetDeviceCount says when there is nothing to run on. */
static bool cuda_no_device(cudaError_t err)
{
    return err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice ||
           err == cudaErrorInitializationError || err == cudaErrorStubLibrary ||
           err == cudaErrorDevicesUnavailable || err == cudaErrorCompatNotSupportedOnDevice ||
           err == cudaErrorSystemDriverMismatch;
}

static mscclpp_result_t cuda_init(void)
{
    mscclpp_result_t res = MSCCLPP_OK;
    pthread_mutex_lock(&init_lock);
    if (initialized) goto unlock;

    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count <= 0) {
        (void)cudaGetLastError();
        /* quiet: the loader falls back to the next backend */
        if (err == cudaSuccess || cuda_no_device(err))
            res = core_error_quiet(MSCCLPP_ERR_UNSUPPORTED, "cuda backend: no usable device (%s)",
                                   err == cudaSuccess ? "0 devices" : cudaGetErrorString(err));
        else
            res = cuda_rt_error(err, "cudaGetDeviceCount", __FILE__, __LINE__);
        INFO(SUBSYS_HAL, "%s", mscclpp_last_error());
        goto unlock;
    }
    CHECK_GOTO(cuda_driver_load(), res, unlock);

    const char *mode = config_get(CFG_MSCCLPP_CUDA_SHAREABLE);
    bool legacy_only = strcmp(mode, "legacy") == 0;
    force_cumem = strcmp(mode, "cumem") == 0;
    if (!legacy_only && strcmp(mode, "cumem") != 0 && strcmp(mode, "auto") != 0 && mode[0])
        WARN(SUBSYS_HAL, "MSCCLPP_CUDA_SHAREABLE=%s is not auto, cumem or legacy; using auto",
             mode);
    ndevices = count < CUDA_MAX_DEVICES ? count : CUDA_MAX_DEVICES;
    for (int i = 0; i < ndevices; i++) {
        CUdevice dev;
        memset(&dev_caps[i], 0, sizeof dev_caps[i]);
        if (cuda_drv.device_get(&dev, i) != CUDA_SUCCESS) continue;
        dev_caps[i].vmm_fd =
            !legacy_only && cuda_drv.have_vmm &&
            drv_attr(dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) &&
            drv_attr(dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
        dev_caps[i].multicast = dev_caps[i].vmm_fd && cuda_drv.have_mc &&
                                drv_attr(dev, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED);
        INFO(SUBSYS_HAL, "cuda: device %d: sharing through %s, multicast %s", i,
             dev_caps[i].vmm_fd ? "cuMem POSIX fds" : "legacy cudaIpc",
             dev_caps[i].multicast ? "yes" : "no");
    }
    initialized = true;

unlock:
    pthread_mutex_unlock(&init_lock);
    return res;
}

static void cuda_fini(void)
{
    pthread_mutex_lock(&init_lock);
    if (initialized) hal_fdb_shutdown();
    initialized = false;
    pthread_mutex_unlock(&init_lock);
}

bool cuda_use_vmm(int ordinal)
{
    return ordinal >= 0 && ordinal < ndevices && dev_caps[ordinal].vmm_fd;
}

bool cuda_require_cumem(void) { return force_cumem; }

bool cuda_device_multicast(int ordinal)
{
    return ordinal >= 0 && ordinal < ndevices && dev_caps[ordinal].multicast;
}

mscclpp_result_t cuda_current_cudev(int *ordinal, CUdevice *dev)
{
    CUDA_CHECK(cudaGetDevice(ordinal));
    /* runtime calls make the primary context current for this thread, as driver calls need:
     * cudaSetDevice does (CUDA 12+) and, unlike cudaFree(NULL), is permitted while the
     * application captures a stream */
    CUDA_CHECK(cudaSetDevice(*ordinal));
    CU_CHECK(cuda_drv.device_get(dev, *ordinal));
    return MSCCLPP_OK;
}

/* ----- devices ------------------------------------------------------------------------------ */

static mscclpp_result_t cuda_device_count(int *count)
{
    CHECK_ARG(count != NULL);
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        if (!cuda_no_device(err)) return cuda_rt_error(err, "cudaGetDeviceCount", __FILE__, __LINE__);
        n = 0; /* no driver or no device: zero devices, not an error */
    }
    *count = n;
    return MSCCLPP_OK;
}

static mscclpp_result_t cuda_device_set(int dev)
{
    CUDA_REQUIRE_INIT();
    if (dev < 0 || dev >= ndevices)
        return ERR_ARG("cuda device_set: device %d out of range [0, %d)", dev, ndevices);
    CUDA_CHECK(cudaSetDevice(dev));
    cuda_mps_device_changed();
    return MSCCLPP_OK;
}

static mscclpp_result_t cuda_device_get(int *dev)
{
    CHECK_ARG(dev != NULL);
    CUDA_REQUIRE_INIT();
    CUDA_CHECK(cudaGetDevice(dev));
    return MSCCLPP_OK;
}

static mscclpp_result_t cuda_device_props(int dev, hal_device_props_t *props)
{
    CHECK_ARG(props != NULL);
    CUDA_REQUIRE_INIT();
    if (dev < 0 || dev >= ndevices)
        return ERR_ARG("cuda device_props: device %d out of range [0, %d)", dev, ndevices);
    struct cudaDeviceProp p;
    CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
    int major = 0, minor = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    memset(props, 0, sizeof *props);
    snprintf(props->name, sizeof props->name, "%.*s", (int)sizeof props->name - 1, p.name);
    snprintf(props->arch, sizeof props->arch, "sm_%d%d", major, minor);
    CUDA_CHECK(cudaDeviceGetAttribute(&props->warp_size, cudaDevAttrWarpSize, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&props->multiprocessors, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(
        cudaDeviceGetAttribute(&props->max_threads_per_block, cudaDevAttrMaxThreadsPerBlock, dev));
    props->kernel_max_threads = KERN_CUDA_MAX_THREADS;
    props->total_memory = p.totalGlobalMem;
    props->ipc = true; /* cuMem fds, or legacy cudaIpc on every Linux device */
    props->multicast = dev_caps[dev].multicast;
    props->graphs = true;
    props->host_memory = false;
    return MSCCLPP_OK;
}

/* ----- the table ---------------------------------------------------------------------------- */

/*
 * Slots that do setup run with the thread's capture mode relaxed (cuda_internal.h,
 * cuda_capture_relax), so that a collective called first inside torch.cuda.graph can build
 * its context and lowered plan; none of this work is captured. CUDA_RELAXED(slot, params,
 * args) defines relaxed_<slot> around cuda_<slot>.
 */
#define CUDA_RELAXED(slot, params, args)                         \
    static mscclpp_result_t relaxed_##slot params                \
    {                                                            \
        enum cudaStreamCaptureMode mode_ = cuda_capture_relax(); \
        mscclpp_result_t r_ = cuda_##slot args;                  \
        cuda_capture_restore(mode_);                             \
        return r_;                                               \
    }
CUDA_RELAXED(mem_alloc, (size_t bytes, void **ptr), (bytes, ptr))
CUDA_RELAXED(mem_alloc_shareable, (size_t bytes, void **ptr), (bytes, ptr))
CUDA_RELAXED(mem_free, (void *ptr), (ptr))
CUDA_RELAXED(host_alloc, (size_t bytes, void **ptr), (bytes, ptr))
CUDA_RELAXED(host_free, (void *ptr), (ptr))
CUDA_RELAXED(mem_range, (const void *ptr, void **base, size_t *size), (ptr, base, size))
CUDA_RELAXED(memcpy_sync, (void *dst, const void *src, size_t bytes), (dst, src, bytes))
CUDA_RELAXED(memset_sync, (void *dst, int value, size_t bytes), (dst, value, bytes))
CUDA_RELAXED(mem_export, (void *base, hal_mem_handle_t *handle), (base, handle))
CUDA_RELAXED(mem_import, (const hal_mem_handle_t *handle, void **base), (handle, base))
CUDA_RELAXED(mem_unimport, (void *base), (base))
CUDA_RELAXED(mc_create, (size_t bytes, int ndevices, hal_mc_t *mc, hal_mem_handle_t *handle),
             (bytes, ndevices, mc, handle))
CUDA_RELAXED(mc_import, (const hal_mem_handle_t *handle, hal_mc_t *mc), (handle, mc))
CUDA_RELAXED(mc_bind, (hal_mc_t mc, void *base, size_t bytes, void **mc_ptr),
             (mc, base, bytes, mc_ptr))
CUDA_RELAXED(mc_free, (hal_mc_t mc), (mc))
CUDA_RELAXED(stream_create, (hal_stream_t * s), (s))
CUDA_RELAXED(stream_destroy, (hal_stream_t s), (s))
/* a capturing stream still refuses to be synchronized: only other streams become legal */
CUDA_RELAXED(stream_sync, (hal_stream_t s), (s))
CUDA_RELAXED(event_create, (hal_event_t * e), (e))
CUDA_RELAXED(event_destroy, (hal_event_t e), (e))
CUDA_RELAXED(event_sync, (hal_event_t e), (e))
#undef CUDA_RELAXED

static const hal_ops_t cuda_ops = {
    .size = sizeof(hal_ops_t),
    .abi_version = HAL_ABI_VERSION,
    .name = "cuda",
    .init = cuda_init,
    .fini = cuda_fini,
    .device_count = cuda_device_count,
    .device_set = cuda_device_set,
    .device_get = cuda_device_get,
    .device_props = cuda_device_props,
    .mem_alloc = relaxed_mem_alloc,
    .mem_alloc_shareable = relaxed_mem_alloc_shareable,
    .mem_free = relaxed_mem_free,
    .host_alloc = relaxed_host_alloc,
    .host_free = relaxed_host_free,
    .mem_range = relaxed_mem_range,
    .mem_info = cuda_mem_info, /* relaxes itself, only to ask the driver */
    .memcpy_sync = relaxed_memcpy_sync,
    .memset_sync = relaxed_memset_sync,
    .memcpy_async = cuda_memcpy_async,
    .memset_async = cuda_memset_async,
    .mem_export = relaxed_mem_export,
    .mem_import = relaxed_mem_import,
    .mem_unimport = relaxed_mem_unimport,
    .mc_granularity = cuda_mc_granularity,
    .mc_create = relaxed_mc_create,
    .mc_import = relaxed_mc_import,
    .mc_bind = relaxed_mc_bind,
    .mc_free = relaxed_mc_free,
    .stream_create = relaxed_stream_create,
    .stream_destroy = relaxed_stream_destroy,
    .stream_sync = relaxed_stream_sync,
    .stream_capturing = cuda_stream_capturing,
    .stream_begin_capture = cuda_stream_begin_capture,
    .stream_end_capture = cuda_stream_end_capture,
    .graph_launch = cuda_graph_launch,
    .graph_destroy = cuda_graph_destroy,
    .event_create = relaxed_event_create,
    .event_destroy = relaxed_event_destroy,
    .event_record = cuda_event_record,
    .event_sync = relaxed_event_sync,
    .event_elapsed_ms = cuda_event_elapsed_ms,
    .stream_wait_event = cuda_stream_wait_event,
    .launch = cuda_launch,
    .launch_scale = cuda_launch_scale,
    .launch_host_func = cuda_launch_host_func,
};

/** Module entry (HAL_MODULE_ENTRY): the loader dlsym()s it and checks size and ABI. */
__attribute__((visibility("default"))) const hal_ops_t *mscclpp_hal_module(void)
{
    return &cuda_ops;
}

/* What this build is (HAL_MODULE_BUILD, printed by mscclpp-info). */
#ifndef MSCCLPP_CUDA_TARGETS
#define MSCCLPP_CUDA_TARGETS "?"
#endif
static pthread_once_t build_once = PTHREAD_ONCE_INIT;
static char build_text[128];

static void build_describe(void)
{
    snprintf(build_text, sizeof build_text, "CUDA (runtime %d.%d; kernel: nvcc, archs %s)",
             CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, MSCCLPP_CUDA_TARGETS);
}

/** The module's own counts (HAL_MODULE_COUNTS): the CUDA calls of its allocation lookups. */
__attribute__((visibility("default"))) int mscclpp_hal_module_counts(const char **names,
                                                                     uint64_t *counts, int cap)
{
    return cuda_lookup_counts(names, counts, cap);
}

/** Module description (HAL_MODULE_BUILD). */
__attribute__((visibility("default"))) const char *mscclpp_hal_module_build(void)
{
    pthread_once(&build_once, build_describe);
    return build_text;
}
