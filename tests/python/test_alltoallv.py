"""Executor.alltoallv (mscclpp_alltoallv from Python, issue 20 item 4): uneven counts, zeros
included, on 2 to 5 forked ranks of the host backend (tests/python/alltoallv_ranks.py checks
every element)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("nranks", [2, 3, 4, 5])
def test_alltoallv_uneven_counts(nranks, tmp_path):
    pytest.importorskip("numpy", reason="the ranks use NumPy arrays on the host backend")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
               MSCCLPP_CACHE_DIR=str(tmp_path), MSCCLPP_PLAN_DIR=os.path.join(ROOT, "plans"),
               MSCCLPP_TUNING_FILE="none", MSCCLPP_HAL="host", MSCCLPP_TIMEOUT="20")
    res = subprocess.run([sys.executable,
                          os.path.join(ROOT, "tests", "python", "alltoallv_ranks.py"),
                          "--nranks", str(nranks)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("alltoallv right") == nranks, res.stdout + res.stderr
