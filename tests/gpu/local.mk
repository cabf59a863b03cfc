# tests/gpu: tests that need a GPU (skip with exit 77 and a TAP SKIP without one), and the
# module checks that run anywhere (tests/unit/test_hal_modules). See docs/gpu.md.
EXTRA_DIST += tests/gpu/run-gpu-tests.sh tests/gpu/mps.sh tests/gpu/gen_variants.py \
	tests/gpu/gpu_report.py scripts/gpu-check.sh docs/gpu.md tests/gpu/torch_graphs.py \
	examples/torch-integration/dsl_with_nccl_api.py tests/gpu/launch_floor.cu \
	tests/gpu/hal_count.sh tests/gpu/torch_percall.py tests/gpu/gpu_tap.h tests/gpu/thread_dump.sh \
	tests/gpu/bench_fit.py tests/gpu/torch_nccl.py tests/gpu/ucx_hang.sh \
	tests/gpu/kern_trace.py tests/gpu/direct_ready.py tests/gpu/slim-pack.sh

# hal_get() and the fd broker (hal/fd_broker.c, one of the library's sources) are internal: link
# the library's objects (MSCCLPP_INTERNAL_LIBS, see Makefile.am).
check_PROGRAMS += tests/gpu/test_gpu_hal
TESTS += tests/gpu/test_gpu_hal tests/gpu/run-gpu-tests.sh
tests_gpu_test_gpu_hal_SOURCES = tests/gpu/test_gpu_hal.c
tests_gpu_test_gpu_hal_LDADD = $(MSCCLPP_INTERNAL_LIBS)

# test_cuda_lookup: the CUDA calls of one allocation lookup on each kind of memory, counted by
# the CUDA module (HAL_MODULE_COUNTS); links cudart to allocate as an application does.
if HAVE_CUDA
check_PROGRAMS += tests/gpu/test_cuda_lookup
TESTS += tests/gpu/test_cuda_lookup
tests_gpu_test_cuda_lookup_SOURCES = tests/gpu/test_cuda_lookup.c
tests_gpu_test_cuda_lookup_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_test_cuda_lookup_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CUDA_LIBS)
endif

if HAVE_CHECK
check_PROGRAMS += tests/unit/test_hal_modules
TESTS += tests/unit/test_hal_modules
tests_unit_test_hal_modules_SOURCES = tests/unit/test_hal_modules.c
tests_unit_test_hal_modules_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_hal_modules_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CHECK_LIBS)
endif

# Fake backend modules test_hal_modules loads in place of the CUDA module (built at make check).
if HAVE_CHECK
check_LTLIBRARIES += tests/unit/libfakehal.la tests/unit/libfakehal_old.la
tests_unit_libfakehal_la_SOURCES = tests/unit/fake_hal_module.c base/module.c hal/hal_stub.c
tests_unit_libfakehal_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
tests_unit_libfakehal_la_LDFLAGS = -module -avoid-version -rpath /nowhere -no-undefined \
	-export-symbols-regex '^mscclpp_hal_module'
tests_unit_libfakehal_old_la_SOURCES = tests/unit/fake_hal_module.c
tests_unit_libfakehal_old_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden -DFAKE_HAL_OLD
tests_unit_libfakehal_old_la_LDFLAGS = -module -avoid-version -rpath /nowhere -no-undefined \
	-export-symbols-regex '^mscclpp_hal_module'
endif

# lat_probe: where the time of a small collective goes (host enqueue vs GPU); a measurement tool
# for scripts/gpu-check.sh, built with the tests.
check_PROGRAMS += tests/gpu/lat_probe
tests_gpu_lat_probe_SOURCES = tests/gpu/lat_probe.c tests/unit/mp_harness.c
tests_gpu_lat_probe_LDADD = libmscclpp.la
# ... and it runs on the host backend in make check (a few seconds), so it keeps working
TESTS += tests/gpu/lat_probe_host.sh
EXTRA_DIST += tests/gpu/lat_probe_host.sh

# graph_replay: graph capture and replay through the C API on the selected backend (100
# replays with new data, every element checked); run by scripts/gpu-check.sh on CUDA. The host
# backend's run of the same checks is tests/unit/test_graph.
check_PROGRAMS += tests/gpu/graph_replay
tests_gpu_graph_replay_SOURCES = tests/gpu/graph_replay.c tests/unit/mp_harness.c
tests_gpu_graph_replay_LDADD = libmscclpp.la
