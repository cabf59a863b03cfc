"""A custom communicator on the library's default algorithms (MSCCL++'s torch-integration
example customized_comm_with_default_algo.py, approach 1 of seed 002).

    python3 customized_comm_with_default_algo.py --nranks 2        # forks 2 ranks
    MSCCLPP_MASTER_ADDR=<ip> MSCCLPP_MASTER_PORT=<port> \\
        torchrun --nproc_per_node=8 customized_comm_with_default_algo.py

With PyTorch and CUDA the tensors are torch tensors on the GPU; otherwise NumPy arrays on the
host backend. Each rank checks the bytes it gets back.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mscclpp  # noqa: E402
from _launch import Tensors, launch  # noqa: E402


def load_algorithms(scratch_buffer, scratch_buffer_size, rank):
    collection_builder = mscclpp.AlgorithmCollectionBuilder()
    return collection_builder.build_default_algorithms(
        scratch_buffer=scratch_buffer, scratch_buffer_size=scratch_buffer_size, rank=rank)


class CustomizedComm:
    def __init__(self, comm, tensors):
        self.comm = comm
        self.t = tensors
        self.scratch = mscclpp.RawGpuBuffer(1 << 20)
        algorithms = load_algorithms(self.scratch.data(), self.scratch.bytes(), comm.my_rank)
        # pick by name, as MSCCL++ code does
        self._algo_small = [a for a in algorithms if a.collective == "allreduce"
                            and a.name == "default_allreduce_nvls_packet"][0]
        self._algo_large = [a for a in algorithms if a.collective == "allreduce"
                            and a.name == "default_allreduce_nvls_warp_pipeline"][0]
        self._allgather = [a for a in algorithms if a.name == "default_allgather"][0]

    def all_reduce(self, tensor, op=None):
        algo = self._algo_small if tensor.nbytes < (1 << 20) else self._algo_large
        algo.execute(comm=self.comm.communicator, input_buffer=self.t.ptr(tensor),
                     output_buffer=self.t.ptr(tensor), input_size=tensor.nbytes,
                     output_size=tensor.nbytes, dtype=self.t.dtype(tensor),
                     op=op if op is not None else mscclpp.ReduceOp.SUM, stream=self.t.stream())

    def all_gather(self, tensor, out):
        self._allgather.execute(self.comm.communicator, self.t.ptr(tensor), self.t.ptr(out),
                                tensor.nbytes, out.nbytes, self.t.dtype(tensor),
                                stream=self.t.stream())


def main(rank, world, trio):
    t = Tensors()
    comm = mscclpp.CommGroup(interfaceIpPortTrio=trio, rank=rank, size=world)
    cc = CustomizedComm(comm, t)
    for n in (1024, 300000):   # one small, one large message (both algorithms)
        x = t.empty(n)
        t.fill(x, [float((rank + 1) * (i % 13)) for i in range(n)])
        cc.all_reduce(x)
        t.synchronize()
        got = t.host(x)
        total = world * (world + 1) // 2
        want = [float(total * (i % 13)) for i in range(n)]
        assert list(got) == want, f"rank {rank}: allreduce of {n} floats differs"
    n = 4096
    x, out = t.empty(n), t.empty(n * world)
    t.fill(x, [float(rank * 100000 + i) for i in range(n)])
    cc.all_gather(x, out)
    t.synchronize()
    want = [float(r * 100000 + i) for r in range(world) for i in range(n)]
    assert list(t.host(out)) == want, f"rank {rank}: allgather differs"
    comm.barrier()
    print(f"rank {rank}: allreduce and allgather correct")


if __name__ == "__main__":
    sys.exit(launch(main))
