"""MSCCL++'s Python runtime names over libmscclpp's public C API (ctypes, no compiler needed).

``mscclpp.CommGroup``, ``Communicator``, ``Executor``, ``ExecutionPlan``, ``DataType``,
``ReduceOp``, ``RawGpuBuffer``, ``is_nvls_supported`` and ``Algorithm`` come from here
(``mscclpp/__init__.py`` loads this module on first use of one of those names;
``mscclpp.AlgorithmCollectionBuilder`` is :mod:`mscclpp.ext`'s, which uses this module).
Buffers are integer addresses (``tensor.data_ptr()``); tensors come in and go out through
DLPack. See docs/python.md.
"""

import ctypes
import enum
import os

from . import runtime
from .runtime import MscclppError, UNIQUE_ID_BYTES

__all__ = ["CommGroup", "Communicator", "Executor", "ExecutionPlan", "DataType", "ReduceOp",
           "PacketType", "RawGpuBuffer", "is_nvls_supported",
           "Algorithm", "NativeAlgorithm", "MscclppError", "execute_plan", "Stream", "Graph"]


def _lib():
    return runtime.load()


def _check(rc, what):
    if rc != 0:
        lib = _lib()
        raise MscclppError(f"{what}: {lib.mscclpp_last_error().decode(errors='replace')} "
                           f"(error {rc})")


class DataType(enum.IntEnum):
    """Element types (values of the C enum mscclpp_dtype_t)."""
    float32 = 0
    float16 = 1
    bfloat16 = 2
    int32 = 3
    uint32 = 4
    int8 = 5
    uint8 = 6
    float64 = 7
    float8_e4m3 = 8
    float8_e5m2 = 9
    int64 = 10
    uint64 = 11


class ReduceOp(enum.IntEnum):
    """Reductions. NOP keeps the plan's own reduce_op (MSCCLPP_REDOP_PLAN)."""
    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    NOP = -1


class PacketType(enum.IntEnum):
    LL16 = 0
    LL8 = 1


def is_nvls_supported():
    """Whether this process's device supports NVLink SHARP multicast (``mscclpp_nvls_supported``:
    the CUDA backend's probe of the current device; False on the host and HIP backends)."""
    flag = ctypes.c_int(0)
    _check(_lib().mscclpp_nvls_supported(ctypes.byref(flag)), "mscclpp_nvls_supported")
    return bool(flag.value)


def backend_name():
    return _lib().mscclpp_backend_name().decode()


# ---- streams and graphs ----------------------------------------------------------------------

class Graph:
    """Work captured from a :class:`Stream` (``Stream.end_capture``): ``launch(stream)`` replays
    it (``mscclpp_graph_launch``), ``close()`` frees it. See docs/graphs.md."""

    def __init__(self, handle):
        self._handle = handle

    @property
    def handle(self):
        return self._handle

    def launch(self, stream):
        """Queue one replay on ``stream`` (a :class:`Stream`, or what a stream argument takes);
        synchronize the stream to wait for it."""
        if not self._handle:
            raise MscclppError("Graph.launch: the graph was closed")
        _check(_lib().mscclpp_graph_launch(self._handle, _stream_handle(stream, "launch")),
               "graph launch")

    def close(self):
        if self._handle and runtime._lib is not None:
            runtime._lib.mscclpp_graph_destroy(self._handle)
        self._handle = None

    def __del__(self):
        self.close()


class Stream:
    """A stream of the library's backend: a new one (``Stream()``, ``mscclpp_stream_create``;
    a worker queue on the host backend), or a wrap of a native ``cudaStream_t`` /
    ``hipStream_t`` (``Stream(native=int)``, ``mscclpp_stream_wrap``: the native stream stays the
    caller's). Every stream argument of the runtime also takes the int torch gives
    (``torch.cuda.current_stream().cuda_stream``) or a ``torch.cuda.Stream``, and wraps it once
    (cached per handle)."""

    def __init__(self, native=None):
        lib = _lib()
        h = ctypes.c_void_p()
        if native is None:
            _check(lib.mscclpp_stream_create(ctypes.byref(h)), "mscclpp_stream_create")
        else:
            _check(lib.mscclpp_stream_wrap(ctypes.c_void_p(int(native)), ctypes.byref(h)),
                   f"mscclpp_stream_wrap({int(native):#x})")
        self._handle = h.value
        self.native = native
        _own_streams[self._handle] = self

    @property
    def handle(self):
        return self._handle

    def synchronize(self):
        """Wait for the work queued on the stream; raises the first error of that work."""
        _check(_lib().mscclpp_stream_synchronize(self._handle), "stream synchronize")

    def is_capturing(self):
        flag = ctypes.c_int(0)
        _check(_lib().mscclpp_stream_is_capturing(self._handle, ctypes.byref(flag)),
               "stream is_capturing")
        return bool(flag.value)

    def begin_capture(self):
        """Record what is queued on the stream from now on (``mscclpp_stream_begin_capture``)."""
        _check(_lib().mscclpp_stream_begin_capture(self._handle), "stream begin_capture")

    def end_capture(self):
        """End the capture and return the :class:`Graph` it recorded."""
        g = ctypes.c_void_p()
        _check(_lib().mscclpp_stream_end_capture(self._handle, ctypes.byref(g)),
               "stream end_capture")
        return Graph(g.value)

    def close(self):
        """Synchronize and free the stream (only the wrapper of a native stream)."""
        h = self._handle
        if h and runtime._lib is not None:
            _own_streams.pop(h, None)
            self._handle = None
            _check(runtime._lib.mscclpp_stream_destroy(h), "stream destroy")


