# Native algorithms (executor/native.c): the example C allreduce and test modules, built as
# loadable modules, and the suite that loads them on forked ranks.
check_LTLIBRARIES += tests/native/libnative_example.la tests/native/libnative_probe.la \
	tests/native/libnative_failing.la tests/native/libnative_badabi.la \
	tests/native/libnative_nosyms.la
NATIVE_MOD_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
tests_native_libnative_example_la_SOURCES = examples/native/allreduce_native.c
tests_native_libnative_example_la_LDFLAGS = $(NATIVE_MOD_LDFLAGS)
tests_native_libnative_probe_la_SOURCES = tests/native/test_modules.c
tests_native_libnative_probe_la_CPPFLAGS = $(AM_CPPFLAGS) -DVARIANT_PROBE
tests_native_libnative_probe_la_LDFLAGS = $(NATIVE_MOD_LDFLAGS)
tests_native_libnative_failing_la_SOURCES = tests/native/test_modules.c
tests_native_libnative_failing_la_CPPFLAGS = $(AM_CPPFLAGS) -DVARIANT_FAILING
tests_native_libnative_failing_la_LDFLAGS = $(NATIVE_MOD_LDFLAGS)
tests_native_libnative_badabi_la_SOURCES = tests/native/test_modules.c
tests_native_libnative_badabi_la_CPPFLAGS = $(AM_CPPFLAGS) -DVARIANT_BAD_ABI
tests_native_libnative_badabi_la_LDFLAGS = $(NATIVE_MOD_LDFLAGS)
tests_native_libnative_nosyms_la_SOURCES = tests/native/test_modules.c
tests_native_libnative_nosyms_la_CPPFLAGS = $(AM_CPPFLAGS) -DVARIANT_NO_SYMS
tests_native_libnative_nosyms_la_LDFLAGS = $(NATIVE_MOD_LDFLAGS)

if HAVE_CHECK
check_PROGRAMS += tests/native/test_native
TESTS += tests/native/test_native
tests_native_test_native_SOURCES = tests/native/test_native.c tests/unit/mp_harness.c
tests_native_test_native_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) \
	-DNATIVE_MODULE_DIR=\"$(abs_top_builddir)/tests/native/.libs\"
tests_native_test_native_LDADD = libmscclpp.la $(CHECK_LIBS)
endif
if HAVE_CHECK
TESTS += tests/native/test_native_hook.sh
endif
EXTRA_DIST += tests/native/test_native_hook.sh
EXTRA_DIST += examples/native/allreduce_native_cuda.cu examples/native/allreduce_native_hip.hip
# mscclpp-bench --native and the tuner with a native candidate (needs the modules above).
if HAVE_CHECK
TESTS += tests/native/test_native_tune.sh
endif
EXTRA_DIST += tests/native/test_native_tune.sh
