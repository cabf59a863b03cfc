# tests/nccl: the NCCL API library, driven by a program written against nccl.h alone
# (tests/nccl/nccl_api_test.c): linked with the real libnccl.so.2 and run under LD_PRELOAD,
# and linked with libmscclpp_nccl directly. tests/nccl/test_nccl_api.sh runs both (TAP).
EXTRA_DIST += tests/nccl/test_nccl_api.sh tests/nccl/allgather_put_output.py
if BUILD_NCCL
check_PROGRAMS += tests/nccl/nccl_api_test_shim
tests_nccl_nccl_api_test_shim_SOURCES = tests/nccl/nccl_api_test.c
tests_nccl_nccl_api_test_shim_CPPFLAGS = $(NCCL_CPPFLAGS) -I$(top_srcdir)/include \
	-DWITH_MSCCLPP_STREAM
tests_nccl_nccl_api_test_shim_LDADD = libmscclpp_nccl.la libmscclpp.la -lm

# ncclCommAbort / ncclCommDestroy while another thread is inside a call (issue 22 item 4).
check_PROGRAMS += tests/nccl/test_nccl_abort
TESTS += tests/nccl/test_nccl_abort
tests_nccl_test_nccl_abort_SOURCES = tests/nccl/test_nccl_abort.c tests/unit/mp_harness.c
tests_nccl_test_nccl_abort_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_nccl_test_nccl_abort_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_nccl_test_nccl_abort_LDADD = libmscclpp_nccl.la libmscclpp.la $(CHECK_LIBS) -lpthread

# HAL operations per steady-state ncclAllReduce (issue 19 item 5): reads internal counters, so
# it is built from the NCCL layer's sources and the library's objects.
check_PROGRAMS += tests/nccl/test_nccl_percall
TESTS += tests/nccl/test_nccl_percall
tests_nccl_test_nccl_percall_SOURCES = tests/nccl/test_nccl_percall.c tests/unit/mp_harness.c \
	$(libmscclpp_nccl_la_SOURCES)
tests_nccl_test_nccl_percall_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CPPFLAGS)
tests_nccl_test_nccl_percall_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_nccl_test_nccl_percall_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CHECK_LIBS) -ldl -lpthread

# The fallback library the test points MSCCLPP_NCCL_LIB_PATH at.
check_LTLIBRARIES += tests/nccl/libfakenccl.la
tests_nccl_libfakenccl_la_SOURCES = tests/nccl/fake_nccl.c
tests_nccl_libfakenccl_la_CPPFLAGS = $(NCCL_CPPFLAGS)
tests_nccl_libfakenccl_la_LDFLAGS = -module -avoid-version -rpath /nowhere

# The benchmark of docs/performance.md ("NCCL API"): built with make check, run by hand.
if HAVE_MPI
check_PROGRAMS += tests/nccl/nccl_bench
tests_nccl_nccl_bench_SOURCES = tests/nccl/nccl_bench.c
tests_nccl_nccl_bench_CPPFLAGS = $(NCCL_CPPFLAGS) -I$(top_srcdir)/include
tests_nccl_nccl_bench_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
tests_nccl_nccl_bench_LDADD = libmscclpp_nccl.la libmscclpp.la $(MPI_LIBS)
endif

if HAVE_REAL_NCCL
check_PROGRAMS += tests/nccl/nccl_api_test_real
tests_nccl_nccl_api_test_real_SOURCES = tests/nccl/nccl_api_test.c
tests_nccl_nccl_api_test_real_CPPFLAGS = $(NCCL_CPPFLAGS)
tests_nccl_nccl_api_test_real_LDFLAGS = -L$(REAL_NCCL_LIBDIR) -Wl,-rpath,$(REAL_NCCL_LIBDIR)
tests_nccl_nccl_api_test_real_LDADD = -l:libnccl.so.2 -lm
endif
endif
# Registered always: without nccl.h the script reports every case skipped, with the reason.
TESTS += tests/nccl/test_nccl_api.sh
