# An MSCCL++-style program (written for libmscclpp's tests, in the style of MSCCL++'s DSL
# examples): reduce-scatter across nodes. Inside a node every rank reads its local peers'
# input chunks bound for its stripe (the ranks with its local index on every node) straight
# out of their input buffers and reduces them (memory-channel read-reduce); across nodes it
# sends each node partial to the rank of that node with its local index (port channel, put
# with signal into the peer's scratch), which adds up the node partials into its output.
#
#   python3 reducescatter.py --name reducescatter --nodes 2 --gpus_per_node 2 > plan.json

import argparse

from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *


def reducescatter(name, nodes, gpus_per_node):
    size = nodes * gpus_per_node
    with CollectiveProgram(name, ReduceScatter(size, 1, False), size, protocol="Simple",
                           min_message_size=0, max_message_size=2**64 - 1):
        # scratch: [0, nodes) this rank's node partials by destination node,
        # [nodes, 2 nodes) the partials of this rank's chunk sent by the other nodes
        scratch = [Buffer(r, 2 * nodes) for r in range(size)]
        intra, inter = {}, {}
        for r in range(size):
            node, gpu = divmod(r, gpus_per_node)
            for peer in range(gpus_per_node):
                if peer != gpu:
                    intra[r, node * gpus_per_node + peer] = MemoryChannel(
                        node * gpus_per_node + peer, r)
            for other in range(nodes):
                if other != node:
                    inter[r, other * gpus_per_node + gpu] = PortChannel(
                        other * gpus_per_node + gpu, r)

        def local_peers(r):
            node, gpu = divmod(r, gpus_per_node)
            return [node * gpus_per_node + (gpu + k) % gpus_per_node
                    for k in range(1, gpus_per_node)]

        def node_peers(r):
            node, gpu = divmod(r, gpus_per_node)
            return [((node + k) % nodes) * gpus_per_node + gpu for k in range(1, nodes)]

        for r in range(size):  # ready: inputs final, scratch slots free
            for p in local_peers(r):
                intra[r, p].signal(tb=0, relaxed=True, data_sync=SyncType.none)
            for p in node_peers(r):
                inter[r, p].signal(tb=0, data_sync=SyncType.none)
        for r in range(size):
            for p in local_peers(r):
                intra[r, p].wait(tb=0, relaxed=True, data_sync=SyncType.after)
            for p in node_peers(r):
                inter[r, p].wait(tb=0, data_sync=SyncType.after)

        for r in range(size):
            node, gpu = divmod(r, gpus_per_node)
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            for m in range(nodes):  # node partial of chunk (m, gpu)
                c = m * gpus_per_node + gpu
                src = inp[c:c + 1]
                for p in local_peers(r):
                    intra[r, p].reduce(src, [Rank(p).get_input_buffer()[c:c + 1]], tb=0,
                                       local_dst_chunk=scratch[r][m:m + 1])
                    src = scratch[r][m:m + 1]
                if not local_peers(r):  # one rank per node: the partial is the input
                    rank.copy(scratch[r][m:m + 1], inp[c:c + 1], tb=0)
            for p in node_peers(r):
                m = p // gpus_per_node
                inter[r, p].put_with_signal(scratch[p][nodes + node:nodes + node + 1],
                                            scratch[r][m:m + 1], tb=0)
            for p in node_peers(r):
                inter[r, p].wait(tb=0, data_sync=SyncType.after)
            rank.reduce(scratch[r][node:node + 1],
                        [scratch[r][nodes + p // gpus_per_node:nodes + p // gpus_per_node + 1]
                         for p in node_peers(r)], tb=0, dst_chunk=out[0:1])
            for p in node_peers(r):
                inter[r, p].flush(tb=0, data_sync=SyncType.none)
            # done reading the local peers' inputs: they may return
            for p in local_peers(r):
                intra[r, p].signal(tb=0, data_sync=SyncType.before)
            for p in local_peers(r):
                intra[r, p].wait(tb=0, data_sync=SyncType.after)
        print(JSON())


parser = argparse.ArgumentParser()
parser.add_argument("--name", type=str, default="reducescatter")
parser.add_argument("--nodes", type=int, default=2)
parser.add_argument("--gpus_per_node", type=int, default=2)
args = parser.parse_args()
reducescatter(args.name, args.nodes, args.gpus_per_node)
