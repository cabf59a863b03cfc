# An MSCCL++-style program (written for libmscclpp's tests, in the style of MSCCL++'s DSL
# examples): in-place LL (packet) allgather across nodes. Every rank packs its chunk into its
# scratch, sends the packets to its local peers over memory channels and to the next node's
# rank with the same local index over a port channel; each packet carries its own flag, so
# there are no signals: a rank forwards what arrives from the previous node (to its local peers
# and, but for the last step, on to the next node) as soon as it lands, and finally unpacks
# every chunk into its output. Double scratch: consecutive calls use alternate halves.
#
#   python3 allgather_pkt.py --name allgather_pkt --nodes 2 --gpus_per_node 2 > plan.json

import argparse

from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *


def allgather_pkt(name, nodes, gpus_per_node):
    size = nodes * gpus_per_node
    with CollectiveProgram(name, AllGather(size, 1, True), size, protocol="LL",
                           use_double_scratch_buffer=True, min_message_size=0,
                           max_message_size=2**64 - 1):
        scratch = [Buffer(r, size) for r in range(size)]
        intra, inter = {}, {}
        for r in range(size):
            node, gpu = divmod(r, gpus_per_node)
            for peer in range(gpus_per_node):
                if peer != gpu:
                    intra[r, node * gpus_per_node + peer] = MemoryChannel(
                        node * gpus_per_node + peer, r)
            if nodes > 1:
                nxt = ((node + 1) % nodes) * gpus_per_node + gpu
                inter[r] = PortChannel(nxt, r)

        for r in range(size):
            node, gpu = divmod(r, gpus_per_node)
            rank = Rank(r)
            out = rank.get_output_buffer()
            peers = [node * gpus_per_node + (gpu + k) % gpus_per_node
                     for k in range(1, gpus_per_node)]
            rank.copy_packets(scratch[r][r:r + 1], out[r:r + 1], tb=0)
            for p in peers:
                intra[r, p].read_put_packets(scratch[p][r:r + 1], scratch[r][r:r + 1], tb=0)
            nxt = inter[r].dst_rank
            inter[r].read_put_packets(scratch[nxt][r:r + 1], scratch[r][r:r + 1], tb=0)
            for step in range(1, nodes):
                c = ((node - step) % nodes) * gpus_per_node + gpu
                for p in peers:
                    intra[r, p].read_put_packets(scratch[p][c:c + 1], scratch[r][c:c + 1],
                                                 tb=0)
                if step < nodes - 1:
                    inter[r].read_put_packets(scratch[nxt][c:c + 1], scratch[r][c:c + 1],
                                              tb=0)
            for k in range(1, size):
                c = (r + k) % size
                rank.unpack_packets(out[c:c + 1], scratch[r][c:c + 1], tb=0)
        print(JSON())


parser = argparse.ArgumentParser()
parser.add_argument("--name", type=str, default="allgather_pkt")
parser.add_argument("--nodes", type=int, default=2)
parser.add_argument("--gpus_per_node", type=int, default=2)
args = parser.parse_args()
allgather_pkt(args.name, args.nodes, args.gpus_per_node)
