/*
 * CUDA backend memory: plain and shareable device memory, pinned mapped host memory, copies,
 * and sharing between processes (cuMem POSIX fds through the fd broker, legacy cudaIpc).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal/cuda/cuda_internal.h"
#include "hal/fd_broker.h"

/* Every allocation this module made or mapped: kinds decide how to free, export, unmap. The
 * application's own memory enters as CUDA_ALLOC_FOREIGN once mem_info or mem_export met it. */
static hal_alloc_reg_t reg = HAL_ALLOC_REG_INIT(cuda_alloc_t, CUDA_ALLOC_FOREIGN);

void cuda_reg_lock(void) { pthread_mutex_lock(&reg.lock); }
void cuda_reg_unlock(void) { pthread_mutex_unlock(&reg.lock); }
cuda_alloc_t *cuda_reg_find(const void *ptr) { return (cuda_alloc_t *)hal_alloc_find(&reg, ptr); }

static mscclpp_result_t reg_add(cuda_alloc_kind_t kind, void *base, size_t size,
                                CUmemGenericAllocationHandle handle, int device)
{
    cuda_alloc_t *a = calloc(1, sizeof *a);
    if (!a) return ERR(MSCCLPP_ERR_NO_MEMORY, "cuda: out of host memory for the registry");
    a->r.kind = kind;
    a->r.base = base;
    a->r.size = size;
    a->handle = handle;
    a->device = device;
    hal_alloc_add(&reg, &a->r);
    return MSCCLPP_OK;
}

/* Remove the entry whose base is `base` and whose kind is accepted by `mask`; NULL if none. */
static cuda_alloc_t *reg_take(const void *base, unsigned mask)
{
    return (cuda_alloc_t *)hal_alloc_take(&reg, base, mask);
}

#define KIND(k) (1u << (k))

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

/* Zero new device memory before any stream can use it (cudaMemset alone is asynchronous). */
static mscclpp_result_t cuda_zero_sync(void *p, size_t bytes)
{
    cudaStream_t s = cuda_setup_stream();
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, s));
    return cuda_stream_wait(s, "zeroing new memory");
}

/* ----- cuMem helpers ------------------------------------------------------------------------ */

static void vmm_prop(CUdevice dev, CUmemAllocationProp *prop)
{
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = dev;
}

