"""Enumerations shared by the DSL and the plan format (plan-format §7.1)."""

from enum import Enum


class DSLError(ValueError):
    """A misuse of the DSL: the message says what was wrong and where."""


class BufferType(Enum):
    input = "i"
    output = "o"
    scratch = "s"

    def __str__(self):
        return self.value

    @classmethod
    def coerce(cls, value):
        if isinstance(value, cls):
            return value
        for member in cls:
            if value == member.value or value == member.name:
                return member
        raise DSLError(f"unknown buffer type {value!r} (expected input, output or scratch)")


class ChannelType(Enum):
    port = "port"
    memory = "memory"
    switch = "switch"
    none = "none"

    def __str__(self):
        return self.value


class SyncType(Enum):
    """Block-wide synchronisation (`nop`) inserted around a synchronisation operation."""

    none = "none"
    before = "before"
    after = "after"
    both = "both"

    def __str__(self):
        return self.value

    @classmethod
    def coerce(cls, value):
        if value is None:
            return cls.none
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            for member in cls:
                if value.lower() == member.value:
                    return member
        raise DSLError(f"unknown data_sync {value!r} (expected none, before, after or both)")

    @property
    def bits(self):
        return {"none": 0, "before": 1, "after": 2, "both": 3}[self.value]


class ReduceOperationType(Enum):
    sum = "sum"
    prod = "prod"
    min = "min"
    max = "max"

    def __str__(self):
        return self.value

    @classmethod
    def coerce(cls, value):
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            for member in cls:
                if value.lower() == member.value:
                    return member
        raise DSLError(f"unknown reduce operation {value!r} (expected sum, prod, min or max)")


class ReplicationPolicy(Enum):
    """How `instances` copies of a program share the data.

    interleaved: chunk counts are multiplied by the instance count and a descriptor of size s at
    index v becomes index v*n + i*s for instance i (plan-format §7.7).
    none: blocks, channels and semaphores are replicated but chunk indices and counts are kept;
    the program itself is responsible for giving each instance distinct data (tb groups).
    """

    interleaved = "interleaved"
    none = "none"

    def __str__(self):
        return self.value


class DataAccessType(Enum):
    read = "r"
    write = "w"
    both = "rw"
