"""The DSL tutorial's program (examples/dsl/allgather_tutorial.py), step by step as
docs/dsl-tutorial.md tells it: write the plan, verify it, run it, tune it."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from mscclpp import runtime, verify_plan

EXAMPLE = os.path.join(ROOT, "examples", "dsl", "allgather_tutorial.py")


def load_example():
    spec = importlib.util.spec_from_file_location("allgather_tutorial", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def need_library():
    if runtime.library_path() is None:
        pytest.skip("libmscclpp.so not found (build it, or set MSCCLPP_LIBRARY)")


def expected_output(nranks, block):
    # allgather: block r of every rank's output is rank r's input
    return b"".join(bytes([r + 1]) * block for r in range(nranks))


@pytest.mark.parametrize("nranks", [2, 3, 4])
def test_write_and_verify(nranks, tmp_path):
    out = tmp_path / "plan.json"
    assert load_example().main(["--num_ranks", str(nranks), "-o", str(out)]) == 0
    plan = json.loads(out.read_text())
    assert plan["collective"] == "allgather" and len(plan["gpus"]) == nranks
    res = verify_plan(str(out))
    assert res, str(res)
    # the same through the command line the tutorial shows
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    cli = subprocess.run([sys.executable, "-m", "mscclpp", "verify", str(out)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert cli.returncode == 0 and "OK (allgather)" in cli.stdout, cli.stdout + cli.stderr


def test_a_broken_program_fails_verification():
    # leave out the wait: the verifier must say the output is not ready / the counters unbalanced
    mod = load_example()
    plan = json.loads(mod.allgather(2).to_json())
    for g in plan["gpus"]:
        for tb in g["threadblocks"]:
            tb["ops"] = [op for op in tb["ops"] if op["name"] != "wait"]
    assert not verify_plan(plan)


@pytest.mark.parametrize("nranks", [2, 4])
def test_run(nranks):
    need_library()
    plan = json.loads(load_example().allgather(nranks).to_json())
    block = 256
    inputs = [bytes([r + 1]) * block for r in range(nranks)]
    outs = runtime.run_plan(plan, nranks, inputs, block, block * nranks)
    assert outs == [expected_output(nranks, block)] * nranks


def test_tune_instances():
    # more thread blocks: same bytes, twice the blocks
    mod = load_example()
    one = json.loads(mod.allgather(3).to_json())
    two = json.loads(mod.allgather(3, instances=2).to_json())
    assert len(two["gpus"][0]["threadblocks"]) == 2 * len(one["gpus"][0]["threadblocks"])
    assert verify_plan(two)
    need_library()
    block = 512
    inputs = [bytes([r + 1]) * block for r in range(3)]
    assert runtime.run_plan(two, 3, inputs, block, 3 * block) == [expected_output(3, block)] * 3