/* Allocation granularity of `dev`, raised to the multicast one so buffers can be bound. */
static mscclpp_result_t vmm_granularity(int ordinal, CUdevice dev, size_t *gran)
{
    CUmemAllocationProp prop;
    vmm_prop(dev, &prop);
    size_t g = 0;
    CU_CHECK(cuda_drv.mem_get_granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    if (cuda_device_multicast(ordinal)) {
        CUmulticastObjectProp mp = {.numDevices = 1,
                                    .size = g,
                                    .handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR};
        size_t mg = 0;
        if (cuda_drv.mc_get_granularity(&mg, &mp, CU_MULTICAST_GRANULARITY_MINIMUM) ==
                CUDA_SUCCESS &&
            mg > g && mg % g == 0)
            g = mg;
    }
    *gran = g ? g : (size_t)2 << 20;
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_map_handle(CUmemGenericAllocationHandle h, size_t size, size_t align,
                                 int cudev, void **ptr)
{
    mscclpp_result_t res;
    CUdeviceptr va = 0;
    CU_CHECK(cuda_drv.mem_address_reserve(&va, size, align, 0, 0));
    CU_CHECK_GOTO(cuda_drv.mem_map(va, size, 0, h, 0), res, free_va);
    CUmemAccessDesc access = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = cudev},
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CU_CHECK_GOTO(cuda_drv.mem_set_access(va, size, &access, 1), res, unmap);
    *ptr = (void *)(uintptr_t)va;
    return MSCCLPP_OK;

unmap:
    (void)cuda_drv.mem_unmap(va, size);
free_va:
    (void)cuda_drv.mem_address_free(va, size);
    return res;
}

void cuda_unmap(void *ptr, size_t size)
{
    CUdeviceptr va = (CUdeviceptr)(uintptr_t)ptr;
    CUresult err = cuda_drv.mem_unmap(va, size);
    if (err != CUDA_SUCCESS) cuda_drv_error(err, "cuMemUnmap", __FILE__, __LINE__);
    err = cuda_drv.mem_address_free(va, size);
    if (err != CUDA_SUCCESS) cuda_drv_error(err, "cuMemAddressFree", __FILE__, __LINE__);
}

mscclpp_result_t cuda_export_fd(CUmemGenericAllocationHandle h, uint8_t *ticket_bytes,
                                uint64_t *key)
{
    int fd = -1;
    CU_CHECK(cuda_drv.mem_export(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    hal_fdb_ticket_t ticket;
    mscclpp_result_t res = hal_fdb_serve(fd, &ticket);
    if (res != MSCCLPP_OK) {
        close(fd);
        return res;
    }
    hal_fdb_ticket_encode(&ticket, ticket_bytes);
    *key = ticket.key;
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_import_fd(const uint8_t *ticket_bytes, CUmemGenericAllocationHandle *h)
{
    hal_fdb_ticket_t ticket;
    hal_fdb_ticket_decode(ticket_bytes, &ticket);
    int fd = -1;
    CHECK(hal_fdb_fetch(&ticket, &fd));
    CUresult err =
        cuda_drv.mem_import(h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd); /* the imported handle holds its own reference */
    if (err != CUDA_SUCCESS) return cuda_drv_error(err, "cuMemImportFromShareableHandle", __FILE__, __LINE__);
    return MSCCLPP_OK;
}

static mscclpp_result_t vmm_alloc(size_t bytes, void **ptr)
{
    int ordinal;
    CUdevice dev;
    CHECK(cuda_current_cudev(&ordinal, &dev));
    size_t gran = 0;
    CHECK(vmm_granularity(ordinal, dev, &gran));
    size_t size = round_up(bytes, gran);

    CUmemAllocationProp prop;
    vmm_prop(dev, &prop);
    int rdma = 0;
    if (cuda_drv.device_get_attribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                                      dev) == CUDA_SUCCESS &&
        rdma)
        prop.allocFlags.gpuDirectRDMACapable = 1; /* the ib transport may register it */

    mscclpp_result_t res;
    CUmemGenericAllocationHandle h;
    CU_CHECK(cuda_drv.mem_create(&h, size, &prop, 0));
    void *va = NULL;
    CHECK_GOTO(cuda_map_handle(h, size, gran, dev, &va), res, release);
    CHECK_GOTO(cuda_zero_sync(va, size), res, unmap);
    CHECK_GOTO(reg_add(CUDA_ALLOC_VMM, va, size, h, ordinal), res, unmap);
    *ptr = va;
    TRACE(SUBSYS_MEM, "cuda: cuMem allocation %p, %zu bytes (asked %zu)", va, size, bytes);
    return MSCCLPP_OK;

unmap:
    cuda_unmap(va, size);
release:
    (void)cuda_drv.mem_release(h);
    return res;
}

static mscclpp_result_t rt_alloc(size_t bytes, cuda_alloc_kind_t kind, void **ptr)
{
    mscclpp_result_t res;
    int ordinal;
    void *p = NULL;
    CUDA_CHECK(cudaGetDevice(&ordinal));
    CUDA_CHECK(cudaMalloc(&p, bytes));
    /* zero-filled like the host backend's memfd memory: semaphores and flags start at 0 */
    CHECK_GOTO(cuda_zero_sync(p, bytes), res, free_mem);
    CHECK_GOTO(reg_add(kind, p, bytes, 0, ordinal), res, free_mem);
    *ptr = p;
    return MSCCLPP_OK;

free_mem:
    (void)cudaFree(p);
    return res;
}

/* ----- allocation ops ----------------------------------------------------------------------- */

mscclpp_result_t cuda_mem_alloc(size_t bytes, void **ptr)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(bytes > 0);
    CUDA_REQUIRE_INIT();
    return rt_alloc(bytes, CUDA_ALLOC_PLAIN, ptr);
}

mscclpp_result_t cuda_mem_alloc_shareable(size_t bytes, void **ptr)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(bytes > 0);
    CUDA_REQUIRE_INIT();
    int ordinal;
    CUDA_CHECK(cudaGetDevice(&ordinal));
    if (cuda_use_vmm(ordinal)) return vmm_alloc(bytes, ptr);
    if (cuda_require_cumem())
        return ERR(MSCCLPP_ERR_UNSUPPORTED, "cuda mem_alloc_shareable: MSCCLPP_CUDA_SHAREABLE=cumem "
                                            "but device %d has no cuMem POSIX fd support",
                   ordinal);
    return rt_alloc(bytes, CUDA_ALLOC_LEGACY, ptr);
}

mscclpp_result_t cuda_mem_free(void *ptr)
{
    CHECK_ARG(ptr != NULL);
    CUDA_REQUIRE_INIT();
    cuda_alloc_t *a =
        reg_take(ptr, KIND(CUDA_ALLOC_PLAIN) | KIND(CUDA_ALLOC_LEGACY) | KIND(CUDA_ALLOC_VMM));
    if (!a) return ERR_ARG("cuda mem_free: %p is not the base of a device allocation", ptr);
    if (a->aliases > 0)
        WARN(SUBSYS_MEM, "cuda mem_free: %p is still imported %d time(s) in this process",
             ptr, a->aliases);
    mscclpp_result_t res = MSCCLPP_OK;
    if (a->r.kind == CUDA_ALLOC_VMM) {
        if (a->exported) hal_fdb_withdraw(a->fdb_key);
        cuda_unmap(a->r.base, a->r.size);
        CUresult err = cuda_drv.mem_release(a->handle);
        if (err != CUDA_SUCCESS) res = cuda_drv_error(err, "cuMemRelease", __FILE__, __LINE__);
    } else {
        cudaError_t err = cudaFree(a->r.base);
        if (err != cudaSuccess) res = cuda_rt_error(err, "cudaFree", __FILE__, __LINE__);
    }
    free(a);
    return res;
}

mscclpp_result_t cuda_host_alloc(size_t bytes, void **ptr)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(bytes > 0);
    CUDA_REQUIRE_INIT();
    mscclpp_result_t res;
    void *p = NULL;
    int ordinal;
    CUDA_CHECK(cudaGetDevice(&ordinal));
    /* Portable: every device of the process sees it; Mapped: kernels load/store it (FIFOs) */
    CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    memset(p, 0, bytes);
    CHECK_GOTO(reg_add(CUDA_ALLOC_HOST, p, bytes, 0, ordinal), res, free_host);
    *ptr = p;
    return MSCCLPP_OK;

free_host:
    (void)cudaFreeHost(p);
    return res;
}

