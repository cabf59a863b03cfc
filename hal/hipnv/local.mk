# hal/hipnv: the HIP backend module built a second time, for NVIDIA GPUs ("HIP on NVIDIA"), as
# libmscclpp-hal-hipnv.so: hal/hip's own sources (plain C, gcc) and kernels/hip/kern_hip.hip
# (nvcc, through kernels/hipnv/kern_hipnv.cu), both against vendor/hipnv/hip/*.h, a mapping of
# the HIP API they use onto the CUDA runtime that is found before any installed HIP (-I first;
# in vendor/, below the layers, since the HAL and the kernels both compile against it).
# Its table is named "hip": MSCCLPP_HAL=hip picks it on an NVIDIA machine (hal/hal.c). Built
# whenever the CUDA module is (m4/mscclpp_hipnv.m4; --without-hipnv to skip). docs/gpu.md §8.
HIPNV_MAP_H = $(top_srcdir)/vendor/hipnv/hip/hip_runtime_api.h \
	$(top_srcdir)/vendor/hipnv/hip/hip_runtime.h
noinst_HEADERS += vendor/hipnv/hip/hip_runtime_api.h vendor/hipnv/hip/hip_runtime.h
EXTRA_DIST += kernels/hipnv/kern_hipnv.cu tests/unit/test_hipnv.sh
TESTS += tests/unit/test_hipnv.sh
if HAVE_HIPNV
pkglib_LTLIBRARIES += libmscclpp-hal-hipnv.la
noinst_LTLIBRARIES += kernels/libkern_hipnv.la
kernels_libkern_hipnv_la_SOURCES = kernels/hipnv/kern_hipnv.cu
libmscclpp_hal_hipnv_la_SOURCES = hal/hip/hip_module.c hal/hip/hip_mem.c hal/hal_stub.c \
	base/module.c
libmscclpp_hal_hipnv_la_CPPFLAGS = -I$(top_srcdir)/vendor/hipnv -I$(top_srcdir) \
	-I$(top_srcdir)/include -I$(top_builddir) $(CUDA_CPPFLAGS) -DMSCCLPP_HAVE_KERN_HIP \
	'-DMSCCLPP_HIP_TARGETS="$(HIPNV_ARCHS)"'
libmscclpp_hal_hipnv_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
libmscclpp_hal_hipnv_la_LDFLAGS = -module -avoid-version -no-undefined \
	-export-symbols-regex '^mscclpp_hal_module'
libmscclpp_hal_hipnv_la_LIBADD = kernels/libkern_hipnv.la $(CUDA_LIBS) $(PTHREAD_LIBS)
libmscclpp_hal_hipnv_la_DEPENDENCIES = kernels/libkern_hipnv.la

# Not the .cu suffix rule: the mapping's include folder goes first and the targets are
# HIPNV_ARCHS. The suffix rules get no depfiles (kernels/local.mk), so name what it includes.
kernels/hipnv/kern_hipnv.lo: $(top_srcdir)/kernels/hipnv/kern_hipnv.cu \
		$(top_srcdir)/kernels/hip/kern_hip.hip $(top_srcdir)/kernels/hip/kern_scale.hip \
		$(top_srcdir)/kernels/common/kern_scale.h $(KERN_GPU_DEPS) $(HIPNV_MAP_H)
	$(AM_V_CC)$(LIBTOOL) $(AM_V_lt) --tag=CC --mode=compile $(NVCC_WRAP) -O3 -std=c++17 \
	  $(HIPNV_GENCODE) $(DEFS) -I$(top_srcdir)/vendor/hipnv -I$(top_srcdir) \
	  -I$(top_srcdir)/include -I$(top_builddir) $(CUDA_CPPFLAGS) -c -o $@ \
	  $(top_srcdir)/kernels/hipnv/kern_hipnv.cu
endif
