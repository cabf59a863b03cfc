# executor/layout.c: chunk and scratch geometry of a call, and how plan ops split into kern ops
# executor/lower.c: a loaded plan + call layout + resolved resources -> interpreter program
libmscclpp_la_SOURCES += executor/layout.c executor/lower.c
noinst_HEADERS += executor/layout.h executor/lower.h
