"""mscclpp.ext with the NCCL-API library, as seed 000's dsl_with_nccl_api.py uses them, on the
host backend: each rank (a forked process) loads libmscclpp_nccl.so, compiles the seed's DSL
allreduce with mscclpp.compile, adds it with AlgorithmCollectionBuilder().add_algorithm_builder,
installs a selector, then calls ncclCommInitRank / ncclAllReduce through ctypes on NumPy
buffers. Every result is checked, and the library's per-plan call count says which algorithm
ran: the DSL plan where the selector chose it, the library's own algorithms elsewhere."""

import ctypes
import os
import select
import signal
import time
import traceback

import pytest

from mscclpp import runtime

np = pytest.importorskip("numpy", reason="NumPy holds the buffers")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _nccl_path():
    p = os.environ.get("MSCCLPP_NCCL_LIBRARY")
    if p:
        return p if os.path.exists(p) else None
    lib = runtime.library_path()
    if not lib:
        return None
    cand = os.path.join(os.path.dirname(lib), "libmscclpp_nccl.so")
    return cand if os.path.exists(cand) else None


pytestmark = pytest.mark.skipif(
    _nccl_path() is None,
    reason="libmscclpp_nccl.so not built (configure found no nccl.h) or libmscclpp.so missing")

NCCL_FLOAT32, NCCL_SUM = 7, 0


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def _load_nccl():
    path = _nccl_path()
    # the test program loads the library itself, globally, as a preload or a link would
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(_UniqueId)]
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, _UniqueId,
                                     ctypes.c_int]
    lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    lib.ncclAllGather.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    lib.ncclCommDestroy.argtypes = [ctypes.c_void_p]
    lib.ncclGetLastError.argtypes = [ctypes.c_void_p]
    lib.ncclGetLastError.restype = ctypes.c_char_p
    return lib


def allreduce_nvls(spec):
    """Seed 000's allreduce: every rank reduces its slice through a switch channel (on the host
    backend, a peer-memory reduction), between two rounds of signals."""
    from mscclpp.language.channel import SwitchChannel, MemoryChannel, BufferType, SyncType
    from mscclpp.language.program import CollectiveProgram
    from mscclpp.language.rank import Rank

    gpu_size = spec.world_size
    with CollectiveProgram.from_spec(spec) as program:
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


def _compile(rank, world, cache):
    import mscclpp
    from mscclpp.language.collectives import AllReduce

    spec = mscclpp.AlgoSpec(name="allreduce_nvls", collective=AllReduce(world, 1, True),
                            nranks_per_node=world, world_size=world, in_place=True, instances=2,
                            protocol="Simple", num_threads_per_block=1024,
                            min_message_size=1 << 20, max_message_size=48 << 30,
                            tags={"nvls": 1})
    return mscclpp.compile(algo=allreduce_nvls, algo_spec=spec, rank=rank, cache_dir=cache)


def run_ranks(n, fn, *args, timeout=240):
    """fn(rank, n, uid_fd_in, uid_fds_out, *args) in n forked processes; rank 0 makes the NCCL
    unique id and writes it to every other rank's pipe. Fails with the ranks' tracebacks; kills
    them after `timeout` seconds."""
    id_pipes = [os.pipe() for _ in range(n)]
    err_pipes, pids = [], []
    for r in range(n):
        rd, wr = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rd)
            code, msg = 0, b""
            try:
                fn(r, n, id_pipes[r][0], [p[1] for p in id_pipes], *args)
            except BaseException:
                code, msg = 1, traceback.format_exc().encode()
            os.write(wr, msg[-60000:])
            os._exit(code)
        os.close(wr)
        err_pipes.append(rd)
        pids.append(pid)
    for p in id_pipes:
        os.close(p[0])
        os.close(p[1])
    deadline = time.monotonic() + timeout
    msgs = {}
    open_fds = {fd: r for r, fd in enumerate(err_pipes)}
    while open_fds and time.monotonic() < deadline:
        ready, _, _ = select.select(list(open_fds), [], [], 1.0)
        for fd in ready:
            chunk = os.read(fd, 65536)
            if chunk:
                msgs[open_fds[fd]] = msgs.get(open_fds[fd], b"") + chunk
            else:
                os.close(fd)
                del open_fds[fd]
    timed_out = bool(open_fds)
    for pid in pids:
        if timed_out:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    errors = []
    for r, pid in enumerate(pids):
        _, status = os.waitpid(pid, 0)
        if status != 0:
            errors.append(f"rank {r}: {msgs.get(r, b'').decode(errors='replace')}")
    for fd in open_fds:
        os.close(fd)
    assert not timed_out, f"ranks still running after {timeout} s"
    assert not errors, "\n".join(errors)


