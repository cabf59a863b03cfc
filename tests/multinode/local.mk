# tests/multinode/: transports, port channels and several nodes on one machine
if HAVE_CHECK
check_PROGRAMS += tests/multinode/test_multinode
TESTS += tests/multinode/test_multinode
tests_multinode_test_multinode_SOURCES = tests/multinode/test_multinode.c tests/unit/mp_harness.c
tests_multinode_test_multinode_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_multinode_test_multinode_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(JANSSON_LIBS) $(CHECK_LIBS) -ldl
endif
# 2 nodes x 2 ranks as network namespaces through mscclpp-bench --nodes (skips without root/ip)
TESTS += tests/multinode/test_netns.sh
EXTRA_DIST += tests/multinode/test_netns.sh
# 64 ranks as 8 namespace nodes (opt-in: MSCCLPP_TEST_SCALE=1; skipped otherwise)
TESTS += tests/multinode/test_scale.sh
EXTRA_DIST += tests/multinode/test_scale.sh
# MSCCL++-style multi-node programs and their plans (run by test_conformance_multinode.sh)
EXTRA_DIST += tests/multinode/programs/build.py tests/multinode/programs/allgather_ring.py \
	tests/multinode/programs/allgather_pkt.py tests/multinode/programs/reducescatter.py \
	tests/multinode/programs/send_recv.py \
	tests/multinode/programs/allgather_ring_2x1.json \
	tests/multinode/programs/allgather_ring_2x2.json \
	tests/multinode/programs/allgather_ring_4x2.json \
	tests/multinode/programs/allgather_pkt_2x1.json \
	tests/multinode/programs/allgather_pkt_2x2.json \
	tests/multinode/programs/allgather_pkt_4x2.json \
	tests/multinode/programs/reducescatter_2x1.json \
	tests/multinode/programs/reducescatter_2x2.json \
	tests/multinode/programs/reducescatter_4x2.json tests/multinode/programs/send_recv_2x1.json \
	tests/multinode/programs/send_recv_2x2.json tests/multinode/programs/send_recv_4x2.json