mscclpp_result_t cuda_host_free(void *ptr)
{
    CHECK_ARG(ptr != NULL);
    CUDA_REQUIRE_INIT();
    cuda_alloc_t *a = reg_take(ptr, KIND(CUDA_ALLOC_HOST));
    if (!a) return ERR_ARG("cuda host_free: %p is not the base of a host allocation", ptr);
    free(a);
    CUDA_CHECK(cudaFreeHost(ptr));
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_mem_range(const void *ptr, void **base, size_t *size)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(base != NULL);
    CHECK_ARG(size != NULL);
    CUDA_REQUIRE_INIT();
    cuda_reg_lock();
    cuda_alloc_t *a = cuda_reg_find(ptr);
    if (a && a->r.kind == CUDA_ALLOC_FOREIGN) a = NULL; /* the driver says what is there now */
    if (a) {
        *base = a->r.base;
        *size = a->r.size;
    }
    cuda_reg_unlock();
    if (a) return MSCCLPP_OK;

    /* memory the application allocated itself */
    int ordinal;
    CUdevice dev;
    CHECK(cuda_current_cudev(&ordinal, &dev));
    CUdeviceptr b = 0;
    size_t s = 0;
    CUresult err = cuda_drv.mem_get_address_range(&b, &s, (CUdeviceptr)(uintptr_t)ptr);
    if (err != CUDA_SUCCESS) {
        const char *str = NULL;
        if (cuda_drv.get_error_string(err, &str) != CUDA_SUCCESS || !str) str = "?";
        return ERR_ARG("cuda mem_range: %p is not device memory known to CUDA (%s)", ptr, str);
    }
    *base = (void *)(uintptr_t)b;
    *size = s;
    return MSCCLPP_OK;
}

