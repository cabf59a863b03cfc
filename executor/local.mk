# executor/: plan loading and validation, registry, contexts, execute
noinst_HEADERS += executor/plan.h
