/*
 * HIP backend memory. Shareable memory is fine-grained (hipDeviceMallocFinegrained): peers poll
 * flags and semaphores in it, which coarse-grained memory would not make visible in time.
 * Sharing between processes uses hipIpc handles.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal/fd_broker.h" /* little-endian helpers only */
#include "hal/hal_alloc.h"
#include "hal/hip/hip_internal.h"

typedef enum {
    HIP_ALLOC_PLAIN,
    HIP_ALLOC_SHAREABLE, /* fine-grained, shared through hipIpc */
    HIP_ALLOC_HOST,
    HIP_IMPORT,          /* a peer's allocation opened with hipIpcOpenMemHandle */
    HIP_FOREIGN,         /* the application's own hipMalloc memory (mem_info, mem_export) */
} hip_alloc_kind_t;

typedef struct hip_alloc {
    hal_alloc_t r; /* kind (hip_alloc_kind_t), base, size, id (hal/hal_alloc.h) */
    int aliases;   /* same-process imports (hipIpcOpenMemHandle refuses its own handles) */
} hip_alloc_t;

static hal_alloc_reg_t reg = HAL_ALLOC_REG_INIT(hip_alloc_t, HIP_FOREIGN);

static hip_alloc_t *reg_find(const void *ptr) { return (hip_alloc_t *)hal_alloc_find(&reg, ptr); }

static mscclpp_result_t reg_add(hip_alloc_kind_t kind, void *base, size_t size)
{
    hip_alloc_t *a = calloc(1, sizeof *a);
    if (!a) return ERR(MSCCLPP_ERR_NO_MEMORY, "hip: out of host memory for the registry");
    a->r.kind = kind;
    a->r.base = base;
    a->r.size = size;
    hal_alloc_add(&reg, &a->r);
    return MSCCLPP_OK;
}

static hip_alloc_t *reg_take(const void *base, unsigned mask)
{
    return (hip_alloc_t *)hal_alloc_take(&reg, base, mask);
}

#define KIND(k) (1u << (k))

/* New device memory starts zeroed (flags, semaphores), and is zero before any stream uses it. */
static mscclpp_result_t zero_sync(void *p, size_t bytes)
{
    hipStream_t s = hip_setup_stream();
    HIP_CHECK(hipMemsetAsync(p, 0, bytes, s));
    return hip_stream_wait(s, "zeroing new memory");
}

static mscclpp_result_t dev_alloc(size_t bytes, hip_alloc_kind_t kind, void **ptr)
{
    mscclpp_result_t res;
    void *p = NULL;
    if (kind == HIP_ALLOC_SHAREABLE)
        HIP_CHECK(hipExtMallocWithFlags(&p, bytes, hipDeviceMallocFinegrained));
    else
        HIP_CHECK(hipMalloc(&p, bytes));
    CHECK_GOTO(zero_sync(p, bytes), res, free_mem);
    CHECK_GOTO(reg_add(kind, p, bytes), res, free_mem);
    *ptr = p;
    return MSCCLPP_OK;

free_mem:
    (void)hipFree(p);
    return res;
}

mscclpp_result_t hip_mem_alloc(size_t bytes, void **ptr)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(bytes > 0);
    HIP_REQUIRE_INIT();
    return dev_alloc(bytes, HIP_ALLOC_PLAIN, ptr);
}

mscclpp_result_t hip_mem_alloc_shareable(size_t bytes, void **ptr)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(bytes > 0);
    HIP_REQUIRE_INIT();
    return dev_alloc(bytes, HIP_ALLOC_SHAREABLE, ptr);
}

mscclpp_result_t hip_mem_free(void *ptr)
{
    CHECK_ARG(ptr != NULL);
    HIP_REQUIRE_INIT();
    hip_alloc_t *a = reg_take(ptr, KIND(HIP_ALLOC_PLAIN) | KIND(HIP_ALLOC_SHAREABLE));
    if (!a) return ERR_ARG("hip mem_free: %p is not the base of a device allocation", ptr);
    if (a->aliases > 0)
        WARN(SUBSYS_MEM, "hip mem_free: %p is still imported %d time(s) in this process", ptr,
             a->aliases);
    free(a);
    HIP_CHECK(hipFree(ptr));
    return MSCCLPP_OK;
}

