"""The MSCCL++ DSL: write collective algorithms in Python, compile them to execution plans.

``from mscclpp.language import *`` brings in the whole public API.
"""

from .internal.types import (
    BufferType, ChannelType, DataAccessType, DSLError, ReduceOperationType, ReplicationPolicy,
    SyncType,
)
from .program import CollectiveProgram, get_program, PLAN_FORMAT
from .collectives import (
    AllGather, AllReduce, AllToAll, Broadcast, Collective, CustomCollective, ReduceScatter,
    SendRecv, TestCollective,
)
from .rank import BaseBuffer, Buffer, Chunk, Rank, Semaphore
from .channel import Channel, MemoryChannel, PortChannel, SwitchChannel
from .thread_block_group import ThreadBlockGroup
from .loop import Loop, LoopIterationContext
from .general import JSON, check
from .utils import AlgoSpec

__all__ = [
    "BufferType", "ChannelType", "DataAccessType", "DSLError", "ReduceOperationType",
    "ReplicationPolicy", "SyncType", "CollectiveProgram", "get_program", "PLAN_FORMAT",
    "AllGather", "AllReduce", "AllToAll", "Broadcast", "Collective", "CustomCollective",
    "ReduceScatter", "SendRecv", "TestCollective", "BaseBuffer", "Buffer", "Chunk", "Rank",
    "Semaphore", "Channel", "MemoryChannel", "PortChannel", "SwitchChannel",
    "ThreadBlockGroup", "Loop", "LoopIterationContext", "JSON", "check", "AlgoSpec",
]
