# tests/gpu: tests that need a GPU (skip with exit 77 and a TAP SKIP without one), and the
# module checks that run anywhere (tests/unit/test_hal_modules). See docs/gpu.md.
EXTRA_DIST += tests/gpu/run-gpu-tests.sh docs/gpu.md

# hal_get() and the fd broker (hal/fd_broker.c, one of the library's sources) are internal: link
# the library's objects (MSCCLPP_INTERNAL_LIBS, see Makefile.am).
check_PROGRAMS += tests/gpu/test_gpu_hal
TESTS += tests/gpu/test_gpu_hal tests/gpu/run-gpu-tests.sh
tests_gpu_test_gpu_hal_SOURCES = tests/gpu/test_gpu_hal.c
tests_gpu_test_gpu_hal_LDADD = $(MSCCLPP_INTERNAL_LIBS)

if HAVE_CHECK
check_PROGRAMS += tests/unit/test_hal_modules
TESTS += tests/unit/test_hal_modules
tests_unit_test_hal_modules_SOURCES = tests/unit/test_hal_modules.c
tests_unit_test_hal_modules_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_hal_modules_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CHECK_LIBS)
endif
