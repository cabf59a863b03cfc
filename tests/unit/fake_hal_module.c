/*
 * A fake HAL backend module for tests/unit/test_hal_modules: built like hal/cuda (with
 * base/module.c, loaded through the library's loader), so a test can prove that a module's
 * error messages reach the caller's mscclpp_last_error(). FAKE_HAL_DEVICES (default 0) is the
 * device count it claims; init fails quietly without one. Allocations always fail. Its streams
 * are handles with no work behind them whose sync times out as a GPU stream's does when a kernel
 * never ends ("still busy after N ms"). It counts its stream creations as a module counts its
 * driver calls (HAL_MODULE_COUNTS).
 * With -DFAKE_HAL_OLD it is instead a module built for an older services table.
 */
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "base/services.h"
#include "hal/hal.h"

#ifdef FAKE_HAL_OLD
/* An older module: built against base services version 0. */
__attribute__((visibility("default"))) int mscclpp_hal_module_bind(const base_services_t *s)
{
    (void)s;
    return 0;
}
__attribute__((visibility("default"))) const hal_ops_t *mscclpp_hal_module(void) { return NULL; }
#else

HAL_DEFINE_STUBS("fake")

static int devices(void)
{
    const char *v = getenv("FAKE_HAL_DEVICES");
    return v ? atoi(v) : 0;
}

static mscclpp_result_t fake_init(void)
{
    if (devices() < 1)
        return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED,
                                "fake backend: no usable device (FAKE_HAL_DEVICES=%d)", devices());
    return MSCCLPP_OK;
}

static mscclpp_result_t fake_device_count(int *count)
{
    CHECK_ARG(count != NULL);
    *count = devices();
    return MSCCLPP_OK;
}

static mscclpp_result_t fake_alloc(size_t bytes, void **ptr)
{
    CHECK_ARG(ptr != NULL);
    *ptr = NULL;
    return ERR_SYS("fake backend: cannot allocate %zu bytes (the device is out of luck)", bytes);
}

static int fake_stream_obj;
static uint64_t fake_creates;

__attribute__((visibility("default"))) int mscclpp_hal_module_counts(const char **names,
                                                                     uint64_t *counts, int cap)
{
    if (cap >= 1) {
        names[0] = "fake_stream_creates";
        counts[0] = __atomic_load_n(&fake_creates, __ATOMIC_RELAXED);
    }
    return 1;
}

static mscclpp_result_t fake_stream_create(hal_stream_t *s)
{
    CHECK_ARG(s != NULL);
    __atomic_fetch_add(&fake_creates, 1, __ATOMIC_RELAXED);
    *s = (hal_stream_t)(void *)&fake_stream_obj;
    return MSCCLPP_OK;
}

static mscclpp_result_t fake_stream_destroy(hal_stream_t s)
{
    (void)s;
    return MSCCLPP_OK;
}

static mscclpp_result_t fake_stream_sync(hal_stream_t s)
{
    return ERR(MSCCLPP_ERR_TIMEOUT, "fake stream_sync: stream %p still busy after 1 ms", (void *)s);
}

static const hal_ops_t fake_ops = {
    .size = sizeof(hal_ops_t),
    .abi_version = HAL_ABI_VERSION,
    .name = "cuda", /* loaded in place of the CUDA module */
#define FAKE_STUB_(slot, params, args) .slot = hal_stub_##slot,
    HAL_OPS_SLOTS(FAKE_STUB_)
#undef FAKE_STUB_
    .fini = hal_stub_fini,
};

__attribute__((visibility("default"))) const hal_ops_t *mscclpp_hal_module(void)
{
    static hal_ops_t ops;
    ops = fake_ops;
    ops.init = fake_init;
    ops.device_count = fake_device_count;
    ops.mem_alloc = fake_alloc;
    ops.mem_alloc_shareable = fake_alloc;
    ops.stream_create = fake_stream_create;
    ops.stream_destroy = fake_stream_destroy;
    ops.stream_sync = fake_stream_sync;
    return &ops;
}
#endif
