/*
 * CUDA backend multicast (NVLS) objects. One rank creates the object and exports it through the
 * fd broker; the others import it; then every rank binds its buffers in the same order, so the
 * same buffer sits at the same offset of the object on every rank. Binding is collective: the
 * driver blocks cuMulticastBindMem until every device of the team has been added.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal/cuda/cuda_internal.h"
#include "hal/fd_broker.h"

#define MC_MAX_BINDS 64

struct hal_mc {
    CUmemGenericAllocationHandle handle;
    size_t size;        /* bytes of the object (per device) */
    size_t gran;        /* minimum multicast granularity: bind offsets and sizes */
    int ordinal;        /* device that joined the team from this process */
    CUdevice dev;
    bool added;         /* cuMulticastAddDevice done */
    bool exported;
    uint64_t fdb_key;
    void *va;           /* the whole object mapped, on first bind */
    size_t next_offset; /* where the next bind goes */
    int nbinds;
    struct {
        size_t offset, size;
    } binds[MC_MAX_BINDS];
};

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

/* The calling thread's device, which must support multicast. */
static mscclpp_result_t mc_device(const char *op, int *ordinal, CUdevice *dev)
{
    CHECK(cuda_current_cudev(ordinal, dev));
    if (!cuda_device_multicast(*ordinal))
        return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED,
                                "cuda %s: device %d has no multicast (NVLS) support", op,
                                *ordinal);
    return MSCCLPP_OK;
}

