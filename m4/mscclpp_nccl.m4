dnl MSCCLPP_CHECK_NCCL: the NCCL API library (nccl/) needs the toolkit's nccl.h (the ABI it
dnl implements) and cuda_runtime.h, which nccl.h includes; the tests also link a program with
dnl the real libnccl.so.2 when one is found. --with-nccl=DIR names the NCCL prefix.
AC_DEFUN([MSCCLPP_CHECK_NCCL], [
  AC_ARG_WITH([nccl],
    [AS_HELP_STRING([--with-nccl@<:@=DIR@:>@],
      [build libmscclpp_nccl against DIR/include/nccl.h (default: the CUDA toolkit's)])],
    [], [with_nccl=check])
  mscclpp_have_nccl=no
  mscclpp_nccl_summary=""
  NCCL_CPPFLAGS=""
  REAL_NCCL_LIBDIR=""
  AS_IF([test "x$with_nccl" != xno], [
    cuda_inc="${CUDA_HOME:-/usr/local/cuda}/include"
    AS_CASE([$with_nccl], [yes|check], [nccl_dirs="$cuda_inc /usr/local/cuda/include /usr/include"],
            [nccl_dirs="$with_nccl/include"])
    for d in $nccl_dirs; do
      AS_IF([test -f "$d/nccl.h"], [
        save_CPPFLAGS=$CPPFLAGS
        CPPFLAGS="$CPPFLAGS -I$d -I$cuda_inc"
        AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <nccl.h>]],
          [[ncclUniqueId id; return (int)sizeof id + (int)ncclNumTypes;]])],
          [mscclpp_have_nccl=yes; NCCL_CPPFLAGS="-I$d -I$cuda_inc"])
        CPPFLAGS=$save_CPPFLAGS
        AS_IF([test "x$mscclpp_have_nccl" = xyes], [
          for l in "$d/../lib" "$d/../lib64" /usr/lib/x86_64-linux-gnu; do
            AS_IF([test -z "$REAL_NCCL_LIBDIR" && test -f "$l/libnccl.so.2"],
                  [REAL_NCCL_LIBDIR=`cd "$l" && pwd`])
          done
          mscclpp_nccl_summary="($d/nccl.h, real library: ${REAL_NCCL_LIBDIR:-none})"
          break
        ])
      ])
    done
    AS_IF([test "x$mscclpp_have_nccl" = xno && test "x$with_nccl" != xcheck],
      [AC_MSG_ERROR([--with-nccl given but no usable nccl.h was found])])
  ])
  AC_SUBST([NCCL_CPPFLAGS]) AC_SUBST([REAL_NCCL_LIBDIR])
  AM_CONDITIONAL([BUILD_NCCL], [test "x$mscclpp_have_nccl" = xyes])
  AM_CONDITIONAL([HAVE_REAL_NCCL], [test -n "$REAL_NCCL_LIBDIR"])
])
