# core/bootstrap.mk: the bootstrap (TCP always, MPI when configure found it) and its tests.
libmscclpp_la_SOURCES += core/bootstrap.c core/bootstrap_tcp.c core/socket.c
noinst_HEADERS += core/bootstrap.h core/socket.h

if HAVE_MPI
# The MPI bootstrap is its own library on the public custom-bootstrap API, so that libmscclpp
# never drags MPI (and its transports) into programs that do not use it.
lib_LTLIBRARIES += libmscclpp_mpi.la
libmscclpp_mpi_la_SOURCES = core/bootstrap_mpi.c
libmscclpp_mpi_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden $(MPI_CFLAGS)
libmscclpp_mpi_la_LIBADD = libmscclpp.la $(MPI_LIBS) $(PTHREAD_LIBS)
libmscclpp_mpi_la_LDFLAGS = -version-info 0:0:0 -no-undefined
mscclppinclude_HEADERS += include/mscclpp/mscclpp_mpi.h
else
EXTRA_DIST += core/bootstrap_mpi.c include/mscclpp/mscclpp_mpi.h
endif

if HAVE_CHECK
check_PROGRAMS += tests/unit/test_bootstrap
TESTS += tests/unit/test_bootstrap
tests_unit_test_bootstrap_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_bootstrap_LDADD = libmscclpp.la $(CHECK_LIBS)
endif
