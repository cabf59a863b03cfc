/*
 * CUDA backend module, shared between its files. Plain C against cuda_runtime_api.h; <cuda.h>
 * gives the driver types only: driver functions come from cudaGetDriverEntryPointByVersion
 * into cuda_drv, so the module never links libcuda and loads on a machine without a driver.
 */
#ifndef MSCCLPP_HAL_CUDA_INTERNAL_H
#define MSCCLPP_HAL_CUDA_INTERNAL_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "base/debug.h"
#include "hal/hal.h"
#include "hal/hal_alloc.h"

/* Driver entry points, each fetched with the ABI version its typedef names. */
typedef struct {
    PFN_cuGetErrorString_v6000 get_error_string;
    PFN_cuDeviceGet_v2000 device_get;
    PFN_cuDeviceGetAttribute_v2000 device_get_attribute;
    PFN_cuMemGetAddressRange_v3020 mem_get_address_range;
    /* the application's own memory (mem_info, exporting it) */
    PFN_cuPointerGetAttributes_v7000 pointer_get_attributes;
    PFN_cuMemRetainAllocationHandle_v11000 mem_retain_handle;
    /* virtual memory management (cuMem) */
    PFN_cuMemCreate_v10020 mem_create;
    PFN_cuMemRelease_v10020 mem_release;
    PFN_cuMemAddressReserve_v10020 mem_address_reserve;
    PFN_cuMemAddressFree_v10020 mem_address_free;
    PFN_cuMemMap_v10020 mem_map;
    PFN_cuMemUnmap_v10020 mem_unmap;
    PFN_cuMemSetAccess_v10020 mem_set_access;
    PFN_cuMemGetAllocationGranularity_v10020 mem_get_granularity;
    PFN_cuMemExportToShareableHandle_v10020 mem_export;
    PFN_cuMemImportFromShareableHandle_v10020 mem_import;
    /* multicast (NVLS, CUDA 12.1+) */
    PFN_cuMulticastCreate_v12010 mc_create;
    PFN_cuMulticastAddDevice_v12010 mc_add_device;
    PFN_cuMulticastBindMem_v12010 mc_bind_mem;
    PFN_cuMulticastUnbind_v12010 mc_unbind;
    PFN_cuMulticastGetGranularity_v12010 mc_get_granularity;
    bool have_base; /* error strings, attributes, address ranges */
    bool have_vmm;  /* every cuMem function above */
    bool have_mc;   /* every cuMulticast function above */
} cuda_driver_t;

extern cuda_driver_t cuda_drv;

/** Fill cuda_drv; missing optional groups only clear have_vmm / have_mc. */
mscclpp_result_t cuda_driver_load(void);

/** Report a runtime error with its CUDA name and string; returns the mapped result. */
mscclpp_result_t cuda_rt_error(cudaError_t err, const char *what, const char *file, int line);
/** Same for a driver (CUresult) error. */
mscclpp_result_t cuda_drv_error(CUresult err, const char *what, const char *file, int line);