/* ----- the application's own memory (mem_info, mem_export) ----------------------------------- */

/* The CUDA calls that describing memory makes (cuda_lookup_counts): each one costs about
 * 0.1-1 us on the host, and a collective on the application's memory describes each buffer at
 * every call. Relaxed atomics: exact once the threads that count are done. */
enum {
    LC_MEM_INFO,     /* mem_info slots served */
    LC_CALLS,        /* every CUDA call below, together */
    LC_CAPTURE_MODE, /* cudaThreadExchangeStreamCaptureMode: relax, restore */
    LC_ATTRIBUTES,   /* cuPointerGetAttributes */
    LC_RANGE,        /* cuMemGetAddressRange */
    LC_DEVICE,       /* cudaGetDevice */
    LC_COUNT_
};
static const char *const lc_names[LC_COUNT_] = {
    "mem_info", "mem_info_cuda_calls", "capture_mode", "pointer_attributes", "address_range",
    "get_device"};
static uint64_t lc_counts[LC_COUNT_];

static void lc_note(int what)
{
    __atomic_fetch_add(&lc_counts[what], 1, __ATOMIC_RELAXED);
    if (what != LC_MEM_INFO) __atomic_fetch_add(&lc_counts[LC_CALLS], 1, __ATOMIC_RELAXED);
}

int cuda_lookup_counts(const char **names, uint64_t *counts, int cap)
{
    for (int i = 0; i < LC_COUNT_ && i < cap; i++) {
        names[i] = lc_names[i];
        counts[i] = __atomic_load_n(&lc_counts[i], __ATOMIC_RELAXED);
    }
    return LC_COUNT_;
}

/*
 * What the driver says of the allocation containing ptr (hal_alloc_describe_fn): false when it
 * is not device memory of this process that the driver can describe (host memory, managed
 * memory, an old driver). One cuPointerGetAttributes for everything it can say; the mapped
 * range (cuMemGetAddressRange: for cuMem memory the mapping, where RANGE_START_ADDR would give
 * the whole reservation) and the current device only for memory not listed yet. Memory listed
 * under the same buffer id (never reused by a process) that cudaMalloc made (legacy IPC: one
 * mapping per id) is the listed allocation: its range is the listed one. cuMem memory is asked
 * every time (the driver does not document a mapping's id as the mapping's own), so a range
 * unmapped and mapped anew inside one reservation is told apart as before.
 */
