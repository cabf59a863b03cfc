/*
 * Hardware abstraction layer: one ops table per backend (host, cuda, hip).
 *
 * Core and executor code reach devices only through hal_get(). No slot is ever NULL: an
 * operation a backend cannot do points at its typed stub hal_stub_<slot> (HAL_DEFINE_STUBS),
 * which returns MSCCLPP_ERR_UNSUPPORTED. The table starts with its own size so the core can
 * refuse a module built against an older, shorter table.
 */
#ifndef MSCCLPP_HAL_H
#define MSCCLPP_HAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mscclpp/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: hal_device_props_t.host_memory; 3: capture and graph slots; 4: mem_info, launch_scale,
 * launch_host_func, stream_wait_event; 5: hal_device_props_t.kernel_max_threads */
#define HAL_ABI_VERSION 5

/** What a backend tells about a device. */
typedef struct {
    char name[128];
    char arch[32];        /* "host-x86_64", "sm_90", "gfx90a" */
    int warp_size;        /* 1 on the host backend, 32 CUDA, 64 AMD */
    int multiprocessors;  /* SMs / CUs / host cores */
    int max_threads_per_block;
    size_t total_memory;
    bool ipc;             /* memory can be shared with other processes */
    bool multicast;       /* NVLS multicast objects */
    bool graphs;          /* stream capture */
    bool host_memory;     /* device memory is host memory the calling CPU thread may use
                           * directly (the host backend): host-driven channels work */
    int kernel_max_threads; /* threads per block the backend's interpreter kernel takes at most
                             * (its launch bound, kernels/common/kern_entry.h; launch rejects
                             * more); 0: any (the host backend, which ignores the count) */
} hal_device_props_t;

/** Opaque handle of shareable memory, as it travels between processes (see base/wire.h). */
#define HAL_MEM_HANDLE_BYTES 112
typedef struct {
    uint32_t kind;  /* HAL_HANDLE_* */
    uint32_t len;   /* bytes used in data */
    uint64_t alloc_size;
    uint8_t data[HAL_MEM_HANDLE_BYTES];
} hal_mem_handle_t;

enum {
    HAL_HANDLE_NONE = 0,
    HAL_HANDLE_HOST_MEMFD = 1, /* memfd served over a Unix socket (SCM_RIGHTS) */
    HAL_HANDLE_CUDA_FD = 2,    /* cuMem POSIX file descriptor (served like the memfd) */
    HAL_HANDLE_CUDA_IPC = 3,   /* legacy cudaIpcMemHandle_t */
    HAL_HANDLE_HIP_IPC = 4,    /* hipIpcMemHandle_t */
};

/**
 * What a backend knows of the allocation containing a pointer (mem_info). Memory the backend did
 * not allocate counts too when it can tell where its allocation starts and ends: device memory
 * from the application's own cudaMalloc/hipMalloc/cuMem calls (PyTorch's caching allocator
 * included), and on the host backend shared file mappings (a memfd mapped MAP_SHARED).
 */
typedef struct {
    void *base;     /* start of the allocation (NULL when unknown) */
    size_t size;    /* its bytes; 0: the backend does not know this memory */
    uint64_t id;    /* unique for the life of the process: an allocation made later at the same
                     * address gets another id (0 when size is 0) */
    bool shareable; /* mem_export accepts base: peers can map it */
    bool foreign;   /* not allocated by this backend (the application's own memory) */
} hal_mem_info_t;

/** A host function queued on a stream (launch_host_func): runs once the work before it is
 * done, and the work after it waits for it. It must not call the backend. */
typedef void (*hal_host_fn_t)(void *arg);

typedef struct hal_stream *hal_stream_t; /* backend-defined */
typedef struct hal_event *hal_event_t;   /* backend-defined */
typedef struct hal_mc *hal_mc_t;         /* multicast object, backend-defined */
typedef struct hal_graph *hal_graph_t;   /* captured work, backend-defined */

