# An MSCCL++-style program (written for libmscclpp's tests, in the style of MSCCL++'s DSL
# examples): in-place allgather across nodes. Inside a node every rank stores its chunk
# straight into its local peers' output buffers over memory channels; across nodes the ranks
# with the same local index form a ring of port channels, and each step forwards the chunk
# received in the previous one to the next node, then hands it on to the local peers.
#
#   python3 allgather_ring.py --name allgather_ring --nodes 2 --gpus_per_node 2 > plan.json

import argparse

from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *


def allgather_ring(name, nodes, gpus_per_node):
    size = nodes * gpus_per_node
    with CollectiveProgram(name, AllGather(size, 1, True), size, protocol="Simple",
                           min_message_size=0, max_message_size=2**64 - 1):
        intra = {}
        ring_next, ring_prev = {}, {}
        for r in range(size):
            node, gpu = divmod(r, gpus_per_node)
            for peer in range(gpus_per_node):
                if peer != gpu:
                    intra[(r, node * gpus_per_node + peer)] = MemoryChannel(
                        node * gpus_per_node + peer, r)
        for r in range(size):
            node, gpu = divmod(r, gpus_per_node)
            nxt = ((node + 1) % nodes) * gpus_per_node + gpu
            prv = ((node - 1) % nodes) * gpus_per_node + gpu
            if nodes == 2 and r > nxt:
                # two nodes: next and previous are the same peer; make the channels in the
                # opposite order on the higher rank so each one pairs with its counterpart
                ring_prev[r] = PortChannel(prv, r)
                ring_next[r] = PortChannel(nxt, r)
            else:
                ring_next[r] = PortChannel(nxt, r)
                ring_prev[r] = PortChannel(prv, r)

        def local_peers(r):
            node, gpu = divmod(r, gpus_per_node)
            return [node * gpus_per_node + (gpu + k) % gpus_per_node
                    for k in range(1, gpus_per_node)]

        # everyone ready: no rank writes into an output buffer still being read
        for r in range(size):
            for p in local_peers(r):
                intra[(r, p)].signal(tb=0, relaxed=True, data_sync=SyncType.none)
            ring_prev[r].signal(tb=0, data_sync=SyncType.none)
        for r in range(size):
            for p in local_peers(r):
                intra[(r, p)].wait(tb=0, relaxed=True, data_sync=SyncType.after)
            ring_next[r].wait(tb=0, data_sync=SyncType.after)

        for r in range(size):
            node, gpu = divmod(r, gpus_per_node)
            out = Rank(r).get_output_buffer()
            # my own chunk: to the local peers and to the next node
            for p in local_peers(r):
                intra[(r, p)].put(Rank(p).get_output_buffer()[r:r + 1], out[r:r + 1], tb=0)
            nxt_out = Rank(ring_next[r].dst_rank).get_output_buffer()
            ring_next[r].put_with_signal(nxt_out[r:r + 1], out[r:r + 1], tb=0)
            # nodes - 1 steps around the ring: forward what came from the previous node
            for step in range(1, nodes):
                src_node = (node - step) % nodes
                c = src_node * gpus_per_node + gpu
                ring_prev[r].wait(tb=0, data_sync=SyncType.after)
                for p in local_peers(r):
                    intra[(r, p)].put(Rank(p).get_output_buffer()[c:c + 1], out[c:c + 1], tb=0)
                if step < nodes - 1:
                    ring_next[r].put_with_signal(nxt_out[c:c + 1], out[c:c + 1], tb=0)
            ring_next[r].flush(tb=0, data_sync=SyncType.none)
            for p in local_peers(r):
                intra[(r, p)].signal(tb=0, data_sync=SyncType.before)
            for p in local_peers(r):
                intra[(r, p)].wait(tb=0, data_sync=SyncType.after)
        print(JSON())


parser = argparse.ArgumentParser()
parser.add_argument("--name", type=str, default="allgather_ring")
parser.add_argument("--nodes", type=int, default=2)
parser.add_argument("--gpus_per_node", type=int, default=2)
args = parser.parse_args()
allgather_ring(args.name, args.nodes, args.gpus_per_node)