_own_streams = {}   # handle of an mscclpp_stream_t made here -> Stream
_wrapped = {}       # native stream handle (int) -> Stream wrapping it, made once


def _stream_handle(stream, what="stream"):
    """The mscclpp_stream_t for a stream argument: None or 0 (no stream: the call waits), a
    :class:`Stream`, an object with ``cuda_stream`` (``torch.cuda.Stream``), or an int: the
    handle of a :class:`Stream` made here, else a native stream handle, wrapped once."""
    if stream is None:
        return None
    if isinstance(stream, Stream):
        return stream.handle
    native = getattr(stream, "cuda_stream", stream)
    try:
        native = int(native)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: a stream is an mscclpp.Stream, a torch.cuda.Stream or an int "
                        f"handle, not {type(stream).__name__}") from None
    if native == 0:
        return None
    if native in _own_streams:
        return native
    w = _wrapped.get(native)
    if w is None:
        if backend_name() == "host":
            raise MscclppError(f"{what}: {native:#x} is not a stream of this process's "
                               f"mscclpp.Stream objects, and the host backend has no native "
                               f"streams to wrap")
        w = _wrapped[native] = Stream(native=native)
    return w.handle


def _capturing(handle):
    flag = ctypes.c_int(0)
    _check(_lib().mscclpp_stream_is_capturing(handle, ctypes.byref(flag)), "stream")
    return bool(flag.value)


def _addr(buf):
    """The address of a buffer argument: an int, a tensor (``data_ptr()``), a NumPy array
    (its data pointer), a :class:`RawGpuBuffer`, or None (0). Nothing is copied."""
    if buf is None:
        return 0
    if isinstance(buf, int):
        return buf
    if hasattr(buf, "data_ptr"):
        return int(buf.data_ptr())
    iface = getattr(buf, "__array_interface__", None) or \
        getattr(buf, "__cuda_array_interface__", None)
    if iface is not None:
        return int(iface["data"][0])
    if hasattr(buf, "data") and callable(buf.data):
        return int(buf.data())
    return int(buf)


class Communicator:
    """A communicator handle (mscclpp_comm_t). Made by :class:`CommGroup`."""

    def __init__(self, handle, owner=None):
        self._handle = handle
        self._owner = owner
        self._executor = None

    @property
    def handle(self):
        return self._handle

    def _int(self, fn):
        v = ctypes.c_int()
        _check(fn(self._handle, ctypes.byref(v)), fn.__name__)
        return v.value

    def rank(self):
        return self._int(_lib().mscclpp_comm_rank)

    def size(self):
        return self._int(_lib().mscclpp_comm_size)

    def local_size(self):
        return self._int(_lib().mscclpp_comm_local_size)

    def bootstrap_barrier(self):
        lib = _lib()
        boot = ctypes.c_void_p()
        _check(lib.mscclpp_comm_bootstrap(self._handle, ctypes.byref(boot)), "comm bootstrap")
        _check(lib.mscclpp_bootstrap_barrier(boot), f"barrier (rank {self.rank()})")

    def default_executor(self):
        """One executor per communicator, shared by the default algorithms."""
        if self._executor is None:
            self._executor = Executor(self)
        return self._executor


def _unique_id():
    uid = ctypes.create_string_buffer(UNIQUE_ID_BYTES)
    _check(_lib().mscclpp_get_unique_id(uid), "unique id")
    return uid.raw


