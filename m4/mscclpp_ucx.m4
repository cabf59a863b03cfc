dnl MSCCLPP_CHECK_UCX: --with-ucx[=DIR] through pkg-config (or DIR/include, DIR/lib).
AC_DEFUN([MSCCLPP_CHECK_UCX], [
  AC_ARG_WITH([ucx],
    [AS_HELP_STRING([--with-ucx@<:@=DIR@:>@], [build the UCX transport (default: detect)])],
    [], [with_ucx=check])
  mscclpp_have_ucx=no
  AS_CASE([$with_ucx],
    [no], [],
    [yes|check], [PKG_CHECK_MODULES([UCX], [ucx >= 1.10], [mscclpp_have_ucx=yes], [mscclpp_have_ucx=no])],
    [UCX_CFLAGS="-I$with_ucx/include"; UCX_LIBS="-L$with_ucx/lib -lucp -luct -lucs"
     save_CPPFLAGS=$CPPFLAGS; CPPFLAGS="$CPPFLAGS $UCX_CFLAGS"
     AC_CHECK_HEADER([ucp/api/ucp.h], [mscclpp_have_ucx=yes])
     CPPFLAGS=$save_CPPFLAGS])
  AS_IF([test "x$mscclpp_have_ucx" = xno && test "x$with_ucx" != xcheck && test "x$with_ucx" != xno],
    [AC_MSG_ERROR([--with-ucx given but UCX was not found (apt-get install libucx-dev)])])
  AS_IF([test "x$mscclpp_have_ucx" = xyes], [AC_DEFINE([MSCCLPP_HAVE_UCX], [1], [UCX transport])])
  AC_SUBST([UCX_CFLAGS]) AC_SUBST([UCX_LIBS])
  AM_CONDITIONAL([HAVE_UCX], [test "x$mscclpp_have_ucx" = xyes])
])
