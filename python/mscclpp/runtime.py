"""Run plans on the C library from Python (ctypes over libmscclpp's public C API).

A small, dependency-free path from the DSL to execution: ``run_plan(plan, nranks, ...)`` forks
``nranks`` processes, each a rank of a communicator on the library's backend (the host backend
on a machine without GPUs), runs the plan once and sends its output buffer back.

The library is found through ``$MSCCLPP_LIBRARY`` (a path to libmscclpp.so), then a build tree
beside this package (``build/.libs``), then the system's library path (ldconfig), then
pkg-config's libdir for ``mscclpp``, then the standard prefixes (/usr/local/lib, /usr/lib...).
"""

import ctypes
import ctypes.util
import json
import os
import struct

DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2, "int32": 3, "uint32": 4, "int8": 5,
          "uint8": 6, "float64": 7, "fp8_e4m3": 8, "fp8_e5m2": 9, "int64": 10,
          "uint64": 11}
REDOPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "plan": -1}
UNIQUE_ID_BYTES = 128  # MSCCLPP_UNIQUE_ID_BYTES

_lib = None


class MscclppError(RuntimeError):
    pass


def library_path():
    """Where libmscclpp.so is, or None."""
    env = os.environ.get("MSCCLPP_LIBRARY")
    if env:
        return env if os.path.exists(env) else None
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.normpath(os.path.join(here, "..", "..", "build", ".libs", "libmscclpp.so"))
    if os.path.exists(tree):
        return tree
    found = ctypes.util.find_library("mscclpp")   # ldconfig's cache, then the linker's paths
    if found:
        return found
    dirs = []
    try:   # an install with a pkg-config file (e.g. under a prefix in PKG_CONFIG_PATH)
        import subprocess

        out = subprocess.run(["pkg-config", "--variable=libdir", "mscclpp"],
                             capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            dirs.append(out.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    dirs += ["/usr/local/lib", "/usr/local/lib64", "/usr/lib", "/usr/lib64",
             "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/opt/mscclpp/lib"]
    for d in dirs:
        p = os.path.join(d, "libmscclpp.so")
        if os.path.exists(p):
            return p
    return None


def load():
    """The loaded library (ctypes.CDLL); raises MscclppError when it cannot be found."""
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    if not path:
        raise MscclppError("libmscclpp.so not found: build it (./scripts/build.sh) or set "
                           "MSCCLPP_LIBRARY to its path")
    lib = ctypes.CDLL(path)
    c_int, c_size, c_void = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p
    pp = ctypes.POINTER(c_void)
    sig = {
        "mscclpp_get_unique_id": [c_void],
        "mscclpp_comm_init_rank": [c_void, c_int, c_int, pp],
        "mscclpp_comm_create": [c_void, pp],
        "mscclpp_comm_destroy": [c_void],
        "mscclpp_comm_rank": [c_void, ctypes.POINTER(c_int)],
        "mscclpp_comm_size": [c_void, ctypes.POINTER(c_int)],
        "mscclpp_comm_local_size": [c_void, ctypes.POINTER(c_int)],
        "mscclpp_comm_bootstrap": [c_void, pp],
        "mscclpp_bootstrap_create_from_address": [ctypes.c_char_p, c_int, c_int, pp],
        "mscclpp_bootstrap_barrier": [c_void],
        "mscclpp_bootstrap_destroy": [c_void],
        "mscclpp_executor_create": [c_void, pp],
        "mscclpp_executor_destroy": [c_void],
        "mscclpp_executor_register_plan": [c_void, c_void, c_int, ctypes.c_char_p],
        "mscclpp_executor_select_plan": [c_void, ctypes.c_char_p, c_int, ctypes.c_uint64,
                                         ctypes.c_char_p, pp],
        "mscclpp_plan_load_string": [ctypes.c_char_p, c_size, pp],
        "mscclpp_plan_load_file": [ctypes.c_char_p, pp],
        "mscclpp_plan_destroy": [c_void],
        "mscclpp_malloc": [c_size, pp],
        "mscclpp_free": [c_void],
        "mscclpp_memcpy": [c_void, c_void, c_size],
        "mscclpp_stream_synchronize": [c_void],
        "mscclpp_stream_create": [pp],
        "mscclpp_stream_destroy": [c_void],
        "mscclpp_stream_wrap": [c_void, pp],
        "mscclpp_stream_begin_capture": [c_void],
        "mscclpp_stream_end_capture": [c_void, pp],
        "mscclpp_stream_is_capturing": [c_void, ctypes.POINTER(c_int)],
        "mscclpp_graph_launch": [c_void, c_void],
        "mscclpp_graph_destroy": [c_void],
        "mscclpp_execute": [c_void, c_void, c_void, c_void, c_size, c_size, c_int, c_int, c_void],
        "mscclpp_execute_ex": [c_void, c_void, c_void, c_void, c_size, c_size, c_int, c_int,
                               c_int, c_void],
        "mscclpp_allreduce": [c_void, c_void, c_void, c_size, c_int, c_int, c_void],
        "mscclpp_allgather": [c_void, c_void, c_void, c_size, c_int, c_void],
        "mscclpp_reducescatter": [c_void, c_void, c_void, c_size, c_int, c_int, c_void],
        "mscclpp_alltoall": [c_void, c_void, c_void, c_size, c_int, c_void],
        # send, sendcounts, sdispls, recv, recvcounts, rdispls, dtype, stream
        "mscclpp_alltoallv": [c_void, c_void, ctypes.POINTER(c_size), ctypes.POINTER(c_size),
                              c_void, ctypes.POINTER(c_size), ctypes.POINTER(c_size), c_int,
                              c_void],
        "mscclpp_broadcast": [c_void, c_void, c_void, c_size, c_int, c_int, c_void],
        # send, recv, bytes, dtype, op, packet, nblocks, nthreads_per_block, stream
        "mscclpp_execute_launch": [c_void, c_void, c_void, c_void, c_size, c_size, c_int, c_int,
                                   c_int, c_int, c_int, c_void],
        "mscclpp_executor_choose_plan": [c_void, ctypes.c_char_p, c_int, ctypes.c_uint64, pp,
                                         ctypes.POINTER(c_int)],
        "mscclpp_native_load": [ctypes.c_char_p, pp],
        "mscclpp_native_destroy": [c_void],
        "mscclpp_executor_register_native": [c_void, c_void, c_void, ctypes.c_char_p, c_int,
                                             ctypes.c_char_p, pp],
        "mscclpp_executor_release_natives": [c_void],
        "mscclpp_nvls_supported": [ctypes.POINTER(c_int)],
        "mscclpp_reduce": [c_void, c_void, c_void, c_size, c_int, c_int, c_int, c_void],
        # collective, protocol, nranks, node_of, root, rank, plan
        "mscclpp_plan_make": [ctypes.c_char_p, ctypes.c_char_p, c_int, ctypes.POINTER(c_int),
                              c_int, c_int, pp],
        "mscclpp_plan_to_json": [c_void, ctypes.c_char_p, c_size, ctypes.POINTER(c_size)],
    }
    for name, args in sig.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = c_int
    lib.mscclpp_last_error.restype = ctypes.c_char_p
    lib.mscclpp_last_error.argtypes = []
    lib.mscclpp_backend_name.restype = ctypes.c_char_p
    lib.mscclpp_backend_name.argtypes = []
    lib.mscclpp_dtype_size.restype = c_size
    lib.mscclpp_dtype_size.argtypes = [c_int]
    for name in ("mscclpp_plan_name", "mscclpp_plan_collective"):
        getattr(lib, name).restype = ctypes.c_char_p
        getattr(lib, name).argtypes = [c_void]
    for name in ("mscclpp_native_name", "mscclpp_native_collective"):
        getattr(lib, name).restype = ctypes.c_char_p
        getattr(lib, name).argtypes = [c_void, c_int]
    for name in ("mscclpp_plan_world_size", "mscclpp_plan_is_inplace", "mscclpp_native_count",
                 "mscclpp_plan_num_blocks", "mscclpp_plan_is_native"):
        getattr(lib, name).restype = c_int
        getattr(lib, name).argtypes = [c_void]
    for name in ("mscclpp_plan_min_message_size", "mscclpp_plan_max_message_size"):
        getattr(lib, name).restype = ctypes.c_uint64
        getattr(lib, name).argtypes = [c_void]
    _lib = lib
    return lib


def _check(lib, rc, what):
    if rc != 0:
        raise MscclppError(f"{what}: error {rc}: {lib.mscclpp_last_error().decode()}")


def _rank_main(lib, uid, rank, nranks, plan_text, in_bytes, out_bytes, layout, inputs, dtype,
               op):
    comm, ex, plan = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    _check(lib, lib.mscclpp_comm_init_rank(uid, rank, nranks, ctypes.byref(comm)), "comm")
    _check(lib, lib.mscclpp_executor_create(comm, ctypes.byref(ex)), "executor")
    data = plan_text.encode()
    _check(lib, lib.mscclpp_plan_load_string(data, len(data), ctypes.byref(plan)), "plan")
    total = max(in_bytes, out_bytes) * (nranks if layout != "separate" else 1)
    a, b = ctypes.c_void_p(), ctypes.c_void_p()
    _check(lib, lib.mscclpp_malloc(max(total, in_bytes, out_bytes, 64), ctypes.byref(a)), "malloc")
    _check(lib, lib.mscclpp_malloc(max(total, in_bytes, out_bytes, 64), ctypes.byref(b)), "malloc")
    if layout == "separate":
        send, recv = a.value, b.value
    elif layout == "inplace-allgather":      # send is this rank's slot of recv
        recv = b.value
        send = recv + rank * in_bytes
    elif layout == "inplace-reducescatter":  # recv is this rank's slot of send
        send = b.value
        recv = send + rank * out_bytes
    else:                                    # in place: one buffer
        send = recv = b.value
    ctypes.memmove(send, inputs[rank], in_bytes)
    _check(lib, lib.mscclpp_execute(ex, plan, send, recv, in_bytes, out_bytes, DTYPES[dtype],
                                    REDOPS[op], None), "execute")
    out = ctypes.string_at(b.value if layout != "separate" else recv,
                           out_bytes if layout != "inplace-reducescatter" else in_bytes)
    if layout == "inplace-reducescatter":
        out = out[rank * out_bytes:(rank + 1) * out_bytes]
    lib.mscclpp_plan_destroy(plan)
    lib.mscclpp_executor_destroy(ex)
    lib.mscclpp_free(a)
    lib.mscclpp_free(b)
    lib.mscclpp_comm_destroy(comm)
    return out


def _child_unique_id(lib, rank, nranks, id_pipes):
    """In a forked rank: rank 0 creates the id and writes it to every other rank's pipe;
    the others read theirs (a closed pipe means rank 0 failed before sending)."""
    uid = ctypes.create_string_buffer(UNIQUE_ID_BYTES)
    if rank == 0:
        for r, (a, _) in enumerate(id_pipes):
            os.close(a)
        rc = lib.mscclpp_get_unique_id(uid)
        for r in range(1, nranks):
            os.write(id_pipes[r][1], uid.raw if rc == 0 else b"")
            os.close(id_pipes[r][1])
        os.close(id_pipes[0][1])
        _check(lib, rc, "unique id")
        return uid
    for r, (a, b) in enumerate(id_pipes):
        os.close(b)
        if r != rank:
            os.close(a)
    data = b""
    with os.fdopen(id_pipes[rank][0], "rb") as f:
        while len(data) < UNIQUE_ID_BYTES:
            part = f.read(UNIQUE_ID_BYTES - len(data))
            if not part:
                break
            data += part
    if len(data) != UNIQUE_ID_BYTES:
        raise MscclppError(f"rank {rank}: no unique id from rank 0 (it failed before sending)")
    ctypes.memmove(uid, data, UNIQUE_ID_BYTES)
    return uid


def run_plan(plan, nranks, inputs, in_bytes, out_bytes, dtype="float32", op="plan"):
    """Run `plan` (dict, JSON text or path) once on `nranks` forked ranks.

    inputs[r] is rank r's input (bytes of length in_bytes). Buffers are laid out as the plan's
    collective and "inplace" flag require (plan-format §3.3). Returns the list of output buffers.
    Every wait inside the library is bounded by MSCCLPP_TIMEOUT, so a broken plan ends with an
    error (MscclppError naming the ranks and the library's message), not a hang.
    """
    if isinstance(plan, dict):
        text = json.dumps(plan)
    elif isinstance(plan, str) and plan.lstrip().startswith("{"):
        text = plan
    else:
        with open(plan) as f:
            text = f.read()
    meta = json.loads(text)
    if not meta.get("inplace"):
        layout = "separate"
    elif meta["collective"] == "allgather":
        layout = "inplace-allgather"
    elif meta["collective"] == "reducescatter":
        layout = "inplace-reducescatter"
    else:
        layout = "inplace"
    lib = load()
    # Fork first, then create the unique id in rank 0: mscclpp_get_unique_id starts the
    # bootstrap root thread, and a child forked after that inherits whatever locks that thread
    # held at the fork (the allocator's, for one), which can hang the child. Rank 0 sends the
    # id to the other ranks through one pipe each.
    id_pipes = [os.pipe() for _ in range(nranks)]
    children = []
    for r in range(nranks):
        rd, wr = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rd)
            code = 0
            try:
                uid = _child_unique_id(lib, r, nranks, id_pipes)
                out = _rank_main(lib, uid, r, nranks, text, in_bytes, out_bytes, layout, inputs,
                                 dtype, op)
                payload = b"K" + out
            except Exception as e:  # report to the parent; never raise out of a child
                payload = b"E" + str(e).encode()
                code = 1
            with os.fdopen(wr, "wb") as f:
                f.write(struct.pack("<Q", len(payload)) + payload)
            os._exit(code)
        os.close(wr)
        children.append((pid, rd))
    for a, b in id_pipes:
        os.close(a)
        os.close(b)
    outputs, errors = [], []
    for r, (pid, rd) in enumerate(children):
        with os.fdopen(rd, "rb") as f:
            head = f.read(8)
            payload = f.read(struct.unpack("<Q", head)[0]) if len(head) == 8 else b"Eno answer"
        os.waitpid(pid, 0)
        if payload[:1] == b"K":
            outputs.append(payload[1:])
        else:
            outputs.append(None)
            errors.append(f"rank {r}: {payload[1:].decode(errors='replace')}")
    if errors:
        raise MscclppError("; ".join(errors))
    return outputs


def make_plan(collective, nranks, node_of=None, protocol="Simple", root=0, rank=-1):
    """The plan the C library makes for a job of ``nranks`` ranks, rank r on node ``node_of[r]``
    (default: one node), as a dict (plan-format JSON; docs/plan-selection.md). ``rank`` -1
    gives every rank's part; a rank gives that rank's part (with ``"rank_subset"``)."""
    lib = load()
    nodes = None
    if node_of is not None:
        if len(node_of) != nranks:
            raise ValueError(f"node_of has {len(node_of)} entries for {nranks} ranks")
        nodes = (ctypes.c_int * nranks)(*node_of)
    plan = ctypes.c_void_p()
    _check(lib, lib.mscclpp_plan_make(collective.encode(), protocol.encode(), nranks, nodes, root,
                                      rank, ctypes.byref(plan)), f"make {collective} plan")
    try:
        size = ctypes.c_size_t()
        _check(lib, lib.mscclpp_plan_to_json(plan, None, 0, ctypes.byref(size)), "plan to JSON")
        buf = ctypes.create_string_buffer(size.value + 1)
        _check(lib, lib.mscclpp_plan_to_json(plan, buf, size.value + 1, ctypes.byref(size)),
               "plan to JSON")
        return json.loads(buf.value.decode())
    finally:
        lib.mscclpp_plan_destroy(plan)
