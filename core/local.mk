# core/: results, logging, configuration, bootstrap, communicator, memory, semaphores, channels
libmscclpp_la_SOURCES += \
	core/status.c core/log.c core/config.c
noinst_HEADERS += core/debug.h core/config.h core/config_vars.h
