# tools/bench.mk: mscclpp-bench (nccl-tests conventions) and its smoke tests.
bin_PROGRAMS += tools/mscclpp-bench
tools_mscclpp_bench_SOURCES = tools/mscclpp-bench.c tools/bench_data.c tools/bench_data.h \
	tools/bench_plot.c tools/bench_plot.h \
	tools/mscclpp-tune.c tools/bench_tune.h \
	tools/netns.c tools/netns.h
tools_mscclpp_bench_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
tools_mscclpp_bench_LDADD = libmscclpp.la $(JANSSON_LIBS) -lm
if HAVE_MPI
tools_mscclpp_bench_CFLAGS += $(MPI_CFLAGS)
tools_mscclpp_bench_LDADD += libmscclpp_mpi.la $(MPI_LIBS)
endif

# Smoke tests (TAP scripts): fork mode, every dtype x op, a reference plan, usage errors, mpiexec.
TESTS += tests/bench/test_bench.sh
EXTRA_DIST += tests/bench/test_bench.sh
# The launcher when a rank is killed mid-run (survivors exit by themselves, errors shown).
TESTS += tests/bench/test_bench_kill.sh
EXTRA_DIST += tests/bench/test_bench_kill.sh
# --nodes leaves no namespace, bridge or rank behind: failing run, Ctrl-C, kill, kill -9.
TESTS += tests/bench/test_bench_cleanup.sh
EXTRA_DIST += tests/bench/test_bench_cleanup.sh
# nccl-tests flags, plan names in --json, the summary of failed calls, --plot (TAP).
TESTS += tests/bench/test_bench_cli.sh
EXTRA_DIST += tests/bench/test_bench_cli.sh
# A collective that fails on the bench's stream fails the bench (issue 8).
TESTS += tests/bench/test_bench_fail.sh
EXTRA_DIST += tests/bench/test_bench_fail.sh

# Unit test of the tool's data helpers (encodings, patterns, checker); prints TAP itself.
check_PROGRAMS += tests/bench/test_bench_data
TESTS += tests/bench/test_bench_data
tests_bench_test_bench_data_SOURCES = tests/bench/test_bench_data.c tools/bench_data.c \
	tools/bench_data.h
tests_bench_test_bench_data_LDADD = libmscclpp.la -lm
# The bound column: a copy timed in the same run, the plan's bytes moved (issue 11).
TESTS += tests/bench/test_bench_bound.sh
EXTRA_DIST += tests/bench/test_bench_bound.sh
