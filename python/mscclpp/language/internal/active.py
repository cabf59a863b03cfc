"""The program the DSL records into: the one of the enclosing ``with CollectiveProgram(...)``
block, or the one ``set_program`` made active. Ranks, channels, loops and the helpers read it
here; only :mod:`mscclpp.language.program` sets it, so none of them imports the program module
(which re-exports their names, as MSCCL++'s does)."""

from .types import DSLError

_current = None


def get_program():
    """The program of the enclosing ``with CollectiveProgram(...)`` block."""
    if _current is None:
        raise DSLError("no active CollectiveProgram: use the DSL inside "
                       "'with CollectiveProgram(...):'")
    return _current


def current():
    """The active program, or None (no error)."""
    return _current


def set_current(program):
    """Make ``program`` (a CollectiveProgram, checked by the caller) or None the active one."""
    global _current
    _current = program
