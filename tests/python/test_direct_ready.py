"""The direct plans open with no handshake (plans/_common.py, direct_ranks: the launch fence does
its work), and tests/gpu/direct_ready.py, scripts/gpu-check.sh step `ready`, puts it back to
measure what it cost: its generator, its comparison on records made to known times, and, where
the build has mscclpp-bench, the step's host dry run."""

import glob
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, bench_path, gpu_check_host

TOOL = os.path.join(ROOT, "tests", "gpu", "direct_ready.py")
PLANS = os.path.join(ROOT, "plans")
DIRECT = sorted(glob.glob(os.path.join(PLANS, "direct", "*.json"))
                + glob.glob(os.path.join(PLANS, "direct", "*", "*.json")))

sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
import direct_ready  # noqa: E402


def ops(block):
    return [o["name"] for o in block["ops"]]


def test_direct_plans_reach_the_peers_buffers():
    # what makes the fence run at every launch of theirs (executor.c: args.fence = reaches_io,
    # exec_plan_reaches_io: a remote buffer that is a peer's input or output)
    assert len(DIRECT) == 189
    for path in DIRECT:
        with open(path) as f:
            plan = json.load(f)
        kinds = {rb["type"] for g in plan["gpus"] for rb in g["remote_buffers"]}
        assert kinds and kinds <= {"i", "o"}, (path, kinds)


def test_no_direct_plan_opens_with_a_handshake():
    # a block that moves data signals and waits only after its last data op (the closing
    # handshake); a block that moves none (a broadcast's peer) only waits for the root's word
    for path in DIRECT:
        with open(path) as f:
            plan = json.load(f)
        for g in plan["gpus"]:
            for tb in g["threadblocks"]:
                names = ops(tb)
                where = (os.path.relpath(path, PLANS), g["id"], tb["id"], names)
                sync = [k for k, n in enumerate(names) if n in ("signal", "wait")]
                data = [k for k, n in enumerate(names) if n not in ("signal", "wait", "nop",
                                                                      "barrier")]
                if data:
                    assert not sync or min(sync) > max(data), where
                else:
                    assert names == ["wait"], where


def test_gen_puts_the_handshake_back(tmp_path):
    out = subprocess.run([sys.executable, TOOL, "gen", ROOT, str(tmp_path)], check=True,
                         capture_output=True, text=True).stdout
    assert out.strip() == f"189 plans written under {tmp_path}"
    for path in DIRECT:
        rel = os.path.relpath(path, PLANS)
        with open(path) as f:
            shipped = json.load(f)
        with open(tmp_path / rel) as f:
            ready = json.load(f)
        assert ready["name"] == shipped["name"] and ready["gpus"][0]["input_chunks"] == \
            shipped["gpus"][0]["input_chunks"], rel
        for gs, gr in zip(shipped["gpus"], ready["gpus"]):
            assert len(gs["threadblocks"]) == len(gr["threadblocks"]), rel
            first = [ops(tb)[0] for tb in gr["threadblocks"]]
            if shipped["collective"] == "broadcast":
                # the peers signal the root, the root's block 0 waits for them
                want = "wait" if gr["id"] == 0 else "signal"
                assert first[0] == want, (rel, gr["id"], first)
            else:
                assert set(first) == {"signal"}, (rel, gr["id"], first)
            for ts, tr in zip(gs["threadblocks"], gr["threadblocks"]):
                # the same ops after the opening ones
                assert ops(tr)[len(ops(tr)) - len(ops(ts)):] == ops(ts), (rel, ops(ts), ops(tr))


def record(size, time_us):
    return {"collective": "allreduce", "size": size, "nranks": 2,
            "out_of_place": {"time_us": time_us}, "in_place": None}


def write(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def test_compare_takes_each_variants_best(tmp_path):
    m4, m64 = 4 << 20, 64 << 20
    write(tmp_path / "ready-ready-allreduce-2-1.json", [record(m4, 40.0), record(m64, 110.0)])
    write(tmp_path / "ready-ready-allreduce-2-2.json", [record(m4, 37.0), record(m64, 112.0)])
    write(tmp_path / "ready-none-allreduce-2-1.json", [record(m4, 35.5), record(m64, 108.0)])
    write(tmp_path / "ready-none-allreduce-2-2.json", [record(m4, 36.0), record(m64, 107.0)])
    write(tmp_path / "ready-ready-allgather-8-1.json", [record(m4, 60.0)])
    write(tmp_path / "ready-none-allgather-8-1.json", [record(m4, 57.0)])
    files = sorted(str(p) for p in tmp_path.iterdir())
    table = direct_ready.compare(files)
    assert "| allreduce | 2 | 4M | 37.0 | 35.5 | +1.5 | 1.042 |" in table, table
    assert "| allreduce | 2 | 64M | 110.0 | 107.0 | +3.0 | 1.028 |" in table, table
    assert "| allgather | 8 | 4M | 60.0 | 57.0 | +3.0 | 1.053 |" in table, table
    brief = direct_ready.compare(files, brief=True)
    assert brief == ("2 ranks: handshake costs +2.2 us (median of 2, +1.5 .. +3.0); "
                     "8 ranks: handshake costs +3.0 us (median of 1, +3.0 .. +3.0)"), brief


def test_compare_refuses_other_names(tmp_path):
    write(tmp_path / "fit-allreduce.json", [record(1, 1.0)])
    with pytest.raises(ValueError, match="not named ready-"):
        direct_ready.compare([str(tmp_path / "fit-allreduce.json")])
    assert direct_ready.compare([]) == "no pair of variants to compare"


@pytest.mark.skipif(not os.access(bench_path(), os.X_OK), reason="mscclpp-bench is not built")
def test_gpu_check_host_dry_run(tmp_path):
    p = gpu_check_host("ready", tmp_path, GPU_CHECK_READY_COLLS="allgather broadcast",
                       GPU_CHECK_READY_ROUNDS="1")
    assert p.returncode == 0, p.stdout + p.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert "| ready | OK | 2 ranks: handshake costs " in summary, summary
    assert len(summary.splitlines()) == 1, summary
    table = (tmp_path / "ready.md").read_text()
    for c in ("allgather", "broadcast"):
        for size in ("2M", "4M"):
            assert f"| {c} | 2 | {size} | " in table, table
