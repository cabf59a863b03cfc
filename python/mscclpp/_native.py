"""``mscclpp.compile_native``: build a native algorithm module (C, CUDA or HIP) and load it.

The source includes ``<mscclpp/native.h>`` and exports its algorithms with
``MSCCLPP_NATIVE_MODULE(...)`` (the C ABI, documented in that header and docs/python.md). The
compiled module is cached by content hash in ``<cache>/native/`` (the DSL's plan cache,
:func:`mscclpp.default_cache_dir`), loaded by the C library with dlopen, and its algorithms run
through an :class:`mscclpp.Executor` like plans.
"""

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

from . import runtime
from ._paths import default_cache_dir
from .runtime import MscclppError

__all__ = ["compile_native", "NativeModule", "native_include_dir"]

_HERE = os.path.dirname(os.path.abspath(__file__))

# file name ending -> (language, default backend)
_KINDS = ((".cu", "cuda"), (".hip", "hip"), (".c", "host"), (".cpp", None), (".cc", None),
          (".cxx", None))


def native_include_dir():
    """The folder holding ``mscclpp/native.h``: ``$MSCCLPP_INCLUDE_DIR``, the source tree beside
    this package, ``pkg-config --variable=includedir mscclpp``, or the include folder beside
    the library."""
    cands = [os.environ.get("MSCCLPP_INCLUDE_DIR", ""),
             os.path.join(os.path.dirname(os.path.dirname(_HERE)), "include")]
    try:
        out = subprocess.run(["pkg-config", "--variable=includedir", "mscclpp"],
                             capture_output=True, text=True, timeout=30)
        if out.returncode == 0:
            cands.append(out.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    lib = runtime.library_path()
    if lib:
        d = os.path.dirname(os.path.realpath(lib))
        cands += [os.path.join(d, "..", "include"), os.path.join(d, "..", "..", "include")]
    cands += ["/usr/local/include", "/usr/include"]
    for d in cands:
        if d and os.path.exists(os.path.join(d, "mscclpp", "native.h")):
            return os.path.abspath(d)
    raise MscclppError("compile_native: <mscclpp/native.h> not found (install libmscclpp, or "
                       "set MSCCLPP_INCLUDE_DIR to the folder holding mscclpp/native.h)")


def _backend_of(path, backend):
    for ext, default in _KINDS:
        if path.endswith(ext):
            b = backend or default
            if b is None:   # C++: the library's backend decides the compiler
                b = _library_backend()
            if ext == ".cu" and b != "cuda" or ext == ".hip" and b != "hip":
                raise ValueError(f"compile_native: {os.path.basename(path)} is "
                                 f"{'CUDA' if ext == '.cu' else 'HIP'} source, backend {b!r}")
            return b
    raise ValueError(f"compile_native: {path}: expected a .c (gcc), .cu (nvcc), .hip (hipcc) "
                     f"or .cpp file")


def _library_backend():
    try:
        return runtime.load().mscclpp_backend_name().decode()
    except MscclppError:
        return "host"


def _compiler(backend, path):
    if backend == "cuda":
        return os.environ.get("NVCC") or shutil.which("nvcc") or \
            ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if backend == "hip":
        return os.environ.get("HIPCC") or shutil.which("hipcc") or \
            ("/opt/rocm/bin/hipcc" if os.path.exists("/opt/rocm/bin/hipcc") else None)
    if path.endswith(".c"):
        return os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")


def _command(backend, cc, src, out, inc, flags):
    if backend == "cuda":
        arch = os.environ.get("MSCCLPP_CUDA_ARCH")   # e.g. "sm_90"; nvcc's default otherwise
        cmd = [cc, "-O2", "-shared", "-Xcompiler", "-fPIC", "-I", inc]
        if arch:
            cmd += ["-arch", arch]
    elif backend == "hip":
        cmd = [cc, "-O2", "-shared", "-fPIC", "-I", inc]
        # hipcc asks the driver for the device's arch; with no AMD driver name one instead
        arch = os.environ.get("MSCCLPP_HIP_ARCH") or \
            (None if os.path.exists("/sys/class/kfd") else "gfx90a")
        if arch:
            cmd += [f"--offload-arch={a}" for a in arch.split(",")]
    else:
        cmd = [cc, "-O2", "-shared", "-fPIC", "-I", inc]
        if src.endswith(".c"):
            cmd.append("-std=gnu11")
    return cmd + list(flags) + [src, "-o", out]


def _report(msg):
    """Record the message for mscclpp_last_error() too, when the library is there."""
    try:
        lib = runtime.load()
    except MscclppError:
        return
    fn = lib.mscclpp_report_error
    fn.restype = ctypes.c_int
    fn(ctypes.c_int(-1), b"%s", msg.encode(errors="replace")[:3000])


class NativeModule:
    """A loaded native module: ``algorithms`` (:class:`mscclpp.Algorithm` objects with
    ``is_native_algorithm()`` true), ``path`` (the cached shared object), ``name``.
    ``module.create_<name>_algorithm()`` returns algorithm ``<name>`` (MSCCL++'s capsule
    flow: ``Algorithm.create_from_native_capsule`` takes it)."""

    def __init__(self, name, path, cached):
        from . import bindings

        lib = runtime.load()
        h = ctypes.c_void_p()
        rc = lib.mscclpp_native_load(path.encode(), ctypes.byref(h))
        if rc != 0:
            raise MscclppError(f"compile_native({name!r}): "
                               f"{lib.mscclpp_last_error().decode(errors='replace')} (error {rc})")
        self._handle = h
        self.name = name
        self.path = path
        self.cached = cached   # True when the cache already held this build
        self.algorithms = []
        for i in range(lib.mscclpp_native_count(h)):
            self.algorithms.append(bindings.NativeAlgorithm(
                self, lib.mscclpp_native_name(h, i).decode(),
                lib.mscclpp_native_collective(h, i).decode()))

    @property
    def handle(self):
        return self._handle

    def algorithm(self, name):
        for a in self.algorithms:
            if a.name == name:
                return a
        raise KeyError(f"native module {self.name!r} has no algorithm {name!r} (it has "
                       f"{[a.name for a in self.algorithms]})")

    def __getattr__(self, attr):
        if attr.startswith("create_") and attr.endswith("_algorithm"):
            algo = self.algorithm(attr[len("create_"):-len("_algorithm")])
            return lambda: algo
        raise AttributeError(attr)

    # The module is never unloaded behind the executors' backs: executors keep it referenced
    # and a process exit releases it. close() unloads it explicitly, after the executors.
    def close(self):
        if self._handle:
            runtime.load().mscclpp_native_destroy(self._handle)
            self._handle = None


def compile_native(name, file, backend=None, cache_dir=None, extra_flags=(), force=False):
    """Compile ``file`` (``.c`` with gcc, ``.cu`` with nvcc, ``.hip`` with hipcc; ``.cpp`` with
    the compiler of ``backend``, default the library's) into a native module, cache it under
    ``<cache>/native/<name>-<hash>.so`` (the hash covers the source, ``<mscclpp/native.h>``,
    the compiler and the flags) and load it. Compile errors raise :class:`MscclppError` with
    the compiler's output (also in ``mscclpp_last_error()``), as do a missing
    ``MSCCLPP_NATIVE_MODULE`` and a module built for another ABI version."""
    if not name or not all(c.isalnum() or c in "_-." for c in name):
        raise ValueError(f"compile_native: name {name!r} must be letters, digits, _ - .")
    src = os.path.abspath(os.fspath(file))
    if not os.path.isfile(src):
        raise MscclppError(f"compile_native({name!r}): no file {src}")
    backend = _backend_of(src, backend)
    cc = _compiler(backend, src)
    if not cc:
        tool = {"cuda": "nvcc", "hip": "hipcc"}.get(backend, "gcc")
        raise MscclppError(f"compile_native({name!r}): no compiler for {backend} ({tool} not "
                           f"found)")
    inc = native_include_dir()
    h = hashlib.sha256()
    for part in (open(src, "rb").read(), open(os.path.join(inc, "mscclpp", "native.h"), "rb")
                 .read(), open(os.path.join(inc, "mscclpp", "mscclpp.h"), "rb").read()):
        h.update(len(part).to_bytes(8, "little") + part)
    h.update(repr((backend, os.path.realpath(cc), _command(backend, cc, "S", "O", "I",
                                                           extra_flags))).encode())
    cache = os.path.join(cache_dir or default_cache_dir(), "native")
    os.makedirs(cache, exist_ok=True)
    out = os.path.join(cache, f"{name}-{h.hexdigest()[:20]}.so")
    cached = os.path.exists(out) and not force
    if not cached:
        fd, tmp = tempfile.mkstemp(dir=cache, prefix=".tmp-", suffix=".so")
        os.close(fd)
        try:
            res = subprocess.run(_command(backend, cc, src, tmp, inc, extra_flags),
                                 capture_output=True, text=True, timeout=900)
            if res.returncode != 0:
                msg = (f"compile_native({name!r}): {os.path.basename(cc)} failed on {src} "
                       f"(exit {res.returncode}):\n{(res.stdout + res.stderr).strip()}")
                _report(msg)
                raise MscclppError(msg)
            os.replace(tmp, out)   # atomic: concurrent ranks compiling the same file agree
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return NativeModule(name, out, cached)