def _comm(lib, rank, n, uid_in, uid_outs):
    uid = _UniqueId()
    if rank == 0:
        assert lib.ncclGetUniqueId(ctypes.byref(uid)) == 0
        for fd in uid_outs[1:]:
            os.write(fd, ctypes.string_at(ctypes.addressof(uid), 128))
    else:
        data = b""
        while len(data) < 128:
            data += os.read(uid_in, 128 - len(data))
        ctypes.memmove(ctypes.addressof(uid), data, 128)
    comm = ctypes.c_void_p()
    rc = lib.ncclCommInitRank(ctypes.byref(comm), n, uid, rank)
    assert rc == 0, f"ncclCommInitRank: {rc}: {lib.ncclGetLastError(None)}"
    return comm


def _allreduce(lib, comm, x, out=None):
    out = x if out is None else out
    rc = lib.ncclAllReduce(x.ctypes.data, out.ctypes.data, x.size, NCCL_FLOAT32, NCCL_SUM, comm,
                           None)
    return rc


def _seed_flow(rank, n, uid_in, uid_outs, cache):
    os.environ["MSCCLPP_HAL"] = "host"
    lib = _load_nccl()
    import mscclpp
    import mscclpp.ext

    builder = mscclpp.ext.AlgorithmCollectionBuilder()
    algo = builder.add_algorithm_builder(_compile(rank, n, cache))
    seen = []

    def selector(algorithms, req):
        seen.append(req)
        if req.collective != "allreduce":
            return None
        if req.message_size < 1 << 20:
            return None
        return algorithms["allreduce"]["allreduce_nvls"]

    builder.set_algorithm_selector(selector)
    comm = _comm(lib, rank, n, uid_in, uid_outs)

    # 1 MiB and more: the DSL plan, in place as torch calls all_reduce
    for k, count in enumerate([1 << 18, 3 << 18]):
        x = np.arange(count, dtype=np.float32) % 1000 + rank * 7 + k
        assert _allreduce(lib, comm, x) == 0, lib.ncclGetLastError(comm)
        want = n * (np.arange(count, dtype=np.float32) % 1000 + k) + 7 * n * (n - 1) / 2
        assert np.array_equal(x, want), f"DSL allreduce of {count} floats: {x[:4]} want {want[:4]}"
    assert builder.nccl_calls(algo) == 2, f"the DSL plan served {builder.nccl_calls(algo)} calls"

    # smaller: the selector declines, the library's own algorithms run
    y = np.full(1000, rank + 1, dtype=np.float32)
    assert _allreduce(lib, comm, y) == 0, lib.ncclGetLastError(comm)
    assert np.all(y == n * (n + 1) / 2)
    assert builder.nccl_calls(algo) == 2

    # what the selector saw
    big = seen[0]
    assert big.collective == "allreduce" and big.message_size == 4 << 18
    assert big.world_size == n and big.rank == rank and big.n_ranks_per_node == n
    assert big.dtype == mscclpp.DataType.float32 and big.hints == {}
    assert big.buffer_mode() == "in_place"
    assert seen[-1].message_size == 4000

    # an allgather: the selector returns None for it, the library's own plan serves it
    g_in = np.full(64, rank, dtype=np.float32)
    g_out = np.zeros(64 * n, dtype=np.float32)
    assert lib.ncclAllGather(g_in.ctypes.data, g_out.ctypes.data, 64, NCCL_FLOAT32, comm,
                             None) == 0
    assert np.array_equal(g_out, np.repeat(np.arange(n, dtype=np.float32), 64))
    assert seen[-1].collective == "allgather"

    # the fallback selector is asked when the selector says None
    builder.set_algorithm_selector(lambda algorithms, req: None)
    builder.set_fallback_algorithm_selector(
        lambda algorithms, req: algorithms["allreduce"].get("allreduce_nvls")
        if req.collective == "allreduce" and req.message_size >= 1 << 20 else None)
    x = np.ones(1 << 18, dtype=np.float32)
    assert _allreduce(lib, comm, x) == 0
    assert np.all(x == n) and builder.nccl_calls(algo) == 3

    # without a selector: the first added plan that serves the call
    builder.set_algorithm_selector(None)
    builder.set_fallback_algorithm_selector(None)
    x = np.ones(1 << 18, dtype=np.float32)
    assert _allreduce(lib, comm, x) == 0
    assert np.all(x == n) and builder.nccl_calls(algo) == 4

    # a selector that chooses a default algorithm: the library's own
    builder.set_algorithm_selector(lambda algorithms, req: algorithms["allreduce"]
                                   ["default_allreduce"])
    x = np.ones(1 << 18, dtype=np.float32)
    assert _allreduce(lib, comm, x) == 0
    assert np.all(x == n) and builder.nccl_calls(algo) == 4

    # a selector that raises fails the call (every rank alike), and says why
    def broken(algorithms, req):
        raise RuntimeError("selector bug")

    builder.set_algorithm_selector(broken)
    x = np.ones(16, dtype=np.float32)
    assert _allreduce(lib, comm, x) != 0
    assert b"selector" in lib.ncclGetLastError(comm)

    # reset: the plan is gone for the NCCL library too
    mscclpp.ext.AlgorithmCollectionBuilder.reset()
    x = np.ones(1 << 18, dtype=np.float32)
    assert _allreduce(lib, comm, x) == 0
    assert np.all(x == n) and builder.nccl_calls(algo) == 4
    fresh = mscclpp.ext.AlgorithmCollectionBuilder()
    assert fresh is not builder and fresh.build().get_all_algorithms() == []
    assert lib.ncclCommDestroy(comm) == 0


