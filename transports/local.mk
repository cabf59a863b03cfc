# transports/: one ops table per transport (transport.h), chosen per pair of ranks
noinst_HEADERS += transports/transport.h transports/tp_check.h
libmscclpp_la_SOURCES += transports/transport.c transports/ipc/ipc.c transports/ucx/ucx.c \
	transports/ib/ib.c
libmscclpp_la_CPPFLAGS += $(UCX_CFLAGS) $(VERBS_CFLAGS)
libmscclpp_la_LIBADD += $(UCX_LIBS) $(VERBS_LIBS)
