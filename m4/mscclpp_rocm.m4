dnl MSCCLPP_CHECK_ROCM: --with-rocm[=DIR]. Finds hipcc, hip/hip_runtime_api.h and libamdhip64.
AC_DEFUN([MSCCLPP_CHECK_ROCM], [
  AC_ARG_WITH([rocm],
    [AS_HELP_STRING([--with-rocm@<:@=DIR@:>@], [build the HIP backend module (default: detect hipcc on PATH or in /opt/rocm)])],
    [], [with_rocm=check])
  AC_ARG_VAR([HIPCC], [HIP compiler])
  AC_ARG_VAR([HIP_ARCHS], [AMD GPU targets (default: gfx90a gfx940)])
  mscclpp_have_rocm=no
  mscclpp_rocm_summary=""
  AS_IF([test "x$with_rocm" != xno], [
    AS_CASE([$with_rocm],
      [yes|check], [AS_IF([test -x /opt/rocm/bin/hipcc], [rocm_home=/opt/rocm], [rocm_home=/usr])],
      [rocm_home=$with_rocm])
    AS_IF([test -z "$HIPCC"], [HIPCC="$rocm_home/bin/hipcc"])
    AS_IF([test -x "$HIPCC" && test -f "$rocm_home/include/hip/hip_runtime_api.h"], [
      save_LIBS=$LIBS; save_LDFLAGS=$LDFLAGS
      AS_IF([test "$rocm_home" != /usr], [LDFLAGS="$LDFLAGS -L$rocm_home/lib"])
      AC_CHECK_LIB([amdhip64], [hipGetDeviceCount], [mscclpp_have_rocm=yes])
      LIBS=$save_LIBS; LDFLAGS=$save_LDFLAGS
    ])
    AS_IF([test "x$mscclpp_have_rocm" = xno && test "x$with_rocm" != xcheck],
      [AC_MSG_ERROR([--with-rocm given but hipcc/hip headers/libamdhip64 not found under $rocm_home])])
  ])
  AS_IF([test "x$mscclpp_have_rocm" = xyes], [
    AS_IF([test -z "$HIP_ARCHS"], [HIP_ARCHS="gfx90a gfx940"])
    HIP_OFFLOAD=""
    for a in $HIP_ARCHS; do HIP_OFFLOAD="$HIP_OFFLOAD --offload-arch=$a"; done
    HIP_CPPFLAGS="-D__HIP_PLATFORM_AMD__"
    AS_IF([test "$rocm_home" != /usr], [HIP_CPPFLAGS="$HIP_CPPFLAGS -I$rocm_home/include"])
    HIP_LIBS="-lamdhip64"
    AS_IF([test "$rocm_home" != /usr], [HIP_LIBS="-L$rocm_home/lib -Wl,-rpath,$rocm_home/lib $HIP_LIBS"])
    mscclpp_rocm_summary="($HIPCC, targets: $HIP_ARCHS)"
    AC_DEFINE([MSCCLPP_HAVE_ROCM], [1], [HIP backend module is built])
  ])
  AC_SUBST([HIP_CPPFLAGS]) AC_SUBST([HIP_LIBS]) AC_SUBST([HIP_OFFLOAD])
  AM_CONDITIONAL([HAVE_ROCM], [test "x$mscclpp_have_rocm" = xyes])
])