#define CUDA_CHECK(call)                                                                  \
    do {                                                                                  \
        cudaError_t cuda_err_ = (call);                                                   \
        if (cuda_err_ != cudaSuccess) return cuda_rt_error(cuda_err_, #call, __FILE__, __LINE__); \
    } while (0)
#define CUDA_CHECK_GOTO(call, res, label)                                         \
    do {                                                                          \
        cudaError_t cuda_err_ = (call);                                           \
        if (cuda_err_ != cudaSuccess) {                                           \
            (res) = cuda_rt_error(cuda_err_, #call, __FILE__, __LINE__);          \
            goto label;                                                           \
        }                                                                         \
    } while (0)
#define CU_CHECK(call)                                                                  \
    do {                                                                                \
        CUresult cu_err_ = (call);                                                      \
        if (cu_err_ != CUDA_SUCCESS) return cuda_drv_error(cu_err_, #call, __FILE__, __LINE__); \
    } while (0)
#define CU_CHECK_GOTO(call, res, label)                                          \
    do {                                                                         \
        CUresult cu_err_ = (call);                                               \
        if (cu_err_ != CUDA_SUCCESS) {                                           \
            (res) = cuda_drv_error(cu_err_, #call, __FILE__, __LINE__);          \
            goto label;                                                          \
        }                                                                        \
    } while (0)

/** Fail with UNSUPPORTED unless init() succeeded. */
mscclpp_result_t cuda_require_init(const char *op);
#define CUDA_REQUIRE_INIT() CHECK(cuda_require_init(__func__))

/** The CUdevice of the calling thread's current device. */
mscclpp_result_t cuda_current_cudev(int *ordinal, CUdevice *dev);
/** Whether the current device shares memory through cuMem POSIX fds (else legacy cudaIpc). */
bool cuda_use_vmm(int ordinal);
/** MSCCLPP_CUDA_SHAREABLE=cumem: shareable memory must be cuMem, no legacy fallback. */
bool cuda_require_cumem(void);
/** Whether the device supports multicast objects. */
bool cuda_device_multicast(int ordinal);

/* ----- allocation registry (cuda_mem.c) ------------------------------------------------- */

typedef enum {
    CUDA_ALLOC_PLAIN,     /* cudaMalloc, not shared */
    CUDA_ALLOC_LEGACY,    /* cudaMalloc, shared through cudaIpc */
    CUDA_ALLOC_VMM,       /* cuMemCreate + map, shared through a POSIX fd */
    CUDA_ALLOC_HOST,      /* cudaHostAlloc, mapped */
    CUDA_IMPORT_VMM,      /* a peer's cuMem allocation mapped here */
    CUDA_IMPORT_LEGACY,   /* a peer's cudaMalloc opened with cudaIpcOpenMemHandle */
    CUDA_ALLOC_FOREIGN,   /* the application's own device memory, remembered once exported
                           * or described (cudaMalloc, PyTorch's allocator, cuMem) */
} cuda_alloc_kind_t;

typedef struct cuda_alloc {
    hal_alloc_t r;                        /* kind (cuda_alloc_kind_t), base, size, id
                                           * (hal/hal_alloc.h); r.size: mapped bytes (a
                                           * granularity multiple for cuMem) */
    CUmemGenericAllocationHandle handle;  /* cuMem kinds */
    int device;                           /* runtime ordinal it was created/mapped on */
    bool exported;                        /* fd served by the broker under fdb_key */
    uint64_t fdb_key;
    uint8_t ticket[64];                   /* encoded broker ticket, valid when exported */
    int aliases;                          /* same-process imports of a legacy allocation */
    bool legacy_ipc;                      /* foreign: cudaIpcGetMemHandle works on it */
    bool vmm_fd;                          /* foreign: cuMem, exportable as a POSIX fd */
    bool retained;                        /* foreign cuMem: `handle` was retained by export */
} cuda_alloc_t;

/** Find the allocation containing [ptr, ptr + 1), or NULL. Call with cuda_reg_lock() held. */
cuda_alloc_t *cuda_reg_find(const void *ptr);
void cuda_reg_lock(void);
void cuda_reg_unlock(void);

/* ----- ops implemented per file ---------------------------------------------------------- */

mscclpp_result_t cuda_mem_alloc(size_t bytes, void **ptr);
mscclpp_result_t cuda_mem_alloc_shareable(size_t bytes, void **ptr);
mscclpp_result_t cuda_mem_free(void *ptr);
mscclpp_result_t cuda_host_alloc(size_t bytes, void **ptr);
mscclpp_result_t cuda_host_free(void *ptr);
mscclpp_result_t cuda_mem_range(const void *ptr, void **base, size_t *size);
mscclpp_result_t cuda_mem_info(const void *ptr, hal_mem_info_t *info);
/** The CUDA calls mem_info made so far, by kind (HAL_MODULE_COUNTS, hal.h). */
int cuda_lookup_counts(const char **names, uint64_t *counts, int cap);
mscclpp_result_t cuda_memcpy_sync(void *dst, const void *src, size_t bytes);
mscclpp_result_t cuda_memset_sync(void *dst, int value, size_t bytes);
mscclpp_result_t cuda_memcpy_async(void *dst, const void *src, size_t bytes, hal_stream_t s);
mscclpp_result_t cuda_memset_async(void *dst, int value, size_t bytes, hal_stream_t s);
mscclpp_result_t cuda_mem_export(void *base, hal_mem_handle_t *handle);
mscclpp_result_t cuda_mem_import(const hal_mem_handle_t *handle, void **base);
mscclpp_result_t cuda_mem_unimport(void *base);
/** Serve the fd of a cuMem handle: HAL_FDB_TICKET_BYTES of ticket, and its broker key. */
mscclpp_result_t cuda_export_fd(CUmemGenericAllocationHandle h, uint8_t *data, uint64_t *key);
/** Fetch the fd named in data and import it as a cuMem handle. */
mscclpp_result_t cuda_import_fd(const uint8_t *data, CUmemGenericAllocationHandle *h);
/** Reserve a VA range of `size`, map `h` there and give the current device read/write. */
mscclpp_result_t cuda_map_handle(CUmemGenericAllocationHandle h, size_t size, size_t align,
                                 int cudev, void **ptr);
void cuda_unmap(void *ptr, size_t size);

mscclpp_result_t cuda_mc_granularity(size_t bytes, size_t *granularity);
mscclpp_result_t cuda_mc_create(size_t bytes, int ndevices, hal_mc_t *mc, hal_mem_handle_t *handle);
mscclpp_result_t cuda_mc_import(const hal_mem_handle_t *handle, hal_mc_t *mc);
mscclpp_result_t cuda_mc_bind(hal_mc_t mc, void *base, size_t bytes, void **mc_ptr);
mscclpp_result_t cuda_mc_free(hal_mc_t mc);

mscclpp_result_t cuda_stream_create(hal_stream_t *s);
mscclpp_result_t cuda_stream_destroy(hal_stream_t s);
mscclpp_result_t cuda_stream_sync(hal_stream_t s);
mscclpp_result_t cuda_stream_capturing(hal_stream_t s, bool *capturing);
mscclpp_result_t cuda_event_create(hal_event_t *e);
mscclpp_result_t cuda_event_destroy(hal_event_t e);
mscclpp_result_t cuda_event_record(hal_event_t e, hal_stream_t s);
mscclpp_result_t cuda_event_sync(hal_event_t e);
mscclpp_result_t cuda_event_elapsed_ms(hal_event_t start, hal_event_t end, float *ms);
mscclpp_result_t cuda_stream_begin_capture(hal_stream_t s);
mscclpp_result_t cuda_stream_end_capture(hal_stream_t s, hal_graph_t *graph);
mscclpp_result_t cuda_graph_launch(hal_graph_t graph, hal_stream_t s);
mscclpp_result_t cuda_graph_destroy(hal_graph_t graph);
/**
 * The stream of the module's synchronous copies and sets: the legacy stream, unless using it
 * now would join a capture in progress (a blocking stream capturing: CUDA then invalidates the
 * capture); then a non-blocking stream of the module's own for the current device.
 */
cudaStream_t cuda_setup_stream(void);
/*
 * Setup work (allocations, synchronous copies, imports) may come while the application
 * captures a stream in global mode (torch.cuda.graph does): CUDA refuses such calls then
 * ("operation not permitted when stream is capturing") although none of them is part of the
 * graph. The module's slots that do setup relax the calling thread's capture mode for their
 * duration (cudaThreadExchangeStreamCaptureMode), as NCCL does for its allocations.
 */
static inline enum cudaStreamCaptureMode cuda_capture_relax(void)
{
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    return mode;
}
static inline void cuda_capture_restore(enum cudaStreamCaptureMode mode)
{
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
}
/** Wait for `s` (0: the legacy stream), polling with backoff, bounded by MSCCLPP_TIMEOUT. */
mscclpp_result_t cuda_stream_wait(cudaStream_t s, const char *who);
/** Once per device, at its first launch: warn if other processes share it without CUDA MPS
 * (cuda_mps.c). Never fails; costs a thread-local test on later launches. */
void cuda_mps_check(void);
/** The calling thread chose a device (device_set): its next launch checks that device. */
void cuda_mps_device_changed(void);
mscclpp_result_t cuda_launch(const void *args, size_t args_bytes, int nblocks, int nthreads,
                             hal_stream_t s);
mscclpp_result_t cuda_launch_host_func(hal_host_fn_t fn, void *arg, hal_stream_t s);
mscclpp_result_t cuda_launch_scale(const void *args, size_t args_bytes, hal_stream_t s);
mscclpp_result_t cuda_stream_wait_event(hal_stream_t s, hal_event_t e);

/* Handle payload layout (explicit, little-endian; version byte first). */
#define CUDA_HANDLE_VERSION 1
/* HAL_HANDLE_CUDA_FD: [0] version, [1] what (0 memory, 1 multicast), [2..3] 0, [4..] ticket */
#define CUDA_FD_TICKET_OFF 4
/* HAL_HANDLE_CUDA_IPC: [0] version, [1..3] 0, [4] pid u32, [8] base u64, [16] cudaIpcMemHandle */
#define CUDA_IPC_PID_OFF 4
#define CUDA_IPC_BASE_OFF 8
#define CUDA_IPC_HANDLE_OFF 16

static inline cudaStream_t cuda_stream(hal_stream_t s) { return (cudaStream_t)(void *)s; }

#endif /* MSCCLPP_HAL_CUDA_INTERNAL_H */
