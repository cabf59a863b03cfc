/*
 * TAP output for the GPU test programs (tests/gpu/test_*.c): a line per subtest, "# " lines of
 * diagnosis, and the checks a subtest (a function returning bool) fails with. Header-only: each
 * program keeps its own counts (gpu_tap_tests, gpu_tap_failed).
 */
#ifndef MSCCLPP_TESTS_GPU_TAP_H
#define MSCCLPP_TESTS_GPU_TAP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "mscclpp/mscclpp.h"

static int gpu_tap_tests, gpu_tap_failed;

static inline void tap(bool ok, const char *name)
{
    gpu_tap_tests++;
    if (!ok) gpu_tap_failed++;
    printf("%s %d - %s\n", ok ? "ok" : "not ok", gpu_tap_tests, name);
    fflush(stdout);
}

static inline void tap_skip(const char *name, const char *why)
{
    gpu_tap_tests++;
    printf("ok %d - %s # SKIP %s\n", gpu_tap_tests, name, why);
    fflush(stdout);
}

static inline void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

/* Evaluate a library or HAL call; on failure print it with the last error and fail the
 * subtest. */
#define OK(expr)                                                                          \
    do {                                                                                  \
        mscclpp_result_t r_ = (expr);                                                     \
        if (r_ != MSCCLPP_OK) {                                                           \
            diag("%s:%d: %s -> %s: %s", __FILE__, __LINE__, #expr,                         \
                 mscclpp_result_string(r_), mscclpp_last_error());                        \
            return false;                                                                 \
        }                                                                                 \
    } while (0)
/* Fail the subtest unless cond holds, saying what was seen (printf arguments). */
#define EXPECT(cond, ...)                                                                 \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            diag("%s:%d: %s", __FILE__, __LINE__, #cond);                                 \
            diag(__VA_ARGS__);                                                            \
            return false;                                                                 \
        }                                                                                 \
    } while (0)

#endif
