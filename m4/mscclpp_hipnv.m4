dnl MSCCLPP_CHECK_HIPNV: --with-hipnv. The HIP backend module built a second time, for NVIDIA
dnl GPUs (HIP's NVIDIA platform): hal/hip's sources against vendor/hipnv's mapping of the HIP API
dnl onto the CUDA runtime, and kernels/hip/kern_hip.hip through nvcc. Needs only what the CUDA
dnl backend needs (nvcc, cuda_runtime.h, libcudart), so it is built whenever that is, unless
dnl --without-hipnv. MSCCLPP_HAL=hip then runs the HIP code on an NVIDIA GPU (docs/gpu.md).
dnl Call after MSCCLPP_CHECK_CUDA.
AC_DEFUN([MSCCLPP_CHECK_HIPNV], [
  AC_REQUIRE([MSCCLPP_CHECK_CUDA])
  AC_ARG_WITH([hipnv],
    [AS_HELP_STRING([--with-hipnv], [build the HIP module for NVIDIA GPUs too, libmscclpp-hal-hipnv.so (default: when the CUDA module is built)])],
    [], [with_hipnv=check])
  AC_ARG_VAR([HIPNV_ARCHS], [CUDA architectures of the HIP-on-NVIDIA kernel (default: 90, with PTX for newer GPUs)])
  mscclpp_have_hipnv=no
  mscclpp_hipnv_summary=""
  AS_CASE([$with_hipnv],
    [no], [],
    [yes|check], [
      AS_IF([test "x$mscclpp_have_cuda" = xyes], [mscclpp_have_hipnv=yes],
        [test "x$with_hipnv" = xyes],
        [AC_MSG_ERROR([--with-hipnv needs the CUDA toolkit the CUDA module uses (--with-cuda)])])],
    [AC_MSG_ERROR([--with-hipnv takes no directory (it uses --with-cuda's toolkit), not '$with_hipnv'])])
  AS_IF([test "x$mscclpp_have_hipnv" = xyes], [
    AS_IF([test -z "$HIPNV_ARCHS"], [HIPNV_ARCHS="90"])
    HIPNV_GENCODE=""
    last=""
    for a in $HIPNV_ARCHS; do HIPNV_GENCODE="$HIPNV_GENCODE -gencode arch=compute_$a,code=sm_$a"; last=$a; done
    dnl PTX of the newest target too: a newer GPU compiles it at load time
    HIPNV_GENCODE="$HIPNV_GENCODE -gencode arch=compute_$last,code=compute_$last"
    mscclpp_hipnv_summary="($NVCC, archs: $HIPNV_ARCHS + PTX; MSCCLPP_HAL=hip on NVIDIA GPUs)"
    AC_DEFINE([MSCCLPP_HAVE_HIPNV], [1], [HIP module for NVIDIA GPUs (hal/hipnv) is built])
  ])
  AC_SUBST([HIPNV_GENCODE])
  AM_CONDITIONAL([HAVE_HIPNV], [test "x$mscclpp_have_hipnv" = xyes])
])
