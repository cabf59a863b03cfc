"""Program-level helpers."""

from .internal.active import get_program


def JSON(indent=2, rank=None):  # noqa: N802 (seed name)
    """The current program compiled to plan JSON (call inside the ``with`` block)."""
    return get_program().to_json(indent=indent, rank=rank)


def check(**kwargs):
    """Simulate the current program and check that it computes its collective.

    Returns a :class:`mscclpp.simulator.CheckResult` (truthy when correct)."""
    return get_program().check(**kwargs)