def test_seed_flow_dsl_plan_through_nccl_api(tmp_path):
    run_ranks(2, _seed_flow, str(tmp_path))


def _bad_choice(rank, n, uid_in, uid_outs, cache):
    os.environ["MSCCLPP_HAL"] = "host"
    lib = _load_nccl()
    import mscclpp.ext

    builder = mscclpp.ext.AlgorithmCollectionBuilder()
    builder.add_algorithm_builder(_compile(rank, n, cache))
    # the DSL plan serves 1 MiB and more: chosen for 4 KiB, the call fails and names it
    builder.set_algorithm_selector(lambda algorithms, req: algorithms["allreduce"]
                                   ["allreduce_nvls"])
    comm = _comm(lib, rank, n, uid_in, uid_outs)
    x = np.ones(1024, dtype=np.float32)
    assert _allreduce(lib, comm, x) != 0
    msg = lib.ncclGetLastError(comm)
    assert b"allreduce_nvls" in msg and b"does not serve" in msg, msg
    assert np.all(x == 1)  # nothing ran
    # the communicator works on
    builder.set_algorithm_selector(None)
    assert _allreduce(lib, comm, x) == 0 and np.all(x == n)
    mscclpp.ext.AlgorithmCollectionBuilder.reset()
    assert lib.ncclCommDestroy(comm) == 0


def test_selected_plan_that_does_not_fit_fails_clearly(tmp_path):
    run_ranks(2, _bad_choice, str(tmp_path))
