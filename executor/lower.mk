# executor/lower.c: a loaded plan + call sizes + resolved resources -> interpreter launch args
libmscclpp_la_SOURCES += executor/lower.c
noinst_HEADERS += executor/lower.h
