# plans/: default execution plans, installed into $(plandir), and the DSL programs that
# generate them (python3 -m mscclpp gen-default-plans; see plans/README.md).
dist_plandata_DATA += \
	plans/allgather_1.json plans/allreduce_1.json plans/alltoall_1.json plans/broadcast_1.json \
	plans/reducescatter_1.json plans/allgather_2.json plans/allgather_3.json \
	plans/allgather_4.json plans/allgather_5.json plans/allgather_6.json \
	plans/allgather_7.json plans/allgather_8.json plans/allreduce_allpairs_2.json \
	plans/allreduce_allpairs_3.json plans/allreduce_allpairs_4.json \
	plans/allreduce_allpairs_5.json plans/allreduce_allpairs_6.json \
	plans/allreduce_allpairs_7.json plans/allreduce_allpairs_8.json \
	plans/allreduce_allpairs_ip_2.json plans/allreduce_allpairs_ip_3.json \
	plans/allreduce_allpairs_ip_4.json plans/allreduce_allpairs_ip_5.json \
	plans/allreduce_allpairs_ip_6.json plans/allreduce_allpairs_ip_7.json \
	plans/allreduce_allpairs_ip_8.json plans/allreduce_pkt_2.json plans/allreduce_pkt_3.json \
	plans/allreduce_pkt_4.json plans/allreduce_pkt_5.json plans/allreduce_pkt_6.json \
	plans/allreduce_pkt_7.json plans/allreduce_pkt_8.json plans/allreduce_pkt_ip_2.json \
	plans/allreduce_pkt_ip_3.json plans/allreduce_pkt_ip_4.json plans/allreduce_pkt_ip_5.json \
	plans/allreduce_pkt_ip_6.json plans/allreduce_pkt_ip_7.json plans/allreduce_pkt_ip_8.json \
	plans/allreduce_simple_2.json plans/allreduce_simple_3.json plans/allreduce_simple_4.json \
	plans/allreduce_simple_5.json plans/allreduce_simple_6.json plans/allreduce_simple_7.json \
	plans/allreduce_simple_8.json plans/allreduce_simple_ip_2.json \
	plans/allreduce_simple_ip_3.json plans/allreduce_simple_ip_4.json \
	plans/allreduce_simple_ip_5.json plans/allreduce_simple_ip_6.json \
	plans/allreduce_simple_ip_7.json plans/allreduce_simple_ip_8.json plans/alltoall_2.json \
	plans/alltoall_3.json plans/alltoall_4.json plans/alltoall_5.json plans/alltoall_6.json \
	plans/alltoall_7.json plans/alltoall_8.json plans/broadcast_2.json plans/broadcast_3.json \
	plans/broadcast_4.json plans/broadcast_5.json plans/broadcast_6.json \
	plans/broadcast_7.json plans/broadcast_8.json plans/reducescatter_2.json \
	plans/reducescatter_3.json plans/reducescatter_4.json plans/reducescatter_5.json \
	plans/reducescatter_6.json plans/reducescatter_7.json plans/reducescatter_8.json
EXTRA_DIST += plans/README.md plans/_common.py plans/allgather.py plans/allreduce_allpairs.py \
	plans/allreduce_pkt.py \
	plans/allreduce_simple.py plans/alltoall.py plans/broadcast.py plans/one_rank.py plans/reducescatter.py

# Backend-specific plans (plans/<backend>/) are registered before the generic ones, so they win
# where their ranges overlap: the host backend's allreduce switches from LL to Simple above 64 B.
planhostdir = $(plandir)/host
dist_planhost_DATA = \
	plans/host/allreduce_pkt_2.json plans/host/allreduce_pkt_3.json \
	plans/host/allreduce_pkt_4.json plans/host/allreduce_pkt_5.json \
	plans/host/allreduce_pkt_6.json plans/host/allreduce_pkt_7.json \
	plans/host/allreduce_pkt_8.json plans/host/allreduce_pkt_ip_2.json \
	plans/host/allreduce_pkt_ip_3.json plans/host/allreduce_pkt_ip_4.json \
	plans/host/allreduce_pkt_ip_5.json plans/host/allreduce_pkt_ip_6.json \
	plans/host/allreduce_pkt_ip_7.json plans/host/allreduce_pkt_ip_8.json \
	plans/host/allreduce_simple_2.json plans/host/allreduce_simple_3.json \
	plans/host/allreduce_simple_4.json plans/host/allreduce_simple_5.json \
	plans/host/allreduce_simple_6.json plans/host/allreduce_simple_7.json \
	plans/host/allreduce_simple_8.json plans/host/allreduce_simple_ip_2.json \
	plans/host/allreduce_simple_ip_3.json plans/host/allreduce_simple_ip_4.json \
	plans/host/allreduce_simple_ip_5.json plans/host/allreduce_simple_ip_6.json \
	plans/host/allreduce_simple_ip_7.json plans/host/allreduce_simple_ip_8.json

