"""Lazy access to the compiled library's Python bindings (not part of this package).

The DSL, the compiler and the simulator are pure Python; only running plans needs the
bindings, which a separate build provides as ``mscclpp._mscclpp``."""

_module = None


def load():
    global _module
    if _module is None:
        try:
            from . import _mscclpp  # noqa: F401  (provided by the native build)
        except ImportError as e:
            raise ImportError(
                "the mscclpp native bindings are not available: the DSL, mscclpp.compile and "
                "the plan checker work without them, but running plans needs libmscclpp's "
                "Python bindings (mscclpp._mscclpp)") from e
        _module = _mscclpp
    return _module