mscclpp_result_t hip_host_alloc(size_t bytes, void **ptr)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(bytes > 0);
    HIP_REQUIRE_INIT();
    mscclpp_result_t res;
    void *p = NULL;
    /* coherent: device stores are visible to a polling host (proxy FIFOs) without a fence */
    HIP_CHECK(hipHostMalloc(&p, bytes,
                            hipHostMallocMapped | hipHostMallocPortable | hipHostMallocCoherent));
    memset(p, 0, bytes);
    CHECK_GOTO(reg_add(HIP_ALLOC_HOST, p, bytes), res, free_host);
    *ptr = p;
    return MSCCLPP_OK;

free_host:
    (void)hipHostFree(p);
    return res;
}

mscclpp_result_t hip_host_free(void *ptr)
{
    CHECK_ARG(ptr != NULL);
    HIP_REQUIRE_INIT();
    hip_alloc_t *a = reg_take(ptr, KIND(HIP_ALLOC_HOST));
    if (!a) return ERR_ARG("hip host_free: %p is not the base of a host allocation", ptr);
    free(a);
    HIP_CHECK(hipHostFree(ptr));
    return MSCCLPP_OK;
}

mscclpp_result_t hip_mem_range(const void *ptr, void **base, size_t *size)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(base != NULL);
    CHECK_ARG(size != NULL);
    HIP_REQUIRE_INIT();
    pthread_mutex_lock(&reg.lock);
    hip_alloc_t *a = reg_find(ptr);
    if (a && a->r.kind == HIP_FOREIGN) a = NULL; /* the runtime says what is there now */
    if (a) {
        *base = a->r.base;
        *size = a->r.size;
    }
    pthread_mutex_unlock(&reg.lock);
    if (a) return MSCCLPP_OK;
    hipDeviceptr_t b = NULL;
    size_t s = 0;
    hipError_t err = hipMemGetAddressRange(&b, &s, (hipDeviceptr_t)(uintptr_t)ptr);
    if (err != hipSuccess) {
        (void)hipGetLastError();
        return ERR_ARG("hip mem_range: %p is not device memory known to HIP (%s)", ptr,
                       hipGetErrorString(err));
    }
    *base = (void *)b;
    *size = s;
    return MSCCLPP_OK;
}

/* What HIP says of the application's allocation containing ptr (hal_alloc_describe_fn): device
 * memory (hipMalloc, PyTorch's allocator) keyed by the runtime's buffer id; false for memory HIP
 * cannot describe. */
static bool foreign_describe(const void *ptr, const hal_alloc_t *listed, hal_alloc_t *fresh)
{
    (void)listed; /* HIP's buffer ids: the range is asked every time */
    hipDeviceptr_t dp = (hipDeviceptr_t)(uintptr_t)ptr;
    unsigned int mtype = 0;
    unsigned long long bid = 0;
    hipDeviceptr_t b = NULL;
    size_t s = 0;
    if (hipPointerGetAttribute(&mtype, HIP_POINTER_ATTRIBUTE_MEMORY_TYPE, dp) != hipSuccess ||
        mtype != hipMemoryTypeDevice ||
        hipPointerGetAttribute(&bid, HIP_POINTER_ATTRIBUTE_BUFFER_ID, dp) != hipSuccess ||
        hipMemGetAddressRange(&b, &s, dp) != hipSuccess || s == 0) {
        (void)hipGetLastError();
        return false;
    }
    fresh->base = (void *)b;
    fresh->size = s;
    fresh->id = (uint64_t)bid | HAL_ALLOC_FOREIGN_ID;
    return true;
}

