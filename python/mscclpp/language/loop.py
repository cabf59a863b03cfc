"""Pipelined loops (``pipeline`` ops, plan-format §2.7)."""

from .internal.types import DSLError
from .internal.ops import Op
from .program import get_program, set_program  # noqa: F401


class LoopIterationContext:
    """Inside ``with LoopIterationContext(unit, num_chunks):`` every op recorded for a
    (rank, thread block) becomes part of one ``pipeline`` op of that block, run over the data in
    steps of ``unit`` bytes. Chunks used inside should have ``num_chunks`` chunks."""

    def __init__(self, unit, num_chunks):
        if not isinstance(unit, int) or unit <= 0:
            raise DSLError(f"loop unit must be a positive number of bytes, got {unit!r}")
        if not isinstance(num_chunks, int) or num_chunks <= 0:
            raise DSLError(f"num_chunks must be a positive integer, got {num_chunks!r}")
        self.unit = unit
        self.num_chunks = num_chunks
        self._ops = {}

    def add(self, rank, tb, op):
        if op.name == "pipeline":
            raise DSLError("pipelines cannot be nested")
        self._ops.setdefault((rank, tb), []).append(op)

    def __enter__(self):
        get_program().set_loop_context(self)
        self._ops = {}
        return self

    def __exit__(self, exc_type, exc, tb):
        prog = get_program()
        prog.set_loop_context(None)
        if exc_type is None:
            for (rank, t), ops in self._ops.items():
                prog.record(rank, t, Op("pipeline", body=ops, unit=self.unit,
                                        num_chunks=self.num_chunks))
        self._ops = {}
        return False


class Loop:
    @staticmethod
    def iteration(unit, num_chunks):
        return LoopIterationContext(unit, num_chunks)
