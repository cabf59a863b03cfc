"""Issue 10 item 6 (DSL targets) and issue 8 item 8 (verify --strict, glre in the DSL).

The DSL compiles for this library's executor by default (no 64-ops-per-block or 10-descriptor
limit, unfused switch reduces allowed); ``target="mscclpp"`` / ``--target mscclpp`` keeps
MSCCL++'s executor limits for plans meant to run there. ``verify --strict`` refuses data that
is ordered only by relaxed signals.
"""

import copy
import json
import os
import subprocess
import sys

import pytest

from mscclpp.language import *
from mscclpp.language.internal.types import DSLError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = os.path.join(ROOT, "python")

RING = '''
import sys
from mscclpp.language import *

def ring_allreduce(N, target=None):
    coll = AllReduce(N, 1, False)
    kw = {} if target is None else {"target": target}
    with CollectiveProgram(f"ring_allreduce_{N}", coll, N, **kw) as prog:
        scr = [Buffer(r, N) for r in range(N)]
        ch = {}
        def chan(r, p):
            if (r, p) not in ch:
                ch[(r, p)] = MemoryChannel(p, r)
            return ch[(r, p)]
        for r in range(N):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            rank.copy(out[0:N], inp[0:N], tb=0)
            nxt, prv = (r + 1) % N, (r - 1) % N
            for s in range(N - 1):
                c = (r - s) % N
                chan(r, nxt).put(scr[nxt][s:s + 1], out[c:c + 1], tb=0)
                chan(r, nxt).signal(tb=0, data_sync=SyncType.before)
                chan(r, prv).wait(tb=0, data_sync=SyncType.after)
                c2 = (r - s - 1) % N
                rank.reduce(out[c2:c2 + 1], [scr[r][s:s + 1]], tb=0)
            for s in range(N - 1):
                c = (r + 1 - s) % N
                dst = Rank(nxt).get_output_buffer()
                chan(r, nxt).put(dst[c:c + 1], out[c:c + 1], tb=0)
                chan(r, nxt).signal(tb=0, data_sync=SyncType.before)
                chan(r, prv).wait(tb=0, data_sync=SyncType.after)
    return prog

if __name__ == "__main__":
    ring_allreduce(int(sys.argv[1]) if len(sys.argv) > 1 else 64)
'''


def _ring():
    ns = {}
    exec(compile(RING, "ring", "exec"), ns)
    return ns["ring_allreduce"]


def test_64_rank_allreduce_native_and_mscclpp_target():
    ring = _ring()
    plan = ring(64).to_dict()
    assert len(plan["gpus"]) == 64
    nops = max(len(tb["ops"]) for g in plan["gpus"] for tb in g["threadblocks"])
    assert nops > 64  # past MSCCL++'s per-block table, fine for ours
    with pytest.raises(DSLError, match=r"operations \(limit 64 of target mscclpp"):
        ring(64, target="mscclpp").to_dict()
    with pytest.raises(DSLError, match="target must be one of"):
        ring(4, target="nccl")


