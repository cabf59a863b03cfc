# tests/gpu: tests that need a GPU (skip with exit 77 and a TAP SKIP without one), and the
# module checks that run anywhere (tests/unit/test_hal_modules). See docs/gpu.md.
EXTRA_DIST += tests/gpu/run-gpu-tests.sh tests/gpu/mps.sh tests/gpu/gen_variants.py \
	tests/gpu/gpu_report.py scripts/gpu-check.sh docs/gpu.md

# hal_get() and the fd broker (hal/fd_broker.c, one of the library's sources) are internal: link
# the library's objects, like test_hal_host.
check_PROGRAMS += tests/gpu/test_gpu_hal
TESTS += tests/gpu/test_gpu_hal tests/gpu/run-gpu-tests.sh
tests_gpu_test_gpu_hal_SOURCES = tests/gpu/test_gpu_hal.c
tests_gpu_test_gpu_hal_LDADD = $(libmscclpp_la_OBJECTS) $(libmscclpp_la_LIBADD)
EXTRA_tests_gpu_test_gpu_hal_DEPENDENCIES = libmscclpp.la

if HAVE_CHECK
check_PROGRAMS += tests/unit/test_hal_modules
TESTS += tests/unit/test_hal_modules
tests_unit_test_hal_modules_SOURCES = tests/unit/test_hal_modules.c
tests_unit_test_hal_modules_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_hal_modules_LDADD = $(libmscclpp_la_OBJECTS) $(libmscclpp_la_LIBADD) $(CHECK_LIBS)
EXTRA_tests_unit_test_hal_modules_DEPENDENCIES = libmscclpp.la
endif

# lat_probe: where the time of a small collective goes (host enqueue vs GPU); a measurement tool
# for scripts/gpu-check.sh, built with the tests but not run by make check.
check_PROGRAMS += tests/gpu/lat_probe
tests_gpu_lat_probe_SOURCES = tests/gpu/lat_probe.c tests/unit/mp_harness.c
tests_gpu_lat_probe_LDADD = libmscclpp.la
