"""MSCCL++'s ``mscclpp.ext``: algorithms and a selector for the NCCL-API library.

``AlgorithmCollectionBuilder`` (a process-wide singleton, as in MSCCL++) collects DSL
algorithms (``mscclpp.compile`` results) and a selector, and hands them, in the process, to
``libmscclpp_nccl.so`` (preloaded or linked): PyTorch's ``backend="nccl"`` then runs a DSL plan
where the selector says so. See docs/nccl.md, "Choosing algorithms from Python".
"""

from .algorithm_collection_builder import (AlgorithmCollection, AlgorithmCollectionBuilder,
                                           CollectiveRequest, nccl_library)

__all__ = ["AlgorithmCollection", "AlgorithmCollectionBuilder", "CollectiveRequest",
           "nccl_library"]
