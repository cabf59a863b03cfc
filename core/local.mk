# core/: communicator, memory, semaphores, channels
# (the bootstrap has its own fragment, core/bootstrap.mk)
libmscclpp_la_SOURCES += \
	core/comm.c core/comm_mem.c core/regmem.c core/semaphore.c core/memory_channel.c \
	core/wait_counter.c core/proxy.c core/port_channel.c core/port_setup.c
noinst_HEADERS += core/core.h core/proxy.h core/port_setup.h
