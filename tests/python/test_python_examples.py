"""The examples in examples/python run as tests: 2 ranks as processes, NumPy on the host backend
here (PyTorch tensors on CUDA where torch and a GPU are present). Each example checks its bytes
and exits non-zero when a rank fails."""

import os
import subprocess
import sys

import pytest

from mscclpp import runtime

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples", "python")

pytestmark = pytest.mark.skipif(
    runtime.library_path() is None,
    reason="libmscclpp.so not built (run ./scripts/build.sh or set MSCCLPP_LIBRARY)")


def run_example(name, tmp_path, nranks=2):
    pytest.importorskip("numpy", reason="the examples use NumPy tensors on the host backend")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
               MSCCLPP_CACHE_DIR=str(tmp_path))
    res = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), "--nranks", str(nranks)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"all {nranks} ranks passed" in res.stdout
    return res.stdout


def test_customized_comm_with_default_algo(tmp_path):
    out = run_example("customized_comm_with_default_algo.py", tmp_path)
    assert out.count("allreduce and allgather correct") == 2


def test_customized_comm_with_dsl(tmp_path):
    out = run_example("customized_comm_with_dsl.py", tmp_path)
    assert out.count("DSL allreduce correct") == 2


@pytest.mark.parametrize("nranks", [2, 4])
def test_customized_comm_with_native_algorithm(tmp_path, nranks):
    out = run_example("customized_comm_with_native.py", tmp_path, nranks)
    assert out.count("native allreduce correct") == nranks
