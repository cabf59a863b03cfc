dnl MSCCLPP_CHECK_VERBS: --with-verbs[=DIR] (libibverbs; devices are probed at run time).
AC_DEFUN([MSCCLPP_CHECK_VERBS], [
  AC_ARG_WITH([verbs],
    [AS_HELP_STRING([--with-verbs@<:@=DIR@:>@], [build the ibverbs transport (default: detect)])],
    [], [with_verbs=check])
  mscclpp_have_verbs=no
  AS_CASE([$with_verbs],
    [no], [],
    [yes|check], [PKG_CHECK_MODULES([VERBS], [libibverbs], [mscclpp_have_verbs=yes], [mscclpp_have_verbs=no])],
    [VERBS_CFLAGS="-I$with_verbs/include"; VERBS_LIBS="-L$with_verbs/lib -libverbs"
     save_CPPFLAGS=$CPPFLAGS; CPPFLAGS="$CPPFLAGS $VERBS_CFLAGS"
     AC_CHECK_HEADER([infiniband/verbs.h], [mscclpp_have_verbs=yes])
     CPPFLAGS=$save_CPPFLAGS])
  AS_IF([test "x$mscclpp_have_verbs" = xno && test "x$with_verbs" != xcheck && test "x$with_verbs" != xno],
    [AC_MSG_ERROR([--with-verbs given but libibverbs was not found (apt-get install libibverbs-dev)])])
  AS_IF([test "x$mscclpp_have_verbs" = xyes], [AC_DEFINE([MSCCLPP_HAVE_VERBS], [1], [ibverbs transport])])
  AC_SUBST([VERBS_CFLAGS]) AC_SUBST([VERBS_LIBS])
  AM_CONDITIONAL([HAVE_VERBS], [test "x$mscclpp_have_verbs" = xyes])
])
