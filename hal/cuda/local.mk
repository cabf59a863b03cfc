# hal/cuda: the CUDA backend module, dlopen()ed by hal/hal.c as libmscclpp-hal-cuda.so.
# Built at the top of the build tree so it lands in $(top_builddir)/.libs, the module directory
# the tests use (MSCCLPP_HAL_MODULE_DIR in AM_TESTS_ENVIRONMENT). Plain C against
# cuda_runtime_api.h; links cudart only (driver entry points are fetched at run time).
# It compiles base/module.c (logging, errors and configuration forwarded to the services table
# the loader hands over, base/services.h) and the fd broker (hal/fd_broker.c, whose library copy
# is hidden).
noinst_HEADERS += hal/cuda/cuda_internal.h
if HAVE_CUDA
pkglib_LTLIBRARIES += libmscclpp-hal-cuda.la
hal_cuda_kern = kernels/libkern_cuda.la
libmscclpp_hal_cuda_la_SOURCES = \
	hal/cuda/cuda_module.c hal/cuda/cuda_mem.c hal/cuda/cuda_mc.c hal/cuda/cuda_stream.c \
	hal/cuda/cuda_mps.c \
	hal/fd_broker.c base/module.c
libmscclpp_hal_cuda_la_CPPFLAGS = -I$(top_srcdir) -I$(top_srcdir)/include -I$(top_builddir) \
	$(CUDA_CPPFLAGS) -DMSCCLPP_HAVE_KERN_CUDA '-DMSCCLPP_CUDA_TARGETS="$(CUDA_ARCHS)"'
libmscclpp_hal_cuda_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
libmscclpp_hal_cuda_la_LDFLAGS = -module -avoid-version -no-undefined \
	-export-symbols-regex '^mscclpp_hal_module'
libmscclpp_hal_cuda_la_LIBADD = $(hal_cuda_kern) $(CUDA_LIBS) $(PTHREAD_LIBS)
libmscclpp_hal_cuda_la_DEPENDENCIES = $(hal_cuda_kern)
endif
