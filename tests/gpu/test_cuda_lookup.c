/*
 * The CUDA calls of one allocation lookup (hal mem_info, issue 19 item 5), counted by the CUDA
 * module itself (its HAL_MODULE_COUNTS symbol, hal/cuda/cuda_mem.c), and what each lookup
 * answers, on every kind of memory an application may pass:
 *
 *   ours       mem_alloc / mem_alloc_shareable memory: the registry answers, no CUDA call
 *   cudaMalloc the application's device memory (PyTorch's caching allocator): 5 calls the first
 *              time (capture mode relax + restore, cuPointerGetAttributes, cuMemGetAddressRange,
 *              cudaGetDevice), then 3 (relax, attributes, restore); freed and made again at the
 *              same address: a new id, the range asked again
 *   cuMem      the application's cuMemCreate + cuMemMap memory (PyTorch's expandable segments):
 *              the mapping's range (not the reservation's), 4 calls after the first meeting
 *   pinned, managed, malloc'd, an unknown address: size 0 (not device memory the peers can
 *              map), 3 calls (relax, attributes, restore), no error
 *
 * Prints TAP; without a CUDA device "1..0 # SKIP" and exit 77. Run on a GPU machine:
 *   build/tests/gpu/test_cuda_lookup
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/hal.h"
#include "tests/gpu/gpu_tap.h"

static const hal_ops_t *ops;

enum { C_MEM_INFO, C_CALLS, C_MODE, C_ATTRS, C_RANGE, C_DEVICE, C_N };
static const char *const c_names[C_N] = {"mem_info",           "mem_info_cuda_calls",
                                         "capture_mode",       "pointer_attributes",
                                         "address_range",      "get_device"};

/* The module's counts, in c_names' order (0 for a name it does not keep). */
static void read_counts(uint64_t *c)
{
    const char *names[32];
    uint64_t v[32];
    int n = hal_count_module(names, v, 32);
    memset(c, 0, C_N * sizeof *c);
    for (int i = 0; i < n && i < 32; i++)
        for (int k = 0; k < C_N; k++)
            if (!strcmp(names[i], c_names[k])) c[k] = v[i];
}

/* `reps` lookups of p; *info the last answer; per[k]: the calls of kind k they made in all. */
static bool lookups(const void *p, int reps, hal_mem_info_t *info, uint64_t *per)
{
    uint64_t a[C_N], b[C_N];
    read_counts(a);
    for (int i = 0; i < reps; i++) {
        hal_mem_info_t m;
        mscclpp_result_t r = ops->mem_info(p, &m);
        EXPECT(r == MSCCLPP_OK, "mem_info(%p): %s", p, mscclpp_last_error());
        EXPECT(i == 0 || (m.base == info->base && m.size == info->size && m.id == info->id &&
                          m.shareable == info->shareable && m.foreign == info->foreign),
               "lookup %d of %p answered otherwise", i, p);
        *info = m;
    }
    read_counts(b);
    for (int k = 0; k < C_N; k++) per[k] = b[k] - a[k];
    return true;
}

/* The calls of `reps` lookups: exactly `calls` each, of which `range` and `device` address
 * ranges and device queries in all. */
static bool expect_calls(const char *what, const uint64_t *per, int reps, int calls, int range,
                         int device)
{
    diag("%s: %d lookup(s): %llu CUDA calls (capture mode %llu, attributes %llu, range %llu, "
         "device %llu)",
         what, reps, (unsigned long long)per[C_CALLS], (unsigned long long)per[C_MODE],
         (unsigned long long)per[C_ATTRS], (unsigned long long)per[C_RANGE],
         (unsigned long long)per[C_DEVICE]);
    EXPECT(per[C_MEM_INFO] == (uint64_t)reps, "%s: %llu mem_info counted, %d made", what,
           (unsigned long long)per[C_MEM_INFO], reps);
    EXPECT(per[C_CALLS] == (uint64_t)(reps * calls) && per[C_RANGE] == (uint64_t)range &&
               per[C_DEVICE] == (uint64_t)device,
           "%s: want %d calls per lookup, %d range and %d device queries in all", what, calls,
           range, device);
    return true;
}

