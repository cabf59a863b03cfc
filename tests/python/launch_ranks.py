"""Ranks for tests/python/test_native.py: nblocks / nthreads_per_block reach the C library's
mscclpp_execute_launch from Executor.execute, Algorithm.execute (DSL and default algorithms)
and native algorithms. Run as ``python3 launch_ranks.py --nranks 2``; exits non-zero when a
rank fails."""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "python"))

import numpy as np  # noqa: E402

import mscclpp  # noqa: E402
from _launch import launch  # noqa: E402


def raises(fn, *needles):
    try:
        fn()
    except mscclpp.MscclppError as e:
        for n in needles:
            assert n in str(e), f"expected {n!r} in: {e}"
        return
    raise AssertionError(f"no error; expected one saying {needles}")


def main(rank, world, trio):
    comm = mscclpp.CommGroup(interfaceIpPortTrio=trio, rank=rank, size=world)
    ex = mscclpp.Executor(comm.communicator)
    n = 1 << 17   # 512 KiB: the size range of the 2-rank Simple plan
    bx, by = mscclpp.RawGpuBuffer(n * 4), mscclpp.RawGpuBuffer(n * 4)
    x = np.from_dlpack(bx.to_dlpack("float32", [n]))
    y = np.from_dlpack(by.to_dlpack("float32", [n]))
    pattern = (np.arange(n) % 7).astype(np.float32)
    want = pattern * (world * (world + 1) // 2)

    # a DSL plan through Executor.execute
    path = os.path.join(ROOT, "plans", f"allreduce_simple_{world}.json")
    plan = mscclpp.ExecutionPlan(path, rank)
    nb = json.load(open(path))["gpus"][rank]["threadblocks"].__len__()
    x[:] = pattern * (rank + 1)
    run = lambda **kw: ex.execute(rank, x.ctypes.data, y.ctypes.data, n * 4, n * 4,  # noqa
                                  mscclpp.DataType.float32, plan, op=mscclpp.ReduceOp.SUM, **kw)
    raises(lambda: run(nblocks=nb + 1), f"runs {nb} thread blocks per rank; nblocks={nb + 1}")
    raises(lambda: run(nthreads_per_block=2000), "nthreads_per_block 2000 is not in [0, 1024]")
    y[:] = 0
    run(nblocks=nb, nthreads_per_block=64)
    assert (y == want).all(), f"rank {rank}: DSL plan with a launch shape"

    # the same plan as an Algorithm (what CompiledAlgorithm.execute runs)
    algo = mscclpp.Algorithm(plan.name, "allreduce", plan=plan)
    arun = lambda **kw: algo.execute(comm.communicator, x.ctypes.data, y.ctypes.data,  # noqa
                                     n * 4, n * 4, mscclpp.DataType.float32,
                                     op=mscclpp.ReduceOp.SUM, executor=ex, **kw)
    raises(lambda: arun(nblocks=nb + 2), f"nblocks={nb + 2} needs a plan variant")
    raises(lambda: arun(nthreads_per_block=1025), "nthreads_per_block 1025 is not in")
    y[:] = 0
    arun(nthreads_per_block=8)
    assert (y == want).all(), f"rank {rank}: DSL algorithm with a launch shape"

    # a default algorithm with a launch shape: the plan it selects, through execute_launch
    algos = mscclpp.AlgorithmCollectionBuilder().build_default_algorithms(rank=rank)
    ar = [a for a in algos if a.name == "default_allreduce"][0]
    go = lambda **kw: ar.execute(comm.communicator, x.ctypes.data, y.ctypes.data, n * 4,  # noqa
                                 n * 4, mscclpp.DataType.float32, op=mscclpp.ReduceOp.SUM,
                                 executor=ex, **kw)
    raises(lambda: go(nthreads_per_block=4096), "nthreads_per_block 4096 is not in [0, 1024]")
    raises(lambda: go(nblocks=999), "nblocks=999")
    y[:] = 0
    go(nthreads_per_block=32)
    assert (y == want).all(), f"rank {rank}: default allreduce with a launch shape"

    # a native algorithm sees the values themselves
    mod = mscclpp.compile_native("probe", os.path.join(ROOT, "tests", "native", "test_modules.c"),
                                 extra_flags=["-DVARIANT_PROBE"])
    probe = mod.algorithm("probe_allreduce")
    assert probe.is_native_algorithm() and probe.collective == "allreduce"
    for nbk, nth, expect in ((0, 0, (7, 96)), (5, 77, (5, 77)), (1, 4096, (1, 4096))):
        probe.execute(comm.communicator, x.ctypes.data, y.ctypes.data, 64, 64,
                      mscclpp.DataType.int32, executor=ex, nblocks=nbk, nthreads_per_block=nth)
        got = np.from_dlpack(by.to_dlpack("int32", [10]))
        assert tuple(got[:2]) == expect, f"rank {rank}: native got {tuple(got[:2])}"
        assert got[3] == 0 and got[4] == int(mscclpp.DataType.int32) and got[5] == rank
    try:
        probe.execute(comm.communicator, x.ctypes.data, y.ctypes.data, 64, 64,
                      mscclpp.DataType.int32, executor=ex, nblocks=-1)
        raise AssertionError("nblocks=-1 accepted")
    except ValueError:
        pass
    comm.barrier()
    ex.close()
    comm.close()
    print(f"rank {rank}: launch parameters reach the library")


if __name__ == "__main__":
    sys.exit(launch(main))
