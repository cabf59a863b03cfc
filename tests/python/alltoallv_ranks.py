"""Ranks for tests/python/test_alltoallv.py: Executor.alltoallv (mscclpp_alltoallv) with uneven
counts, zeros included, every received element and every gap element checked; packed and
explicit displacements, equal counts (the direct path), three element types, a stream, counts the ranks disagree on, and the
arguments Python refuses before the library sees them. Run as
``python3 alltoallv_ranks.py --nranks 3``; exits non-zero when a rank fails."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "python"))

import numpy as np  # noqa: E402

import mscclpp  # noqa: E402
from _launch import launch  # noqa: E402


def count(src, dst, world, seed):
    """Elements rank src sends rank dst: 0 for about a third of the pairs, 1 to 37 otherwise."""
    v = (src * 7 + dst * 13 + seed * 5 + world) % 11
    return 0 if v % 3 == 0 else 1 + (src * 17 + dst * 29 + seed * 3) % 37


def value(src, dst, t):
    return src * 1000 + dst * 100 + t % 97


def main(rank, world, trio):
    comm = mscclpp.CommGroup(interfaceIpPortTrio=trio, rank=rank, size=world)
    ex = mscclpp.Executor(comm.communicator)
    cap = 64 * 1024
    bs, br = mscclpp.RawGpuBuffer(cap * 8), mscclpp.RawGpuBuffer(cap * 8)
    seen = 0

    def run(seed, dtype, gaps, stream=0, zero=False, even=0):
        nonlocal seen
        sc = [even or (0 if zero else count(rank, j, world, seed)) for j in range(world)]
        rc = [even or (0 if zero else count(j, rank, world, seed)) for j in range(world)]
        send = np.from_dlpack(bs.to_dlpack(dtype, [cap]))
        recv = np.from_dlpack(br.to_dlpack(dtype, [cap]))
        if gaps:   # send blocks in reverse rank order, 1 element apart; receive blocks 2 apart
            sd, at = [0] * world, 3
            for j in reversed(range(world)):
                sd[j], at = at, at + sc[j] + 1
            rd, at = [0] * world, 1
            for j in range(world):
                rd[j], at = at, at + rc[j] + 2
        else:
            sd = list(np.cumsum([0] + sc[:-1]))
            rd = list(np.cumsum([0] + rc[:-1]))
        send[:] = -1
        recv[:] = -7
        for j in range(world):
            send[sd[j]:sd[j] + sc[j]] = [value(rank, j, t) for t in range(sc[j])]
        dt = getattr(mscclpp.DataType, dtype)
        if gaps:
            ex.alltoallv(bs, sc, br, rc, dt, send_displs=sd, recv_displs=rd, stream=stream)
        else:
            ex.alltoallv(bs, sc, br, rc, dt, stream=stream)
        if stream:
            stream.synchronize()
        want = np.full(cap, -7, dtype=dtype)
        for j in range(world):
            want[rd[j]:rd[j] + rc[j]] = [value(j, rank, t) for t in range(rc[j])]
        bad = np.nonzero(recv != want)[0]
        assert not len(bad), (f"rank {rank} seed {seed} {dtype} gaps={gaps}: element {bad[0]} "
                              f"is {recv[bad[0]]}, want {want[bad[0]]} ({len(bad)} wrong)")
        seen += sum(rc)

    for seed in range(3):
        run(seed, "float32", gaps=False)
        run(seed, "int32", gaps=True)
    run(5, "float16", gaps=True)
    run(6, "float32", gaps=False, zero=True)     # nothing moves anywhere
    run(0, "float32", gaps=False, even=19)       # equal packed blocks: the caller's buffers
    s = mscclpp.Stream()
    run(7, "int32", gaps=True, stream=s)
    s.close()

    # counts the ranks disagree on: every rank raises, nothing moves, the next call serves
    sc = [count(rank, j, world, 0) for j in range(world)]
    rc = [count(j, rank, world, 0) for j in range(world)]
    if rank == 0:
        sc[world - 1] += 1
    try:
        ex.alltoallv(bs, sc, br, rc, mscclpp.DataType.float32)
    except mscclpp.MscclppError as e:
        assert "disagree" in str(e), f"rank {rank}: {e}"
    else:
        raise AssertionError(f"rank {rank}: counts the ranks disagree on were accepted")
    run(1, "float32", gaps=True)

    # refused in Python, before any rank talks to another: every rank passes the same bad call
    for bad, needle in (([1] * (world + 1), "one per rank"), ([-1] + [0] * (world - 1), ">= 0"),
                        ([0.5] + [0] * (world - 1), ">= 0")):
        try:
            ex.alltoallv(bs, bad, br, [0] * world, mscclpp.DataType.float32)
        except ValueError as e:
            assert needle in str(e), f"rank {rank}: {e}"
        else:
            raise AssertionError(f"rank {rank}: send_counts {bad} were accepted")
    comm.barrier()
    ex.close()
    comm.close()
    print(f"rank {rank}: alltoallv right ({seen} elements received)")


if __name__ == "__main__":
    sys.exit(launch(main))
