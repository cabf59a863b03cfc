"""tests/gpu/bench_fit.py, the tables of scripts/gpu-check.sh steps `fit` and `auto` (no GPU
needed): its least-squares split of a call into a fixed cost and a loop rate, checked on rows
made to a known line, and the per-mode comparison; and, where the build has mscclpp-bench, the
two steps' host dry run (gpu-check.sh --host) end to end."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, bench_path, gpu_check_host

FIT = os.path.join(ROOT, "tests", "gpu", "bench_fit.py")
MIB = 1 << 20

sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
import bench_fit  # noqa: E402


def record(size, time_us, ideal=None, wrong=0, plan="allreduce_direct", nranks=2, sel=None):
    """The fields of one mscclpp-bench --json record that bench_fit.py reads."""
    c = {"plan": plan, "time_us": time_us, "algbw": size / 1e3 / time_us, "busbw": 0.0,
         "wrong": wrong, "ideal_algbw": ideal}
    return {"collective": "allreduce", "plan": plan, "plan_file": f"/p/{plan}_{nranks}.json",
            "selected_plan": {"out_of_place": sel or plan, "in_place": None},
            "nranks": nranks, "size": size, "out_of_place": c, "in_place": None}


def write(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def run(*args):
    return subprocess.run([sys.executable, FIT, *map(str, args)], check=True,
                          capture_output=True, text=True).stdout


def test_fit_recovers_a_line():
    # t = 28 us + S / (1000 GB/s): 1000 GB/s is 1e6 bytes per us
    rows = [record(s, 28.0 + s / 1e6, ideal=1100.0) for s in (4 * MIB, 16 * MIB, 64 * MIB,
                                                              256 * MIB, 1024 * MIB)]
    f = bench_fit.fit_rows(rows)
    assert f["a"] == pytest.approx(28.0)
    assert f["r"] == pytest.approx(1000.0)
    assert f["r_share"] == pytest.approx(1000.0 / 1100.0)
    t64 = 28.0 + 64 * MIB / 1e6
    assert f["t_at"] == pytest.approx(t64)
    assert f["a_part"] == pytest.approx(28.0 / t64)
    # the predicted 64 MiB algbw (S / t, GB/s) over that row's ideal; measured alike
    assert f["share_at"] == pytest.approx(64 * MIB / t64 / 1e3 / 1100.0)
    assert f["measured_at"] == pytest.approx(f["share_at"])
    assert f["resid"] == pytest.approx(0.0, abs=1e-9)
    assert f["a_large"] == pytest.approx(28.0) and f["r_large"] == pytest.approx(1000.0)


def test_fit_from_64mib_up_leaves_the_cached_rows_out():
    # rows that fit in the L2 cache run their loop at twice the rate: one line through every
    # size misses them (a fit error above zero), the fit from 64 MiB up finds the line past it
    rows = [record(s, 20.0 + s / (2e6 if s < 64 * MIB else 1e6))
            for s in (4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, 1024 * MIB)]
    f = bench_fit.fit_rows(rows)
    assert f["a_large"] == pytest.approx(20.0) and f["r_large"] == pytest.approx(1000.0)
    assert f["resid"] > 0.05 and f["a"] != pytest.approx(20.0, abs=1.0)
    assert bench_fit.fit_rows(rows[:3])["a_large"] is None  # one size from 64 MiB: no line


def test_fit_is_least_squares():
    # three points off any line: the fit must be the least-squares one (slope 2.5, intercept
    # -2/3 for (1, 1), (2, 2), (3, 6) ... in bytes and us), not a line through two of them
    a, b = bench_fit.fit_line([(1, 1.0), (2, 2.0), (3, 6.0)])
    assert b == pytest.approx(2.5)
    assert a == pytest.approx(3.0 - 2.5 * 2)
    assert bench_fit.fit_line([(5, 1.0)]) is None
    assert bench_fit.fit_line([(5, 1.0), (5, 2.0)]) is None
    assert bench_fit.rate_gbps(1e-6) == pytest.approx(1000.0)
    assert bench_fit.rate_gbps(0) is None


def test_fit_uses_the_64mib_rows_own_ideal_and_counts_failures():
    # the copy bandwidth (so the ideal) is measured per size: the 64 MiB share divides by that
    # row's ideal, r's share by the largest size's; a failed row is left out of the fit, a wrong
    # element counted
    rows = [record(4 * MIB, 10.0 + 4 * MIB / 5e5, ideal=400.0),
            record(64 * MIB, 10.0 + 64 * MIB / 5e5, ideal=600.0, wrong=3),
            record(256 * MIB, 10.0 + 256 * MIB / 5e5, ideal=800.0)]
    failed = dict(record(16 * MIB, 1.0))
    failed["out_of_place"] = {"plan": "allreduce_direct", "error": "MSCCLPP_TIMEOUT"}
    f = bench_fit.fit_rows(rows + [failed])
    assert f["sizes"] == [4 * MIB, 64 * MIB, 256 * MIB]
    assert f["errors"] == 1 and f["wrong"] == 3
    assert f["r"] == pytest.approx(500.0)
    assert f["ideal"] == 800.0
    assert f["r_share"] == pytest.approx(500.0 / 800.0)
    t64 = 10.0 + 64 * MIB / 5e5
    assert f["share_at"] == pytest.approx(64 * MIB / t64 / 1e3 / 600.0)


def test_fit_tables_and_summary(tmp_path):
    p = tmp_path / "fit-allreduce_direct_2.json"
    write(p, [record(s, 28.0 + s / 1e6, ideal=1100.0) for s in (4 * MIB, 16 * MIB, 64 * MIB)])
    q = tmp_path / "fit-allgather_direct_2.json"  # no copy bandwidth: no ideal columns
    write(q, [record(s, 5.0 + s / 2e6, plan="allgather_direct") for s in (4 * MIB, 16 * MIB)])
    md = run("fit", p, q)
    assert ("| allreduce_direct_2 | 2 | 4M,16M,64M | 28.0 | 1000 | 1100 | 91% | 95.1 | 29% "
            "| 64% | 64% | 0% | - | - | 0 |") in md, md
    assert "| allgather_direct_2 | 2 | 4M,16M | 5.0 | 2000 | - | - | 38.6 | 13% | - | - |" in md
    big = tmp_path / "fit-big.json"
    write(big, [record(s, 28.0 + s / 1e6, ideal=1100.0, plan="allreduce_big")
                for s in (16 * MIB, 64 * MIB, 256 * MIB)])
    assert "| 0% | 28.0 | 1000 | 0 |" in run("fit", big)
    assert run("fit", "--brief", big).strip() == ("allreduce_big_2: a 28.0 us, r 1000 GB/s (91% of "
                                                    "ideal), 64M 64%, from 64M a 28.0 r 1000")
    brief = run("fit", "--brief", p, q)
    assert brief.strip() == ("allreduce_direct_2: a 28.0 us, r 1000 GB/s (91% of ideal), 64M "
                             "64%; allgather_direct_2: a 5.0 us, r 2000 GB/s (- of ideal), "
                             "64M -"), brief


def test_modes_name_the_fastest_and_the_plan_each_row_ran(tmp_path):
    files = []
    for mode, t4, t64, plan64 in (("off", 20.0, 160.0, "allreduce_simple"),
                                  ("auto", 21.0, 104.0, "allreduce_direct"),
                                  ("on", 18.0, 103.0, "allreduce_direct")):
        f = tmp_path / f"auto-{mode}-allreduce.json"
        sel4 = "allreduce_direct" if mode == "on" else "allreduce_simple"
        write(f, [record(4 * MIB, t4, plan="", sel=sel4), record(64 * MIB, t64, plan="",
                                                                 sel=plan64)])
        files.append(f"{mode}={f}")
    torch = []
    for mode, t in (("off", 170.0), ("auto", 110.0), ("on", 109.5)):
        f = tmp_path / f"auto-torch-{mode}.json"
        f.write_text(json.dumps({str(64 * MIB): t}))
        torch += ["--torch", f"{mode}={f}"]
    md = run("modes", *files, *torch)
    assert ("| 4M | 20.0 | 21.0 | 18.0 | on | allreduce_simple/allreduce_simple/"
            "allreduce_direct |") in md, md
    assert ("| 64M | 160.0 | 104.0 | 103.0 | on | allreduce_simple/allreduce_direct/"
            "allreduce_direct |") in md, md
    assert "| 64M | 170.0 | 110.0 | 109.5 | on |\n" in md, md
    brief = run("modes", "--brief", *files).strip()
    assert brief == ("allreduce 2 ranks (off/auto/on us, fastest): 4M 20.0/21.0/18.0 on, "
                     "64M 160.0/104.0/103.0 on; auto ran a direct plan at 64M"), brief
    brief = run("modes", "--brief", *torch).strip()
    assert brief == "dist.all_reduce (off/auto/on us, fastest): 64M 170.0/110.0/109.5 on", brief
    # a mode given again (another torchrun) keeps each size's fastest: PyTorch's host time per
    # call moves between torchruns, so one slow run must not decide the comparison
    again = []
    for mode, t8, t64 in (("off", 31.0, 171.0), ("on", 29.0, 110.0)):
        f = tmp_path / f"auto-torch-{mode}-2.json"
        f.write_text(json.dumps({str(8 * MIB): t8, str(64 * MIB): t64}))
        again += ["--torch", f"{mode}={f}"]
    brief = run("modes", "--brief", *torch, *again).strip()
    assert brief == ("dist.all_reduce, best of each mode's torchruns (off 2, auto 1, on 2) "
                     "(off/auto/on us, fastest): 8M 31.0/-/29.0 on, 64M 170.0/110.0/109.5 on"), brief
    with pytest.raises(subprocess.CalledProcessError):
        run("modes", "no-equals-sign")


@pytest.mark.skipif(not os.access(bench_path(), os.X_OK), reason="mscclpp-bench is not built")
def test_gpu_check_host_dry_run(tmp_path):
    # the steps' own logic on the host backend: what they run, that every row is checked, the
    # summary lines and the tables (2 ranks only, to stay quick)
    p = gpu_check_host("fit,auto", tmp_path, GPU_CHECK_FIT_RANKS="2")
    assert p.returncode == 0, p.stdout + p.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert "| fit | OK | t = a + S/r, allreduce_direct_2: a " in summary, summary
    assert "allreduce_simple_2: a " in summary, summary
    assert "| auto | OK | allreduce 2 ranks (off/auto/on us, fastest): 2M " in summary, summary
    assert "allgather 2 ranks (off/auto/on us, fastest):" in summary, summary
    assert "dist.all_reduce: not on the host backend (--host)" in summary, summary
    assert len(summary.splitlines()) == 2, summary  # one row per step
    report = (tmp_path / "report.md").read_text()
    assert "| broadcast_direct_2 | 2 | 2M,4M,8M |" in report, report
    assert "| allreduce_direct_2 | 2 | 2M,4M,8M,16M |" in report, report
    assert "| allgather_direct_2 | 2 | 2M,4M,8M,16M |" in report, report  # to 1 GiB on a GPU
    assert "## allreduce 2 ranks: time per call (us) by MSCCLPP_PLAN_DIRECT mode" in report
    assert "## allgather 2 ranks, in place: time per call (us)" in report, report
    # the fit's units against the bench's own: a measured share at a size that ran is the row's
    # ideal_pct (algbw over the ideal), and the ideal the row's ideal_algbw
    rows = bench_fit.load(str(tmp_path / "fit-allreduce_direct_2.json"))
    assert len(rows) == 4, rows
    for r in rows:
        c = r["out_of_place"]
        f = bench_fit.fit_rows(rows, at=r["size"])
        assert 100 * f["measured_at"] == pytest.approx(c["ideal_pct"], rel=1e-3, abs=0.02), r
    assert bench_fit.fit_rows(rows)["ideal"] == rows[-1]["out_of_place"]["ideal_algbw"]
    # the plan each row ran: never a direct one with the mode off, always one with it on (out of
    # place and in place, allreduce and allgather)
    rows = [line for line in report.splitlines() if line.startswith("| 8M |")]
    assert len(rows) == 4, report
    for line in rows:
        off, auto, on = line.split("|")[-2].strip().split("/")
        assert "direct" not in off and "direct" in on, line


def test_torch_nccl_time_sizes(monkeypatch):
    # tests/gpu/torch_nccl.py --time-sizes (step auto's dist.all_reduce sizes), parsed without
    # PyTorch: the module only needs torch to run, not to be read
    import types
    fake = types.ModuleType("torch")
    fake.distributed = types.ModuleType("torch.distributed")
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setitem(sys.modules, "torch.distributed", fake.distributed)
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "torch_nccl_under_test", os.path.join(ROOT, "tests", "gpu", "torch_nccl.py"))
    torch_nccl = importlib.util.module_from_spec(spec)  # not left in sys.modules
    spec.loader.exec_module(torch_nccl)
    assert torch_nccl.parse_sizes("16M,8M, 1024,8m,1G") == [1024, 8 * MIB, 16 * MIB, 1 << 30]
    for bad in ("", "6", "0", "8X", "M", "-8M", "8M,,16M"):
        with pytest.raises(SystemExit):
            torch_nccl.parse_sizes(bad)
    # the quick sweep's sizes: 8M is on it, 32M and 64M are not (the check adds them)
    quick = torch_nccl.sizes(16 * MIB)
    assert 8 * MIB in quick and 32 * MIB not in quick and max(quick) <= 16 * MIB


def test_modes_split_the_placements(tmp_path):
    # a bench row holds both columns: each placement gets its own table, with the plan its
    # column ran (selected_plan of that placement), and a plan of one placement none of the other
    rows = {}
    for mode, ip_plan in (("off", "allgather_scratch"), ("on", "allgather_direct_ip")):
        r = record(4 * MIB, 30.0, plan="allgather_x", sel="allgather_x")
        r["collective"] = "allgather"
        r["in_place"] = dict(r["out_of_place"], time_us=20.0, plan=ip_plan)
        r["selected_plan"]["in_place"] = ip_plan
        rows[mode] = r
    files = []
    for mode, r in rows.items():
        f = tmp_path / f"{mode}.json"
        write(f, [r])
        files.append(f"{mode}={f}")
    only_oop = tmp_path / "oop.json"
    write(only_oop, [record(4 * MIB, 10.0)])
    md = run("modes", *files)
    assert "## allgather 2 ranks: time per call" in md, md
    assert "| 4M | 30.0 | 30.0 | off | allgather_x/allgather_x |" in md, md
    assert "## allgather 2 ranks, in place: time per call" in md, md
    assert "| 4M | 20.0 | 20.0 | off | allgather_scratch/allgather_direct_ip |" in md, md
    assert "in place" not in run("modes", f"on={only_oop}")
    # the summary is one line (a row of gpu-check's summary table) whatever the sets
    brief = run("modes", "--brief", *files)
    assert brief.count("\n") == 1 and "; allgather 2 ranks, in place (off/on us" in brief, brief


def test_runs_that_left_no_records_still_give_a_line(tmp_path):
    # a bench or torchrun that failed before its first row leaves no file (or an empty one): the
    # summary still says so on its one line
    missing = tmp_path / "missing.json"
    empty = tmp_path / "empty.json"
    empty.write_text("")
    assert run("fit", "--brief", missing).strip() == "no rows"
    assert run("modes", "--brief", f"off={missing}", f"on={empty}").strip() == \
        "bench (off/on us, fastest): no times"
    assert run("modes", "--brief", "--torch", f"off={missing}").strip() == \
        "dist.all_reduce (off us, fastest): no times"
