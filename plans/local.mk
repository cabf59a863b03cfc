# plans/: default execution plans, installed into $(plandir), and the DSL programs that
# generate them (python3 -m mscclpp gen-default-plans; see plans/README.md).
dist_plandata_DATA += plans/allgather_1.json plans/allreduce_1.json plans/alltoall_1.json \
	plans/broadcast_1.json plans/reducescatter_1.json \
	plans/allgather_2.json plans/allgather_3.json plans/allgather_4.json \
	plans/allgather_5.json plans/allgather_6.json plans/allgather_7.json plans/allgather_8.json \
	plans/allreduce_pkt_2.json plans/allreduce_pkt_3.json plans/allreduce_pkt_4.json \
	plans/allreduce_pkt_5.json plans/allreduce_pkt_6.json plans/allreduce_pkt_7.json \
	plans/allreduce_pkt_8.json plans/allreduce_simple_2.json plans/allreduce_simple_3.json \
	plans/allreduce_simple_4.json plans/allreduce_simple_5.json plans/allreduce_simple_6.json \
	plans/allreduce_simple_7.json plans/allreduce_simple_8.json plans/alltoall_2.json \
	plans/alltoall_3.json plans/alltoall_4.json plans/alltoall_5.json plans/alltoall_6.json \
	plans/alltoall_7.json plans/alltoall_8.json plans/broadcast_2.json plans/broadcast_3.json \
	plans/broadcast_4.json plans/broadcast_5.json plans/broadcast_6.json plans/broadcast_7.json \
	plans/broadcast_8.json plans/reducescatter_2.json plans/reducescatter_3.json \
	plans/reducescatter_4.json plans/reducescatter_5.json plans/reducescatter_6.json \
	plans/reducescatter_7.json plans/reducescatter_8.json
EXTRA_DIST += plans/README.md plans/_common.py plans/allgather.py plans/allreduce_pkt.py \
	plans/allreduce_simple.py plans/alltoall.py plans/broadcast.py plans/one_rank.py plans/reducescatter.py

# Backend-specific plans (plans/<backend>/) are registered before the generic ones, so they win
# where their ranges overlap: the host backend's allreduce switches from LL to Simple at 1 KiB.
planhostdir = $(plandir)/host
dist_planhost_DATA = \
	plans/host/allreduce_pkt_2.json plans/host/allreduce_pkt_3.json \
	plans/host/allreduce_pkt_4.json plans/host/allreduce_pkt_5.json \
	plans/host/allreduce_pkt_6.json plans/host/allreduce_pkt_7.json \
	plans/host/allreduce_pkt_8.json \
	plans/host/allreduce_simple_2.json plans/host/allreduce_simple_3.json \
	plans/host/allreduce_simple_4.json plans/host/allreduce_simple_5.json \
	plans/host/allreduce_simple_6.json plans/host/allreduce_simple_7.json \
	plans/host/allreduce_simple_8.json

# CUDA-tuned plans (plans/cuda/, chosen by measurement on an H100; docs/performance.md):
# more thread blocks per rank for large messages (Simple allreduce from 128/256 KiB).
plancudadir = $(plandir)/cuda
dist_plancuda_DATA = \
	plans/cuda/allgather_2.json plans/cuda/allgather_3.json plans/cuda/allgather_4.json \
	plans/cuda/allgather_5.json plans/cuda/allgather_6.json plans/cuda/allgather_7.json \
	plans/cuda/allgather_8.json plans/cuda/allreduce_simple_2.json \
	plans/cuda/allreduce_simple_3.json plans/cuda/allreduce_simple_4.json \
	plans/cuda/allreduce_simple_5.json plans/cuda/allreduce_simple_6.json \
	plans/cuda/allreduce_simple_7.json plans/cuda/allreduce_simple_8.json \
	plans/cuda/alltoall_2.json plans/cuda/alltoall_3.json plans/cuda/alltoall_4.json \
	plans/cuda/alltoall_5.json plans/cuda/alltoall_6.json plans/cuda/alltoall_7.json \
	plans/cuda/alltoall_8.json plans/cuda/broadcast_2.json plans/cuda/broadcast_3.json \
	plans/cuda/broadcast_4.json plans/cuda/broadcast_5.json plans/cuda/broadcast_6.json \
	plans/cuda/broadcast_7.json plans/cuda/broadcast_8.json plans/cuda/reducescatter_2.json \
	plans/cuda/reducescatter_3.json plans/cuda/reducescatter_4.json \
	plans/cuda/reducescatter_5.json plans/cuda/reducescatter_6.json \
	plans/cuda/reducescatter_7.json plans/cuda/reducescatter_8.json
