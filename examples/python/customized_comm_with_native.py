"""A custom communicator running a native algorithm (MSCCL++'s torch-integration example
customized_allgather.py, approach 3 of seed 002): a C (host backend) or CUDA (PyTorch on a GPU)
allreduce from examples/native, compiled by ``mscclpp.compile_native`` and run like any
algorithm.

    python3 customized_comm_with_native.py --nranks 2

The module is compiled once per source content (cached under ``<cache>/native/``); the library
loads it with dlopen and calls its ``execute`` with every rank's buffers mapped in.
"""

import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import mscclpp  # noqa: E402
from _launch import Tensors, launch  # noqa: E402

NATIVE = os.path.join(os.path.dirname(HERE), "native")


class CustomizedComm:
    def __init__(self, comm, tensors):
        self.comm = comm
        self.t = tensors
        # the C version runs on the host backend, the CUDA one with PyTorch on a GPU
        src, name = (("allreduce_native_cuda.cu", "native_allreduce_cuda") if tensors.torch
                     else ("allreduce_native.c", "native_allreduce_c"))
        module = mscclpp.compile_native(name="mscclpp_native", file=os.path.join(NATIVE, src))
        capsule = getattr(module, f"create_{name}_algorithm")()
        self.algorithm = mscclpp.Algorithm.create_from_native_capsule(capsule)
        self.executor = mscclpp.Executor(comm.communicator)

    def all_reduce(self, tensor, out=None, op=None, nblocks=0):
        out = tensor if out is None else out
        self.algorithm.execute(comm=self.comm.communicator, executor=self.executor,
                               input_buffer=self.t.ptr(tensor), output_buffer=self.t.ptr(out),
                               input_size=tensor.nbytes, output_size=out.nbytes,
                               dtype=self.t.dtype(tensor), op=op or mscclpp.ReduceOp.SUM,
                               stream=self.t.stream(), nblocks=nblocks)

    def close(self):
        self.executor.close()


def main(rank, world, trio):
    t = Tensors()
    comm = mscclpp.CommGroup(interfaceIpPortTrio=trio, rank=rank, size=world)
    cc = CustomizedComm(comm, t)
    for n in (1, 1000, 1 << 16):
        x = t.empty(n)
        y = t.empty(n)
        t.fill(x, [float((rank + 1) * (i % 11)) for i in range(n)])
        cc.all_reduce(x, y)                          # out of place
        cc.all_reduce(x, op=mscclpp.ReduceOp.MAX)    # in place
        t.synchronize()
        total = world * (world + 1) // 2
        assert list(t.host(y)) == [float(total * (i % 11)) for i in range(n)], \
            f"rank {rank}: native allreduce (sum, {n} elements) differs"
        assert list(t.host(x)) == [float(world * (i % 11)) for i in range(n)], \
            f"rank {rank}: native allreduce (max, {n} elements) differs"
    comm.barrier()
    cc.close()
    comm.close()
    print(f"rank {rank}: native allreduce correct")


if __name__ == "__main__":
    # keep the example's compiled module out of the user's cache unless told otherwise
    os.environ.setdefault("MSCCLPP_CACHE_DIR", tempfile.mkdtemp(prefix="mscclpp-example-"))
    sys.exit(launch(main))