class CommGroup:
    """The ranks of one job, as MSCCL++'s ``CommGroup``.

    Give one of: ``interfaceIpPortTrio`` ("interface:ip:port" or "ip:port", with ``rank`` and
    ``size``; rank 0 listens there); ``mpi_comm`` (an mpi4py communicator); ``torch_group``
    (a ``torch.distributed`` process group, or True for the default one); ``store`` (a
    ``torch.distributed`` Store, or any object with ``set(key, bytes)`` and ``get(key)``, with
    ``rank`` and ``size``). With MPI, torch or a store, rank 0 creates a unique id and the
    others receive it through that channel.
    """

    def __init__(self, mpi_comm=None, torch_group=None, interfaceIpPortTrio="", rank=None,
                 size=None, store=None, store_key="mscclpp_unique_id"):
        lib = _lib()
        comm = ctypes.c_void_p()
        self._boot = None
        if interfaceIpPortTrio:
            if rank is None or size is None:
                raise ValueError("CommGroup: interfaceIpPortTrio needs rank and size")
            boot = ctypes.c_void_p()
            _check(lib.mscclpp_bootstrap_create_from_address(
                interfaceIpPortTrio.encode(), rank, size, ctypes.byref(boot)),
                f"bootstrap at {interfaceIpPortTrio} (rank {rank} of {size})")
            rc = lib.mscclpp_comm_create(boot, ctypes.byref(comm))
            if rc != 0:
                lib.mscclpp_bootstrap_destroy(boot)
                _check(rc, f"communicator (rank {rank} of {size})")
            self._boot = boot
        else:
            if mpi_comm is not None:
                rank, size = mpi_comm.Get_rank(), mpi_comm.Get_size()
                uid = mpi_comm.bcast(_unique_id() if rank == 0 else None, root=0)
            elif torch_group is not None:
                uid, rank, size = self._uid_from_torch(torch_group)
            elif store is not None:
                if rank is None or size is None:
                    raise ValueError("CommGroup: a store needs rank and size")
                if rank == 0:
                    uid = _unique_id()
                    store.set(store_key, uid)
                else:
                    uid = bytes(store.get(store_key))
            else:
                raise ValueError("CommGroup needs interfaceIpPortTrio, mpi_comm, torch_group "
                                 "or store")
            if len(uid) != UNIQUE_ID_BYTES:
                raise MscclppError(f"CommGroup: rank {rank} got a unique id of {len(uid)} "
                                   f"bytes, not {UNIQUE_ID_BYTES}")
            buf = ctypes.create_string_buffer(uid, UNIQUE_ID_BYTES)
            _check(lib.mscclpp_comm_init_rank(buf, rank, size, ctypes.byref(comm)),
                   f"communicator (rank {rank} of {size})")
        self.communicator = Communicator(comm, self)
        self.my_rank = self.communicator.rank()
        self.nranks = self.communicator.size()
        self.nranks_per_node = self.communicator.local_size()

    @staticmethod
    def _uid_from_torch(group):
        import torch.distributed as dist

        pg = None if group is True else group
        rank, size = dist.get_rank(pg), dist.get_world_size(pg)
        obj = [_unique_id() if rank == 0 else None]
        dist.broadcast_object_list(obj, src=dist.get_global_rank(pg, 0) if pg else 0, group=pg)
        return obj[0], rank, size

    def barrier(self):
        self.communicator.bootstrap_barrier()

    def close(self):
        """Destroy the communicator (collective: every rank calls it)."""
        lib = _lib()
        if self.communicator is not None and self.communicator._handle:
            ex = self.communicator._executor
            if ex is not None:
                ex.close()
            lib.mscclpp_comm_destroy(self.communicator._handle)
            self.communicator._handle = None
        if self._boot:
            lib.mscclpp_bootstrap_destroy(self._boot)
            self._boot = None


class ExecutionPlan:
    """A plan loaded from a JSON file (``ExecutionPlan(path, rank)``) or text (``json=``)."""

    def __init__(self, plan_path=None, rank=0, json=None):
        lib = _lib()
        h = ctypes.c_void_p()
        if json is not None:
            data = json.encode() if isinstance(json, str) else json
            _check(lib.mscclpp_plan_load_string(data, len(data), ctypes.byref(h)), "plan")
        else:
            _check(lib.mscclpp_plan_load_file(os.fspath(plan_path).encode(), ctypes.byref(h)),
                   f"plan {plan_path}")
        self._handle = h
        self.rank = rank
        self.name = lib.mscclpp_plan_name(h).decode()
        self.collective = lib.mscclpp_plan_collective(h).decode()
        self.world_size = lib.mscclpp_plan_world_size(h)
        self.in_place = bool(lib.mscclpp_plan_is_inplace(h))
        self.min_message_size = lib.mscclpp_plan_min_message_size(h)
        self.max_message_size = lib.mscclpp_plan_max_message_size(h)

    def __del__(self):
        h = getattr(self, "_handle", None)
        if h and runtime._lib is not None:
            runtime._lib.mscclpp_plan_destroy(h)
            self._handle = None


