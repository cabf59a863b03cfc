"""The default plans in plans/: regenerated from their programs, correct, within limits."""

import glob
import json
import os

import pytest

import mscclpp
from mscclpp import default_plans

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLANS = os.path.join(ROOT, "plans")
FILES = sorted(glob.glob(os.path.join(PLANS, "*.json")) + glob.glob(os.path.join(PLANS, "*", "*.json"))
               + glob.glob(os.path.join(PLANS, "direct", "*", "*.json")))
# multi-node plans (plans/multinode/[flat/]<nodes>x<ranks per node>/), checked by the simulator below
MULTINODE = sorted(glob.glob(os.path.join(PLANS, "multinode", "**", "*.json"), recursive=True))
FAMILIES = ["allreduce_allpairs", "allreduce_pkt", "allreduce_simple", "allgather",
            "reducescatter", "alltoall", "broadcast"]
DIRECT_FAMILIES = ["allreduce_direct", "allreduce_direct_ip", "allgather_direct",
                   "allgather_direct_ip", "reducescatter_direct", "reducescatter_direct_ip",
                   "alltoall_direct", "broadcast_direct", "broadcast_direct_ip"]
# backends with direct variants of their own (plans/direct/<backend>/)
DIRECT_BACKENDS = ["host", "cuda"]


def _is_direct(path):
    return "direct" in os.path.relpath(path, PLANS).split(os.sep)[:-1]


def test_regenerating_default_plans_gives_the_committed_files():
    generated = dict(default_plans.generate(PLANS))
    committed = {os.path.relpath(f, PLANS) for f in FILES + MULTINODE}
    assert set(generated) == committed, "plans/*.json and plans/*.py disagree on the file set"
    stale = []
    for name, text in generated.items():
        with open(os.path.join(PLANS, name)) as f:
            if f.read() != text:
                stale.append(name)
    assert not stale, ("stale default plans (run python3 -m mscclpp gen-default-plans): "
                       + ", ".join(stale))


def test_every_family_and_rank_count_is_present():
    names = {os.path.basename(f) for f in FILES}
    for fam in FAMILIES:
        for n in range(2, 9):
            assert f"{fam}_{n}.json" in names


@pytest.mark.parametrize("path", MULTINODE, ids=lambda p: os.path.relpath(p, PLANS))
def test_multinode_plan_is_correct(path):
    res = mscclpp.verify_plan(path, strict_relaxed=True)
    assert res, str(res)
    assert res.checked_semantics
    assert not res.warnings, res.warnings


@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_default_plan_is_correct(path):
    res = mscclpp.verify_plan(path, strict_relaxed=True)
    assert res, str(res)
    assert res.checked_semantics
    assert not res.warnings, res.warnings


@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_default_plan_shape_and_limits(path):
    with open(path) as f:
        plan = json.load(f)
    name = os.path.basename(path)[:-5]
    n = int(name.rsplit("_", 1)[1])
    # plans/direct/ and plans/direct/<backend>/: the peers' input and output addressed directly
    direct = _is_direct(path)
    assert plan["format"] == "mscclpp-plan/1"
    # the in-place twins are <family>_ip_<N>.json
    assert plan["inplace"] is ("_ip_" in name)
    assert len(plan["gpus"]) == n
    assert plan["collective"] == name.split("_")[0]
    assert plan["protocol"] == ("LL" if "_pkt_" in name or "_allpairs_" in name else "Simple")
    if plan["collective"] == "broadcast":
        assert plan["root"] == 0
    for g in plan["gpus"]:
        assert {c["channel_type"] for c in g["channels"]} <= {"memory"}
        for rb in g["remote_buffers"]:
            if direct:
                assert rb["type"] in ("i", "o"), "direct plans address the peers' io, no scratch"
            else:
                assert rb["type"] == "s", "default plans address only peers' scratch"
        if direct:
            assert g["scratch_chunks"] == 0
        for tb in g["threadblocks"]:
            count = 0
            for op in tb["ops"]:
                count += 1 + len(op.get("ops", []))
                assert len(op.get("channel_ids", [])) <= 8
                assert len(op.get("src_buff", [])) <= 10 and len(op.get("dst_buff", [])) <= 10
            assert count <= 64
            for ch in tb["channels"]:
                assert len(ch["channel_ids"]) <= 16


