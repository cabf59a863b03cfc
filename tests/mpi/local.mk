# tests/mpi/: multi-process tests run under $(MPIEXEC) -n 2, 4 and 8 by tests/mpi/mpi-run.sh.
# To add a test: build it as a check program here and append it to MPI_TEST_PROGS, e.g.
#   MPI_TEST_PROGS += tests/mpi/test_foo
#   check_PROGRAMS += tests/mpi/test_foo
#   tests_mpi_test_foo_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
#   tests_mpi_test_foo_LDADD = libmscclpp_mpi.la libmscclpp.la $(MPI_LIBS)
# (inside "if HAVE_MPI"). A program exits 0 on success, 77 to skip, anything else on failure.
MPI_TEST_PROGS =
EXTRA_DIST += tests/mpi/mpi-run.sh

if HAVE_MPI
MPI_TEST_PROGS += tests/mpi/test_mpi_bootstrap
check_PROGRAMS += tests/mpi/test_mpi_bootstrap
tests_mpi_test_mpi_bootstrap_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
tests_mpi_test_mpi_bootstrap_LDADD = libmscclpp_mpi.la libmscclpp.la $(MPI_LIBS)
MPI_TEST_PROGS += tests/mpi/test_mpi_channels
check_PROGRAMS += tests/mpi/test_mpi_channels
tests_mpi_test_mpi_channels_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
tests_mpi_test_mpi_channels_LDADD = libmscclpp_mpi.la libmscclpp.la $(MPI_LIBS)

# The TESTS entry: a generated wrapper that hands MPI_TEST_PROGS to mpi-run.sh.
check_SCRIPTS += tests/mpi/mpi-tests
TESTS += tests/mpi/mpi-tests
CLEANFILES += tests/mpi/mpi-tests
tests/mpi/mpi-tests: Makefile $(top_srcdir)/tests/mpi/mpi-run.sh
	$(AM_V_GEN)mkdir -p tests/mpi && { \
	  echo '#!/bin/sh'; \
	  echo 'exec $(SHELL) "$(abs_top_srcdir)/tests/mpi/mpi-run.sh" $(MPI_TEST_PROGS) "$$@"'; \
	} > $@.tmp && chmod +x $@.tmp && mv $@.tmp $@
endif
