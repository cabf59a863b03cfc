# executor/: plan loading and validation, registry, contexts, execute
noinst_HEADERS += executor/plan.h
libmscclpp_la_SOURCES += executor/executor.c executor/exec_port.c
noinst_HEADERS += executor/exec_port.h
