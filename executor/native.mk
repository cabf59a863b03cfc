# executor/native.c: native algorithms (modules of C/CUDA/HIP code loaded with dlopen, registered
# like plans; the module ABI is include/mscclpp/native.h)
libmscclpp_la_SOURCES += executor/native.c
noinst_HEADERS += executor/native_exec.h
mscclppinclude_HEADERS += include/mscclpp/native.h
libmscclpp_la_SOURCES += executor/plan_traffic.c