static bool t_ours(void)
{
    void *a = NULL, *b = NULL;
    const size_t n = 1 << 20;
    if (ops->mem_alloc(n, &a) != MSCCLPP_OK || ops->mem_alloc_shareable(n, &b) != MSCCLPP_OK) {
        diag("mem_alloc: %s", mscclpp_last_error());
        return false;
    }
    hal_mem_info_t ia, ib;
    uint64_t pa[C_N], pb[C_N];
    bool ok = lookups((char *)a + 5, 10, &ia, pa) && lookups((char *)b + n - 1, 10, &ib, pb) &&
              expect_calls("mem_alloc", pa, 10, 0, 0, 0) &&
              expect_calls("mem_alloc_shareable", pb, 10, 0, 0, 0);
    if (ok && !(ia.base == a && ia.size >= n && !ia.foreign && ib.base == b && ib.shareable &&
                !ib.foreign)) {
        diag("ours: %p/%zu foreign %d; %p/%zu shareable %d", ia.base, ia.size, ia.foreign,
             ib.base, ib.size, ib.shareable);
        ok = false;
    }
    ops->mem_free(a);
    ops->mem_free(b);
    return ok;
}

static bool t_cuda_malloc(void)
{
    const size_t n = (4u << 20) + 4096;
    char *p = NULL;
    EXPECT(cudaMalloc((void **)&p, n) == cudaSuccess, "cudaMalloc");
    hal_mem_info_t first, m;
    uint64_t per[C_N];
    if (!lookups(p + 100, 1, &first, per) || !expect_calls("cudaMalloc, first", per, 1, 5, 1, 1))
        return false;
    EXPECT(first.base == p && first.size >= n && first.foreign && first.shareable,
           "cudaMalloc: base %p (want %p) size %zu foreign %d shareable %d", first.base,
           (void *)p, first.size, first.foreign, first.shareable);
    if (!lookups(p + n - 1, 100, &m, per) || !expect_calls("cudaMalloc, again", per, 100, 3, 0, 0))
        return false;
    EXPECT(m.base == first.base && m.size == first.size && m.id == first.id,
           "the same allocation answered otherwise");
    /* freed and made again (the caching allocator's pattern when it frees: often the same
     * address): a new id, never the old entry */
    EXPECT(cudaFree(p) == cudaSuccess, "cudaFree");
    char *q = NULL;
    EXPECT(cudaMalloc((void **)&q, n) == cudaSuccess, "cudaMalloc again");
    if (!lookups(q, 1, &m, per) || !expect_calls("cudaMalloc, made again", per, 1, 5, 1, 1))
        return false;
    EXPECT(m.base == q && m.id != first.id, "made again at %p (was %p): id %llu, before %llu",
           (void *)q, (void *)p, (unsigned long long)m.id, (unsigned long long)first.id);
    diag("made again %s", q == p ? "at the same address" : "elsewhere");
    cudaFree(q);
    return true;
}

/* A driver entry point (the test links cudart only, as the module does). */
static void *drv(const char *symbol, unsigned version)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
        return NULL;
    return fn;
}

static bool t_cumem(void)
{
    PFN_cuMemCreate_v10020 create = drv("cuMemCreate", 10020);
    PFN_cuMemAddressReserve_v10020 reserve = drv("cuMemAddressReserve", 10020);
    PFN_cuMemMap_v10020 map = drv("cuMemMap", 10020);
    PFN_cuMemSetAccess_v10020 access = drv("cuMemSetAccess", 10020);
    PFN_cuMemGetAllocationGranularity_v10020 gran = drv("cuMemGetAllocationGranularity", 10020);
    PFN_cuMemUnmap_v10020 unmap = drv("cuMemUnmap", 10020);
    PFN_cuMemRelease_v10020 release = drv("cuMemRelease", 10020);
    PFN_cuMemAddressFree_v10020 addr_free = drv("cuMemAddressFree", 10020);
    EXPECT(create && reserve && map && access && gran && unmap && release && addr_free,
           "no cuMem entry points");
    int dev = 0;
    EXPECT(cudaGetDevice(&dev) == cudaSuccess, "cudaGetDevice");
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev}};
    size_t g = 0;
    EXPECT(gran(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS && g, "granularity");
    /* two chunks mapped into one reservation four chunks long, as expandable segments grow */
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h[2];
    EXPECT(reserve(&va, 4 * g, g, 0, 0) == CUDA_SUCCESS, "cuMemAddressReserve");
    CUmemAccessDesc ad = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev},
                          .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    for (int i = 0; i < 2; i++) {
        EXPECT(create(&h[i], g, &prop, 0) == CUDA_SUCCESS, "cuMemCreate");
        EXPECT(map(va + (CUdeviceptr)i * g, g, 0, h[i], 0) == CUDA_SUCCESS, "cuMemMap");
    }
    EXPECT(access(va, 2 * g, &ad, 1) == CUDA_SUCCESS, "cuMemSetAccess");
    hal_mem_info_t m0, m1;
    uint64_t per[C_N];
    bool ok = lookups((void *)(uintptr_t)(va + 10), 1, &m0, per) &&
              expect_calls("cuMem, first", per, 1, 5, 1, 1) &&
              lookups((void *)(uintptr_t)(va + 20), 50, &m0, per) &&
              expect_calls("cuMem, again", per, 50, 4, 50, 0) &&
              lookups((void *)(uintptr_t)(va + g + 5), 1, &m1, per);
    /* whether the driver gives each mapping of a reservation its own buffer id (then the range
     * could be skipped for cuMem memory as for cudaMalloc's: 3 calls) */
    if (ok)
        diag("cuMem: the two mappings' buffer ids are %s",
             m1.id != m0.id ? "distinct" : "the same");
    if (ok && !(m0.base == (void *)(uintptr_t)va && m0.size == g && m0.foreign &&
                m0.shareable && m1.base == (void *)(uintptr_t)(va + g) && m1.size == g)) {
        diag("cuMem: chunk 0 %p/%zu (want %p/%zu) shareable %d, chunk 1 %p/%zu id %llu/%llu",
             m0.base, m0.size, (void *)(uintptr_t)va, g, m0.shareable, m1.base, m1.size,
             (unsigned long long)m0.id, (unsigned long long)m1.id);
        ok = false;
    }
    for (int i = 0; i < 2; i++) {
        unmap(va + (CUdeviceptr)i * g, g);
        release(h[i]);
    }
    addr_free(va, 4 * g);
    return ok;
}

