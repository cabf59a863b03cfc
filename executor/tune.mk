# executor/tuning.c: tuning tables (mscclpp-bench --tune writes them, the executor applies them)
libmscclpp_la_SOURCES += executor/tuning.c
noinst_HEADERS += executor/tuning.h

# Table parsing, refusal messages and plan picking (internal symbols: the convenience library).
if HAVE_CHECK
check_PROGRAMS += tests/tune/test_tuning
TESTS += tests/tune/test_tuning
tests_tune_test_tuning_SOURCES = tests/tune/test_tuning.c
tests_tune_test_tuning_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_tune_test_tuning_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CHECK_LIBS)
endif

# End to end: mscclpp-bench --tune writes a table, the executor applies it, bad ones are refused.
TESTS += tests/tune/test_tune.sh
EXTRA_DIST += tests/tune/test_tune.sh
