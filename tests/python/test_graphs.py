"""Streams and graphs in the Python runtime (docs/graphs.md, issue 18 items 4 and 5) on the
host backend, 2 ranks as processes: stream arguments as mscclpp.Stream objects and as the int
handles of them; a default algorithm and a DSL plan captured into a graph with
Stream.begin_capture / end_capture and replayed with new data each time (every element
checked), mixed with direct calls; buffers passed as NumPy arrays (no address, no copy)."""

import os
import socket

import pytest

from mscclpp import runtime

np = pytest.importorskip("numpy", reason="NumPy holds the buffers")

pytestmark = pytest.mark.skipif(
    runtime.library_path() is None,
    reason="libmscclpp.so not built (run ./scripts/build.sh or set MSCCLPP_LIBRARY)")

from test_bindings import run_ranks  # noqa: E402


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _arrays(mscclpp, n, count):
    bufs = [mscclpp.RawGpuBuffer(count * 4) for _ in range(n)]
    return bufs, [np.from_dlpack(b.to_dlpack("float32", [count])) for b in bufs]


def _graph_replays(rank, n, trio):
    os.environ["MSCCLPP_HAL"] = "host"
    import mscclpp

    group = mscclpp.CommGroup(interfaceIpPortTrio=trio, rank=rank, size=n)
    comm = group.communicator
    algos = {a.name: a for a in mscclpp.AlgorithmCollectionBuilder().build_default_algorithms()}
    allreduce = algos["default_allreduce"]
    keep, (x, y, z) = _arrays(mscclpp, 3, 4096)
    s = mscclpp.Stream()
    t = mscclpp.Stream()

    # a direct call on a stream given as the int handle of an mscclpp.Stream
    x[:] = rank + 1
    allreduce.execute(comm, x, y, x.nbytes, y.nbytes, mscclpp.DataType.float32,
                      op=mscclpp.ReduceOp.SUM, stream=s.handle)
    s.synchronize()
    assert np.all(y == n * (n + 1) / 2)

    # captured: out of place and in place, replayed on both streams
    s.begin_capture()
    assert s.is_capturing() and not t.is_capturing()
    allreduce.execute(comm, x, y, x.nbytes, y.nbytes, mscclpp.DataType.float32,
                      op=mscclpp.ReduceOp.SUM, stream=s)
    allreduce.execute(comm, z, z, z.nbytes, z.nbytes, mscclpp.DataType.float32,
                      op=mscclpp.ReduceOp.MAX, stream=s)
    g = s.end_capture()
    assert not s.is_capturing()
    idx = np.arange(4096, dtype=np.float32)
    for rep in range(30):
        x[:] = idx % 101 + rank + rep
        z[:] = idx % 7 + rank * 10 + rep
        y[:] = -1
        on = t if rep % 2 else s
        g.launch(on)
        on.synchronize()
        assert np.array_equal(y, n * (idx % 101 + rep) + n * (n - 1) / 2), f"replay {rep}: y"
        assert np.array_equal(z, idx % 7 + (n - 1) * 10 + rep), f"replay {rep}: z"
        if rep % 5 == 4:  # a direct call of another shape between replays
            x[:1000] = rank
            allreduce.execute(comm, x[:1000], y[:1000], 4000, 4000, mscclpp.DataType.float32,
                              op=mscclpp.ReduceOp.SUM, stream=t)
            t.synchronize()
            assert np.all(y[:1000] == n * (n - 1) / 2)
    g.close()

    # a stream int that is no stream of ours: the host backend has nothing to wrap
    with pytest.raises(mscclpp.MscclppError, match="host backend has no native streams"):
        allreduce.execute(comm, x, y, x.nbytes, y.nbytes, mscclpp.DataType.float32,
                          op=mscclpp.ReduceOp.SUM, stream=0x1234)
    # the launch-shape path of an in-place call with no in-place plan (alltoall; allreduce has
    # _ip_ plans) stages synchronously: refused under capture, with the capture left intact
    s.begin_capture()
    with pytest.raises(mscclpp.MscclppError, match="captured stream"):
        algos["default_alltoall"].execute(comm, z, z, z.nbytes, z.nbytes,
                                          mscclpp.DataType.float32, stream=s,
                                          nthreads_per_block=256)
    s.end_capture().close()
    # a synchronize inside a capture is refused and loses the capture
    s.begin_capture()
    with pytest.raises(mscclpp.MscclppError, match="capturing"):
        s.synchronize()
    with pytest.raises(mscclpp.MscclppError, match="invalidated"):
        s.end_capture()
    s.close()
    t.close()
    group.barrier()
    group.close()
    del keep


def test_capture_and_replay_from_python():
    run_ranks(2, _graph_replays, f"127.0.0.1:{_free_port()}")
