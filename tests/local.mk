# tests/: shared helpers and the core suites; other suites live in their module's fragment.
EXTRA_DIST += tests/unit/mp_harness.h
# the preamble every TAP shell test sources (top_src, top_build, tmp, pass/skip/fail/run, mk)
EXTRA_DIST += tests/tap.sh

# The house: layers, circles, the config table, vendor headers and the architecture map
# (scripts/check-house.py).
TESTS += tests/unit/test_house.sh
EXTRA_DIST += tests/unit/test_house.sh scripts/check-house.py
if HAVE_CHECK
check_PROGRAMS += tests/unit/test_channels
TESTS += tests/unit/test_channels
tests_unit_test_channels_SOURCES = tests/unit/test_channels.c tests/unit/mp_harness.c
tests_unit_test_channels_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_channels_LDADD = libmscclpp.la $(CHECK_LIBS)
endif

# Conformance: every plan x dtype x op x size, ranks as processes (see the file header).
EXTRA_DIST += tests/conformance/conf_ref.h tests/conformance/exclude-host.txt \
	tests/conformance/exclude-cuda.txt tests/conformance/exclude-hip.txt \
	tests/conformance/test_conformance_multinode.sh
if HAVE_CHECK
check_PROGRAMS += tests/conformance/test_conformance
TESTS += tests/conformance/test_conformance
# the multi-node plans across network namespaces (bounded tier; MSCCLPP_CONFORMANCE_FULL=1)
TESTS += tests/conformance/test_conformance_multinode.sh
tests_conformance_test_conformance_SOURCES = tests/conformance/test_conformance.c \
	tests/unit/mp_harness.c tools/netns.c tools/netns.h
tests_conformance_test_conformance_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_conformance_test_conformance_LDADD = libmscclpp.la $(CHECK_LIBS) -lm
# the plans made for the job through the collective API, every shape (tiers in the file)
check_PROGRAMS += tests/conformance/test_made
TESTS += tests/conformance/test_made
tests_conformance_test_made_SOURCES = tests/conformance/test_made.c tests/unit/mp_harness.c \
	tools/netns.c tools/netns.h
tests_conformance_test_made_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_conformance_test_made_LDADD = libmscclpp.la $(CHECK_LIBS) -lm
endif

if HAVE_CHECK
check_PROGRAMS += tests/unit/test_executor
TESTS += tests/unit/test_executor
tests_unit_test_executor_SOURCES = tests/unit/test_executor.c tests/unit/mp_harness.c
tests_unit_test_executor_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_executor_LDADD = libmscclpp.la $(CHECK_LIBS)
endif

# The executor on the caller's own buffers: the application's memory registered by allocation,
# scratch that follows the call (issue 18).
if HAVE_CHECK
check_PROGRAMS += tests/unit/test_buffers
TESTS += tests/unit/test_buffers
tests_unit_test_buffers_SOURCES = tests/unit/test_buffers.c tests/unit/mp_harness.c
tests_unit_test_buffers_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_buffers_LDADD = libmscclpp.la $(CHECK_LIBS)
endif

# The interpreter's phase trace (MSCCLPP_KERN_TRACE): files, order of the stamps, ops.
if HAVE_CHECK
check_PROGRAMS += tests/unit/test_kern_trace
TESTS += tests/unit/test_kern_trace
tests_unit_test_kern_trace_SOURCES = tests/unit/test_kern_trace.c tests/unit/mp_harness.c
tests_unit_test_kern_trace_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_kern_trace_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CHECK_LIBS)
endif

# Graph capture and replay on the host backend's capture mode (docs/graphs.md, issue 18).
if HAVE_CHECK
check_PROGRAMS += tests/unit/test_graph
TESTS += tests/unit/test_graph
tests_unit_test_graph_SOURCES = tests/unit/test_graph.c tests/unit/mp_harness.c
tests_unit_test_graph_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_graph_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CHECK_LIBS)
endif

# The bootstrap parser fuzz target (tests/fuzz/fuzz_boot*).
include tests/fuzz/boot.mk
# Executor failures (timeouts on streams, partial failure, killed ranks): issue 8.
if HAVE_CHECK
check_PROGRAMS += tests/unit/test_exec_fail
TESTS += tests/unit/test_exec_fail
tests_unit_test_exec_fail_SOURCES = tests/unit/test_exec_fail.c tests/unit/mp_harness.c
tests_unit_test_exec_fail_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_exec_fail_LDADD = libmscclpp.la $(CHECK_LIBS)
endif

# Ranks that disagree on a call, queued launches after a failure, unserved calls (issue 22).
if HAVE_CHECK
check_PROGRAMS += tests/unit/test_exec_agree
TESTS += tests/unit/test_exec_agree
tests_unit_test_exec_agree_SOURCES = tests/unit/test_exec_agree.c tests/unit/mp_harness.c
tests_unit_test_exec_agree_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_exec_agree_LDADD = libmscclpp.la $(CHECK_LIBS)
endif

# Soak: many small collectives, RSS and fds flat (issue 8).
if HAVE_CHECK
# HAL operations per steady-state call (issue 19 item 5), counted on the host backend; uses
# internal symbols (hal_count_*): links the library objects.
check_PROGRAMS += tests/unit/test_percall
TESTS += tests/unit/test_percall
tests_unit_test_percall_SOURCES = tests/unit/test_percall.c tests/unit/mp_harness.c
tests_unit_test_percall_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_percall_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CHECK_LIBS)

check_PROGRAMS += tests/unit/test_soak
TESTS += tests/unit/test_soak
tests_unit_test_soak_SOURCES = tests/unit/test_soak.c tests/unit/mp_harness.c
tests_unit_test_soak_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_soak_LDADD = libmscclpp.la $(CHECK_LIBS)
endif

# A port channel's transport failing after its launch ended (fault injection, issue 8).
if HAVE_CHECK
check_PROGRAMS += tests/unit/test_port_fault
TESTS += tests/unit/test_port_fault
tests_unit_test_port_fault_SOURCES = tests/unit/test_port_fault.c tests/unit/mp_harness.c
tests_unit_test_port_fault_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_port_fault_LDADD = libmscclpp.la $(CHECK_LIBS)
endif

# mscclpp_comm_abort while another thread is inside a call (issue 22 item 4).
if HAVE_CHECK
check_PROGRAMS += tests/unit/test_comm_abort
TESTS += tests/unit/test_comm_abort
tests_unit_test_comm_abort_SOURCES = tests/unit/test_comm_abort.c tests/unit/mp_harness.c
tests_unit_test_comm_abort_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_comm_abort_LDADD = libmscclpp.la $(CHECK_LIBS) -lpthread
endif
