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
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
