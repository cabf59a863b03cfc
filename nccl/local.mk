# nccl/: libmscclpp_nccl, the NCCL 2.28 API over the public libmscclpp API (docs/nccl.md).
# Built when configure finds the toolkit's nccl.h (the ABI it implements).
EXTRA_DIST += nccl/libmscclpp_nccl.map docs/nccl.md include/mscclpp/nccl_ext.h
noinst_HEADERS += nccl/nccl_internal.h
if BUILD_NCCL
lib_LTLIBRARIES += libmscclpp_nccl.la
libmscclpp_nccl_la_SOURCES = nccl/nccl_util.c nccl/nccl_fallback.c nccl/nccl_comm.c \
	nccl/nccl_coll.c nccl/nccl_profile.c nccl/nccl_ext.c
# the extension hook mscclpp.ext (Python) calls in the process (docs/nccl.md)
mscclppinclude_HEADERS += include/mscclpp/nccl_ext.h
libmscclpp_nccl_la_CPPFLAGS = -I$(top_srcdir) -I$(top_srcdir)/include $(NCCL_CPPFLAGS)
libmscclpp_nccl_la_CFLAGS = $(AM_CFLAGS)
libmscclpp_nccl_la_LIBADD = libmscclpp.la -ldl $(PTHREAD_LIBS)
# Exports only nccl*/pnccl* (unversioned, like libnccl.so.2); -Bsymbolic-functions binds the
# library's own calls (pnccl* -> nccl*) inside it whatever else the process defines.
libmscclpp_nccl_la_LDFLAGS = -version-info 0:0:0 -no-undefined \
	-Wl,--version-script=$(top_srcdir)/nccl/libmscclpp_nccl.map -Wl,-Bsymbolic-functions
EXTRA_libmscclpp_nccl_la_DEPENDENCIES = $(top_srcdir)/nccl/libmscclpp_nccl.map
endif
