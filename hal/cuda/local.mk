# hal/cuda: the CUDA backend module, dlopen()ed by hal/hal.c as libmscclpp-hal-cuda.so.
# Built at the top of the build tree so it lands in $(top_builddir)/.libs, the module directory
# the tests use (MSCCLPP_HAL_MODULE_DIR in AM_TESTS_ENVIRONMENT). Plain C against
# cuda_runtime_api.h; links cudart only (driver entry points are fetched at run time).
# It carries its own copy of base/status.c, log.c, config.c and the fd broker (hal/fd_broker.c):
# the library's are hidden.
noinst_HEADERS += hal/cuda/cuda_internal.h
if HAVE_CUDA
pkglib_LTLIBRARIES += libmscclpp-hal-cuda.la
hal_cuda_kern = kernels/libkern_cuda.la
libmscclpp_hal_cuda_la_SOURCES = \
	hal/cuda/cuda_module.c hal/cuda/cuda_mem.c hal/cuda/cuda_mc.c hal/cuda/cuda_stream.c \
	hal/fd_broker.c base/status.c base/log.c base/config.c base/wait.c
libmscclpp_hal_cuda_la_CPPFLAGS = -I$(top_srcdir) -I$(top_srcdir)/include -I$(top_builddir) \
	$(CUDA_CPPFLAGS) -DMSCCLPP_HAVE_KERN_CUDA
libmscclpp_hal_cuda_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
libmscclpp_hal_cuda_la_LDFLAGS = -module -avoid-version -no-undefined \
	-export-symbols-regex '^mscclpp_hal_module'
libmscclpp_hal_cuda_la_LIBADD = $(hal_cuda_kern) $(CUDA_LIBS) $(PTHREAD_LIBS)
libmscclpp_hal_cuda_la_DEPENDENCIES = $(hal_cuda_kern)
endif
