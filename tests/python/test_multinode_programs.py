"""The MSCCL++-style multi-node programs of tests/multinode/programs/: written with MSCCL++'s
import names, run as scripts that print their plan, committed as JSON (up to date), and correct
under the simulator. Running them across network namespaces: test_conformance_multinode.sh."""

import glob
import importlib.util
import json
import os

import pytest

import mscclpp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "tests", "multinode", "programs")
PLANS = sorted(glob.glob(os.path.join(HERE, "*.json")))


def _build():
    spec = importlib.util.spec_from_file_location("mn_programs_build",
                                                  os.path.join(HERE, "build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_plans_match_the_programs():
    generated = dict(_build().plans())
    assert set(generated) == {os.path.basename(p) for p in PLANS}
    stale = [n for n, text in generated.items() if open(os.path.join(HERE, n)).read() != text]
    assert not stale, "stale (run python3 tests/multinode/programs/build.py): " + ", ".join(stale)


def test_programs_use_mscclpp_import_names():
    for prog in _build().PROGRAMS:
        text = open(os.path.join(HERE, prog + ".py")).read()
        for mod in ("channel", "rank", "general", "program", "collectives"):
            assert f"from mscclpp.language.{mod} import *" in text, (prog, mod)
        assert "print(JSON())" in text


@pytest.mark.parametrize("path", PLANS, ids=os.path.basename)
def test_program_plan_is_correct_and_crosses_nodes(path):
    res = mscclpp.verify_plan(path, strict_relaxed=True)
    assert res, str(res)
    assert res.checked_semantics
    assert not res.warnings, res.warnings
    plan = json.load(open(path))
    k, l = (int(x) for x in os.path.basename(path)[:-5].rsplit("_", 1)[1].split("x"))
    assert len(plan["gpus"]) == k * l
    types = {c["channel_type"] for g in plan["gpus"] for c in g["channels"]}
    assert "port" in types, "a multi-node program must use port channels"