class Executor:
    """Runs plans on a communicator (``Executor(comm.communicator)``)."""

    def __init__(self, communicator):
        comm = communicator.communicator if isinstance(communicator, CommGroup) else communicator
        # The library reads the DSL's plan cache only when asked (MSCCLPP_CACHE_DIR set): a
        # Python process asks for the one mscclpp.compile writes to, C programs never see it.
        from ._paths import default_cache_dir
        os.environ.setdefault("MSCCLPP_CACHE_DIR", default_cache_dir())
        h = ctypes.c_void_p()
        _check(_lib().mscclpp_executor_create(comm.handle, ctypes.byref(h)), "executor")
        self._handle = h
        self.communicator = comm
        self._plans = []   # registered plans stay alive as long as the executor
        self._natives = {}  # (module handle, algorithm name) -> plan handle of the registration
        self._modules = []  # native modules outlive the executor's registrations

    @property
    def handle(self):
        return self._handle

    def execute(self, rank, send_buff, recv_buff, send_buff_size, recv_buff_size, data_type,
                plan, stream=0, packet_type=PacketType.LL16, op=ReduceOp.NOP, nblocks=0,
                nthreads_per_block=0):
        """Run ``plan`` once (MSCCL++'s Executor.execute). ``stream`` 0 waits for the result.
        ``nblocks`` / ``nthreads_per_block`` (0: the plan's) go to ``mscclpp_execute_launch``,
        which checks them: a plan's block count is part of the plan (another count raises the
        library's error), threads per block are 1 to 1024."""
        _launch_args(nblocks, nthreads_per_block)
        handle = plan._handle if isinstance(plan, ExecutionPlan) else plan
        name = getattr(plan, "name", "plan")
        _check(_lib().mscclpp_execute_launch(self._handle, handle, _addr(send_buff),
                                             _addr(recv_buff), send_buff_size, recv_buff_size,
                                             int(data_type), int(op), int(packet_type),
                                             int(nblocks), int(nthreads_per_block),
                                             _stream_handle(stream, f"execute {name}")),
               f"execute {name} (rank {rank})")

    def alltoallv(self, send_buff, send_counts, recv_buff, recv_counts, data_type,
                  send_displs=None, recv_displs=None, stream=0):
        """All-to-all with a count per peer (``mscclpp_alltoallv``, as MPI_Alltoallv):
        ``send_counts[j]`` elements at element ``send_displs[j]`` of ``send_buff`` go to rank
        j; ``recv_counts[j]`` elements from rank j land at element ``recv_displs[j]`` of
        ``recv_buff``. Counts and displacements are in elements, one per rank; displacements
        left out are the blocks packed in rank order (the running sum of the counts, as
        torch's ``all_to_all_single`` splits). Rank i's ``send_counts[j]`` must equal rank j's
        ``recv_counts[i]``: when they disagree every rank raises and nothing moves. Elements of
        ``recv_buff`` outside the received blocks are not written. ``stream`` 0 waits for the
        result."""
        comm = self.communicator
        n = comm.size()
        what = f"alltoallv (rank {comm.rank()})"

        def sizes(vals, name):
            if vals is None:
                return None
            vals = [v for v in vals]
            if len(vals) != n:
                raise ValueError(f"{what}: {name} has {len(vals)} entries; it needs one per rank "
                                 f"({n})")
            out = []
            for j, v in enumerate(vals):
                if isinstance(v, bool) or int(v) != v or int(v) < 0:
                    raise ValueError(f"{what}: {name}[{j}] = {v!r} is not a count of elements "
                                     f"(an int >= 0)")
                out.append(int(v))
            return out

        def packed(counts):
            at, out = 0, []
            for c in counts:
                out.append(at)
                at += c
            return out

        scount = sizes(send_counts, "send_counts")
        rcount = sizes(recv_counts, "recv_counts")
        sdispl = sizes(send_displs, "send_displs") or packed(scount)
        rdispl = sizes(recv_displs, "recv_displs") or packed(rcount)
        arr = ctypes.c_size_t * n
        _check(_lib().mscclpp_alltoallv(self._handle, _addr(send_buff), arr(*scount),
                                        arr(*sdispl), _addr(recv_buff), arr(*rcount),
                                        arr(*rdispl), int(data_type),
                                        _stream_handle(stream, what)), what)

    def register_native(self, module, name=None, ranks_per_node=0, tags=None):
        """Register algorithm ``name`` of a native module (:func:`mscclpp.compile_native`;
        None: all of them) with this executor, as plans are registered: collectives, the
        tuner and tuning tables see it. Returns the plan handle of the (last) one."""
        key = (module.handle.value, name)
        if key in self._natives:
            return self._natives[key]
        h = ctypes.c_void_p()
        comm = self.communicator
        _check(_lib().mscclpp_executor_register_native(
            self._handle, comm.handle, module.handle, name.encode() if name else None,
            ranks_per_node, tags.encode() if tags else None, ctypes.byref(h)),
            f"register native {name or module.name} (rank {comm.rank()})")
        self._natives[key] = h
        self._modules.append(module)
        return h

    def register_plan(self, plan, ranks_per_node=0, tags=None):
        """Add a plan to the executor's registry, ahead of the default plans."""
        _check(_lib().mscclpp_executor_register_plan(self._handle, plan._handle, ranks_per_node,
                                                     tags.encode() if tags else None),
               f"register plan {plan.name}")
        self._plans.append(plan)

    def close(self):
        if self._handle:
            lib = _lib()
            # native algorithms' mappings go before the executor (and its communicator)
            lib.mscclpp_executor_release_natives(self._handle)
            lib.mscclpp_executor_destroy(self._handle)
            self._handle = None


