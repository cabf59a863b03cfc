"""Lazy access to the runtime bindings (:mod:`mscclpp.bindings`, ctypes over libmscclpp).

The DSL, the compiler and the simulator are pure Python; only running plans needs the library,
which is loaded on first use (see :func:`mscclpp.runtime.library_path` for where it is found).
"""

_module = None


def load():
    global _module
    if _module is None:
        from . import bindings

        _module = bindings
    return _module
