dnl MSCCLPP_CHECK_CHECK: the Check unit-test framework through pkg-config.
AC_DEFUN([MSCCLPP_CHECK_CHECK], [
  PKG_CHECK_MODULES([CHECK], [check >= 0.9.6], [mscclpp_have_check=yes],
    [mscclpp_have_check=no
     AC_MSG_WARN([Check not found: 'make check' will skip the unit suites (apt-get install check)])])
  AM_CONDITIONAL([HAVE_CHECK], [test "x$mscclpp_have_check" = xyes])
])