def test_every_direct_family_and_rank_count_is_present():
    names = {os.path.basename(f) for f in glob.glob(os.path.join(PLANS, "direct", "*.json"))}
    assert names == {f"{fam}_{n}.json" for fam in DIRECT_FAMILIES for n in range(2, 9)}


@pytest.mark.parametrize("backend", DIRECT_BACKENDS)
def test_direct_backend_variants(backend):
    """plans/direct/<backend>/: every direct plan again, at the backend's block count (CUDA:
    its scratch plans'; host: one block for the allreduce, as plans/host/, INSTANCES
    otherwise) and from the size the backend's rule gives (CUDA: its scratch plans' ranges;
    host: _common.HOST_DIRECT_MIN_MESSAGE), under a name of its own."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_plans_common", os.path.join(PLANS, "_common.py"))
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    d = os.path.join(PLANS, "direct", backend)
    names = {os.path.basename(f) for f in glob.glob(os.path.join(d, "*.json"))}
    assert names == {f"{fam}_{n}.json" for fam in DIRECT_FAMILIES for n in range(2, 9)}
    seen = set()
    for name in sorted(names):
        with open(os.path.join(d, name)) as f:
            plan = json.load(f)
        coll, n = plan["collective"], len(plan["gpus"])
        assert plan["name"] not in seen
        seen.add(plan["name"])
        assert f"_{backend}_" in plan["name"]
        blocks = {len(g["threadblocks"]) for g in plan["gpus"]}
        if backend == "cuda":
            scratch = "allreduce_simple" if coll == "allreduce" else coll
            with open(os.path.join(PLANS, "cuda", f"{scratch}_{n}.json")) as f:
                ref = json.load(f)
            per_rank = [len(g["threadblocks"]) for g in plan["gpus"]]
            # every block of every rank co-resident on one GPU: at most 128 in all
            assert sum(per_rank) <= 128
            if coll == "broadcast":
                # only the root moves data: it takes the blocks the others do not need
                assert per_rank == [common.cuda_root_blocks(n)] + [1] * (n - 1)
                assert sum(per_rank) == 128
            else:
                assert blocks == {len(ref["gpus"][0]["threadblocks"])} == \
                    {common.cuda_instances(n)}
            assert plan["min_message_size"] == ref["min_message_size"]
        else:
            assert blocks == {1 if coll == "allreduce" else common.INSTANCES}
            assert plan["min_message_size"] == common.HOST_DIRECT_MIN_MESSAGE[coll]
        assert plan["max_message_size"] == 2**64 - 1


def test_allreduce_size_ranges_meet():
    for n in range(2, 9):
        for ip in ("", "_ip"):
            plans = {}
            for fam in ("allpairs", "pkt", "simple"):
                with open(os.path.join(PLANS, f"allreduce_{fam}{ip}_{n}.json")) as f:
                    plans[fam] = json.load(f)
            assert plans["allpairs"]["min_message_size"] == 0
            assert plans["pkt"]["min_message_size"] == plans["allpairs"]["max_message_size"] + 1
            assert plans["simple"]["min_message_size"] == plans["pkt"]["max_message_size"] + 1
            assert plans["simple"]["max_message_size"] == 2**64 - 1


def test_plans_readme_lists_every_family():
    with open(os.path.join(PLANS, "README.md")) as f:
        text = f.read()
    for fam in FAMILIES + DIRECT_FAMILIES:
        assert fam in text
    assert "gen-default-plans" in text


def test_plans_local_mk_installs_every_plan():
    with open(os.path.join(PLANS, "local.mk")) as f:
        text = f.read()
    for path in FILES + MULTINODE:
        assert "plans/" + os.path.relpath(path, PLANS) in text
    for prog in glob.glob(os.path.join(PLANS, "*.py")):
        assert "plans/" + os.path.basename(prog) in text
