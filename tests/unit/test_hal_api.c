/* Unit tests of the public backend, memory and stream calls (hal/hal_api.c), through the
 * shared library's exported symbols only. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mscclpp/mscclpp.h"

START_TEST(test_backend_name)
{
    const char *name = mscclpp_backend_name();
    ck_assert_ptr_nonnull(name);
    ck_assert_str_eq(name, "host"); /* main() forces MSCCLPP_HAL=host */
    ck_assert_str_eq(mscclpp_backend_name(), name);
}
END_TEST

/* NVLS probe: no multicast on the host backend; a NULL out-pointer is refused */
START_TEST(test_nvls_supported)
{
    int yes = -1;
    ck_assert_int_eq(mscclpp_nvls_supported(&yes), MSCCLPP_OK);
    ck_assert_int_eq(yes, 0);
    ck_assert_int_eq(mscclpp_nvls_supported(NULL), MSCCLPP_ERR_INVALID_ARG);
}
END_TEST

/* The device line of mscclpp-bench's header: index and description of the calling thread's device */
START_TEST(test_device_describe)
{
    char text[256];
    int dev = -1;
    ck_assert_int_eq(mscclpp_device_describe(&dev, text, sizeof text), MSCCLPP_OK);
    ck_assert_int_eq(dev, 0);
    ck_assert_msg(strstr(text, "host-") && strstr(text, "multiprocessors") && strstr(text, "GiB"),
                  "%s", text);
    ck_assert_int_eq(mscclpp_device_describe(NULL, text, sizeof text), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_device_describe(&dev, NULL, 8), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_device_describe(&dev, text, 0), MSCCLPP_ERR_INVALID_ARG);
}
END_TEST

START_TEST(test_malloc_memcpy_memset)
{
    const size_t n = 100000;
    uint8_t *a = NULL, *b = NULL;
    ck_assert_int_eq(mscclpp_malloc(n, (void **)&a), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_malloc(n, (void **)&b), MSCCLPP_OK);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_ne(a, b);
    ck_assert_int_eq(mscclpp_memset(a, 0xc3, n), MSCCLPP_OK);
    for (size_t i = 0; i < n; i++) ck_assert_uint_eq(a[i], 0xc3);
    for (size_t i = 0; i < n; i++) a[i] = (uint8_t)(i * 29u + 1u);
    ck_assert_int_eq(mscclpp_memcpy(b, a, n), MSCCLPP_OK);
    for (size_t i = 0; i < n; i++) ck_assert_uint_eq(b[i], (uint8_t)(i * 29u + 1u));
    ck_assert_int_eq(mscclpp_memcpy(b, a, 0), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_free(a), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_free(b), MSCCLPP_OK);
}
END_TEST

