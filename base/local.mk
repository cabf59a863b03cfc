# base/: the bottom layer every other layer includes (results and the last error, logging,
# configuration variables, wire encoding, the clock and the one wait policy). It includes nothing
# of ours above it.
libmscclpp_la_SOURCES += base/status.c base/log.c base/config.c base/wait.c
noinst_HEADERS += base/debug.h base/config.h base/config_vars.h base/wire.h base/clock.h \
	base/wait.h