static void foreign_release(hal_alloc_t *stale) { free(stale); }

static bool entry_shareable(const hal_alloc_t *a)
{
    return a->kind == HIP_ALLOC_SHAREABLE || a->kind == HIP_FOREIGN;
}

/* The entry of the allocation containing ptr, valid now (hal_alloc_current): NULL (no error) for
 * memory HIP cannot describe. Lock held. */
static hip_alloc_t *foreign_entry(const void *ptr)
{
    hip_alloc_t scratch;
    return (hip_alloc_t *)hal_alloc_current(&reg, ptr, &scratch.r, foreign_describe,
                                            foreign_release);
}

mscclpp_result_t hip_mem_info(const void *ptr, hal_mem_info_t *info)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(info != NULL);
    memset(info, 0, sizeof *info);
    HIP_REQUIRE_INIT();
    hip_alloc_t scratch;
    hal_alloc_info(&reg, ptr, &scratch.r, foreign_describe, foreign_release, entry_shareable, info);
    return MSCCLPP_OK;
}

static bool is_host_alloc(const void *ptr)
{
    pthread_mutex_lock(&reg.lock);
    hip_alloc_t *a = reg_find(ptr);
    bool host = a && a->r.kind == HIP_ALLOC_HOST;
    pthread_mutex_unlock(&reg.lock);
    return host;
}

mscclpp_result_t hip_memcpy_sync(void *dst, const void *src, size_t bytes)
{
    CHECK_ARG(bytes == 0 || (dst != NULL && src != NULL));
    HIP_REQUIRE_INIT();
    if (bytes == 0) return MSCCLPP_OK;
    hipStream_t s = hip_setup_stream();
    /* as CUDA's (hal/cuda/cuda_mem.c cuda_memcpy_sync): wait for what the stream holds by
     * polling first, so that a copy to pageable memory queued behind a kernel that waits for
     * this rank's proxy does not hold the thread inside the runtime for the kernel's life */
    CHECK(hip_stream_wait(s, "memcpy_sync"));
    HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDefault, s));
    return hip_stream_wait(s, "memcpy_sync");
}

mscclpp_result_t hip_memset_sync(void *dst, int value, size_t bytes)
{
    CHECK_ARG(bytes == 0 || dst != NULL);
    HIP_REQUIRE_INIT();
    if (bytes == 0) return MSCCLPP_OK;
    if (is_host_alloc(dst)) {
        memset(dst, value, bytes);
        return MSCCLPP_OK;
    }
    hipStream_t s = hip_setup_stream();
    HIP_CHECK(hipMemsetAsync(dst, value, bytes, s));
    return hip_stream_wait(s, "memset_sync");
}

mscclpp_result_t hip_memcpy_async(void *dst, const void *src, size_t bytes, hal_stream_t s)
{
    CHECK_ARG(bytes == 0 || (dst != NULL && src != NULL));
    HIP_REQUIRE_INIT();
    if (bytes == 0) return MSCCLPP_OK;
    HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDefault, hip_stream(s)));
    return MSCCLPP_OK;
}

mscclpp_result_t hip_memset_async(void *dst, int value, size_t bytes, hal_stream_t s)
{
    CHECK_ARG(bytes == 0 || dst != NULL);
    HIP_REQUIRE_INIT();
    if (bytes == 0) return MSCCLPP_OK;
    HIP_CHECK(hipMemsetAsync(dst, value, bytes, hip_stream(s)));
    return MSCCLPP_OK;
}

