# executor/: the public calls (executor.c), contexts (context.c), executor and device state
# (state.c), port channels and their proxy (exec_port.c); see docs/architecture.md
noinst_HEADERS += executor/plan.h executor/executor.h executor/state.h
libmscclpp_la_SOURCES += executor/executor.c executor/context.c executor/state.c \
	executor/exec_port.c executor/plan_dirs.c
noinst_HEADERS += executor/exec_port.h executor/exec_forget.h
