# tools/: mscclpp-info, mscclpp-bench
bin_PROGRAMS += tools/mscclpp-info
tools_mscclpp_info_SOURCES = tools/mscclpp-info.c
tools_mscclpp_info_LDADD = $(MSCCLPP_INTERNAL_LIBS) -ldl
