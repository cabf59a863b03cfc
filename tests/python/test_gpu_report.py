"""tests/gpu/gpu_report.py, the tables scripts/gpu-check.sh writes into its report (no GPU needed:
the records are mscclpp-bench --json rows written here)."""

import json
import os
import subprocess
import sys

from conftest import ROOT

REPORT = os.path.join(ROOT, "tests", "gpu", "gpu_report.py")


def row(name, size, time_us):
    # the fields of one mscclpp-bench --json record that the report reads (`plan`: the plan's
    # name, `plan_file`: the file given to --plan)
    return {"collective": "allreduce", "plan": name, "plan_file": f"/v/{name}.json",
            "nranks": 2, "size": size,
            "out_of_place": {"time_us": time_us, "algbw": 0.1, "busbw": 0.1, "wrong": None},
            "in_place": None}


def test_variants_keep_their_file_names(tmp_path):
    # two candidates of gen_variants.py (allreduce_pkt with 1 and 2 instances): each must keep
    # its own row, and the best per size must name the faster one (the report cut 5 characters,
    # a ".json" it expected, off `plan`: both became "allreduce_pkt", one row, one time per size)
    for name, t in (("allreduce_pkt_i1_2", 20.0), ("allreduce_pkt_i2_2", 10.0)):
        with open(tmp_path / f"variant-{name}.json", "w") as f:
            for size in (8, 64):
                f.write(json.dumps(row(name, size, t + size / 64)) + "\n")
    out = subprocess.run([sys.executable, REPORT, str(tmp_path), ""], check=True,
                         capture_output=True, text=True).stdout
    assert "| allreduce_pkt_i1_2 | 2 | 20.1 | 21.0 |" in out, out
    assert "| allreduce_pkt_i2_2 | 2 | 10.1 | 11.0 |" in out, out
    assert "| allreduce | 2 | 8 | allreduce_pkt_i2_2 | 10.12 |" in out, out
