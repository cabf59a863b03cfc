"""tests/gpu/kern_trace.py, the reader of the interpreter's phase trace (MSCCLPP_KERN_TRACE,
docs/gpu.md), on small files in the format executor/exec_trace.c writes (no GPU needed): the
entry skew between ranks, each phase's min / median / max over the blocks, a point a block did
not reach, and the errors for no files and a malformed line; and, where the build has
mscclpp-bench, scripts/gpu-check.sh step trace's host dry run (--host) end to end."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT, bench_path, gpu_check_host

READER = os.path.join(ROOT, "tests", "gpu", "kern_trace.py")

sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
import kern_trace  # noqa: E402

HEADER = """# mscclpp interpreter phase trace (MSCCLPP_KERN_TRACE)
rank {rank}
plan direct_allreduce_2
collective allreduce
in_bytes 67108864
out_bytes 67108864
blocks 3
threads 512
launches 25
base_ns {base}
"""


def write_rank(prefix, rank, base, rows):
    with open(f"{prefix}.rank{rank}.txt", "w", encoding="utf-8") as f:
        f.write(HEADER.format(rank=rank, base=base))
        for b, row in enumerate(rows):
            f.write(f"block {b} {row}\n")


ROWS = ["entry=0.000 staged=1.000 fenced=3.000 op0:signal=3.500 op1:wait=10.000 op2:rre=80.000 "
        "exit=82.000",
        "entry=2.000 staged=2.500 fenced=4.000 op0:signal=4.500 op1:wait=12.000 op2:rre=84.000 "
        "exit=90.000",
        "entry=4.000 staged=5.000 fenced=7.000 op0:signal=8.000 op1:wait=15.000 op2:rre=86.000 "
        "exit=88.000"]


def run(*args):
    p = subprocess.run([sys.executable, READER, *args], capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout, p.stderr


def test_phases_and_skew(tmp_path):
    prefix = str(tmp_path / "kt")
    write_rank(prefix, 0, 1_000_000, ROWS)
    write_rank(prefix, 1, 1_007_500, ROWS)
    rc, out, err = run(prefix)
    assert rc == 0, err
    assert "2 ranks, plan direct_allreduce_2 (allreduce, 67108864 B in" in out, out
    assert "rank 0 +0.000, rank 1 +7.500" in out, out
    lines = [ln.split() for ln in out.splitlines() if ln.startswith("  ")]
    rank0 = {" ".join(w[:-5]): [float(x) for x in w[-5:-2]] for w in lines[:8]}
    assert rank0["entry"] == [0.0, 2.0, 4.0]
    assert rank0["prologue"] == [0.5, 1.0, 1.0]
    assert rank0["fence"] == [1.5, 2.0, 2.0]
    assert rank0["op1 wait"] == [6.5, 7.0, 7.5]
    assert rank0["op2 rre"] == [70.0, 71.0, 72.0]
    assert rank0["epilogue"] == [2.0, 2.0, 6.0]
    assert rank0["total"] == [82.0, 84.0, 88.0]
    assert "the last out at 90.000 us" in out
    assert "smallest gap between two stamps: 0.500 us" in out, out
    # block 0 passed the fence at 3, the others at 4 and 7: the hand-off's hop is 5.5 - 3
    assert out.count("  fence passed: block 0 at 3.000 us, the other 2 blocks at "
                     "4.000 / 5.500 / 7.000 (hop +2.500 us)") == 2, out
    rc, out, _ = run("--brief", prefix)
    assert rc == 0
    assert out.strip() == ("direct_allreduce_2 x2: skew 7.5 us, medians (us) prologue 1.0, "
                           "fence 2.0, op0 signal 0.5, op1 wait 7.0, op2 rre 71.0, "
                           "epilogue 2.0, total 84.0, fence hop +2.5"), out


def test_no_hop_without_a_fence_or_other_blocks(tmp_path):
    # a launch that did not fence (no stamp), or one block alone: no hand-off to report
    prefix = str(tmp_path / "kt")
    write_rank(prefix, 0, 5, ["entry=0.000 staged=1.000 fenced=- op0:wait=9.000 exit=10.000",
                              "entry=0.500 staged=1.000 fenced=- op0:wait=9.000 exit=10.000"])
    write_rank(prefix, 1, 5, ["entry=0.000 staged=1.000 fenced=2.000 op0:wait=9.000 exit=10.000"])
    rc, out, err = run(prefix)
    assert rc == 0 and "fence passed" not in out, out + err
    rc, out, _ = run("--brief", prefix)
    assert rc == 0 and "hop" not in out, out


def test_unreached_point_spans_from_the_last_reached(tmp_path):
    prefix = str(tmp_path / "kt")
    write_rank(prefix, 0, 5, ["entry=0.000 staged=1.000 fenced=- op0:wait=9.000 exit=-"])
    info = kern_trace.parse(prefix + ".rank0.txt")
    assert kern_trace.phases(info["rows"][0]) == [("entry", 0.0), ("prologue", 1.0),
                                                  ("op0:wait", 8.0)]
    rc, out, _ = run(prefix)
    assert rc == 0 and "the last out at - us" in out, out


def test_errors(tmp_path):
    rc, _, err = run(str(tmp_path / "none"))
    assert rc == 1 and "MSCCLPP_KERN_TRACE" in err
    prefix = str(tmp_path / "bad")
    write_rank(prefix, 0, 5, ["entry=0.000 staged"])
    with pytest.raises(ValueError, match="bad point 'staged'"):
        kern_trace.parse(prefix + ".rank0.txt")
    with open(prefix + ".rank0.txt", "w", encoding="utf-8") as f:
        f.write(HEADER.format(rank=0, base=5) + "block entry=0.000\n")
    with pytest.raises(ValueError, match="a block line without its number"):
        kern_trace.parse(prefix + ".rank0.txt")


@pytest.mark.skipif(not os.access(bench_path(), os.X_OK), reason="mscclpp-bench is not built")
def test_gpu_check_trace_host_dry_run(tmp_path):
    # the step on the host backend: every plan traced on both ranks, the tables and the summary
    p = gpu_check_host("trace", tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert "| trace | OK | direct_allreduce_cuda_2 x2: skew " in summary, summary
    assert "; direct_broadcast_cuda_2 x2: skew " in summary, summary
    assert "; default_allreduce_simple_cuda_2 x2: skew " in summary, summary
    # the direct allreduce's first op is its data op (no opening handshake: plans/_common.py)
    assert ", fence " in summary and ", op0 rres " in summary, summary
    assert ", epilogue " in summary, summary
    # the direct plans fence every launch on several blocks: the hand-off's hop is reported
    direct = summary.split("direct_allreduce_cuda_2 x2: ")[1].split(";")[0]
    assert ", fence hop " in direct, summary
    for plan in ("allreduce_direct_2", "broadcast_direct_2", "allreduce_simple_2"):
        for r in (0, 1):
            info = kern_trace.parse(str(tmp_path / f"trace-{plan}.rank{r}.txt"))
            assert info["rank"] == r and info["in_bytes"] == 4 << 20, info
            assert len(info["rows"]) == info["blocks"] > 0, info
        md = (tmp_path / f"trace-{plan}.md").read_text()
        assert "entry skew between ranks" in md and "\n  total " in md, md