# CUDA-tuned plans (plans/cuda/, chosen by measurement on an H100; docs/performance.md):
# more thread blocks per rank for large messages (Simple allreduce from 128/256 KiB), and one
# block per rank for the LL allreduce up to 1 KiB (measured on an H200, session 9).
plancudadir = $(plandir)/cuda
dist_plancuda_DATA = \
	plans/cuda/allreduce_allpairs_small_2.json plans/cuda/allreduce_allpairs_small_3.json \
	plans/cuda/allreduce_allpairs_small_4.json plans/cuda/allreduce_allpairs_small_5.json \
	plans/cuda/allreduce_allpairs_small_6.json plans/cuda/allreduce_allpairs_small_7.json \
	plans/cuda/allreduce_allpairs_small_8.json plans/cuda/allreduce_allpairs_ip_small_2.json \
	plans/cuda/allreduce_allpairs_ip_small_3.json plans/cuda/allreduce_allpairs_ip_small_4.json \
	plans/cuda/allreduce_allpairs_ip_small_5.json plans/cuda/allreduce_allpairs_ip_small_6.json \
	plans/cuda/allreduce_allpairs_ip_small_7.json plans/cuda/allreduce_allpairs_ip_small_8.json \
	plans/cuda/allgather_2.json plans/cuda/allgather_3.json plans/cuda/allgather_4.json \
	plans/cuda/allgather_5.json plans/cuda/allgather_6.json plans/cuda/allgather_7.json \
	plans/cuda/allgather_8.json plans/cuda/allreduce_simple_2.json \
	plans/cuda/allreduce_simple_3.json plans/cuda/allreduce_simple_4.json \
	plans/cuda/allreduce_simple_5.json plans/cuda/allreduce_simple_6.json \
	plans/cuda/allreduce_simple_7.json plans/cuda/allreduce_simple_8.json \
	plans/cuda/allreduce_simple_ip_2.json plans/cuda/allreduce_simple_ip_3.json \
	plans/cuda/allreduce_simple_ip_4.json plans/cuda/allreduce_simple_ip_5.json \
	plans/cuda/allreduce_simple_ip_6.json plans/cuda/allreduce_simple_ip_7.json \
	plans/cuda/allreduce_simple_ip_8.json plans/cuda/alltoall_2.json \
	plans/cuda/alltoall_3.json plans/cuda/alltoall_4.json plans/cuda/alltoall_5.json \
	plans/cuda/alltoall_6.json plans/cuda/alltoall_7.json plans/cuda/alltoall_8.json \
	plans/cuda/broadcast_2.json plans/cuda/broadcast_3.json plans/cuda/broadcast_4.json \
	plans/cuda/broadcast_5.json plans/cuda/broadcast_6.json plans/cuda/broadcast_7.json \
	plans/cuda/broadcast_8.json plans/cuda/reducescatter_2.json \
	plans/cuda/reducescatter_3.json plans/cuda/reducescatter_4.json \
	plans/cuda/reducescatter_5.json plans/cuda/reducescatter_6.json \
	plans/cuda/reducescatter_7.json plans/cuda/reducescatter_8.json
