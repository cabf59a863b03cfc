# hal/: the ops table, the module loader and the built-in host backend
noinst_HEADERS += hal/hal.h