def test_cli_target(tmp_path):
    prog = tmp_path / "ring.py"
    prog.write_text(RING)
    env = dict(os.environ, PYTHONPATH=PY)
    out = tmp_path / "ring64.json"
    r = subprocess.run([sys.executable, "-m", "mscclpp", "compile", str(prog), "-o", str(out),
                        "--", "16"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(out.read_text())["gpus"]) == 16
    r = subprocess.run([sys.executable, "-m", "mscclpp", "compile", str(prog), "--target",
                        "mscclpp", "-o", str(tmp_path / "x.json"), "--", "16"], env=env,
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "limit 64 of target mscclpp" in r.stderr


def test_reduce_with_16_sources():
    def prog(target=None):
        kw = {} if target is None else {"target": target}
        N = 16
        with CollectiveProgram("reduce16", AllReduce(N, N, False), N, **kw) as p:
            for r in range(N):
                rank = Rank(r)
                inp, out = rank.get_input_buffer(), rank.get_output_buffer()
                scr = Buffer(r, N)
                rank.copy(scr[0:N], inp[0:N], tb=0)
                rank.reduce(out[0:1], [scr[k:k + 1] for k in range(N)], tb=0)
        return p
    plan = prog().to_dict()
    ops = plan["gpus"][0]["threadblocks"][0]["ops"]
    assert any(len(op.get("src_buff", [])) == 17 for op in ops)  # 1 + 16 sources
    with pytest.raises(DSLError, match=r"at most 9 other chunks per reduce \(target mscclpp\)"):
        prog("mscclpp").to_dict()


def _ag2(relaxed_data):
    """The 2-rank allgather of spec section 1.8; optionally its data signal made relaxed."""
    def gpu(r):
        p = 1 - r
        ops = [{"name": "rlxsignal", "channel_ids": [0], "channel_type": "memory"},
               {"name": "rlxwait", "channel_ids": [0], "channel_type": "memory"},
               {"name": "nop"},
               {"name": "copy", "src_buff": [{"type": "i", "index": 0, "size": 1}],
                "dst_buff": [{"type": "o", "index": r, "size": 1}]},
               {"name": "put", "src_buff": [{"type": "i", "index": 0, "size": 1}],
                "dst_buff": [{"buffer_id": 0, "index": r, "size": 1}], "channel_type": "memory"},
               {"name": "nop"},
               {"name": "rlxsignal" if relaxed_data else "signal", "channel_ids": [0],
                "channel_type": "memory"},
               {"name": "rlxwait" if relaxed_data else "wait", "channel_ids": [0],
                "channel_type": "memory"},
               {"name": "nop"}]
        return {"id": r, "input_chunks": 1, "output_chunks": 2, "scratch_chunks": 0,
                "channels": [{"channel_type": "memory", "connected_to": [p]}],
                "remote_buffers": [{"rank": p, "type": "o", "access_channel_types": ["memory"]}],
                "threadblocks": [{"id": 0,
                                  "channels": [{"channel_type": "memory", "channel_ids": [0]}],
                                  "remote_buffer_refs": [{"access_channel_type": "memory",
                                                          "remote_buffer_ids": [0]}],
                                  "ops": ops}]}
    return {"name": "ag2", "collective": "allgather", "protocol": "Simple", "inplace": False,
            "gpus": [gpu(0), gpu(1)]}


def test_verify_strict_refuses_relaxed_ordering(tmp_path):
    good, rlx = tmp_path / "good.json", tmp_path / "rlx.json"
    good.write_text(json.dumps(_ag2(False)))
    rlx.write_text(json.dumps(_ag2(True)))
    env = dict(os.environ, PYTHONPATH=PY)

    def verify(*args):
        return subprocess.run([sys.executable, "-m", "mscclpp", "verify", *args], env=env,
                              capture_output=True, text=True)
    r = verify(str(good), str(rlx))
    assert r.returncode == 0, r.stdout + r.stderr       # without --strict: a warning
    assert "ordered only by relaxed signals" in r.stdout
    r = verify("--strict", str(good))
    assert r.returncode == 0, r.stdout + r.stderr
    r = verify("--strict", str(rlx))
    assert r.returncode == 1
    assert "FAILED" in r.stdout and "race" in r.stdout


def test_unfused_switch_reduce_only_for_native_target():
    def prog(target=None):
        kw = {} if target is None else {"target": target}
        N = 2
        with CollectiveProgram("glre2", AllReduce(N, N, False), N, **kw) as p:
            sw = SwitchChannel(rank_list=[0, 1], buffer_type=BufferType.input)
            for r in range(N):
                out = Rank(r).get_output_buffer()
                sw.at_rank(r).reduce(buffer_offset=0, size=N, dst_chunk=out[0:N], tb=0)
        return p
    plan = prog().to_dict()
    names = [op["name"] for op in plan["gpus"][0]["threadblocks"][0]["ops"]]
    assert "glre" in names
    with pytest.raises(DSLError, match="MSCCL\\+\\+ cannot execute an unfused switch reduce"):
        prog("mscclpp").to_dict()
