/* HIP backend module, shared between its files. Plain C against hip_runtime_api.h (AMD). */
#ifndef MSCCLPP_HAL_HIP_INTERNAL_H
#define MSCCLPP_HAL_HIP_INTERNAL_H

#include <hip/hip_runtime_api.h>
#include <stdbool.h>

#include "base/debug.h"
#include "hal/hal.h"

/** Report a HIP error with its name and string; returns the mapped result. */
mscclpp_result_t hip_rt_error(hipError_t err, const char *what, const char *file, int line);

#define HIP_CHECK(call)                                                                  \
    do {                                                                                 \
        hipError_t hip_err_ = (call);                                                    \
        if (hip_err_ != hipSuccess) return hip_rt_error(hip_err_, #call, __FILE__, __LINE__); \
    } while (0)
#define HIP_CHECK_GOTO(call, res, label)                                         \
    do {                                                                         \
        hipError_t hip_err_ = (call);                                            \
        if (hip_err_ != hipSuccess) {                                            \
            (res) = hip_rt_error(hip_err_, #call, __FILE__, __LINE__);           \
            goto label;                                                          \
        }                                                                        \
    } while (0)

mscclpp_result_t hip_require_init(const char *op);
#define HIP_REQUIRE_INIT() CHECK(hip_require_init(__func__))

/** Wait for `s` (NULL: the null stream), polling with backoff, bounded by MSCCLPP_TIMEOUT. */
mscclpp_result_t hip_stream_wait(hipStream_t s, const char *who);
/** The stream of synchronous copies and sets: the null stream, unless using it would join a
 * capture in progress; then a non-blocking stream of the module's own (hip_module.c). */
hipStream_t hip_setup_stream(void);

mscclpp_result_t hip_mem_alloc(size_t bytes, void **ptr);
mscclpp_result_t hip_mem_alloc_shareable(size_t bytes, void **ptr);
mscclpp_result_t hip_mem_free(void *ptr);
mscclpp_result_t hip_host_alloc(size_t bytes, void **ptr);
mscclpp_result_t hip_host_free(void *ptr);
mscclpp_result_t hip_mem_range(const void *ptr, void **base, size_t *size);
mscclpp_result_t hip_mem_info(const void *ptr, hal_mem_info_t *info);
mscclpp_result_t hip_memcpy_sync(void *dst, const void *src, size_t bytes);
mscclpp_result_t hip_memset_sync(void *dst, int value, size_t bytes);
mscclpp_result_t hip_memcpy_async(void *dst, const void *src, size_t bytes, hal_stream_t s);
mscclpp_result_t hip_memset_async(void *dst, int value, size_t bytes, hal_stream_t s);
mscclpp_result_t hip_mem_export(void *base, hal_mem_handle_t *handle);
mscclpp_result_t hip_mem_import(const hal_mem_handle_t *handle, void **base);
mscclpp_result_t hip_mem_unimport(void *base);

/* HAL_HANDLE_HIP_IPC payload: [0] version, [1..3] 0, [4] pid u32, [8] base u64, [16] handle */
#define HIP_HANDLE_VERSION 1
#define HIP_IPC_PID_OFF 4
#define HIP_IPC_BASE_OFF 8
#define HIP_IPC_HANDLE_OFF 16

static inline hipStream_t hip_stream(hal_stream_t s) { return (hipStream_t)(void *)s; }

#endif /* MSCCLPP_HAL_HIP_INTERNAL_H */