static bool foreign_describe(const void *ptr, const hal_alloc_t *listed, hal_alloc_t *fresh)
{
    cuda_alloc_t *d = (cuda_alloc_t *)fresh;
    if (!cuda_drv.pointer_get_attributes) return false;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                   CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                   CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED};
    unsigned int mtype = 0;
    unsigned long long bid = 0, handle_types = 0;
    int legacy = 0, managed = 0;
    void *data[] = {&mtype, &bid, &legacy, &handle_types, &managed};
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
    lc_note(LC_ATTRIBUTES);
    if (cuda_drv.pointer_get_attributes(5, attrs, data, p) != CUDA_SUCCESS) return false;
    if (mtype != CU_MEMORYTYPE_DEVICE || managed || bid == 0) return false;
    const uint64_t id = (uint64_t)bid | HAL_ALLOC_FOREIGN_ID;
    const cuda_alloc_t *was = (const cuda_alloc_t *)listed;
    d->legacy_ipc = legacy != 0;
    d->vmm_fd = (handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0 &&
                cuda_drv.mem_retain_handle != NULL && cuda_drv.have_vmm;
    d->r.id = id;
    if (was && was->r.id == id && was->legacy_ipc && d->legacy_ipc) {
        /* the listed allocation itself: hal_alloc_current keeps it (and its device) */
        d->r.base = was->r.base;
        d->r.size = was->r.size;
        d->device = was->device;
        return true;
    }
    CUdeviceptr b = 0;
    size_t s = 0;
    lc_note(LC_RANGE);
    if (cuda_drv.mem_get_address_range(&b, &s, p) != CUDA_SUCCESS || s == 0) return false;
    d->r.base = (void *)(uintptr_t)b;
    d->r.size = s;
    if (was && was->r.id == id && was->r.base == d->r.base && was->r.size == s) {
        d->device = was->device; /* kept: the device it was met on */
        return true;
    }
    lc_note(LC_DEVICE);
    (void)cudaGetDevice(&d->device);
    return true;
}

/* Free a foreign entry already taken out of the registry (its mapping is the application's). */
static void foreign_release(hal_alloc_t *stale)
{
    cuda_alloc_t *a = (cuda_alloc_t *)stale;
    if (a->aliases > 0)
        WARN(SUBSYS_MEM, "cuda: allocation %p was freed while still imported here", a->r.base);
    if (a->exported) hal_fdb_withdraw(a->fdb_key);
    if (a->retained) (void)cuda_drv.mem_release(a->handle);
    free(a);
}

static bool entry_shareable(const hal_alloc_t *r)
{
    const cuda_alloc_t *a = (const cuda_alloc_t *)r;
    return r->kind == CUDA_ALLOC_VMM || r->kind == CUDA_ALLOC_LEGACY ||
           (r->kind == CUDA_ALLOC_FOREIGN && (a->legacy_ipc || a->vmm_fd));
}

/* The registry entry of the allocation containing ptr, valid now (hal_alloc_current): NULL (no
 * error) when the driver cannot describe the memory. Lock held. */
static cuda_alloc_t *foreign_entry(const void *ptr)
{
    cuda_alloc_t scratch;
    return (cuda_alloc_t *)hal_alloc_current(&reg, ptr, &scratch.r, foreign_describe,
                                             foreign_release);
}

/*
 * The mem_info slot. Memory this module allocated or mapped is answered from the registry
 * with no CUDA call; any other memory is described by the driver (foreign_describe) with the
 * thread's capture mode relaxed around it (cuda_capture_relax: a lookup inside a
 * torch.cuda.graph capture), as the table's relaxed slots do.
 */
mscclpp_result_t cuda_mem_info(const void *ptr, hal_mem_info_t *info)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(info != NULL);
    memset(info, 0, sizeof *info);
    CUDA_REQUIRE_INIT();
    lc_note(LC_MEM_INFO);
    cuda_reg_lock();
    const cuda_alloc_t *a = cuda_reg_find(ptr);
    const bool ours = a && a->r.kind != CUDA_ALLOC_FOREIGN;
    if (ours) {
        info->base = a->r.base;
        info->size = a->r.size;
        info->id = a->r.id;
        info->shareable = entry_shareable(&a->r);
    }
    cuda_reg_unlock();
    if (ours) return MSCCLPP_OK;
    lc_note(LC_CAPTURE_MODE);
    enum cudaStreamCaptureMode mode = cuda_capture_relax();
    cuda_alloc_t scratch;
    hal_alloc_info(&reg, ptr, &scratch.r, foreign_describe, foreign_release, entry_shareable, info);
    lc_note(LC_CAPTURE_MODE);
    cuda_capture_restore(mode);
    return MSCCLPP_OK;
}

/* ----- copies ------------------------------------------------------------------------------- */

