"""The Python runtime names of seed 002 / MSCCL++ over the C library (ctypes), on the host
backend with NumPy, 2 ranks as processes. Every test checks the bytes that come back."""

import ctypes
import os
import socket
import traceback

import pytest

from mscclpp import runtime

np = pytest.importorskip("numpy", reason="NumPy is needed to exchange tensors through DLPack")

pytestmark = pytest.mark.skipif(
    runtime.library_path() is None,
    reason="libmscclpp.so not built (run ./scripts/build.sh or set MSCCLPP_LIBRARY)")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(n, fn, *args):
    """fn(rank, n, *args) in n forked processes; fails with the ranks' tracebacks."""
    pipes, pids = [], []
    for r in range(n):
        rd, wr = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rd)
            code, msg = 0, b""
            try:
                fn(r, n, *args)
            except BaseException:
                code, msg = 1, traceback.format_exc().encode()
            os.write(wr, msg)
            os._exit(code)
        os.close(wr)
        pipes.append(rd)
        pids.append(pid)
    errors = []
    for r, (pid, rd) in enumerate(zip(pids, pipes)):
        with os.fdopen(rd, "rb") as f:
            msg = f.read()
        _, status = os.waitpid(pid, 0)
        if status != 0:
            errors.append(f"rank {r}: {msg.decode(errors='replace')}")
    assert not errors, "\n".join(errors)


def test_names_exist_with_seed_signatures():
    import mscclpp
    import mscclpp.utils as mscclpp_utils

    for name in ("CommGroup", "Communicator", "Executor", "ExecutionPlan", "DataType",
                 "ReduceOp", "RawGpuBuffer", "is_nvls_supported", "AlgorithmCollectionBuilder",
                 "Algorithm"):
        assert getattr(mscclpp, name) is not None
    assert mscclpp.is_nvls_supported() is False
    assert mscclpp_utils.torch_dtype_to_mscclpp_dtype("torch.float16") == mscclpp.DataType.float16
    assert mscclpp_utils.torch_dtype_to_mscclpp_dtype("torch.bfloat16") == \
        mscclpp.DataType.bfloat16
    assert mscclpp_utils.torch_dtype_to_mscclpp_dtype("torch.int64") == mscclpp.DataType.int64
    assert mscclpp_utils.numpy_dtype_to_mscclpp_dtype(np.uint64) == mscclpp.DataType.uint64
    # the enum's values are the C library's
    from mscclpp.runtime import DTYPES
    for t in mscclpp.DataType:
        assert DTYPES[t.name.replace("float8_", "fp8_")] == int(t)
    with pytest.raises(ValueError):
        mscclpp_utils.torch_dtype_to_mscclpp_dtype("torch.complex64")
    assert int(mscclpp.ReduceOp.SUM) == 0 and int(mscclpp.DataType.float32) == 0


def test_raw_gpu_buffer_dlpack_is_the_allocation():
    import mscclpp

    buf = mscclpp.RawGpuBuffer(4096)
    a = np.from_dlpack(buf.to_dlpack(data_type="torch.float32"))
    assert a.shape == (1024,) and a.dtype == np.float32
    assert a.ctypes.data == buf.data()
    a[:] = np.arange(1024, dtype=np.float32)
    raw = ctypes.string_at(buf.data(), 16)
    assert np.frombuffer(raw, dtype=np.float32).tolist() == [0.0, 1.0, 2.0, 3.0]
    h = np.from_dlpack(buf.to_dlpack("float16", [2, 8]))
    assert h.shape == (2, 8) and h.dtype == np.float16
    with pytest.raises(ValueError):
        buf.to_dlpack("float32", [2048])
    del buf   # the arrays keep the memory alive through their DLPack deleters
    assert a[1023] == 1023.0


class FakeStore:
    """A torch.distributed Store stand-in: set/get of bytes in a shared directory."""

    def __init__(self, path):
        self.path = path

    def set(self, key, value):
        tmp = os.path.join(self.path, key + ".tmp")
        with open(tmp, "wb") as f:
            f.write(value)
        os.replace(tmp, os.path.join(self.path, key))

    def get(self, key):
        import time

        p = os.path.join(self.path, key)
        for _ in range(3000):
            if os.path.exists(p):
                with open(p, "rb") as f:
                    return f.read()
            time.sleep(0.01)
        raise TimeoutError(key)


