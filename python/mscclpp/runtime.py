"""Run plans on the C library from Python (ctypes over libmscclpp's public C API).

A small, dependency-free path from the DSL to execution: ``run_plan(plan, nranks, ...)`` forks
``nranks`` processes, each a rank of a communicator on the library's backend (the host backend
on a machine without GPUs), runs the plan once and sends its output buffer back.

The library is found through ``$MSCCLPP_LIBRARY`` (a path to libmscclpp.so), then a build tree
beside this package (``build/.libs``), then the system's library path.
"""

import ctypes
import ctypes.util
import json
import os
import struct

DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2, "int32": 3, "uint32": 4, "int8": 5,
          "uint8": 6, "float64": 7, "fp8_e4m3": 8, "fp8_e5m2": 9}
REDOPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "plan": -1}

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
    return ctypes.util.find_library("mscclpp")


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
        "mscclpp_comm_destroy": [c_void],
        "mscclpp_executor_create": [c_void, pp],
        "mscclpp_executor_destroy": [c_void],
        "mscclpp_plan_load_string": [ctypes.c_char_p, c_size, pp],
        "mscclpp_plan_destroy": [c_void],
        "mscclpp_malloc": [c_size, pp],
        "mscclpp_free": [c_void],
        "mscclpp_execute": [c_void, c_void, c_void, c_void, c_size, c_size, c_int, c_int, c_void],
    }
    for name, args in sig.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = c_int
    lib.mscclpp_last_error.restype = ctypes.c_char_p
    lib.mscclpp_last_error.argtypes = []
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
    uid = ctypes.create_string_buffer(128)
    _check(lib, lib.mscclpp_get_unique_id(uid), "unique id")
    children = []
    for r in range(nranks):
        rd, wr = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rd)
            code = 0
            try:
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