mscclpp_result_t hip_mem_export(void *base, hal_mem_handle_t *handle)
{
    CHECK_ARG(base != NULL);
    CHECK_ARG(handle != NULL);
    HIP_REQUIRE_INIT();
    memset(handle, 0, sizeof *handle);
    pthread_mutex_lock(&reg.lock);
    hip_alloc_t *a = foreign_entry(base);
    bool ok = a && a->r.base == base && entry_shareable(&a->r);
    size_t size = ok ? a->r.size : 0;
    pthread_mutex_unlock(&reg.lock);
    if (!ok)
        return ERR_ARG("hip mem_export: %p is not the base of a shareable allocation "
                       "(mem_alloc_shareable, or the application's hipMalloc memory)", base);
    hipIpcMemHandle_t ipc;
    HIP_CHECK(hipIpcGetMemHandle(&ipc, base));
    handle->kind = HAL_HANDLE_HIP_IPC;
    handle->alloc_size = size;
    handle->data[0] = HIP_HANDLE_VERSION;
    hal_put_u32(handle->data + HIP_IPC_PID_OFF, (uint32_t)getpid());
    hal_put_u64(handle->data + HIP_IPC_BASE_OFF, (uint64_t)(uintptr_t)base);
    memcpy(handle->data + HIP_IPC_HANDLE_OFF, &ipc, sizeof ipc);
    handle->len = HIP_IPC_HANDLE_OFF + (uint32_t)sizeof ipc;
    return MSCCLPP_OK;
}

mscclpp_result_t hip_mem_import(const hal_mem_handle_t *handle, void **base)
{
    CHECK_ARG(handle != NULL);
    CHECK_ARG(base != NULL);
    HIP_REQUIRE_INIT();
    hipIpcMemHandle_t ipc;
    if (handle->kind != HAL_HANDLE_HIP_IPC)
        return ERR_ARG("hip mem_import: handle kind %u is not a HIP handle (another backend?)",
                       handle->kind);
    if (handle->len != HIP_IPC_HANDLE_OFF + sizeof ipc || handle->data[0] != HIP_HANDLE_VERSION ||
        handle->alloc_size == 0)
        return ERR_ARG("hip mem_import: malformed handle (len %u, version %u)", handle->len,
                       handle->data[0]);
    uint32_t pid = hal_get_u32(handle->data + HIP_IPC_PID_OFF);
    void *orig = (void *)(uintptr_t)hal_get_u64(handle->data + HIP_IPC_BASE_OFF);
    if (pid == (uint32_t)getpid()) {
        /* ranks that are threads of one process share the original pointer */
        mscclpp_result_t res = MSCCLPP_OK;
        pthread_mutex_lock(&reg.lock);
        hip_alloc_t *a = reg_find(orig);
        if (a && a->r.base == orig && entry_shareable(&a->r)) a->aliases++;
        else
            res = ERR(MSCCLPP_ERR_REMOTE, "hip mem_import: allocation %p of this process was freed",
                      orig);
        pthread_mutex_unlock(&reg.lock);
        if (res == MSCCLPP_OK) *base = orig;
        return res;
    }
    memcpy(&ipc, handle->data + HIP_IPC_HANDLE_OFF, sizeof ipc);
    void *p = NULL;
    HIP_CHECK(hipIpcOpenMemHandle(&p, ipc, hipIpcMemLazyEnablePeerAccess));
    mscclpp_result_t res = reg_add(HIP_IMPORT, p, handle->alloc_size);
    if (res != MSCCLPP_OK) {
        (void)hipIpcCloseMemHandle(p);
        return res;
    }
    *base = p;
    return MSCCLPP_OK;
}

mscclpp_result_t hip_mem_unimport(void *base)
{
    CHECK_ARG(base != NULL);
    HIP_REQUIRE_INIT();
    hip_alloc_t *a = reg_take(base, KIND(HIP_IMPORT));
    if (!a) {
        mscclpp_result_t res = MSCCLPP_OK;
        pthread_mutex_lock(&reg.lock);
        hip_alloc_t *o = reg_find(base);
        if (o && o->r.base == base && entry_shareable(&o->r) && o->aliases > 0) o->aliases--;
        else
            res = ERR_ARG("hip mem_unimport: %p was not imported", base);
        pthread_mutex_unlock(&reg.lock);
        return res;
    }
    free(a);
    HIP_CHECK(hipIpcCloseMemHandle(base));
    return MSCCLPP_OK;
}
