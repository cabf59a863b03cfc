"""A custom communicator running a DSL algorithm (MSCCL++'s torch-integration example
customized_comm_with_dsl.py, approach 2 of seed 002): the seed's allreduce over a switch channel,
compiled by ``mscclpp.compile`` and run through an ``Executor``.

    python3 customized_comm_with_dsl.py --nranks 2

With PyTorch and CUDA the tensors are torch tensors on the GPU; otherwise NumPy arrays on the
host backend, where the switch channel runs as a peer-memory reduction.
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mscclpp  # noqa: E402
from mscclpp.language.collectives import AllReduce  # noqa: E402
from mscclpp.language.channel import SwitchChannel, MemoryChannel, BufferType, SyncType  # noqa
from mscclpp.language.program import CollectiveProgram  # noqa: E402
from mscclpp.language.rank import Rank  # noqa: E402
from _launch import Tensors, launch  # noqa: E402


def allreduce_nvls(spec):
    gpu_size = spec.world_size
    with CollectiveProgram(spec.name, spec.collective, gpu_size, instances=spec.instances,
                           protocol=spec.protocol,
                           num_threads_per_block=spec.num_threads_per_block,
                           min_message_size=spec.min_message_size,
                           max_message_size=spec.max_message_size) as program:
        nvls_chan = SwitchChannel(rank_list=list(range(gpu_size)), buffer_type=BufferType.input)
        channels = {}
        for gpu in range(gpu_size):
            for peer in range(gpu_size):
                if peer != gpu:
                    channels[(peer, gpu)] = MemoryChannel(peer, gpu)
        for gpu in range(gpu_size):
            for peer in range(gpu_size):
                if peer != gpu:
                    channels[(peer, gpu)].signal(tb=0, relaxed=True)
            for peer in range(gpu_size):
                if peer != gpu:
                    channels[(peer, gpu)].wait(tb=0, relaxed=True, data_sync=SyncType.after)
        for gpu in range(gpu_size):
            buf = Rank(gpu).get_input_buffer()
            nvls_chan.at_rank(gpu).reduce(buffer_offset=gpu, size=1,
                                          dst_chunk=buf[gpu:gpu + 1], tb=0)
            nvls_chan.at_rank(gpu).broadcast(src_chunk=buf[gpu:gpu + 1], buffer_offset=gpu,
                                             size=1, tb=0)
        for gpu in range(gpu_size):
            for peer in range(gpu_size):
                if peer != gpu:
                    channels[(peer, gpu)].signal(tb=0, relaxed=True, data_sync=SyncType.before)
            for peer in range(gpu_size):
                if peer != gpu:
                    channels[(peer, gpu)].wait(tb=0, relaxed=True)
    return program


def setup_algorithm(rank, world_size, nranks_per_node):
    spec = mscclpp.language.AlgoSpec(
        name="allreduce_nvls", collective=AllReduce(world_size, 1, True),
        nranks_per_node=nranks_per_node, world_size=world_size, in_place=True,
        instances=nranks_per_node, protocol="Simple", num_threads_per_block=1024,
        min_message_size=0, max_message_size=48 << 30, tags={"nvls": 1})
    return mscclpp.compile(algo=allreduce_nvls, algo_spec=spec, rank=rank)


class CustomizedComm:
    def __init__(self, comm, algorithm, tensors):
        self.comm = comm
        self.t = tensors
        self.executor = mscclpp.Executor(comm.communicator)
        self.algorithm = algorithm

    def all_reduce(self, tensor):
        self.algorithm.execute(comm=self.comm.communicator, executor=self.executor,
                               input_buffer=self.t.ptr(tensor), output_buffer=self.t.ptr(tensor),
                               input_size=tensor.nbytes, output_size=tensor.nbytes,
                               dtype=self.t.dtype(tensor), stream=self.t.stream())


def main(rank, world, trio):
    t = Tensors()
    comm = mscclpp.CommGroup(interfaceIpPortTrio=trio, rank=rank, size=world)
    algorithm = setup_algorithm(rank, world, comm.nranks_per_node)
    cc = CustomizedComm(comm, algorithm, t)
    n = 1 << 16
    x = t.empty(n)
    t.fill(x, [float((rank + 1) * (i % 11)) for i in range(n)])
    cc.all_reduce(x)
    t.synchronize()
    total = world * (world + 1) // 2
    assert list(t.host(x)) == [float(total * (i % 11)) for i in range(n)], \
        f"rank {rank}: DSL allreduce differs"
    comm.barrier()
    print(f"rank {rank}: DSL allreduce correct")


if __name__ == "__main__":
    # keep the example's compiled plan out of the user's cache unless told otherwise
    os.environ.setdefault("MSCCLPP_CACHE_DIR", tempfile.mkdtemp(prefix="mscclpp-example-"))
    sys.exit(launch(main))
