"""libmscclpp Python package: the MSCCL++ DSL, plan compilation and verification.

Importing this package never needs the compiled library; bindings are loaded lazily on first
use of a name that needs them.
"""

from ._version import __version__
from .language.utils import AlgoSpec
from .language.internal.types import ReduceOperationType, BufferType, SyncType
from ._compiler import compile, CompiledAlgorithm, Constraint
from ._paths import default_cache_dir
from .simulator import simulate, verify_plan, CheckResult
from ._native import compile_native, NativeModule

_BINDING_NAMES = frozenset([
    "Executor", "ExecutionPlan", "Communicator", "CommGroup", "RawGpuBuffer",
    "AlgorithmCollectionBuilder", "Algorithm", "DataType", "ReduceOp", "is_nvls_supported",
    "PacketType", "MscclppError", "NativeAlgorithm", "Stream", "Graph",
])


def __getattr__(name):
    if name == "AlgorithmCollectionBuilder":  # mscclpp.ext's (it loads the bindings itself)
        from .ext import AlgorithmCollectionBuilder

        return AlgorithmCollectionBuilder
    if name in _BINDING_NAMES:
        from . import _binding

        return getattr(_binding.load(), name)
    raise AttributeError(f"module 'mscclpp' has no attribute {name!r}")


__all__ = ["__version__", "AlgoSpec", "compile", "CompiledAlgorithm", "Constraint",
           "default_cache_dir", "compile_native", "NativeModule", "simulate", "verify_plan", "CheckResult", "language",
           "ReduceOperationType", "BufferType", "SyncType"]
