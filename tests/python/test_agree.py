"""Ranks that disagree on a call get an error from Python too (issue 22): the forked ranks of
tests/python/agree_ranks.py on the host backend."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("nranks", [2, 3])
def test_ranks_that_disagree_get_an_error(nranks, tmp_path):
    pytest.importorskip("numpy", reason="the ranks use NumPy arrays on the host backend")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
               MSCCLPP_CACHE_DIR=str(tmp_path), MSCCLPP_PLAN_DIR=os.path.join(ROOT, "plans"),
               MSCCLPP_TUNING_FILE="none", MSCCLPP_HAL="host", MSCCLPP_TIMEOUT="5")
    res = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "python", "agree_ranks.py"),
                          "--nranks", str(nranks)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("every disagreement was an error") == nranks
