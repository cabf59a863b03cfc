# hal/: the ops table, the module loader and the built-in host backend
noinst_HEADERS += hal/hal.h hal/hal_api.h hal/hal_alloc.h hal/fd_broker.h hal/host/host.h \
	hal/host/host_wait.h
libmscclpp_la_SOURCES += \
	hal/hal.c hal/hal_stub.c hal/hal_api.c hal/fd_broker.c \
	hal/host/host_ops.c hal/host/host_mem.c hal/host/host_share.c hal/host/host_stream.c \
	hal/host/host_check.c

if HAVE_CHECK
check_PROGRAMS += tests/unit/test_hal_host tests/unit/test_hal_api
TESTS += tests/unit/test_hal_host tests/unit/test_hal_api

# Uses internal (hidden) symbols: links the library objects (see Makefile.am).
tests_unit_test_hal_host_SOURCES = tests/unit/test_hal_host.c tests/unit/mp_harness.c
tests_unit_test_hal_host_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_hal_host_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CHECK_LIBS)

tests_unit_test_hal_api_SOURCES = tests/unit/test_hal_api.c
tests_unit_test_hal_api_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_hal_api_LDADD = libmscclpp.la $(CHECK_LIBS)
endif

# The host stream's bounded queue (issue 8); internal symbols: the convenience library.
if HAVE_CHECK
check_PROGRAMS += tests/unit/test_host_queue
TESTS += tests/unit/test_host_queue
tests_unit_test_host_queue_SOURCES = tests/unit/test_host_queue.c
tests_unit_test_host_queue_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_host_queue_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CHECK_LIBS)
endif
