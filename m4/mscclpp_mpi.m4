dnl MSCCLPP_CHECK_MPI: --with-mpi. MPI bootstrap (mscclpp_mpi.h) and mpiexec tests.
dnl Uses pkg-config (mpich, ompi) and mpiexec on PATH.
AC_DEFUN([MSCCLPP_CHECK_MPI], [
  AC_ARG_WITH([mpi],
    [AS_HELP_STRING([--with-mpi], [build the MPI bootstrap and MPI tests (default: detect MPICH)])],
    [], [with_mpi=check])
  mscclpp_have_mpi=no
  mscclpp_mpi_summary=""
  AS_IF([test "x$with_mpi" != xno], [
    PKG_CHECK_MODULES([MPI], [mpich], [mscclpp_have_mpi=yes MPI_PC_MODULE=mpich],
      [PKG_CHECK_MODULES([MPI], [ompi], [mscclpp_have_mpi=yes MPI_PC_MODULE=ompi],
        [mscclpp_have_mpi=no])])
    AC_PATH_PROGS([MPIEXEC], [mpiexec.hydra mpiexec], [])
    AS_IF([test -z "$MPIEXEC"], [mscclpp_have_mpi=no])
    AS_IF([test "x$mscclpp_have_mpi" = xno && test "x$with_mpi" != xcheck],
      [AC_MSG_ERROR([--with-mpi given but MPI (pkg-config mpich/ompi and mpiexec) was not found (apt-get install mpich libmpich-dev)])])
  ])
  AS_IF([test "x$mscclpp_have_mpi" = xyes], [
    mscclpp_mpi_summary="($MPIEXEC)"
    AC_DEFINE([MSCCLPP_HAVE_MPI], [1], [MPI bootstrap])
  ])
  AC_SUBST([MPI_CFLAGS]) AC_SUBST([MPI_LIBS]) AC_SUBST([MPIEXEC])
  dnl mscclpp_mpi.pc requires the same pkg-config module (mscclpp_mpi.h includes mpi.h).
  AC_SUBST([MPI_PC_MODULE])
  AM_CONDITIONAL([HAVE_MPI], [test "x$mscclpp_have_mpi" = xyes])
])
