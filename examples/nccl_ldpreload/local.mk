# examples/nccl_ldpreload: a DSL plan behind the NCCL API through LD_PRELOAD; run.sh is both
# the example's walk-through and its test.
EXTRA_DIST += examples/nccl_ldpreload/run.sh examples/nccl_ldpreload/allpairs_allreduce.py
if BUILD_NCCL
check_PROGRAMS += examples/nccl_ldpreload/nccl_ldpreload
examples_nccl_ldpreload_nccl_ldpreload_SOURCES = examples/nccl_ldpreload/nccl_ldpreload.c
examples_nccl_ldpreload_nccl_ldpreload_CPPFLAGS = $(NCCL_CPPFLAGS)
if HAVE_REAL_NCCL
# linked with NVIDIA's library, as an application would be; run.sh preloads ours
examples_nccl_ldpreload_nccl_ldpreload_LDFLAGS = -L$(REAL_NCCL_LIBDIR) \
	-Wl,-rpath,$(REAL_NCCL_LIBDIR)
examples_nccl_ldpreload_nccl_ldpreload_LDADD = -l:libnccl.so.2
else
examples_nccl_ldpreload_nccl_ldpreload_LDADD = libmscclpp_nccl.la
endif
endif
TESTS += examples/nccl_ldpreload/run.sh