mscclpp_result_t cuda_memcpy_sync(void *dst, const void *src, size_t bytes)
{
    CHECK_ARG(bytes == 0 || (dst != NULL && src != NULL));
    CUDA_REQUIRE_INIT();
    if (bytes == 0) return MSCCLPP_OK;
    /* device-to-device cudaMemcpy returns before the copy is done: wait explicitly */
    cudaStream_t s = cuda_setup_stream();
    /* First wait for what the stream holds, by polling. A copy from device to pageable memory
     * (a stack variable: the executor reads a synchronous launch's state so, right after
     * launching it on this legacy stream) returns "only once the copy has completed" (API
     * synchronization behavior): the thread would sit inside the driver for the kernel's whole
     * life while that kernel waits for this rank's proxy, whose own CUDA calls then wait for
     * it in turn (issue 19: the UCX 2x1 put in a futex wait). Queued once the stream is idle,
     * the copy is short. */
    CHECK(cuda_stream_wait(s, "memcpy_sync"));
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
    return cuda_stream_wait(s, "memcpy_sync");
}

static bool is_host_alloc(const void *ptr)
{
    cuda_reg_lock();
    cuda_alloc_t *a = cuda_reg_find(ptr);
    bool host = a && a->r.kind == CUDA_ALLOC_HOST;
    cuda_reg_unlock();
    return host;
}

mscclpp_result_t cuda_memset_sync(void *dst, int value, size_t bytes)
{
    CHECK_ARG(bytes == 0 || dst != NULL);
    CUDA_REQUIRE_INIT();
    if (bytes == 0) return MSCCLPP_OK;
    if (is_host_alloc(dst)) {
        memset(dst, value, bytes);
        return MSCCLPP_OK;
    }
    /* the legacy stream does not wait for our non-blocking streams, so this cannot hang on a
     * kernel that waits for a peer */
    cudaStream_t s = cuda_setup_stream();
    CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, s));
    return cuda_stream_wait(s, "memset_sync");
}

mscclpp_result_t cuda_memcpy_async(void *dst, const void *src, size_t bytes, hal_stream_t s)
{
    CHECK_ARG(bytes == 0 || (dst != NULL && src != NULL));
    CUDA_REQUIRE_INIT();
    if (bytes == 0) return MSCCLPP_OK;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cuda_stream(s)));
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_memset_async(void *dst, int value, size_t bytes, hal_stream_t s)
{
    CHECK_ARG(bytes == 0 || dst != NULL);
    CUDA_REQUIRE_INIT();
    if (bytes == 0) return MSCCLPP_OK;
    CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, cuda_stream(s)));
    return MSCCLPP_OK;
}

/* ----- sharing ------------------------------------------------------------------------------ */