# Direct plans (plans/direct/: the peers' input and output addressed directly, the fewest bytes;
# the generic ones are installed, not loaded by default: plans/README.md).
plandirectdir = $(plandir)/direct
dist_plandirect_DATA = \
	plans/direct/allgather_direct_2.json plans/direct/allgather_direct_3.json \
	plans/direct/allgather_direct_4.json plans/direct/allgather_direct_5.json \
	plans/direct/allgather_direct_6.json plans/direct/allgather_direct_7.json \
	plans/direct/allgather_direct_8.json plans/direct/allgather_direct_ip_2.json \
	plans/direct/allgather_direct_ip_3.json plans/direct/allgather_direct_ip_4.json \
	plans/direct/allgather_direct_ip_5.json plans/direct/allgather_direct_ip_6.json \
	plans/direct/allgather_direct_ip_7.json plans/direct/allgather_direct_ip_8.json \
	plans/direct/allreduce_direct_2.json plans/direct/allreduce_direct_3.json \
	plans/direct/allreduce_direct_4.json plans/direct/allreduce_direct_5.json \
	plans/direct/allreduce_direct_6.json plans/direct/allreduce_direct_7.json \
	plans/direct/allreduce_direct_8.json plans/direct/allreduce_direct_ip_2.json \
	plans/direct/allreduce_direct_ip_3.json plans/direct/allreduce_direct_ip_4.json \
	plans/direct/allreduce_direct_ip_5.json plans/direct/allreduce_direct_ip_6.json \
	plans/direct/allreduce_direct_ip_7.json plans/direct/allreduce_direct_ip_8.json \
	plans/direct/alltoall_direct_2.json plans/direct/alltoall_direct_3.json \
	plans/direct/alltoall_direct_4.json plans/direct/alltoall_direct_5.json \
	plans/direct/alltoall_direct_6.json plans/direct/alltoall_direct_7.json \
	plans/direct/alltoall_direct_8.json plans/direct/broadcast_direct_2.json \
	plans/direct/broadcast_direct_3.json plans/direct/broadcast_direct_4.json \
	plans/direct/broadcast_direct_5.json plans/direct/broadcast_direct_6.json \
	plans/direct/broadcast_direct_7.json plans/direct/broadcast_direct_8.json \
	plans/direct/broadcast_direct_ip_2.json plans/direct/broadcast_direct_ip_3.json \
	plans/direct/broadcast_direct_ip_4.json plans/direct/broadcast_direct_ip_5.json \
	plans/direct/broadcast_direct_ip_6.json plans/direct/broadcast_direct_ip_7.json \
	plans/direct/broadcast_direct_ip_8.json plans/direct/reducescatter_direct_2.json \
	plans/direct/reducescatter_direct_3.json plans/direct/reducescatter_direct_4.json \
	plans/direct/reducescatter_direct_5.json plans/direct/reducescatter_direct_6.json \
	plans/direct/reducescatter_direct_7.json plans/direct/reducescatter_direct_8.json \
	plans/direct/reducescatter_direct_ip_2.json plans/direct/reducescatter_direct_ip_3.json \
	plans/direct/reducescatter_direct_ip_4.json plans/direct/reducescatter_direct_ip_5.json \
	plans/direct/reducescatter_direct_ip_6.json plans/direct/reducescatter_direct_ip_7.json \
	plans/direct/reducescatter_direct_ip_8.json
