"""Where the Python package keeps what it makes (a leaf: imports nothing of the package)."""
import os


def default_cache_dir():
    """``$MSCCLPP_CACHE_DIR``, else ``~/.cache/mscclpp``: where :func:`mscclpp.compile`,
    :func:`mscclpp.compile_native` and ``python3 -m mscclpp --install`` write. The C library
    reads it only when ``MSCCLPP_CACHE_DIR`` is set (:class:`mscclpp.Executor` sets it)."""
    d = os.environ.get("MSCCLPP_CACHE_DIR")
    if d:
        return d
    return os.path.join(os.path.expanduser("~"), ".cache", "mscclpp")