START_TEST(test_bad_args)
{
    void *p = NULL;
    int local = 0;
    ck_assert_int_eq(mscclpp_malloc(0, &p), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_gt((int)strlen(mscclpp_last_error()), 0);
    ck_assert_int_eq(mscclpp_malloc(64, NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_free(NULL), MSCCLPP_OK); /* like free(NULL) */
    ck_assert_int_eq(mscclpp_free(&local), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_memcpy(NULL, &local, 4), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_memcpy(&local, NULL, 4), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_memset(NULL, 0, 4), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_stream_create(NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_stream_synchronize(NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_stream_destroy(NULL), MSCCLPP_ERR_INVALID_ARG);
}
END_TEST

START_TEST(test_stream)
{
    mscclpp_stream_t s = NULL;
    ck_assert_int_eq(mscclpp_stream_create(&s), MSCCLPP_OK);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(mscclpp_stream_synchronize(s), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_stream_synchronize(s), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_stream_destroy(s), MSCCLPP_OK);
    mscclpp_stream_t many[8];
    for (int i = 0; i < 8; i++) ck_assert_int_eq(mscclpp_stream_create(&many[i]), MSCCLPP_OK);
    for (int i = 0; i < 8; i++) ck_assert_int_eq(mscclpp_stream_destroy(many[i]), MSCCLPP_OK);
}
END_TEST

/* mscclpp_scale_async: every dtype, a host and a device-resident scalar, a divisor, on a stream
 * (after a copy queued before it) and on the NULL stream; and inside a captured graph, replayed
 * with a new scalar each time (device residence: read at each replay). */
static float h2f(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = e == 0 ? (float)m / 16777216.0f : (float)(m | 0x400) * (float)(1u << e) / 33554432.0f;
    return (h & 0x8000) ? -v : v;
}

START_TEST(test_scale)
{
    enum { N = 1000 };
    mscclpp_stream_t s;
    ck_assert_int_eq(mscclpp_stream_create(&s), MSCCLPP_OK);
    /* float32: x3 on the stream, after a copy queued before it; then /4 on the NULL stream */
    float *src = NULL, *dst = NULL, three = 3.0f;
    ck_assert_int_eq(mscclpp_malloc(N * sizeof(float), (void **)&src), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_malloc(N * sizeof(float), (void **)&dst), MSCCLPP_OK);
    float host[N];
    for (int i = 0; i < N; i++) host[i] = (float)(i % 17);
    ck_assert_int_eq(mscclpp_memcpy_async(src, host, sizeof host, s), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_scale_async(dst, src, N, MSCCLPP_FLOAT32, 0, &three, 0, s),
                     MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_stream_synchronize(s), MSCCLPP_OK);
    for (int i = 0; i < N; i++) ck_assert_float_eq(dst[i], 3.0f * (float)(i % 17));
    ck_assert_int_eq(mscclpp_scale_async(dst, dst, N, MSCCLPP_FLOAT32, 4, NULL, 0, NULL),
                     MSCCLPP_OK);
    for (int i = 0; i < N; i++) ck_assert_float_eq(dst[i], 0.75f * (float)(i % 17));
    /* integers: int32 x -2 (in their type), uint8 / 3 (truncating), int8 x 5 (wrapping) */
    int32_t i32[N], m2 = -2;
    uint8_t u8[N], i8s[N], five = 5;
    for (int i = 0; i < N; i++) {
        i32[i] = i - 500;
        u8[i] = (uint8_t)i;
        i8s[i] = (uint8_t)(i % 60);
    }
    ck_assert_int_eq(mscclpp_scale_async(i32, i32, N, MSCCLPP_INT32, 0, &m2, 0, s), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_scale_async(u8, u8, N, MSCCLPP_UINT8, 3, NULL, 0, s), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_scale_async(i8s, i8s, N, MSCCLPP_INT8, 0, &five, 0, s), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_stream_synchronize(s), MSCCLPP_OK);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(i32[i], (i - 500) * -2);
        ck_assert_uint_eq(u8[i], (uint8_t)i / 3);
        ck_assert_int_eq((int8_t)i8s[i], (int8_t)(uint8_t)((i % 60) * 5));
    }
    /* 64-bit integers: int64 x 3e9 (beyond 32 bits), uint64 / 7 */
    int64_t i64[N], big = 3000000000ll;
    uint64_t u64[N];
    for (int i = 0; i < N; i++) {
        i64[i] = i - 500;
        u64[i] = ((uint64_t)1 << 40) + (uint64_t)i;
    }
    ck_assert_int_eq(mscclpp_scale_async(i64, i64, N, MSCCLPP_INT64, 0, &big, 0, s), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_scale_async(u64, u64, N, MSCCLPP_UINT64, 7, NULL, 0, s), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_stream_synchronize(s), MSCCLPP_OK);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(i64[i], (int64_t)(i - 500) * big);
        ck_assert_uint_eq(u64[i], (((uint64_t)1 << 40) + (uint64_t)i) / 7);
    }
    /* float16 x 0.5 and float64 / 8 */
    uint16_t h[N], half = 0x3800; /* 0.5 */
    double d[N];
    for (int i = 0; i < N; i++) {
        h[i] = (uint16_t)(0x3c00 + (i % 8) * 0x400); /* 1, 2, 4, ..., 128 */
        d[i] = (double)i;
    }
    ck_assert_int_eq(mscclpp_scale_async(h, h, N, MSCCLPP_FLOAT16, 0, &half, 0, s), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_scale_async(d, d, N, MSCCLPP_FLOAT64, 8, NULL, 0, s), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_stream_synchronize(s), MSCCLPP_OK);
    for (int i = 0; i < N; i++) {
        ck_assert_float_eq(h2f(h[i]), (float)(1 << (i % 8)) * 0.5f);
        ck_assert_double_eq(d[i], (double)i / 8.0);
    }
    /* a device-resident scalar is read when the work runs: in a graph, at each replay */
    float *scalar = NULL;
    ck_assert_int_eq(mscclpp_malloc(sizeof(float), (void **)&scalar), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_stream_begin_capture(s), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_scale_async(dst, src, N, MSCCLPP_FLOAT32, 0, scalar, 1, s),
                     MSCCLPP_OK);
    mscclpp_graph_t g = NULL;
    ck_assert_int_eq(mscclpp_stream_end_capture(s, &g), MSCCLPP_OK);
    for (int rep = 1; rep <= 3; rep++) {
        *scalar = (float)rep;
        ck_assert_int_eq(mscclpp_graph_launch(g, s), MSCCLPP_OK);
        ck_assert_int_eq(mscclpp_stream_synchronize(s), MSCCLPP_OK);
        for (int i = 0; i < N; i++) ck_assert_float_eq(dst[i], (float)rep * (float)(i % 17));
    }
    ck_assert_int_eq(mscclpp_graph_destroy(g), MSCCLPP_OK);
    /* bad arguments */
    ck_assert_int_eq(mscclpp_scale_async(dst, src, N, MSCCLPP_FLOAT32, 0, NULL, 0, s),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_scale_async(dst, src, N, (mscclpp_dtype_t)77, 2, NULL, 0, s),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(mscclpp_stream_destroy(s), MSCCLPP_OK);
    mscclpp_free(scalar);
    mscclpp_free(src);
    mscclpp_free(dst);
}
END_TEST

int main(void)
{
    setenv("MSCCLPP_HAL", "host", 1);
    if (!getenv("MSCCLPP_DEBUG")) setenv("MSCCLPP_DEBUG", "NONE", 1);
    Suite *s = suite_create("hal_api");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_backend_name);
    tcase_add_test(tc, test_nvls_supported);
    tcase_add_test(tc, test_device_describe);
    tcase_add_test(tc, test_malloc_memcpy_memset);
    tcase_add_test(tc, test_bad_args);
    tcase_add_test(tc, test_stream);
    tcase_add_test(tc, test_scale);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
