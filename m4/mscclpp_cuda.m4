dnl MSCCLPP_CHECK_CUDA: --with-cuda[=DIR]. Finds nvcc, cuda_runtime.h and libcudart.
dnl Never links -lcuda: driver entry points are fetched at run time.
AC_DEFUN([MSCCLPP_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [build the CUDA backend module (default: detect in /usr/local/cuda)])],
    [], [with_cuda=check])
  AC_ARG_VAR([NVCC], [CUDA compiler])
  AC_ARG_VAR([CUDA_ARCHS], [CUDA architectures, e.g. "80 90" (default: 80 90 and newer the toolkit knows)])
  mscclpp_have_cuda=no
  mscclpp_cuda_summary=""
  AS_IF([test "x$with_cuda" != xno], [
    AS_CASE([$with_cuda], [yes|check], [cuda_home=/usr/local/cuda], [cuda_home=$with_cuda])
    AS_IF([test -z "$NVCC"], [NVCC="$cuda_home/bin/nvcc"])
    AS_IF([test -x "$NVCC" && test -f "$cuda_home/include/cuda_runtime.h"], [
      cuda_libdir="$cuda_home/lib64"
      AS_IF([test -d "$cuda_libdir"], [], [cuda_libdir="$cuda_home/lib"])
      save_LIBS=$LIBS; save_LDFLAGS=$LDFLAGS; save_CPPFLAGS=$CPPFLAGS
      LDFLAGS="$LDFLAGS -L$cuda_libdir"; CPPFLAGS="$CPPFLAGS -I$cuda_home/include"
      AC_CHECK_LIB([cudart], [cudaGetDeviceCount], [mscclpp_have_cuda=yes], [], [-lstdc++])
      LIBS=$save_LIBS; LDFLAGS=$save_LDFLAGS; CPPFLAGS=$save_CPPFLAGS
    ])
    AS_IF([test "x$mscclpp_have_cuda" = xno && test "x$with_cuda" != xcheck],
      [AC_MSG_ERROR([--with-cuda given but nvcc/cuda_runtime.h/libcudart not found under $cuda_home])])
  ])
  AS_IF([test "x$mscclpp_have_cuda" = xyes], [
    AS_IF([test -z "$CUDA_ARCHS"], [
      CUDA_ARCHS="80 90"
      for a in 100 120; do
        AS_IF([$NVCC --list-gpu-arch 2>/dev/null | grep -q "compute_$a\$"], [CUDA_ARCHS="$CUDA_ARCHS $a"])
      done
    ])
    CUDA_GENCODE=""
    for a in $CUDA_ARCHS; do CUDA_GENCODE="$CUDA_GENCODE -gencode arch=compute_$a,code=sm_$a"; done
    CUDA_CPPFLAGS="-I$cuda_home/include"
    CUDA_LIBS="-L$cuda_libdir -Wl,-rpath,$cuda_libdir -lcudart -lstdc++"
    CUDA_HOME=$cuda_home
    mscclpp_cuda_summary="($NVCC, archs: $CUDA_ARCHS)"
    AC_DEFINE([MSCCLPP_HAVE_CUDA], [1], [CUDA backend module is built])
  ])
  AC_SUBST([CUDA_HOME]) AC_SUBST([CUDA_CPPFLAGS]) AC_SUBST([CUDA_LIBS]) AC_SUBST([CUDA_GENCODE])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$mscclpp_have_cuda" = xyes])
])
