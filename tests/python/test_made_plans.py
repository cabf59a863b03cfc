"""Plans the C library makes for the job at hand (executor/made.c) compute their collective.

Every collective on every shape of the list (one node of 1 to 20 ranks, node layouts 2x1 ...
4x4, 3x2, 5x3, uneven and cyclic ones), written as JSON by the library and simulated chunk by
chunk (races checked, relaxed signals strict): the simulator compares every rank's output with
what the collective must produce. On one node of up to 8 ranks the made plans are the DSL's own
default plans op for op (tests/unit/test_made.c), so they are checked against the DSL there.
"""

import pytest

import mscclpp
from mscclpp import runtime

try:
    runtime.load()
    HAVE_LIB = True
except runtime.MscclppError:
    HAVE_LIB = False

pytestmark = pytest.mark.skipif(not HAVE_LIB, reason="libmscclpp.so not built (set "
                                "MSCCLPP_LIBRARY)")

# (name, node sizes, cyclic: rank r on node r % nodes instead of node-major)
SHAPES = [(f"1x{n}", [n], False) for n in (1, 2, 3, 4, 5, 7, 9, 12, 16, 17, 18)] + [
    ("2x1", [1, 1], False), ("2x2", [2, 2], False), ("2x3", [3, 3], False),
    ("2x4", [4, 4], False), ("3x1", [1, 1, 1], False), ("3x2", [2, 2, 2], False),
    ("3x3", [3, 3, 3], False), ("4x1", [1] * 4, False), ("4x2", [2] * 4, False),
    ("4x3", [3] * 4, False), ("4x4", [4] * 4, False), ("5x3", [3] * 5, False),
    ("2+3+1", [2, 3, 1], False), ("1+4", [1, 4], False), ("5+2+3", [5, 2, 3], False),
    ("3+1+1+2", [3, 1, 1, 2], False), ("cyclic3x2", [2, 2, 2], True),
    ("17+2", [17, 2], False),
]
COLLECTIVES = ["allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce"]


def node_of(sizes, cyclic):
    n = sum(sizes)
    if cyclic:
        return [r % len(sizes) for r in range(n)]
    out = []
    for k, s in enumerate(sizes):
        out += [k] * s
    return out


CASES = []
for name, sizes, cyclic in SHAPES:
    n = sum(sizes)
    for coll in COLLECTIVES:
        roots = sorted({0, n - 1, n // 2}) if coll in ("broadcast", "reduce") else [0]
        for root in roots:
            CASES.append((name, sizes, cyclic, coll, "Simple", root))
    if 1 < n <= 17 and len(sizes) == 1:
        CASES.append((name, sizes, cyclic, "allreduce", "LL", 0))
    if len(sizes) > 1:   # packet plans across nodes (where the layout fits one)
        for coll in ("allreduce", "allgather", "reducescatter"):
            CASES.append((name, sizes, cyclic, coll, "LL", 0))


@pytest.mark.parametrize("shape,sizes,cyclic,coll,proto,root", CASES,
                         ids=[f"{c[0]}-{c[3]}-{c[4]}-root{c[5]}" for c in CASES])
def test_made_plan_computes_its_collective(shape, sizes, cyclic, coll, proto, root):
    n = sum(sizes)
    try:
        plan = runtime.make_plan(coll, n, node_of(sizes, cyclic), protocol=proto, root=root)
    except runtime.MscclppError as e:
        if proto == "LL" and "too many peers" in str(e):
            pytest.skip(f"no packet plan for this layout: {e}")
        raise
    res = mscclpp.verify_plan(plan, strict_relaxed=True)
    assert res, f"{plan['name']}: {res}"
    assert res.checked_semantics
    assert not res.warnings, res.warnings


def test_one_rank_part_is_partial():
    plan = runtime.make_plan("allreduce", 6, [0, 0, 1, 1, 2, 2], rank=3)
    assert plan["rank_subset"] == [3]
    assert [len(g["threadblocks"]) > 0 for g in plan["gpus"]] == [False, False, False, True,
                                                                    False, False]
