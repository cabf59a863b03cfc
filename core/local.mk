# core/: results, logging, configuration, communicator, memory, semaphores, channels
# (the bootstrap has its own fragment, core/bootstrap.mk)
libmscclpp_la_SOURCES += \
	core/status.c core/log.c core/config.c \
	core/comm.c core/regmem.c core/semaphore.c core/memory_channel.c core/proxy.c \
	core/port_channel.c
noinst_HEADERS += core/debug.h core/config.h core/config_vars.h core/core.h core/wire.h core/proxy.h