/* Memory the peers cannot map: size 0, no error, 3 calls each time. */
static bool t_not_device(void)
{
    void *pinned = NULL, *managed = NULL;
    EXPECT(cudaHostAlloc(&pinned, 65536, cudaHostAllocDefault) == cudaSuccess, "cudaHostAlloc");
    EXPECT(cudaMallocManaged(&managed, 65536, cudaMemAttachGlobal) == cudaSuccess,
           "cudaMallocManaged");
    char *heap = malloc(65536);
    static char unknown[64];
    const struct {
        const char *what;
        const void *p;
    } cases[] = {{"pinned host memory", pinned},
                 {"managed memory", managed},
                 {"malloc'd memory", heap},
                 {"a static array", unknown}};
    bool ok = heap != NULL;
    for (size_t i = 0; ok && i < sizeof cases / sizeof *cases; i++) {
        hal_mem_info_t m;
        uint64_t per[C_N];
        ok = lookups((const char *)cases[i].p + 8, 10, &m, per) &&
             expect_calls(cases[i].what, per, 10, 3, 0, 0);
        if (ok && (m.size != 0 || m.shareable)) {
            diag("%s: size %zu shareable %d, want 0", cases[i].what, m.size, m.shareable);
            ok = false;
        }
    }
    cudaFreeHost(pinned);
    cudaFree(managed);
    free(heap);
    return ok;
}

int main(void)
{
    setenv("MSCCLPP_HAL", "cuda", 1);
    hal_count_enable(); /* the module's counts are read through the counted table's module */
    int count = 0;
    if (hal_get(&ops) != MSCCLPP_OK || strcmp(ops->name, "cuda") != 0 ||
        ops->device_count(&count) != MSCCLPP_OK || count < 1) {
        printf("1..0 # SKIP no CUDA device or driver: %s\n", mscclpp_last_error());
        return 77;
    }
    const char *names[32];
    uint64_t v[32];
    if (hal_count_module(names, v, 32) < C_N) {
        printf("1..1\nnot ok 1 - the CUDA module keeps its lookup counts (%s)\n",
               HAL_MODULE_COUNTS);
        return 1;
    }
    if (cudaSetDevice(0) != cudaSuccess) {
        printf("1..1\nnot ok 1 - cudaSetDevice(0)\n");
        return 1;
    }
    printf("1..4\n");
    tap(t_ours(), "the module's own memory: no CUDA call");
    tap(t_cuda_malloc(), "cudaMalloc'd memory: 5 calls once, then 3; a new id after free");
    tap(t_cumem(), "cuMem memory: the mapping's range, 4 calls after the first");
    tap(t_not_device(), "pinned, managed, malloc'd, unknown: size 0, 3 calls");
    ops->fini();
    return gpu_tap_failed ? 1 : 0;
}
