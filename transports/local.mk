# transports/: one ops table per transport (transport.h), chosen per pair of ranks
noinst_HEADERS += transports/transport.h transports/tp_check.h transports/tp_fault.h \
	transports/ipc/ipc_map.h
libmscclpp_la_SOURCES += transports/tp_util.c transports/tp_registry.c transports/tp_fault.c \
	transports/ipc/ipc.c transports/ipc/ipc_map.c transports/ucx/ucx.c \
	transports/ib/ib.c
libmscclpp_la_CPPFLAGS += $(UCX_CFLAGS) $(VERBS_CFLAGS)
libmscclpp_la_LIBADD += $(UCX_LIBS) $(VERBS_LIBS)
