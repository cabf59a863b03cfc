# executor/: the public calls (executor.c), contexts (context.c), executor and device state
# (state.c), port channels and their proxy (exec_port.c), mscclpp_alltoallv on the alltoall
# plans (alltoallv.c); see docs/architecture.md
noinst_HEADERS += executor/plan.h executor/exec.h executor/state.h
libmscclpp_la_SOURCES += executor/executor.c executor/context.c executor/state.c \
	executor/exec_port.c executor/plan_dirs.c executor/alltoallv.c executor/cache.c \
	executor/exec_trace.c
noinst_HEADERS += executor/exec_port.h executor/exec_forget.h executor/cache.h
# executor/plan_make.c: one rank's part of a plan recorded like a DSL program (fusion, syncs,
# replication); executor/made.c: the plans made for the job at hand (any rank count and node
# layout); executor/select.c: which plan serves a call; executor/plan_json.c: plans as JSON
libmscclpp_la_SOURCES += executor/plan_make.c executor/made.c executor/select.c \
	executor/plan_json.c
noinst_HEADERS += executor/plan_make.h executor/made.h executor/select.h

# Made plans: the DSL's on one node, every shape loads and verifies, one rank's part (internal).
if HAVE_CHECK
check_PROGRAMS += tests/unit/test_made
TESTS += tests/unit/test_made
tests_unit_test_made_SOURCES = tests/unit/test_made.c
tests_unit_test_made_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_made_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CHECK_LIBS)
endif

# Benchmark: one rank's part of the made plans of a 1024-rank job (docs/performance.md).
noinst_PROGRAMS += tests/bench/bench_plan_make
tests_bench_bench_plan_make_SOURCES = tests/bench/bench_plan_make.c
tests_bench_bench_plan_make_LDADD = libmscclpp.la