typedef struct hal_ops {
    size_t size;      /* sizeof(hal_ops_t) of the builder */
    int abi_version;  /* HAL_ABI_VERSION of the builder */
    const char *name; /* "host", "cuda", "hip" (either HIP build: AMD or NVIDIA, hal/hipnv) */

    /* lifecycle: init returns UNSUPPORTED (quietly) when no device/driver is present */
    mscclpp_result_t (*init)(void);
    void (*fini)(void);

    /* devices */
    mscclpp_result_t (*device_count)(int *count);
    mscclpp_result_t (*device_set)(int dev);
    mscclpp_result_t (*device_get)(int *dev);
    mscclpp_result_t (*device_props)(int dev, hal_device_props_t *props);

    /* memory */
    mscclpp_result_t (*mem_alloc)(size_t bytes, void **ptr);           /* plain device memory */
    mscclpp_result_t (*mem_alloc_shareable)(size_t bytes, void **ptr); /* exportable */
    mscclpp_result_t (*mem_free)(void *ptr);                           /* either kind */
    mscclpp_result_t (*host_alloc)(size_t bytes, void **ptr); /* pinned, device-mapped */
    mscclpp_result_t (*host_free)(void *ptr);
    /* allocation containing ptr (from this backend, or imported); ERR_INVALID_ARG if unknown */
    mscclpp_result_t (*mem_range)(const void *ptr, void **base, size_t *size);
    /* The allocation containing ptr, as hal_mem_info_t says, including memory the application
     * allocated itself (found through the driver, or on the host backend /proc/self/maps, and
     * remembered so that it can be exported). Memory the backend cannot tell apart gives
     * size 0 and MSCCLPP_OK, with no error recorded: callers probe. */
    mscclpp_result_t (*mem_info)(const void *ptr, hal_mem_info_t *info);
    mscclpp_result_t (*memcpy_sync)(void *dst, const void *src, size_t bytes);
    mscclpp_result_t (*memset_sync)(void *dst, int value, size_t bytes);
    mscclpp_result_t (*memcpy_async)(void *dst, const void *src, size_t bytes, hal_stream_t s);
    mscclpp_result_t (*memset_async)(void *dst, int value, size_t bytes, hal_stream_t s);

    /* sharing between processes of one node */
    mscclpp_result_t (*mem_export)(void *base, hal_mem_handle_t *handle); /* base of a shareable
                                                                              allocation */
    mscclpp_result_t (*mem_import)(const hal_mem_handle_t *handle, void **base); /* maps all */
    mscclpp_result_t (*mem_unimport)(void *base);

    /* multicast (NVLS); UNSUPPORTED outside CUDA sm_90+ */
    mscclpp_result_t (*mc_granularity)(size_t bytes, size_t *granularity);
    mscclpp_result_t (*mc_create)(size_t bytes, int ndevices, hal_mc_t *mc,
                                  hal_mem_handle_t *handle);
    mscclpp_result_t (*mc_import)(const hal_mem_handle_t *handle, hal_mc_t *mc);
    mscclpp_result_t (*mc_bind)(hal_mc_t mc, void *base, size_t bytes, void **mc_ptr);
    mscclpp_result_t (*mc_free)(hal_mc_t mc);

    /* streams and events */
    mscclpp_result_t (*stream_create)(hal_stream_t *s);
    mscclpp_result_t (*stream_destroy)(hal_stream_t s);
    mscclpp_result_t (*stream_sync)(hal_stream_t s);
    /* graph-capture status: whether work queued on `s` now is recorded rather than run (a
     * capture begun here or by the application, e.g. torch.cuda.graph) */
    mscclpp_result_t (*stream_capturing)(hal_stream_t s, bool *capturing);
    /*
     * Capture (CUDA/HIP stream capture; the host backend records its tasks): between begin and
     * end, launches, async copies/sets and event records queued on `s` are recorded into a
     * graph instead of running. Synchronizing `s` meanwhile is an error that invalidates the
     * capture (end then fails), as CUDA does. graph_launch queues the recording on a stream, in
     * order, once per call; a graph may be destroyed while launches of it are still queued.
     */
    mscclpp_result_t (*stream_begin_capture)(hal_stream_t s);
    mscclpp_result_t (*stream_end_capture)(hal_stream_t s, hal_graph_t *graph);
    mscclpp_result_t (*graph_launch)(hal_graph_t graph, hal_stream_t s);
    mscclpp_result_t (*graph_destroy)(hal_graph_t graph);
    mscclpp_result_t (*event_create)(hal_event_t *e);
    mscclpp_result_t (*event_destroy)(hal_event_t e);
    mscclpp_result_t (*event_record)(hal_event_t e, hal_stream_t s);
    mscclpp_result_t (*event_sync)(hal_event_t e);
    mscclpp_result_t (*event_elapsed_ms)(hal_event_t start, hal_event_t end, float *ms);
    /* work queued on s from now on waits until e's last record (queued before) is reached */
    mscclpp_result_t (*stream_wait_event)(hal_stream_t s, hal_event_t e);

    /*
     * Launch the plan interpreter: `nblocks` blocks of `nthreads` threads (at most the
     * device's kernel_max_threads, when not 0) run kern_entry(args)
     * (kernels/common/kern_args.h). `args` (args_bytes bytes) is copied at launch, so the
     * caller may reuse it at once.
     */
    mscclpp_result_t (*launch)(const void *args, size_t args_bytes, int nblocks, int nthreads,
                               hal_stream_t s);
    /* Elementwise scaling (kernels/common/kern_scale.h): `args` is a kern_scale_args_t,
     * copied at the call; queued on s, NULL: done now */
    mscclpp_result_t (*launch_scale)(const void *args, size_t args_bytes, hal_stream_t s);
    /* Queue fn(arg) on s (NULL: run it now): cudaLaunchHostFunc / hipLaunchHostFunc */
    mscclpp_result_t (*launch_host_func)(hal_host_fn_t fn, void *arg, hal_stream_t s);
} hal_ops_t;