def _allreduce_default(rank, n, how, arg):
    import mscclpp

    if how == "trio":
        group = mscclpp.CommGroup(interfaceIpPortTrio=arg, rank=rank, size=n)
    else:
        group = mscclpp.CommGroup(store=FakeStore(arg), rank=rank, size=n)
    assert group.my_rank == rank and group.nranks == n
    algos = mscclpp.AlgorithmCollectionBuilder().build_default_algorithms(0, 0, rank)
    ar = [a for a in algos if a.name == "default_allreduce" and a.collective == "allreduce"][0]
    buf = mscclpp.RawGpuBuffer(4 * 5000)
    x = np.from_dlpack(buf.to_dlpack("torch.float32"))
    x[:] = (rank + 1) * np.arange(5000, dtype=np.float32)
    ar.execute(group.communicator, x.ctypes.data, x.ctypes.data, x.nbytes, x.nbytes,
               mscclpp.DataType.float32, mscclpp.ReduceOp.SUM, nthreads_per_block=64,
               symmetric_memory=True)
    want = (n * (n + 1) // 2) * np.arange(5000, dtype=np.float32)
    assert np.array_equal(x, want), (rank, x[:8], want[:8])
    # the launch shape reaches the library, which checks it against the plan it selects
    with pytest.raises(mscclpp.MscclppError, match="nblocks=99 needs a plan variant"):
        ar.execute(group.communicator, x.ctypes.data, x.ctypes.data, x.nbytes, x.nbytes,
                   mscclpp.DataType.float32, mscclpp.ReduceOp.SUM, nblocks=99)
    with pytest.raises(ValueError):
        ar.execute(group.communicator, x.ctypes.data, x.ctypes.data, x.nbytes, x.nbytes,
                   mscclpp.DataType.float32, nblocks=-1)
    group.barrier()
    group.close()


def test_commgroup_from_trio_default_allreduce():
    run_ranks(2, _allreduce_default, "trio", f"127.0.0.1:{_free_port()}")


def test_commgroup_from_store_default_allreduce(tmp_path):
    run_ranks(2, _allreduce_default, "store", str(tmp_path))


def _executor_plan(rank, n, trio, plan_text):
    import mscclpp

    group = mscclpp.CommGroup(interfaceIpPortTrio=trio, rank=rank, size=n)
    ex = mscclpp.Executor(group.communicator)
    plan = mscclpp.ExecutionPlan(json=plan_text, rank=rank)
    assert plan.collective == "allgather" and plan.world_size == n
    count = 1000
    out = mscclpp.RawGpuBuffer(4 * count * n)
    o = np.from_dlpack(out.to_dlpack("float32"))
    send = o.ctypes.data + rank * 4 * count   # in place: this rank's slot of the output
    o[rank * count:(rank + 1) * count] = rank * 10000 + np.arange(count, dtype=np.float32)
    ex.execute(rank, send, o.ctypes.data, 4 * count, 4 * count * n, mscclpp.DataType.float32,
               plan, 0)
    want = np.concatenate([r * 10000 + np.arange(count, dtype=np.float32) for r in range(n)])
    assert np.array_equal(o, want)
    ex.close()
    group.close()


def test_executor_runs_execution_plan():
    import contextlib
    import io
    import runpy

    seeds = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(os.path.join(seeds, "simple_allgather.py"), run_name="__main__")
    run_ranks(2, _executor_plan, f"127.0.0.1:{_free_port()}", out.getvalue())


def _cached_plan_found(rank, n, trio, cache):
    import mscclpp

    os.environ["MSCCLPP_CACHE_DIR"] = cache
    os.environ.pop("MSCCLPP_PLAN_DIR", None)
    group = mscclpp.CommGroup(interfaceIpPortTrio=trio, rank=rank, size=n)
    ex = mscclpp.Executor(group.communicator)
    lib = runtime.load()
    plan = ctypes.c_void_p()
    rc = lib.mscclpp_executor_select_plan(ex.handle, b"sendrecv", 0, 8192, None,
                                          ctypes.byref(plan))
    assert rc == 0, lib.mscclpp_last_error()
    assert lib.mscclpp_plan_name(plan).decode() == "cached_sendrecv"
    ex.close()
    group.close()


def test_compiled_plans_in_the_cache_are_found_by_the_library(tmp_path):
    """A plan mscclpp.compile wrote into MSCCLPP_CACHE_DIR is registered by every executor."""
    import mscclpp
    from mscclpp.language.channel import MemoryChannel
    from mscclpp.language.collectives import SendRecv
    from mscclpp.language.internal.types import SyncType
    from mscclpp.language.program import CollectiveProgram
    from mscclpp.language.rank import Rank
    from mscclpp.language.utils import AlgoSpec

    def algo(spec):
        # a sendrecv plan for 2 ranks: no default plan serves sendrecv, so only the cache can
        n = spec.world_size
        with CollectiveProgram(spec.name, spec.collective, n) as prog:
            for r in range(n):
                peer = 1 - r
                ch = MemoryChannel(peer, r)
                ch.signal(tb=0, relaxed=True)
                ch.wait(tb=0, relaxed=True, data_sync=SyncType.after)
                ch.put(Rank(peer).get_output_buffer()[0:1], Rank(r).get_input_buffer()[0:1],
                       tb=0)
                ch.signal(tb=0, data_sync=SyncType.before)
                ch.wait(tb=0, data_sync=SyncType.after)
        return prog

    spec = AlgoSpec(name="cached_sendrecv", collective=SendRecv(2, 1, False), nranks_per_node=2,
                    world_size=2, in_place=False, instances=1, protocol="Simple")
    compiled = mscclpp.compile(algo, spec, cache_dir=str(tmp_path))
    assert os.path.dirname(compiled.plan_path) == str(tmp_path)
    run_ranks(2, _cached_plan_found, f"127.0.0.1:{_free_port()}", str(tmp_path))


def test_run_plan_creates_the_unique_id_after_forking(monkeypatch, tmp_path):
    """The id (and its bootstrap root thread) must not exist in the parent when ranks fork."""
    import contextlib
    import io
    import runpy

    lib = runtime.load()
    log = tmp_path / "uid_pids"

    class Spy:
        def __getattr__(self, name):
            return getattr(lib, name)

        def mscclpp_get_unique_id(self, uid):
            with open(log, "a") as f:
                f.write(f"{os.getpid()}\n")
            return lib.mscclpp_get_unique_id(uid)

    monkeypatch.setattr(runtime, "load", lambda: Spy())
    seeds = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(os.path.join(seeds, "simple_allgather.py"), run_name="__main__")
    count = 16
    inputs = [bytes([r]) * 4 * count for r in range(2)]
    outs = runtime.run_plan(out.getvalue(), 2, inputs, 4 * count, 8 * count)
    assert outs[0] == outs[1] == bytes([0]) * 4 * count + bytes([1]) * 4 * count
    pids = [int(x) for x in log.read_text().split()]
    assert len(pids) == 1 and pids[0] != os.getpid()
