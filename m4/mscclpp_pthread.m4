dnl AX_PTHREAD_SIMPLE: -pthread for every compile and link (gcc and clang on Linux).
AC_DEFUN([AX_PTHREAD_SIMPLE], [
  PTHREAD_CFLAGS="-pthread"
  PTHREAD_LIBS="-pthread"
  AC_SUBST([PTHREAD_CFLAGS])
  AC_SUBST([PTHREAD_LIBS])
])