# ---- DLPack ----------------------------------------------------------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", _DELETER)]

class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    pass


_DELETER_V = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensorVersioned))
_DLManagedTensorVersioned._fields_ = [("version", _DLPackVersion),
                                      ("manager_ctx", ctypes.c_void_p),
                                      ("deleter", _DELETER_V), ("flags", ctypes.c_uint64),
                                      ("dl_tensor", _DLTensor)]

# DLPack type codes: 0 int, 1 uint, 2 float, 4 bfloat
_DL_TYPES = {
    "float16": (2, 16), "float32": (2, 32), "float64": (2, 64), "bfloat16": (4, 16),
    "int8": (0, 8), "int32": (0, 32), "int64": (0, 64), "uint8": (1, 8), "uint32": (1, 32),
    "uint64": (1, 64),
    # fp8 types travel as bytes (as MSCCL++ does for fp8_e4m3b15)
    "float8_e4m3fn": (1, 8), "float8_e5m2": (1, 8), "float8_e4m3fnuz": (1, 8),
    "float8_e5m2fnuz": (1, 8), "float8_e4m3": (1, 8),
}
_DL_DEVICE = {"host": 1, "cuda": 2, "hip": 10}   # kDLCPU, kDLCUDA, kDLROCM
_live = {}   # address of a DLManagedTensor -> what keeps its memory alive until the deleter


@_DELETER
def _dl_deleter(ptr):
    _live.pop(ctypes.addressof(ptr.contents), None)


@_DELETER_V
def _dl_deleter_v(ptr):
    _live.pop(ctypes.addressof(ptr.contents), None)


class _DLPackExport:
    """What ``RawGpuBuffer.to_dlpack`` returns: an object with ``__dlpack__`` (NumPy's and
    torch's ``from_dlpack`` take it) that makes one DLPack capsule."""

    def __init__(self, buf, dtype, shape, strides):
        self._buf, self._dtype, self._shape, self._strides = buf, dtype, shape, strides

    def __dlpack_device__(self):
        return (_DL_DEVICE.get(backend_name(), 1), 0)

    def __dlpack__(self, stream=None, max_version=None, **kwargs):
        # DLPack 1.x ("dltensor_versioned") when the consumer takes it: the legacy form has no
        # read-only flag, so NumPy 2 makes arrays from it read-only.
        versioned = max_version is not None and max_version[0] >= 1
        code, bits = self._dtype
        n = len(self._shape)
        shape = (ctypes.c_int64 * n)(*self._shape)
        strides = (ctypes.c_int64 * n)(*self._strides) if self._strides else None
        m = _DLManagedTensorVersioned() if versioned else _DLManagedTensor()
        t = m.dl_tensor
        t.data = self._buf.data()
        t.device = _DLDevice(*self.__dlpack_device__())
        t.ndim = n
        t.dtype = _DLDataType(code, bits, 1)
        t.shape = shape
        t.strides = strides
        t.byte_offset = 0
        if versioned:
            m.version = _DLPackVersion(1, 0)
            m.flags = 0   # writable, not a copy
            m.deleter = _dl_deleter_v
        else:
            m.deleter = _dl_deleter
        _live[ctypes.addressof(m)] = (m, shape, strides, self._buf)
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        # No capsule destructor: a consumer always takes it (and calls the deleter); one that
        # is never consumed keeps its buffer alive, which is the safe side.
        return new(ctypes.addressof(m), b"dltensor_versioned" if versioned else b"dltensor",
                   None)