# The backends' direct plans (loaded before the backend's own with MSCCLPP_PLAN_DIRECT=on:
# executor/plan_dirs.c direct_default), the host's at its scratch plans' block counts
plandirecthostdir = $(plandir)/direct/host
dist_plandirecthost_DATA = \
	plans/direct/host/allgather_direct_2.json plans/direct/host/allgather_direct_3.json \
	plans/direct/host/allgather_direct_4.json plans/direct/host/allgather_direct_5.json \
	plans/direct/host/allgather_direct_6.json plans/direct/host/allgather_direct_7.json \
	plans/direct/host/allgather_direct_8.json plans/direct/host/allgather_direct_ip_2.json \
	plans/direct/host/allgather_direct_ip_3.json plans/direct/host/allgather_direct_ip_4.json \
	plans/direct/host/allgather_direct_ip_5.json plans/direct/host/allgather_direct_ip_6.json \
	plans/direct/host/allgather_direct_ip_7.json plans/direct/host/allgather_direct_ip_8.json \
	plans/direct/host/allreduce_direct_2.json plans/direct/host/allreduce_direct_3.json \
	plans/direct/host/allreduce_direct_4.json plans/direct/host/allreduce_direct_5.json \
	plans/direct/host/allreduce_direct_6.json plans/direct/host/allreduce_direct_7.json \
	plans/direct/host/allreduce_direct_8.json plans/direct/host/allreduce_direct_ip_2.json \
	plans/direct/host/allreduce_direct_ip_3.json plans/direct/host/allreduce_direct_ip_4.json \
	plans/direct/host/allreduce_direct_ip_5.json plans/direct/host/allreduce_direct_ip_6.json \
	plans/direct/host/allreduce_direct_ip_7.json plans/direct/host/allreduce_direct_ip_8.json \
	plans/direct/host/alltoall_direct_2.json plans/direct/host/alltoall_direct_3.json \
	plans/direct/host/alltoall_direct_4.json plans/direct/host/alltoall_direct_5.json \
	plans/direct/host/alltoall_direct_6.json plans/direct/host/alltoall_direct_7.json \
	plans/direct/host/alltoall_direct_8.json plans/direct/host/broadcast_direct_2.json \
	plans/direct/host/broadcast_direct_3.json plans/direct/host/broadcast_direct_4.json \
	plans/direct/host/broadcast_direct_5.json plans/direct/host/broadcast_direct_6.json \
	plans/direct/host/broadcast_direct_7.json plans/direct/host/broadcast_direct_8.json \
	plans/direct/host/broadcast_direct_ip_2.json plans/direct/host/broadcast_direct_ip_3.json \
	plans/direct/host/broadcast_direct_ip_4.json plans/direct/host/broadcast_direct_ip_5.json \
	plans/direct/host/broadcast_direct_ip_6.json plans/direct/host/broadcast_direct_ip_7.json \
	plans/direct/host/broadcast_direct_ip_8.json plans/direct/host/reducescatter_direct_2.json \
	plans/direct/host/reducescatter_direct_3.json plans/direct/host/reducescatter_direct_4.json \
	plans/direct/host/reducescatter_direct_5.json plans/direct/host/reducescatter_direct_6.json \
	plans/direct/host/reducescatter_direct_7.json plans/direct/host/reducescatter_direct_8.json \
	plans/direct/host/reducescatter_direct_ip_2.json \
	plans/direct/host/reducescatter_direct_ip_3.json \
	plans/direct/host/reducescatter_direct_ip_4.json \
	plans/direct/host/reducescatter_direct_ip_5.json \
	plans/direct/host/reducescatter_direct_ip_6.json \
	plans/direct/host/reducescatter_direct_ip_7.json \
	plans/direct/host/reducescatter_direct_ip_8.json
# CUDA's direct plans at the CUDA plans' block counts and ranges (not loaded by default until a
# GPU run decides: scripts/gpu-check.sh step direct)
plandirectcudadir = $(plandir)/direct/cuda
dist_plandirectcuda_DATA = \
	plans/direct/cuda/allgather_direct_2.json plans/direct/cuda/allgather_direct_3.json \
	plans/direct/cuda/allgather_direct_4.json plans/direct/cuda/allgather_direct_5.json \
	plans/direct/cuda/allgather_direct_6.json plans/direct/cuda/allgather_direct_7.json \
	plans/direct/cuda/allgather_direct_8.json plans/direct/cuda/allgather_direct_ip_2.json \
	plans/direct/cuda/allgather_direct_ip_3.json plans/direct/cuda/allgather_direct_ip_4.json \
	plans/direct/cuda/allgather_direct_ip_5.json plans/direct/cuda/allgather_direct_ip_6.json \
	plans/direct/cuda/allgather_direct_ip_7.json plans/direct/cuda/allgather_direct_ip_8.json \
	plans/direct/cuda/allreduce_direct_2.json plans/direct/cuda/allreduce_direct_3.json \
	plans/direct/cuda/allreduce_direct_4.json plans/direct/cuda/allreduce_direct_5.json \
	plans/direct/cuda/allreduce_direct_6.json plans/direct/cuda/allreduce_direct_7.json \
	plans/direct/cuda/allreduce_direct_8.json plans/direct/cuda/allreduce_direct_ip_2.json \
	plans/direct/cuda/allreduce_direct_ip_3.json plans/direct/cuda/allreduce_direct_ip_4.json \
	plans/direct/cuda/allreduce_direct_ip_5.json plans/direct/cuda/allreduce_direct_ip_6.json \
	plans/direct/cuda/allreduce_direct_ip_7.json plans/direct/cuda/allreduce_direct_ip_8.json \
	plans/direct/cuda/alltoall_direct_2.json plans/direct/cuda/alltoall_direct_3.json \
	plans/direct/cuda/alltoall_direct_4.json plans/direct/cuda/alltoall_direct_5.json \
	plans/direct/cuda/alltoall_direct_6.json plans/direct/cuda/alltoall_direct_7.json \
	plans/direct/cuda/alltoall_direct_8.json plans/direct/cuda/broadcast_direct_2.json \
	plans/direct/cuda/broadcast_direct_3.json plans/direct/cuda/broadcast_direct_4.json \
	plans/direct/cuda/broadcast_direct_5.json plans/direct/cuda/broadcast_direct_6.json \
	plans/direct/cuda/broadcast_direct_7.json plans/direct/cuda/broadcast_direct_8.json \
	plans/direct/cuda/broadcast_direct_ip_2.json plans/direct/cuda/broadcast_direct_ip_3.json \
	plans/direct/cuda/broadcast_direct_ip_4.json plans/direct/cuda/broadcast_direct_ip_5.json \
	plans/direct/cuda/broadcast_direct_ip_6.json plans/direct/cuda/broadcast_direct_ip_7.json \
	plans/direct/cuda/broadcast_direct_ip_8.json plans/direct/cuda/reducescatter_direct_2.json \
	plans/direct/cuda/reducescatter_direct_3.json plans/direct/cuda/reducescatter_direct_4.json \
	plans/direct/cuda/reducescatter_direct_5.json plans/direct/cuda/reducescatter_direct_6.json \
	plans/direct/cuda/reducescatter_direct_7.json plans/direct/cuda/reducescatter_direct_8.json \
	plans/direct/cuda/reducescatter_direct_ip_2.json \
	plans/direct/cuda/reducescatter_direct_ip_3.json \
	plans/direct/cuda/reducescatter_direct_ip_4.json \
	plans/direct/cuda/reducescatter_direct_ip_5.json \
	plans/direct/cuda/reducescatter_direct_ip_6.json \
	plans/direct/cuda/reducescatter_direct_ip_7.json \
	plans/direct/cuda/reducescatter_direct_ip_8.json
