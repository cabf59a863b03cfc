# kernels/: the plan interpreter (common), compiled for the host (gcc), CUDA (nvcc), HIP (hipcc)
noinst_HEADERS += kernels/common/kern_entry.h
libmscclpp_la_SOURCES += kernels/host/kern_host.c
