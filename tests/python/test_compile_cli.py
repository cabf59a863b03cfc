"""mscclpp.compile, rank-subset output, the command line, packaging metadata."""

import json
import os
import subprocess
import sys

import pytest

import mscclpp
from mscclpp.language import *

import programs as P

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = os.path.join(ROOT, "python")


def algo(spec, peers_per_block=8):
    return P.alltoall_blocks(spec.world_size, peers_per_block)


def spec(**kw):
    base = dict(name="a2a", collective=AllToAll(4, 1, False), nranks_per_node=4, world_size=4,
                in_place=False, instances=1, protocol="Simple", tags={"x": 1})
    base.update(kw)
    return AlgoSpec(**base)


def test_compile_returns_metadata_and_caches(tmp_path):
    a = mscclpp.compile(algo, spec(), rank=1, cache_dir=str(tmp_path))
    assert a.name == "a2a" and a.collective == "alltoall" and a.tags == {"x": 1}
    assert a.constraint == mscclpp.Constraint(world_size=4, nranks_per_node=4)
    assert os.path.exists(a.plan_path) and a.plan_path.startswith(str(tmp_path))
    assert a.plan["format"] == "mscclpp-plan/1"
    assert a.check()
    b = mscclpp.compile(algo, spec(), rank=1, cache_dir=str(tmp_path))
    assert b.plan_path == a.plan_path


@pytest.mark.parametrize("change", [
    dict(max_message_size=1 << 20), dict(min_message_size=16), dict(buffer_alignment=32),
    dict(use_double_scratch_buffer=True), dict(reuse_resources=True),
    dict(num_threads_per_block=512), dict(tags={"x": 2}), dict(nranks_per_node=2),
    dict(auto_sync=False), dict(instr_fusion=False),
])
def test_cache_key_covers_every_spec_field(tmp_path, change):
    a = mscclpp.compile(algo, spec(), cache_dir=str(tmp_path))
    b = mscclpp.compile(algo, spec(**change), cache_dir=str(tmp_path))
    assert a.plan_path != b.plan_path


def test_cache_key_covers_kwargs(tmp_path):
    a = mscclpp.compile(algo, spec(), cache_dir=str(tmp_path), peers_per_block=8)
    b = mscclpp.compile(algo, spec(), cache_dir=str(tmp_path), peers_per_block=2)
    assert a.plan_path != b.plan_path
    assert len(b.plan["gpus"][0]["threadblocks"]) == 2


def test_compile_requires_a_program(tmp_path):
    with pytest.raises(TypeError):
        mscclpp.compile(lambda s: None, spec(), cache_dir=str(tmp_path))


def test_single_rank_output(tmp_path):
    full = P.hierarchical_allreduce(4, 2, peers_per_block=2).to_dict()
    part = P.hierarchical_allreduce(4, 2, peers_per_block=2, rank_subset=[5]).to_dict()
    assert part["rank_subset"] == [5]
    assert part["gpus"][5] == full["gpus"][5]
    for r, g in enumerate(part["gpus"]):
        assert g["id"] == r
        if r != 5:
            assert g["threadblocks"] == []
            for rb in g["remote_buffers"]:
                assert rb["rank"] == 5
            for ch in g["channels"]:
                assert set(ch.get("connected_to", [5])) == {5}
            # what setup needs survives: rank r's channels to 5, buffers of 5 that r uses
            fc = [p for c in full["gpus"][r]["channels"] for p in c.get("connected_to", [])]
            pc = [p for c in g["channels"] for p in c.get("connected_to", [])]
            assert pc == [p for p in fc if p == 5]
    # the same from a full program, post hoc
    again = P.hierarchical_allreduce(4, 2, peers_per_block=2).to_dict(rank=5)
    assert again == part
    res = mscclpp.simulate(part)
    assert not res and "partial plan" in str(res)


def test_single_rank_compile(tmp_path):
    a = mscclpp.compile(algo, spec(), rank=2, cache_dir=str(tmp_path), single_rank=True)
    assert a.plan["rank_subset"] == [2]
    b = mscclpp.compile(algo, spec(), rank=3, cache_dir=str(tmp_path), single_rank=True)
    assert a.plan_path != b.plan_path


def _cli(*args, cwd=None, env=None):
    e = dict(os.environ, PYTHONPATH=PY)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "mscclpp", *args], cwd=cwd, env=e,
                          capture_output=True, text=True)


