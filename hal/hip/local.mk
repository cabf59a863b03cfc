# hal/hip: the HIP backend module, dlopen()ed by hal/hal.c as libmscclpp-hal-hip.so. Built at
# the top of the build tree so it lands in $(top_builddir)/.libs with the other modules (the
# tests' MSCCLPP_HAL_MODULE_DIR). Plain C against hip_runtime_api.h (HIP_CPPFLAGS carries
# -D__HIP_PLATFORM_AMD__), with base/module.c (logging, errors and
# configuration forwarded to the services table the loader hands over, base/services.h) and
# hal/hal_stub.c (the library's is hidden).
noinst_HEADERS += hal/hip/hip_internal.h
if HAVE_ROCM
pkglib_LTLIBRARIES += libmscclpp-hal-hip.la
hal_hip_kern = kernels/libkern_hip.la
libmscclpp_hal_hip_la_SOURCES = hal/hip/hip_module.c hal/hip/hip_mem.c hal/hal_stub.c \
	base/module.c
libmscclpp_hal_hip_la_CPPFLAGS = -I$(top_srcdir) -I$(top_srcdir)/include -I$(top_builddir) \
	$(HIP_CPPFLAGS) -DMSCCLPP_HAVE_KERN_HIP '-DMSCCLPP_HIP_TARGETS="$(HIP_ARCHS)"'
libmscclpp_hal_hip_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
libmscclpp_hal_hip_la_LDFLAGS = -module -avoid-version -no-undefined \
	-export-symbols-regex '^mscclpp_hal_module'
libmscclpp_hal_hip_la_LIBADD = $(hal_hip_kern) $(HIP_LIBS) $(PTHREAD_LIBS)
libmscclpp_hal_hip_la_DEPENDENCIES = $(hal_hip_kern)
endif
