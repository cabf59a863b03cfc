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
# A killed rank or node: survivors fail naming it in time, and no library thread survives
# their teardown (issue 10 item 8)
if HAVE_CHECK
check_PROGRAMS += tests/multinode/test_kill_threads
TESTS += tests/multinode/test_kill_threads
tests_multinode_test_kill_threads_SOURCES = tests/multinode/test_kill_threads.c \
	tests/unit/mp_harness.c
tests_multinode_test_kill_threads_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_multinode_test_kill_threads_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(JANSSON_LIBS) $(CHECK_LIBS) -ldl
endif
# Every survivor of a rank killed during bootstrap, context setup or a stream of calls names
# that rank, on one node and across 2 (issue 22 item 5)
if HAVE_CHECK
check_PROGRAMS += tests/multinode/test_culprit
TESTS += tests/multinode/test_culprit
tests_multinode_test_culprit_SOURCES = tests/multinode/test_culprit.c tests/unit/mp_harness.c
tests_multinode_test_culprit_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_multinode_test_culprit_LDADD = libmscclpp.la $(CHECK_LIBS) -lpthread
endif
# ib without a device: discovery, argument and error paths (test_ib); its data path needs a
# device and skips with the reason without one (test_ib_device) (issue 10 item 10)
if HAVE_CHECK
check_PROGRAMS += tests/multinode/test_ib tests/multinode/test_ib_device
TESTS += tests/multinode/test_ib tests/multinode/test_ib_device
tests_multinode_test_ib_SOURCES = tests/multinode/test_ib.c tests/unit/mp_harness.c
tests_multinode_test_ib_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_multinode_test_ib_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(JANSSON_LIBS) $(CHECK_LIBS) -ldl
tests_multinode_test_ib_device_SOURCES = tests/multinode/test_ib_device.c tests/unit/mp_harness.c
tests_multinode_test_ib_device_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_multinode_test_ib_device_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(JANSSON_LIBS) $(CHECK_LIBS) -ldl
endif
# 64 ranks as 8 namespace nodes (opt-in: MSCCLPP_TEST_SCALE=1; skipped otherwise)
TESTS += tests/multinode/test_scale.sh
EXTRA_DIST += tests/multinode/test_scale.sh
# port ppkt (packets relayed over a port channel): allgather_pkt_2x1 with rppkt renamed ppkt
EXTRA_DIST += tests/multinode/allgather_ppkt_port_2x1.json tests/multinode/mn_link.h
# plans retired from plans/multinode/ (made plans serve those layouts), kept as fixtures
EXTRA_DIST += tests/multinode/plans/2x1/allreduce.json tests/multinode/plans/2x1/allreduce-pkt.json \
	tests/multinode/plans/2x1/allgather.json tests/multinode/plans/2x1/allgather-pkt.json \
	tests/multinode/plans/2x1/reducescatter.json tests/multinode/plans/2x1/reducescatter-pkt.json \
	tests/multinode/plans/2x2/allgather.json tests/multinode/plans/2x2/allgather-pkt.json \
	tests/multinode/plans/2x2/allreduce.json tests/multinode/plans/2x2/allreduce-pkt.json \
	tests/multinode/plans/2x2/reducescatter.json
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
# Memory and port channels together on forced nodes: the launch fence through the proxy, and
# a failed proxy seen by a memory-channel wait (issue 8)
if HAVE_CHECK
check_PROGRAMS += tests/multinode/test_mixed
TESTS += tests/multinode/test_mixed
tests_multinode_test_mixed_SOURCES = tests/multinode/test_mixed.c tests/unit/mp_harness.c
tests_multinode_test_mixed_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_multinode_test_mixed_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(JANSSON_LIBS) $(CHECK_LIBS) -ldl
endif
# ucx staging through pinned host memory (issue 10 item 7), forced on the host backend:
# the copy helper, the decision, a staged put's signal order, the default plans, every byte
if HAVE_CHECK
check_PROGRAMS += tests/multinode/test_staging
TESTS += tests/multinode/test_staging
tests_multinode_test_staging_SOURCES = tests/multinode/test_staging.c tests/unit/mp_harness.c
tests_multinode_test_staging_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_multinode_test_staging_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(JANSSON_LIBS) $(CHECK_LIBS) -ldl
endif
# A peer killed in the middle of a UCX connection: the survivor gets an error naming it, never
# UCX 1.13's tcp assertion (issue 22)
if HAVE_CHECK
check_PROGRAMS += tests/multinode/test_ucx_death
TESTS += tests/multinode/test_ucx_death
tests_multinode_test_ucx_death_SOURCES = tests/multinode/test_ucx_death.c tests/unit/mp_harness.c
tests_multinode_test_ucx_death_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_multinode_test_ucx_death_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(JANSSON_LIBS) $(CHECK_LIBS) -ldl
endif
