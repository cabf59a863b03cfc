"""Ranks for tests/python/test_agree.py: ranks that disagree on a call's size or dtype get a
MscclppError saying so (issue 22), through a default algorithm (mscclpp_allreduce) and a DSL
plan (Executor.execute), and the next agreeing call is right. Run as
``python3 agree_ranks.py --nranks 2``; exits non-zero when a rank fails."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "python"))

import numpy as np  # noqa: E402

import mscclpp  # noqa: E402
from _launch import launch  # noqa: E402


def main(rank, world, trio):
    comm = mscclpp.CommGroup(interfaceIpPortTrio=trio, rank=rank, size=world)
    ex = mscclpp.Executor(comm.communicator)
    odd = rank == world - 1
    n = 4096
    bx, by = mscclpp.RawGpuBuffer(2 * n * 4), mscclpp.RawGpuBuffer(2 * n * 4)
    algos = mscclpp.AlgorithmCollectionBuilder().build_default_algorithms(rank=rank)
    ar = [a for a in algos if a.name == "default_allreduce"][0]
    # the one-hop packet allreduce: 0 to 32 KiB, the sizes below
    plan = mscclpp.ExecutionPlan(os.path.join(ROOT, "plans", f"allreduce_allpairs_{world}.json"),
                                 rank)

    def call(route, count, dtype):
        x = np.from_dlpack(bx.to_dlpack(dtype, [count]))
        y = np.from_dlpack(by.to_dlpack(dtype, [count]))
        x[:] = (np.arange(count) % 7 + rank + 1).astype(dtype)
        y[:] = 0
        nbytes = count * np.dtype(dtype).itemsize
        dt = getattr(mscclpp.DataType, dtype)
        if route == "default":
            ar.execute(comm.communicator, x.ctypes.data, y.ctypes.data, nbytes, nbytes, dt,
                       op=mscclpp.ReduceOp.SUM, executor=ex)
        else:
            ex.execute(rank, x.ctypes.data, y.ctypes.data, nbytes, nbytes, dt, plan,
                       op=mscclpp.ReduceOp.SUM)
        return y

    def agreeing(route):
        y = call(route, n, "float32")
        want = (np.arange(n) % 7) * world + world * (world + 1) // 2
        assert (y == want).all(), f"rank {rank} {route}: the agreeing call is wrong"

    cases = [("size", lambda r: call(r, 2 * n if odd else n, "float32")),
             ("dtype", lambda r: call(r, n, "int32" if odd else "float32"))]
    for route in ("default", "execute"):
        for what, bad in cases:
            for warm in (False, True):
                if warm:
                    agreeing(route)  # then only the odd rank changes its call
                try:
                    bad(route)
                except mscclpp.MscclppError as e:
                    assert "disagree" in str(e) and what in str(e), \
                        f"rank {rank} {route} {what}: {e}"
                else:
                    raise AssertionError(f"rank {rank} {route} {what}: a call the ranks "
                                         f"disagree on returned without an error")
                agreeing(route)
    # a size that is not a whole number of elements is refused, not cut short (issue 22)
    for route in ("default", "execute"):
        try:
            if route == "default":
                ar.execute(comm.communicator, bx.data(), by.data(), 1023, 1023,
                           mscclpp.DataType.float32, op=mscclpp.ReduceOp.SUM, executor=ex)
            else:
                ex.execute(rank, bx.data(), by.data(), 1023, 1023, mscclpp.DataType.float32,
                           plan, op=mscclpp.ReduceOp.SUM)
        except mscclpp.MscclppError as e:
            assert "1023" in str(e) and "whole number" in str(e), f"rank {rank} {route}: {e}"
        else:
            raise AssertionError(f"rank {rank} {route}: a 1023-byte float32 call was accepted")
    agreeing("default")
    comm.barrier()
    ex.close()
    comm.close()
    print(f"rank {rank}: every disagreement was an error")


if __name__ == "__main__":
    sys.exit(launch(main))