mscclpp_result_t cuda_mem_export(void *base, hal_mem_handle_t *handle)
{
    CHECK_ARG(base != NULL);
    CHECK_ARG(handle != NULL);
    CUDA_REQUIRE_INIT();
    memset(handle, 0, sizeof *handle);

    cuda_reg_lock();
    cuda_alloc_t *a = foreign_entry(base);
    bool foreign = a && a->r.kind == CUDA_ALLOC_FOREIGN;
    if (!a || a->r.base != base ||
        (a->r.kind != CUDA_ALLOC_VMM && a->r.kind != CUDA_ALLOC_LEGACY &&
         !(foreign && (a->legacy_ipc || a->vmm_fd)))) {
        cuda_reg_unlock();
        return ERR_ARG("cuda mem_export: %p is not the base of a shareable allocation "
                       "(mem_alloc_shareable, or the application's cudaMalloc or cuMem memory "
                       "with POSIX fd handles)", base);
    }
    mscclpp_result_t res = MSCCLPP_OK;
    handle->alloc_size = a->r.size;
    handle->data[0] = CUDA_HANDLE_VERSION;
    if (foreign && !a->legacy_ipc && !a->retained) {
        /* the application's cuMem allocation: export the physical allocation mapped here */
        CUresult err = cuda_drv.mem_retain_handle(&a->handle, base);
        if (err != CUDA_SUCCESS) {
            cuda_reg_unlock();
            return cuda_drv_error(err, "cuMemRetainAllocationHandle", __FILE__, __LINE__);
        }
        a->retained = true;
    }
    if (a->r.kind == CUDA_ALLOC_VMM || (foreign && !a->legacy_ipc)) {
        /* one fd per allocation, served until mem_free; later exports reuse the ticket */
        if (!a->exported) {
            res = cuda_export_fd(a->handle, a->ticket, &a->fdb_key);
            a->exported = res == MSCCLPP_OK;
        }
        if (res == MSCCLPP_OK) {
            handle->kind = HAL_HANDLE_CUDA_FD;
            handle->data[1] = 0; /* memory */
            memcpy(handle->data + CUDA_FD_TICKET_OFF, a->ticket, HAL_FDB_TICKET_BYTES);
            handle->len = CUDA_FD_TICKET_OFF + HAL_FDB_TICKET_BYTES;
        }
    } else {
        cudaIpcMemHandle_t ipc;
        cudaError_t err = cudaIpcGetMemHandle(&ipc, base);
        if (err != cudaSuccess) {
            res = cuda_rt_error(err, "cudaIpcGetMemHandle", __FILE__, __LINE__);
        } else {
            handle->kind = HAL_HANDLE_CUDA_IPC;
            hal_put_u32(handle->data + CUDA_IPC_PID_OFF, (uint32_t)getpid());
            hal_put_u64(handle->data + CUDA_IPC_BASE_OFF, (uint64_t)(uintptr_t)base);
            memcpy(handle->data + CUDA_IPC_HANDLE_OFF, &ipc, sizeof ipc);
            handle->len = CUDA_IPC_HANDLE_OFF + (uint32_t)sizeof ipc;
        }
    }
    cuda_reg_unlock();
    return res;
}