/*
 * Every function slot of hal_ops_t that returns a result, with its parameters and the names
 * that pass them on: X(slot, params, args).
 * `fini` (void) is the only other slot. Used to define typed stubs and to check tables.
 */
#define HAL_OPS_SLOTS(X)                                                                          \
    X(init, (void), ())                                                                           \
    X(device_count, (int *count), (count))                                                        \
    X(device_set, (int dev), (dev))                                                               \
    X(device_get, (int *dev), (dev))                                                              \
    X(device_props, (int dev, hal_device_props_t *props), (dev, props))                           \
    X(mem_alloc, (size_t bytes, void **ptr), (bytes, ptr))                                        \
    X(mem_alloc_shareable, (size_t bytes, void **ptr), (bytes, ptr))                              \
    X(mem_free, (void *ptr), (ptr))                                                               \
    X(host_alloc, (size_t bytes, void **ptr), (bytes, ptr))                                       \
    X(host_free, (void *ptr), (ptr))                                                              \
    X(mem_range, (const void *ptr, void **base, size_t *size), (ptr, base, size))                 \
    X(mem_info, (const void *ptr, hal_mem_info_t *info), (ptr, info))                             \
    X(memcpy_sync, (void *dst, const void *src, size_t bytes), (dst, src, bytes))                 \
    X(memset_sync, (void *dst, int value, size_t bytes), (dst, value, bytes))                     \
    X(memcpy_async, (void *dst, const void *src, size_t bytes, hal_stream_t s),                   \
      (dst, src, bytes, s))                                                                       \
    X(memset_async, (void *dst, int value, size_t bytes, hal_stream_t s), (dst, value, bytes, s)) \
    X(mem_export, (void *base, hal_mem_handle_t *handle), (base, handle))                         \
    X(mem_import, (const hal_mem_handle_t *handle, void **base), (handle, base))                  \
    X(mem_unimport, (void *base), (base))                                                         \
    X(mc_granularity, (size_t bytes, size_t *granularity), (bytes, granularity))                 \
    X(mc_create, (size_t bytes, int ndevices, hal_mc_t *mc, hal_mem_handle_t *handle),            \
      (bytes, ndevices, mc, handle))                                                              \
    X(mc_import, (const hal_mem_handle_t *handle, hal_mc_t *mc), (handle, mc))                    \
    X(mc_bind, (hal_mc_t mc, void *base, size_t bytes, void **mc_ptr), (mc, base, bytes, mc_ptr)) \
    X(mc_free, (hal_mc_t mc), (mc))                                                               \
    X(stream_create, (hal_stream_t *s), (s))                                                     \
    X(stream_destroy, (hal_stream_t s), (s))                                                      \
    X(stream_sync, (hal_stream_t s), (s))                                                         \
    X(stream_capturing, (hal_stream_t s, bool *capturing), (s, capturing))                        \
    X(stream_begin_capture, (hal_stream_t s), (s))                                                \
    X(stream_end_capture, (hal_stream_t s, hal_graph_t *graph), (s, graph))                      \
    X(graph_launch, (hal_graph_t graph, hal_stream_t s), (graph, s))                              \
    X(graph_destroy, (hal_graph_t graph), (graph))                                                \
    X(event_create, (hal_event_t *e), (e))                                                       \
    X(event_destroy, (hal_event_t e), (e))                                                        \
    X(event_record, (hal_event_t e, hal_stream_t s), (e, s))                                      \
    X(event_sync, (hal_event_t e), (e))                                                           \
    X(event_elapsed_ms, (hal_event_t start, hal_event_t end, float *ms), (start, end, ms))        \
    X(stream_wait_event, (hal_stream_t s, hal_event_t e), (s, e))                                 \
    X(launch, (const void *args, size_t args_bytes, int nblocks, int nthreads, hal_stream_t s),   \
      (args, args_bytes, nblocks, nthreads, s))                                                   \
    X(launch_scale, (const void *args, size_t args_bytes, hal_stream_t s), (args, args_bytes, s)) \
    X(launch_host_func, (hal_host_fn_t fn, void *arg, hal_stream_t s), (fn, arg, s))