class RawGpuBuffer:
    """``nbytes`` of device memory from the library's allocator (host memory on the host
    backend), freed when the object and every tensor made from it are gone."""

    def __init__(self, nbytes):
        if nbytes <= 0:
            raise ValueError(f"RawGpuBuffer: size must be positive, got {nbytes}")
        p = ctypes.c_void_p()
        _check(_lib().mscclpp_malloc(nbytes, ctypes.byref(p)), f"RawGpuBuffer({nbytes})")
        self._ptr = p.value
        self._nbytes = nbytes

    def data(self):
        return self._ptr

    def data_ptr(self):
        return self._ptr

    def bytes(self):
        return self._nbytes

    def nelems(self):
        return self._nbytes

    def device_id(self):
        return 0

    def to_dlpack(self, data_type="torch.float32", shape=None, strides=None):
        """A DLPack export of this buffer as ``data_type`` ("torch.float16", "float32",
        a numpy/torch dtype or a :class:`DataType`), 1-D over the whole buffer unless
        ``shape`` is given."""
        name = _dtype_name(data_type)
        if name not in _DL_TYPES:
            raise ValueError(f"to_dlpack: unsupported data type {data_type!r}")
        code, bits = _DL_TYPES[name]
        esize = bits // 8
        if not shape:
            shape = [self._nbytes // esize]
        need = esize
        for d in shape:
            need *= d
        if need > self._nbytes:
            raise ValueError(f"to_dlpack: shape {list(shape)} of {name} needs {need} bytes, the "
                             f"buffer has {self._nbytes}")
        return _DLPackExport(self, (code, bits), list(shape), list(strides or []))

    def numpy(self, dtype="float32", shape=None):
        """The buffer as a NumPy array (host backend only)."""
        import numpy as np

        return np.from_dlpack(self.to_dlpack(dtype, shape))

    def __del__(self):
        p = getattr(self, "_ptr", None)
        if p and runtime._lib is not None:
            runtime._lib.mscclpp_free(ctypes.c_void_p(p))
            self._ptr = None


def _dtype_name(data_type):
    if isinstance(data_type, DataType):
        return {DataType.float8_e4m3: "float8_e4m3"}.get(data_type, data_type.name)
    s = str(data_type)
    for prefix in ("torch.", "numpy.", "<class 'numpy."):
        if s.startswith(prefix):
            s = s[len(prefix):]
    return s.rstrip("'>")


# ---- algorithms ------------------------------------------------------------------------------

_COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast")
# MSCCL++'s default allreduce algorithm names (CUDA kernels there). Here each one is served by
# the library's allreduce, which selects a plan by message size; kept so code written for
# MSCCL++ that picks its algorithm by name runs unchanged.
_MSCCLPP_ALLREDUCE_NAMES = ("default_allreduce_packet", "default_allreduce_nvls_packet",
                            "default_allreduce_nvls_warp_pipeline",
                            "default_allreduce_rsag_zero_copy",
                            "default_allreduce_nvls_zero_copy", "default_allreduce_allpair_packet",
                            "default_allreduce_fullmesh")


def _launch_args(nblocks, nthreads_per_block):
    if nblocks < 0 or nthreads_per_block < 0:
        raise ValueError(f"nblocks and nthreads_per_block must be >= 0 (0 = the plan's), got "
                         f"{nblocks}, {nthreads_per_block}")


class Algorithm:
    """A collective algorithm with MSCCL++'s ``execute`` signature. Either a default algorithm
    (the library's own collective, which picks a registered plan by message size) or a DSL
    plan (from :func:`mscclpp.compile`, run through an :class:`Executor`)."""

    def __init__(self, name, collective, plan=None, compiled=None, tags=None,
                 message_size_range=(0, 2**64 - 1)):
        self.name = name
        self.collective = collective
        self.tags = dict(tags or {})
        self.message_size_range = message_size_range
        self._plan = plan
        self._compiled = compiled

    def is_dsl_algorithm(self):
        return self._plan is not None or self._compiled is not None

    def is_native_algorithm(self):
        return False

    @staticmethod
    def create_from_native_capsule(capsule):
        """MSCCL++'s flow for native algorithms: ``module.create_<name>_algorithm()`` of a
        :func:`mscclpp.compile_native` module returns the algorithm itself here."""
        if not isinstance(capsule, NativeAlgorithm):
            raise TypeError("create_from_native_capsule takes what a compile_native module's "
                            "create_<name>_algorithm() returns")
        return capsule

    def execute(self, comm, input_buffer, output_buffer, input_size, output_size, dtype,
                op=ReduceOp.NOP, stream=0, executor=None, nblocks=0, nthreads_per_block=0,
                symmetric_memory=False, extras=None, accum_dtype=None):
        """Run once; returns 0 (errors raise MscclppError naming the library's message).

        ``nblocks`` / ``nthreads_per_block`` (0 = the plan's) go to the library's
        ``mscclpp_execute_launch``, which checks them against the plan (a DSL plan, or the plan
        a default algorithm selects for this call). ``symmetric_memory`` is a hint: the
        executor caches its buffer setup per address either way. ``extras`` /
        ``accum_dtype`` are accepted for MSCCL++ compatibility."""
        _launch_args(nblocks, nthreads_per_block)
        comm = comm.communicator if isinstance(comm, CommGroup) else comm
        ex = executor or comm.default_executor()
        if self.is_dsl_algorithm():
            plan = self._plan or _compiled_plan(self._compiled)
            ex.execute(comm.rank(), input_buffer, output_buffer, input_size, output_size, dtype,
                       plan, stream, op=op, nblocks=nblocks,
                       nthreads_per_block=nthreads_per_block)
            return 0
        if nblocks or nthreads_per_block:
            _run_default_launch(ex, comm, self.collective, input_buffer, output_buffer,
                                input_size, output_size, DataType(int(dtype)), op, stream,
                                nblocks, nthreads_per_block)
            return 0
        _run_default(ex, comm, self.collective, input_buffer, output_buffer, input_size,
                     output_size, DataType(int(dtype)), op, stream, extras)
        return 0

    def __repr__(self):
        return f"Algorithm(name={self.name!r}, collective={self.collective!r})"


def _run_default(ex, comm, collective, inp, out, in_size, out_size, dtype, op, stream, extras):
    lib = _lib()
    esz = lib.mscclpp_dtype_size(int(dtype))
    red = ReduceOp.SUM if op == ReduceOp.NOP else op
    s = _stream_handle(stream, collective)
    inp, out = _addr(inp), _addr(out)
    what = f"{collective} (rank {comm.rank()}, {in_size} bytes)"
    # the library counts whole elements: a size that is not a whole number of them would lose
    # its tail (a 1023-byte float32 call reduced 1020 bytes)
    per = {"alltoall": esz * comm.size()}.get(collective, esz)
    size, which = (out_size, "output") if collective == "reducescatter" else (in_size, "input")
    if size % per:
        raise MscclppError(f"{what}: the {which} size, {size} bytes, is not a whole number of "
                           f"{DataType(int(dtype)).name} elements ({esz} bytes each"
                           f"{f', times {comm.size()} ranks' if per != esz else ''})")
    if collective == "allreduce":
        rc = lib.mscclpp_allreduce(ex.handle, inp, out, in_size // esz, int(dtype), int(red), s)
    elif collective == "allgather":
        rc = lib.mscclpp_allgather(ex.handle, inp, out, in_size // esz, int(dtype), s)
    elif collective == "reducescatter":
        rc = lib.mscclpp_reducescatter(ex.handle, inp, out, out_size // esz, int(dtype),
                                       int(red), s)
    elif collective == "alltoall":
        rc = lib.mscclpp_alltoall(ex.handle, inp, out, in_size // esz // comm.size(),
                                  int(dtype), s)
    elif collective == "broadcast":
        root = int((extras or {}).get("root", 0))
        rc = lib.mscclpp_broadcast(ex.handle, inp, out, in_size // esz, int(dtype), root, s)
    else:
        raise MscclppError(f"no default algorithm for {collective}")
    _check(rc, what)


def _run_default_launch(ex, comm, collective, inp, out, in_size, out_size, dtype, op, stream,
                        nblocks, nthreads):
    """A default algorithm with a launch shape: the plan the collective would pick for this
    call (tuning table, then the registry), run through mscclpp_execute_launch."""
    lib = _lib()
    rank = comm.rank()
    inp, out = _addr(inp), _addr(out)
    stream = _stream_handle(stream, collective)
    if collective == "allgather":
        inplace, msg = inp == out + rank * in_size, out_size
    elif collective == "reducescatter":
        inplace, msg = out == inp + rank * out_size, in_size
    elif collective in ("allreduce", "alltoall"):
        inplace, msg = inp == out, in_size
    else:
        raise MscclppError(f"{collective}: nblocks / nthreads_per_block are not supported for "
                           f"this default algorithm (its root is chosen per call); pass 0")
    plan = ctypes.c_void_p()
    nth = ctypes.c_int()
    stage = None
    if lib.mscclpp_executor_choose_plan(ex.handle, collective.encode(), int(inplace), msg,
                                        ctypes.byref(plan), ctypes.byref(nth)) != 0:
        if not inplace:
            _check(-3, f"{collective} (rank {rank}, {in_size} bytes): no plan for a launch shape")
        # as the library's collective does: an out-of-place plan on a staged copy of the input
        _check(lib.mscclpp_executor_choose_plan(ex.handle, collective.encode(), 0, msg,
                                                ctypes.byref(plan), ctypes.byref(nth)),
               f"{collective} (rank {rank}, {in_size} bytes): no plan for a launch shape")
        if stream and _capturing(stream):
            raise MscclppError(f"{collective} (rank {rank}): an in-place call with nblocks / "
                               f"nthreads_per_block stages its input through a synchronous copy, "
                               f"which a captured stream cannot run; pass 0 for both (the "
                               f"library stages it on the stream) or call it out of place")
        stage = RawGpuBuffer(max(in_size, 1))
        if stream:
            _check(lib.mscclpp_stream_synchronize(stream), f"{collective}: stream")
        _check(lib.mscclpp_memcpy(stage.data(), inp, in_size), f"{collective}: staging copy")
        inp = stage.data()
    red = ReduceOp.SUM if op == ReduceOp.NOP else op
    _check(lib.mscclpp_execute_launch(ex.handle, plan, inp, out, in_size, out_size, int(dtype),
                                      int(red), int(PacketType.LL16), int(nblocks),
                                      int(nthreads or nth.value), stream),
           f"{collective} (rank {rank}, {in_size} bytes, nblocks={nblocks}, "
           f"nthreads_per_block={nthreads})")
    if stage is not None and stream:
        # the staging buffer must outlive the queued call
        _check(lib.mscclpp_stream_synchronize(stream), f"{collective}: stream")


class NativeAlgorithm(Algorithm):
    """An algorithm of a native module (:func:`mscclpp.compile_native`): registered with the
    executor it runs on at its first call there, then run through ``mscclpp_execute_launch``
    with ``nblocks`` / ``nthreads_per_block`` passed to the algorithm."""

    def __init__(self, module, name, collective):
        super().__init__(name, collective)
        self.module = module

    def is_native_algorithm(self):
        return True

    def is_dsl_algorithm(self):
        return False

    def execute(self, comm, input_buffer, output_buffer, input_size, output_size, dtype,
                op=ReduceOp.NOP, stream=0, executor=None, nblocks=0, nthreads_per_block=0,
                symmetric_memory=False, extras=None, accum_dtype=None):
        _launch_args(nblocks, nthreads_per_block)
        comm = comm.communicator if isinstance(comm, CommGroup) else comm
        ex = executor or comm.default_executor()
        plan = ex.register_native(self.module, self.name)
        _check(_lib().mscclpp_execute_launch(ex.handle, plan, _addr(input_buffer),
                                             _addr(output_buffer), input_size, output_size,
                                             int(dtype), int(op), int(PacketType.LL16),
                                             int(nblocks), int(nthreads_per_block),
                                             _stream_handle(stream, f"native {self.name}")),
               f"native {self.name} (rank {comm.rank()}, {input_size} bytes)")
        return 0

    def __repr__(self):
        return f"NativeAlgorithm(name={self.name!r}, collective={self.collective!r})"


_compiled_plans = {}


def _compiled_plan(compiled):
    key = (compiled.id, compiled.plan_path)
    if key not in _compiled_plans:
        _compiled_plans[key] = ExecutionPlan(json=compiled.plan_json, rank=compiled.rank)
    return _compiled_plans[key]


def execute_plan(compiled, comm, input_buffer, output_buffer, input_size, output_size, dtype,
                 op=ReduceOp.NOP, stream=0, executor=None, nblocks=0, nthreads_per_block=0,
                 symmetric_memory=False, extras=None, accum_dtype=None):
    """``CompiledAlgorithm.execute``: as :meth:`Algorithm.execute` for a compiled DSL plan."""
    algo = Algorithm(compiled.name, compiled.collective, compiled=compiled)
    return algo.execute(comm, input_buffer, output_buffer, input_size, output_size, dtype, op,
                        stream, executor, nblocks, nthreads_per_block, symmetric_memory, extras,
                        accum_dtype)