static mscclpp_result_t import_vmm(const hal_mem_handle_t *handle, void **base)
{
    if (handle->len != CUDA_FD_TICKET_OFF + HAL_FDB_TICKET_BYTES || handle->data[1] != 0)
        return ERR_ARG("cuda mem_import: malformed cuMem handle (len %u, what %u)", handle->len,
                       handle->data[1]);
    int ordinal;
    CUdevice dev;
    CHECK(cuda_current_cudev(&ordinal, &dev));
    if (!cuda_drv.have_vmm)
        return ERR(MSCCLPP_ERR_UNSUPPORTED, "cuda mem_import: the driver has no cuMem API");
    CUmemAllocationProp prop;
    vmm_prop(dev, &prop);
    size_t gran = 0;
    CU_CHECK(cuda_drv.mem_get_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (gran == 0 || handle->alloc_size % gran != 0)
        return ERR_ARG("cuda mem_import: size %llu is not a multiple of the granularity %zu",
                       (unsigned long long)handle->alloc_size, gran);

    mscclpp_result_t res;
    CUmemGenericAllocationHandle h;
    CHECK(cuda_import_fd(handle->data + CUDA_FD_TICKET_OFF, &h));
    void *va = NULL;
    CHECK_GOTO(cuda_map_handle(h, handle->alloc_size, gran, dev, &va), res, release);
    CHECK_GOTO(reg_add(CUDA_IMPORT_VMM, va, handle->alloc_size, h, ordinal), res, unmap);
    *base = va;
    return MSCCLPP_OK;

unmap:
    cuda_unmap(va, handle->alloc_size);
release:
    (void)cuda_drv.mem_release(h);
    return res;
}

static mscclpp_result_t import_legacy(const hal_mem_handle_t *handle, void **base)
{
    cudaIpcMemHandle_t ipc;
    if (handle->len != CUDA_IPC_HANDLE_OFF + sizeof ipc)
        return ERR_ARG("cuda mem_import: malformed cudaIpc handle (len %u)", handle->len);
    uint32_t pid = hal_get_u32(handle->data + CUDA_IPC_PID_OFF);
    void *orig = (void *)(uintptr_t)hal_get_u64(handle->data + CUDA_IPC_BASE_OFF);

    if (pid == (uint32_t)getpid()) {
        /* cudaIpcOpenMemHandle refuses handles of its own process: ranks that are threads of
         * one process use the original pointer */
        mscclpp_result_t res = MSCCLPP_OK;
        cuda_reg_lock();
        cuda_alloc_t *a = cuda_reg_find(orig);
        if (a && a->r.base == orig &&
            (a->r.kind == CUDA_ALLOC_LEGACY || (a->r.kind == CUDA_ALLOC_FOREIGN && a->legacy_ipc)))
            a->aliases++;
        else
            res = ERR(MSCCLPP_ERR_REMOTE,
                      "cuda mem_import: allocation %p of this process was freed", orig);
        cuda_reg_unlock();
        if (res == MSCCLPP_OK) *base = orig;
        return res;
    }

    memcpy(&ipc, handle->data + CUDA_IPC_HANDLE_OFF, sizeof ipc);
    int ordinal;
    CUDA_CHECK(cudaGetDevice(&ordinal));
    void *p = NULL;
    CUDA_CHECK(cudaIpcOpenMemHandle(&p, ipc, cudaIpcMemLazyEnablePeerAccess));
    mscclpp_result_t res = reg_add(CUDA_IMPORT_LEGACY, p, handle->alloc_size, 0, ordinal);
    if (res != MSCCLPP_OK) {
        (void)cudaIpcCloseMemHandle(p);
        return res;
    }
    *base = p;
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_mem_import(const hal_mem_handle_t *handle, void **base)
{
    CHECK_ARG(handle != NULL);
    CHECK_ARG(base != NULL);
    CUDA_REQUIRE_INIT();
    if (handle->len > HAL_MEM_HANDLE_BYTES || handle->alloc_size == 0)
        return ERR_ARG("cuda mem_import: handle of %u bytes for %llu bytes is malformed",
                       handle->len, (unsigned long long)handle->alloc_size);
    if (handle->len == 0 || handle->data[0] != CUDA_HANDLE_VERSION)
        return ERR_ARG("cuda mem_import: handle version %u, expected %u",
                       handle->len ? handle->data[0] : 0u, CUDA_HANDLE_VERSION);
    switch (handle->kind) {
    case HAL_HANDLE_CUDA_FD: return import_vmm(handle, base);
    case HAL_HANDLE_CUDA_IPC: return import_legacy(handle, base);
    default:
        return ERR_ARG("cuda mem_import: handle kind %u is not a CUDA handle (another backend?)",
                       handle->kind);
    }
}

mscclpp_result_t cuda_mem_unimport(void *base)
{
    CHECK_ARG(base != NULL);
    CUDA_REQUIRE_INIT();
    cuda_alloc_t *a = reg_take(base, KIND(CUDA_IMPORT_VMM) | KIND(CUDA_IMPORT_LEGACY));
    if (!a) {
        /* a same-process import of a legacy allocation */
        mscclpp_result_t res = MSCCLPP_OK;
        cuda_reg_lock();
        cuda_alloc_t *o = cuda_reg_find(base);
        if (o && o->r.base == base &&
            (o->r.kind == CUDA_ALLOC_LEGACY || o->r.kind == CUDA_ALLOC_FOREIGN) && o->aliases > 0)
            o->aliases--;
        else
            res = ERR_ARG("cuda mem_unimport: %p was not imported", base);
        cuda_reg_unlock();
        return res;
    }
    mscclpp_result_t res = MSCCLPP_OK;
    if (a->r.kind == CUDA_IMPORT_VMM) {
        cuda_unmap(a->r.base, a->r.size);
        CUresult err = cuda_drv.mem_release(a->handle);
        if (err != CUDA_SUCCESS) res = cuda_drv_error(err, "cuMemRelease", __FILE__, __LINE__);
    } else {
        cudaError_t err = cudaIpcCloseMemHandle(a->r.base);
        if (err != cudaSuccess) res = cuda_rt_error(err, "cudaIpcCloseMemHandle", __FILE__, __LINE__);
    }
    free(a);
    return res;
}
