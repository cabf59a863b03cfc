# kernels/: the plan interpreter (common), compiled for the host (gcc), CUDA (nvcc), HIP (hipcc)
noinst_HEADERS += kernels/common/kern_entry.h kernels/common/kern_args.h \
	kernels/common/kern_port.h kernels/common/kern_dtype.h kernels/common/kern_interp.h \
	kernels/common/kern_scale.h
libmscclpp_la_SOURCES += kernels/host/kern_host.c kernels/host/kern_host_scale.c
EXTRA_DIST += kernels/cuda/kern_cuda.cu kernels/hip/kern_hip.hip kernels/cuda/kern_scale.cu \
	kernels/hip/kern_scale.hip

# GPU builds of the same interpreter, as convenience libraries the HAL modules link.
if HAVE_CUDA
noinst_LTLIBRARIES += kernels/libkern_cuda.la
kernels_libkern_cuda_la_SOURCES = kernels/cuda/kern_cuda.cu kernels/cuda/kern_scale.cu
endif
if HAVE_ROCM
noinst_LTLIBRARIES += kernels/libkern_hip.la
kernels_libkern_hip_la_SOURCES = kernels/hip/kern_hip.hip kernels/hip/kern_scale.hip
endif
# The .cu/.hip suffix rules (Makefile.am) get no depfiles from automake's dependency tracking,
# which covers only the C compiler: name every header they include (kern_cuda.cu and
# kern_hip.hip include the same two), or a change to kern_args.h leaves a GPU kernel built
# against the old launch arguments.
KERN_GPU_DEPS = $(top_srcdir)/kernels/common/kern_entry.h \
	$(top_srcdir)/kernels/common/kern_interp.h $(top_srcdir)/kernels/common/kern_args.h \
	$(top_srcdir)/kernels/common/kern_port.h $(top_srcdir)/kernels/common/kern_dtype.h \
	$(top_srcdir)/base/wait.h $(top_srcdir)/base/wait_sched.h $(top_srcdir)/base/clock.h \
	$(top_srcdir)/include/mscclpp/mscclpp.h
kernels/cuda/kern_cuda.lo: $(KERN_GPU_DEPS)
kernels/hip/kern_hip.lo: $(KERN_GPU_DEPS)
kernels/cuda/kern_scale.lo: $(KERN_GPU_DEPS) $(top_srcdir)/kernels/common/kern_scale.h
kernels/hip/kern_scale.lo: $(KERN_GPU_DEPS) $(top_srcdir)/kernels/common/kern_scale.h

# Portability check: kernels/common through nvcc (sm_80, sm_90) and hipcc (gfx90a), TAP.
EXTRA_DIST += tests/unit/kern_compile.sh
TESTS += tests/unit/kern_compile.sh

if HAVE_CHECK
check_PROGRAMS += tests/unit/test_kernels
TESTS += tests/unit/test_kernels
tests_unit_test_kernels_SOURCES = tests/unit/test_kernels.c tests/unit/kern_harness.c \
	tests/unit/kern_harness.h
tests_unit_test_kernels_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_kernels_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CHECK_LIBS)
# the launch fence's records, function by function (the interpreter's host build)
check_PROGRAMS += tests/unit/test_kern_fence
TESTS += tests/unit/test_kern_fence
tests_unit_test_kern_fence_SOURCES = tests/unit/test_kern_fence.c
tests_unit_test_kern_fence_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_kern_fence_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CHECK_LIBS)
endif
