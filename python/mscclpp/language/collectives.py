"""Collectives: what a program computes, and the chunk counts of its buffers (plan-format §7.1)."""

from .internal.types import BufferType, DSLError  # noqa: F401 (BufferType: MSCCL++ exports it)
from .rank import BaseBuffer  # noqa: F401 (MSCCL++ exports it here)


class Collective:
    """Base class. ``name`` is the plan's ``collective`` string."""

    name = "custom"

    def __init__(self, num_ranks, chunk_factor, inplace):
        if not isinstance(num_ranks, int) or num_ranks < 1:
            raise DSLError(f"num_ranks must be a positive integer, got {num_ranks!r}")
        if not isinstance(chunk_factor, int) or chunk_factor < 0:
            raise DSLError(f"chunk_factor must be a non-negative integer, got {chunk_factor!r}")
        self.num_ranks = num_ranks
        self.chunk_factor = chunk_factor
        self.inplace = bool(inplace)

    def input_chunks(self, rank):
        raise NotImplementedError

    def output_chunks(self, rank):
        raise NotImplementedError

    def extra_plan_fields(self):
        return {}

    def __repr__(self):
        return (f"{type(self).__name__}({self.num_ranks}, {self.chunk_factor}, "
                f"inplace={self.inplace})")


class AllReduce(Collective):
    name = "allreduce"

    def input_chunks(self, rank):
        return self.num_ranks * self.chunk_factor

    def output_chunks(self, rank):
        return self.num_ranks * self.chunk_factor


class AllGather(Collective):
    name = "allgather"

    def input_chunks(self, rank):
        return self.chunk_factor

    def output_chunks(self, rank):
        return self.num_ranks * self.chunk_factor


class ReduceScatter(Collective):
    name = "reducescatter"

    def input_chunks(self, rank):
        return self.num_ranks * self.chunk_factor

    def output_chunks(self, rank):
        return self.chunk_factor


class AllToAll(Collective):
    name = "alltoall"

    def input_chunks(self, rank):
        return self.num_ranks * self.chunk_factor

    def output_chunks(self, rank):
        return self.num_ranks * self.chunk_factor


class SendRecv(Collective):
    """Every rank sends its input to the next rank of the ring: output of rank r = input of
    rank (r - 1) mod N."""

    name = "sendrecv"

    def input_chunks(self, rank):
        return self.chunk_factor

    def output_chunks(self, rank):
        return self.chunk_factor


class Broadcast(Collective):
    """Every rank's output = the root's input (not an MSCCL++ collective; libmscclpp's)."""

    name = "broadcast"

    def __init__(self, num_ranks, chunk_factor, inplace, root=0):
        super().__init__(num_ranks, chunk_factor, inplace)
        if not isinstance(root, int) or not 0 <= root < num_ranks:
            raise DSLError(f"broadcast root {root!r} is out of range for {num_ranks} ranks")
        self.root = root

    def input_chunks(self, rank):
        return self.chunk_factor

    def output_chunks(self, rank):
        return self.chunk_factor

    def extra_plan_fields(self):
        return {"root": self.root}


class TestCollective(Collective):
    """A collective with free chunk counts and no reference result (plan collective "test")."""

    name = "test"
    __test__ = False  # not a pytest class

    def __init__(self, num_ranks, input_size, output_size, inplace=False):
        super().__init__(num_ranks, 1, inplace)
        if input_size < 0 or output_size < 0:
            raise DSLError("chunk counts must be non-negative")
        self.input_size = input_size
        self.output_size = output_size

    def input_chunks(self, rank):
        return self.input_size

    def output_chunks(self, rank):
        return self.output_size


class CustomCollective(Collective):
    """A named collective with given per-rank chunk counts and no reference result."""

    def __init__(self, name, num_ranks, input_chunks, output_chunks, inplace=False):
        super().__init__(num_ranks, 1, inplace)
        self.name = name
        self._in = input_chunks
        self._out = output_chunks

    def input_chunks(self, rank):
        return self._in

    def output_chunks(self, rank):
        return self._out
