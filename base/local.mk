# base/: the bottom layer every other layer includes (results and the last error, logging,
# configuration variables, wire encoding, the clock and the one wait policy). It includes nothing
# of ours above it.
libmscclpp_la_SOURCES += base/status.c base/log.c base/config.c base/wait.c base/services.c \
	base/names.c base/self.c
noinst_HEADERS += base/debug.h base/config.h base/config_vars.h base/wire.h base/clock.h base/names.h \
	base/wait.h base/wait_sched.h base/services.h base/self.h
# base/module.c is compiled into each loadable HAL module instead of the files above: it
# forwards to the services table the library hands the module at load (base/services.h).
EXTRA_DIST += base/module.c

if HAVE_CHECK
check_PROGRAMS += tests/unit/test_config
TESTS += tests/unit/test_config
# Uses internal (hidden) symbols: links the convenience library.
tests_unit_test_config_SOURCES = tests/unit/test_config.c
tests_unit_test_config_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_config_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CHECK_LIBS)
EXTRA_tests_unit_test_config_DEPENDENCIES = tools/mscclpp-info
endif

if HAVE_CHECK
check_PROGRAMS += tests/unit/test_wait
TESTS += tests/unit/test_wait
tests_unit_test_wait_SOURCES = tests/unit/test_wait.c
tests_unit_test_wait_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_wait_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CHECK_LIBS)
endif
