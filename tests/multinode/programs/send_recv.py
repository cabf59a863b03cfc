# An MSCCL++-style program (written for libmscclpp's tests, in the style of MSCCL++'s DSL
# examples): send/recv around a ring of all ranks over port channels (rank r's output is rank
# r - 1's input). Ranks are node-major, so the hop from a node's last rank to the next node's
# first crosses the network; the hops inside a node go through the proxy too (ipc).
#
#   python3 send_recv.py --name send_recv --nodes 2 --gpus_per_node 2 > plan.json

import argparse

from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *


def send_recv(name, nodes, gpus_per_node, instances):
    size = nodes * gpus_per_node
    with CollectiveProgram(name, SendRecv(size, 1, False), size, protocol="Simple",
                           instances=instances, min_message_size=0,
                           max_message_size=2**64 - 1):
        to_next, to_prev = {}, {}
        for r in range(size):
            nxt, prv = (r + 1) % size, (r - 1) % size
            if nxt == prv and r > nxt:
                # two ranks: next and previous are one peer; opposite creation order on the
                # higher rank pairs each channel with its counterpart
                to_prev[r] = PortChannel(prv, r)
                to_next[r] = PortChannel(nxt, r)
            else:
                to_next[r] = PortChannel(nxt, r)
                to_prev[r] = PortChannel(prv, r)
        for r in range(size):
            # tell the previous rank my output is free, wait for the same from the next
            to_prev[r].signal(tb=0, data_sync=SyncType.none)
            to_next[r].wait(tb=0, data_sync=SyncType.after)
            dst = Rank(to_next[r].dst_rank).get_output_buffer()
            src = Rank(r).get_input_buffer()
            to_next[r].put_with_signal(dst[0:1], src[0:1], tb=0)
            to_prev[r].wait(tb=0, data_sync=SyncType.after)
            to_next[r].flush(tb=0, data_sync=SyncType.none)
        print(JSON())


parser = argparse.ArgumentParser()
parser.add_argument("--name", type=str, default="send_recv")
parser.add_argument("--nodes", type=int, default=2)
parser.add_argument("--gpus_per_node", type=int, default=2)
parser.add_argument("--instances", type=int, default=1)
args = parser.parse_args()
send_recv(args.name, args.nodes, args.gpus_per_node, args.instances)