def test_cli_compile_seed_program_and_verify(tmp_path):
    seed = os.path.join(ROOT, "tests", "python", "seeds", "simple_allgather.py")
    out = tmp_path / "ag.json"
    r = _cli("compile", seed, "-o", str(out), "--verify")
    assert r.returncode == 0, r.stderr
    plan = json.loads(out.read_text())
    assert plan["name"] == "simple_allgather_2gpus"
    r = _cli("verify", str(out))
    assert r.returncode == 0 and "OK" in r.stdout


def test_cli_compile_program_with_args(tmp_path):
    prog = os.path.join(ROOT, "plans", "allgather.py")
    out = tmp_path / "ag3.json"
    r = _cli("compile", prog, "-o", str(out), "--", "--num_ranks", "3")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(out.read_text())["gpus"]) == 3
    r = _cli("compile", prog, "-o", str(tmp_path / "r1.json"), "--rank", "1", "--",
             "--num_ranks", "3")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "r1.json").read_text())["rank_subset"] == [1]


def test_cli_verify_fails_on_a_broken_plan(tmp_path):
    plan = P.port_allgather(3).to_dict()
    plan["gpus"][2]["threadblocks"][0]["ops"].pop(0)  # drop a copy
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(plan))
    r = _cli("verify", str(p))
    assert r.returncode == 1 and "rank 2 output chunk 2" in r.stdout


def test_cli_install_writes_default_plans(tmp_path):
    r = _cli("--install", env={"MSCCLPP_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    files = os.listdir(tmp_path / "default")
    assert "allreduce_pkt_8.json" in files and len(files) >= 42


def test_cli_gen_default_plans_check():
    r = _cli("gen-default-plans", "--check")
    assert r.returncode == 0, r.stdout + r.stderr


def test_package_imports_without_native_library():
    # importing the package and naming the runtime classes never loads libmscclpp (the
    # ctypes bindings load it on first use), so the DSL works where the library is absent
    code = ("import mscclpp, sys; import mscclpp.language\n"
            "from mscclpp import runtime\n"
            "assert isinstance(mscclpp.Executor, type)\n"
            "print('lazy', runtime._lib is None)\n")
    r = subprocess.run([sys.executable, "-c", code],
                       env=dict(os.environ, PYTHONPATH=PY, MSCCLPP_LIBRARY="/nonexistent.so"),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "lazy True" in r.stdout


def test_pyproject_declares_the_package():
    import tomllib

    with open(os.path.join(PY, "pyproject.toml"), "rb") as f:
        meta = tomllib.load(f)
    assert meta["project"]["name"] == "mscclpp"
    assert meta["project"]["dependencies"] == []
    assert "mscclpp.language" in meta["tool"]["setuptools"]["packages"]


def test_cli_version():
    r = _cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("python3 -m mscclpp ") and \
        mscclpp.__version__ in r.stdout, r.stdout + r.stderr


def test_cli_bad_input_is_a_sentence_not_a_traceback(tmp_path):
    """verify and compile answer a missing file, bad JSON, an unknown key or collective with a
    sentence naming the file and the JSON path (issue 21 item 10)."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x",\n')
    plan = P.port_allgather(2).to_dict()
    plan["max_mesage_size"] = 1024
    typo = tmp_path / "typo.json"
    typo.write_text(json.dumps(plan))
    plan = P.port_allgather(2).to_dict()
    plan["collective"] = "allgahter"
    coll = tmp_path / "coll.json"
    coll.write_text(json.dumps(plan))
    printer = tmp_path / "printer.py"
    printer.write_text("print('not a plan')\n")
    cases = [
        (("verify", str(tmp_path / "missing.json")), "missing.json: no such file"),
        (("verify", str(bad)), "bad.json: JSON syntax error at line 2"),
        (("verify", str(typo)), 'max_mesage_size: unknown key (did you mean "max_message_size"?)'),
        (("verify", str(coll)), 'collective: unknown collective "allgahter" (did you mean '
                                '"allgather"?'),
        (("compile", str(tmp_path / "missing.py")), "missing.py: no such file"),
        (("compile", str(printer), "-o", str(tmp_path / "o.json")),
         "neither built a CollectiveProgram nor printed a plan"),
    ]
    for args, want in cases:
        r = _cli(*args)
        out = r.stdout + r.stderr
        assert r.returncode == 1, (args, out)
        assert want in out and "Traceback" not in out, (args, out)