/**
 * Report that `backend` cannot do `op`: records MSCCLPP_ERR_UNSUPPORTED with the message
 * "<op>: not supported by the <backend> backend" (logged at INFO, since callers often probe)
 * and returns it. Defined in hal/hal_stub.c (a module may compile that file in).
 */
mscclpp_result_t hal_unsupported_op(const char *backend, const char *op);

#define HAL_STUB_DEFINE_(slot, params, args)                                                    \
    static __attribute__((unused)) mscclpp_result_t hal_stub_##slot params                      \
    {                                                                                           \
        return hal_unsupported_op(hal_stub_backend_, #slot);                                    \
    }

/**
 * Define, in the file that builds a backend's table, one typed stub per slot named
 * hal_stub_<slot> (static, same signature as the slot) that returns MSCCLPP_ERR_UNSUPPORTED
 * naming the operation and `backend`, plus hal_stub_fini (does nothing). Point every slot the
 * backend cannot do at its stub, e.g. `.mc_create = hal_stub_mc_create`.
 */
#define HAL_DEFINE_STUBS(backend)                                                               \
    static __attribute__((unused)) const char hal_stub_backend_[] = backend;                    \
    HAL_OPS_SLOTS(HAL_STUB_DEFINE_)                                                             \
    static __attribute__((unused)) void hal_stub_fini(void) {}

/**
 * Check a table: size at least sizeof(hal_ops_t), abi_version HAL_ABI_VERSION, a name, and no
 * NULL slot. On failure returns MSCCLPP_ERR_INVALID_ARG (message names the first bad field) and,
 * when `bad` is not NULL, sets *bad to that field's name.
 */
mscclpp_result_t hal_ops_check(const hal_ops_t *ops, const char **bad);

/**
 * Choose a backend now, without caching the choice (hal_get caches it). `name` is "host",
 * "cuda", "hip" (forced: an unknown or unusable one is MSCCLPP_ERR_UNSUPPORTED naming what was
 * tried) or NULL/"" for the default order: each module of MSCCLPP_HAL_MODULES that finds a
 * device, else host. Modules are loaded and initialized at most once per process. "hip" tries
 * the AMD build (libmscclpp-hal-hip.so), then the NVIDIA one (libmscclpp-hal-hipnv.so) when
 * built; the default order skips hipnv. "hipnv" names the NVIDIA build alone.
 */
mscclpp_result_t hal_select(const char *name, const hal_ops_t **ops);

/**
 * The backend in use: chosen on first call from MSCCLPP_HAL (host|cuda|hip) or the first
 * backend that finds a device (cuda, hip, then host). Never NULL after success.
 */
mscclpp_result_t hal_get(const hal_ops_t **ops);

/** The always-present host backend (hal/host). */
const hal_ops_t *hal_host_ops(void);

/*
 * Counting the operations a process asks of its backend (a test and measurement tool, not for
 * production): with MSCCLPP_HAL_COUNT=1 set before the first hal_get, or after
 * hal_count_enable() called before it, hal_get hands out a table that counts every call of each
 * slot and passes it on to the chosen backend's (hal_host_ops returns that table too when the
 * host backend is the one counted). Off (the default), nothing is wrapped and nothing counted.
 * With MSCCLPP_HAL_COUNT=1 the counts are also printed to stderr at every mscclpp_comm_destroy
 * and when the process exits.
 */
void hal_count_enable(void);
/** hal_count_wrap(real): the counting table of `real` when counting is on and `real` is the
 * counted backend (the first one wrapped), else `real` itself. */
const hal_ops_t *hal_count_wrap(const hal_ops_t *real);
/** Number of counted slots (every slot of HAL_OPS_SLOTS, in its order). */
int hal_count_slots(void);
/** Name of counted slot i (0 <= i < hal_count_slots()). */
const char *hal_count_slot_name(int i);
/** Copy the counts so far into counts[0..hal_count_slots()-1] (zeros when counting is off). */
void hal_count_read(uint64_t *counts);
/** The counted backend module's own counts (HAL_MODULE_COUNTS: e.g. the CUDA calls of its
 * lookups): fills names[i] and counts[i] for i < min(cap, n) and returns n; 0 when counting is
 * off or the module keeps none. */
int hal_count_module(const char **names, uint64_t *counts, int cap);
/** With MSCCLPP_HAL_COUNT=1: print the counts so far to stderr, saying `when` (the library
 * calls it as a communicator goes, since forked ranks often leave with _exit). */
void hal_count_report(const char *when);

/*
 * Threads a running launch may wait for (core/proxy.c marks each proxy thread): a backend call
 * of theirs that waits for the device, or that CUDA/HIP treat as an implicit synchronization,
 * waits for that launch, which waits for them (a deadlock that only a GPU shows). With
 * MSCCLPP_HAL_SYNC_CHECK=1 the host backend refuses such calls from a marked thread while one
 * of its launches runs (hal/host/host_check.c, which keeps the mark), so CI finds them. Per
 * thread; unmarked at start.
 */
void hal_thread_serves_launches(bool on);
bool hal_thread_serving_launches(void);

/**
 * Backends that could be loaded, for mscclpp-info: name, path, status per entry, in the order
 * hal_select tries them (modules of MSCCLPP_HAL_MODULES, then host). Loads and initializes each
 * module (once). Fills at most `cap` entries (out may be NULL when cap is 0) and returns the
 * number of backends; strings stay valid for the life of the process.
 */
typedef struct {
    const char *name;
    const char *path;         /* module path, or "(built in)" */
    mscclpp_result_t status;  /* of loading + init */
    const char *error;        /* why status is not MSCCLPP_OK ("" when it is) */
    int devices;
    const char *build; /* what the module was built for (HAL_MODULE_BUILD), "" if unsaid */
} hal_backend_info_t;
int hal_list_backends(hal_backend_info_t *out, int cap);

/** What the module whose table is `ops` was built for ("" for host or a module that does not
 * say): "HIP on NVIDIA ..." tells the hipnv build of the HIP module from the AMD one. */
const char *hal_backend_build(const hal_ops_t *ops);

/** Symbol a backend module exports: returns its table. */
typedef const hal_ops_t *(*hal_module_entry_fn)(void);
#define HAL_MODULE_ENTRY "mscclpp_hal_module"
/** Optional symbol: a line saying what the module was built for and with what (platform,
 * toolkit, targets), e.g. "HIP on NVIDIA (hal/hipnv over CUDA runtime 13.0; nvcc, sm_90)". */
typedef const char *(*hal_module_build_fn)(void);
#define HAL_MODULE_BUILD "mscclpp_hal_module_build"
/** Optional symbol: the module's own counts of what its slots ask of the driver (a measurement
 * tool, like hal_count_enable), e.g. the CUDA calls of its allocation lookups. Fills names[i]
 * and counts[i] for i < min(cap, n) and returns n, the number it keeps. With MSCCLPP_HAL_COUNT=1
 * the library prints them under the HAL operations ("driver calls of pid ..."). */
typedef int (*hal_module_counts_fn)(const char **names, uint64_t *counts, int cap);
#define HAL_MODULE_COUNTS "mscclpp_hal_module_counts"

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_HAL_H */