EXTRA_DIST += plans/allgather_direct.py plans/allreduce_direct.py plans/alltoall_direct.py \
	plans/broadcast_direct.py plans/reducescatter_direct.py
# Multi-node plans (plans/multinode/<nodes>x<ranks per node>/, hierarchical, and packet plans
# for small messages, *-pkt.json), registered first
# when the communicator spans that many nodes of that many ranks (executor.c); the flat
# all-pairs variants (plans/multinode/flat/<K>x<L>/) are installed for comparison (--plan).
planmnflat2x1dir = $(plandir)/multinode/flat/2x1
dist_planmnflat2x1_DATA = \
	plans/multinode/flat/2x1/allgather.json \
	plans/multinode/flat/2x1/allreduce.json \
	plans/multinode/flat/2x1/alltoall.json \
	plans/multinode/flat/2x1/broadcast.json \
	plans/multinode/flat/2x1/reducescatter.json
planmnflat2x2dir = $(plandir)/multinode/flat/2x2
dist_planmnflat2x2_DATA = \
	plans/multinode/flat/2x2/allgather.json \
	plans/multinode/flat/2x2/allreduce.json \
	plans/multinode/flat/2x2/alltoall.json \
	plans/multinode/flat/2x2/broadcast.json \
	plans/multinode/flat/2x2/reducescatter.json
planmnflat2x3dir = $(plandir)/multinode/flat/2x3
dist_planmnflat2x3_DATA = \
	plans/multinode/flat/2x3/allgather.json \
	plans/multinode/flat/2x3/allreduce.json \
	plans/multinode/flat/2x3/alltoall.json \
	plans/multinode/flat/2x3/broadcast.json \
	plans/multinode/flat/2x3/reducescatter.json
planmnflat2x4dir = $(plandir)/multinode/flat/2x4
dist_planmnflat2x4_DATA = \
	plans/multinode/flat/2x4/allgather.json \
	plans/multinode/flat/2x4/allreduce.json \
	plans/multinode/flat/2x4/alltoall.json \
	plans/multinode/flat/2x4/broadcast.json \
	plans/multinode/flat/2x4/reducescatter.json
planmnflat4x2dir = $(plandir)/multinode/flat/4x2
dist_planmnflat4x2_DATA = \
	plans/multinode/flat/4x2/allgather.json \
	plans/multinode/flat/4x2/allreduce.json \
	plans/multinode/flat/4x2/alltoall.json \
	plans/multinode/flat/4x2/broadcast.json \
	plans/multinode/flat/4x2/reducescatter.json
planmn8x8dir = $(plandir)/multinode/8x8
dist_planmn8x8_DATA = \
	plans/multinode/8x8/allgather.json \
	plans/multinode/8x8/allreduce.json \
	plans/multinode/8x8/alltoall.json \
	plans/multinode/8x8/broadcast.json \
	plans/multinode/8x8/reducescatter.json
EXTRA_DIST += plans/multinode.py