static mscclpp_result_t mc_gran(size_t bytes, unsigned ndevices, CUmulticastGranularity_flags which,
                                size_t *gran)
{
    CUmulticastObjectProp prop = {.numDevices = ndevices,
                                  .size = bytes,
                                  .handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR};
    CU_CHECK(cuda_drv.mc_get_granularity(gran, &prop, which));
    if (*gran == 0) return ERR(MSCCLPP_ERR_SYSTEM, "cuMulticastGetGranularity returned 0");
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_mc_granularity(size_t bytes, size_t *granularity)
{
    CHECK_ARG(bytes > 0);
    CHECK_ARG(granularity != NULL);
    CUDA_REQUIRE_INIT();
    int ordinal;
    CUdevice dev;
    CHECK(mc_device("mc_granularity", &ordinal, &dev));
    return mc_gran(bytes, 1, CU_MULTICAST_GRANULARITY_MINIMUM, granularity);
}

static mscclpp_result_t mc_new(size_t size, hal_mc_t *out)
{
    hal_mc_t mc = calloc(1, sizeof *mc);
    if (!mc) return ERR(MSCCLPP_ERR_NO_MEMORY, "cuda: out of host memory for a multicast object");
    mscclpp_result_t res = mc_device("mc", &mc->ordinal, &mc->dev);
    if (res == MSCCLPP_OK) res = mc_gran(size, 1, CU_MULTICAST_GRANULARITY_MINIMUM, &mc->gran);
    if (res != MSCCLPP_OK) {
        free(mc);
        return res;
    }
    mc->size = size;
    *out = mc;
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_mc_create(size_t bytes, int ndevices, hal_mc_t *mc, hal_mem_handle_t *handle)
{
    CHECK_ARG(bytes > 0);
    CHECK_ARG(ndevices > 0);
    CHECK_ARG(mc != NULL);
    CHECK_ARG(handle != NULL);
    CUDA_REQUIRE_INIT();
    int ordinal;
    CUdevice dev;
    CHECK(mc_device("mc_create", &ordinal, &dev));
    size_t rec;
    CHECK(mc_gran(bytes, (unsigned)ndevices, CU_MULTICAST_GRANULARITY_RECOMMENDED, &rec));
    size_t size = round_up(bytes, rec);

    mscclpp_result_t res;
    hal_mc_t m;
    CHECK(mc_new(size, &m));
    CUmulticastObjectProp prop = {.numDevices = (unsigned)ndevices,
                                  .size = size,
                                  .handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR};
    CU_CHECK_GOTO(cuda_drv.mc_create(&m->handle, &prop), res, free_mc);

    memset(handle, 0, sizeof *handle);
    CHECK_GOTO(cuda_export_fd(m->handle, handle->data + CUDA_FD_TICKET_OFF, &m->fdb_key), res,
               release);
    m->exported = true;
    handle->kind = HAL_HANDLE_CUDA_FD;
    handle->alloc_size = size;
    handle->data[0] = CUDA_HANDLE_VERSION;
    handle->data[1] = 1; /* multicast object */
    handle->len = CUDA_FD_TICKET_OFF + HAL_FDB_TICKET_BYTES;
    *mc = m;
    INFO(SUBSYS_MEM, "cuda: multicast object of %zu bytes for %d devices", size, ndevices);
    return MSCCLPP_OK;

release:
    (void)cuda_drv.mem_release(m->handle);
free_mc:
    free(m);
    return res;
}

mscclpp_result_t cuda_mc_import(const hal_mem_handle_t *handle, hal_mc_t *mc)
{
    CHECK_ARG(handle != NULL);
    CHECK_ARG(mc != NULL);
    CUDA_REQUIRE_INIT();
    if (handle->kind != HAL_HANDLE_CUDA_FD || handle->len != CUDA_FD_TICKET_OFF + HAL_FDB_TICKET_BYTES ||
        handle->data[0] != CUDA_HANDLE_VERSION || handle->data[1] != 1 || handle->alloc_size == 0)
        return ERR_ARG("cuda mc_import: not a multicast handle (kind %u, len %u)", handle->kind,
                       handle->len);
    hal_mc_t m;
    CHECK(mc_new(handle->alloc_size, &m));
    mscclpp_result_t res = cuda_import_fd(handle->data + CUDA_FD_TICKET_OFF, &m->handle);
    if (res != MSCCLPP_OK) {
        free(m);
        return res;
    }
    *mc = m;
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_mc_bind(hal_mc_t mc, void *base, size_t bytes, void **mc_ptr)
{
    CHECK_ARG(mc != NULL);
    CHECK_ARG(base != NULL);
    CHECK_ARG(bytes > 0);
    CHECK_ARG(mc_ptr != NULL);
    CUDA_REQUIRE_INIT();
    size_t size = round_up(bytes, mc->gran);

    /* the buffer must be a cuMem allocation of this process, granularity-aligned */
    CUmemGenericAllocationHandle mem;
    size_t mem_offset;
    cuda_reg_lock();
    cuda_alloc_t *a = cuda_reg_find(base);
    bool ok = a && a->r.kind == CUDA_ALLOC_VMM;
    if (ok) {
        mem = a->handle;
        mem_offset = (size_t)((uintptr_t)base - (uintptr_t)a->r.base);
        ok = mem_offset % mc->gran == 0 && mem_offset + size <= a->r.size;
    }
    cuda_reg_unlock();
    if (!ok)
        return ERR_ARG("cuda mc_bind: %p (+%zu bytes) is not a granularity-aligned part of a "
                       "cuMem allocation (mem_alloc_shareable on a multicast device)",
                       base, size);
    if (mc->nbinds == MC_MAX_BINDS || mc->next_offset + size > mc->size)
        return ERR_ARG("cuda mc_bind: %zu more bytes do not fit the multicast object (%zu of "
                       "%zu used, %d binds)",
                       size, mc->next_offset, mc->size, mc->nbinds);

    if (!mc->added) {
        CU_CHECK(cuda_drv.mc_add_device(mc->handle, mc->dev));
        mc->added = true;
    }
    size_t offset = mc->next_offset;
    CU_CHECK(cuda_drv.mc_bind_mem(mc->handle, offset, mem, mem_offset, size, 0));
    if (!mc->va) {
        mscclpp_result_t res = cuda_map_handle(mc->handle, mc->size, mc->gran, mc->dev, &mc->va);
        if (res != MSCCLPP_OK) {
            (void)cuda_drv.mc_unbind(mc->handle, mc->dev, offset, size);
            return res;
        }
    }
    mc->binds[mc->nbinds].offset = offset;
    mc->binds[mc->nbinds].size = size;
    mc->nbinds++;
    mc->next_offset = offset + size;
    *mc_ptr = (char *)mc->va + offset;
    return MSCCLPP_OK;
}

mscclpp_result_t cuda_mc_free(hal_mc_t mc)
{
    CHECK_ARG(mc != NULL);
    CUDA_REQUIRE_INIT();
    mscclpp_result_t res = MSCCLPP_OK;
    if (mc->va) cuda_unmap(mc->va, mc->size);
    for (int i = 0; i < mc->nbinds; i++) {
        CUresult err =
            cuda_drv.mc_unbind(mc->handle, mc->dev, mc->binds[i].offset, mc->binds[i].size);
        if (err != CUDA_SUCCESS) res = cuda_drv_error(err, "cuMulticastUnbind", __FILE__, __LINE__);
    }
    if (mc->exported) hal_fdb_withdraw(mc->fdb_key);
    CUresult err = cuda_drv.mem_release(mc->handle);
    if (err != CUDA_SUCCESS) res = cuda_drv_error(err, "cuMemRelease", __FILE__, __LINE__);
    free(mc);
    return res;
}
