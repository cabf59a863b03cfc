"""Generated programs checked through the chunk-level simulator, 2 to 8 ranks, and the
simulator's own diagnostics on broken programs."""

import json
import os

import pytest

import mscclpp
from mscclpp.language import *

import programs as P

RANKS = range(2, 9)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def ok(prog_or_plan):
    res = prog_or_plan.check() if hasattr(prog_or_plan, "check") else \
        mscclpp.simulate(prog_or_plan)
    assert res, str(res)
    assert res.checked_semantics
    return res


@pytest.mark.parametrize("n", RANKS)
def test_ring_allreduce(n):
    ok(P.ring_allreduce(n))


@pytest.mark.parametrize("n", [2, 3, 5])
def test_ring_allreduce_inplace(n):
    ok(P.ring_allreduce(n, inplace=True))


@pytest.mark.parametrize("n", RANKS)
def test_allpairs_read_reduce_allreduce(n):
    ok(P.allpairs_allreduce_inplace(n))


@pytest.mark.parametrize("n", RANKS)
def test_ring_allgather(n):
    ok(P.ring_allgather(n))


@pytest.mark.parametrize("n", RANKS)
def test_packet_allgather(n):
    ok(P.packet_allgather_rppkt(n))


@pytest.mark.parametrize("n", RANKS)
def test_port_allgather(n):
    ok(P.port_allgather(n))


@pytest.mark.parametrize("n", RANKS)
def test_packet_reducescatter(n):
    ok(P.packet_reducescatter(n))


@pytest.mark.parametrize("n", RANKS)
def test_alltoall_get(n):
    ok(P.alltoall_get(n))


@pytest.mark.parametrize("n", RANKS)
def test_alltoall_blocks(n):
    ok(P.alltoall_blocks(n, peers_per_block=3))


@pytest.mark.parametrize("n", [2, 3, 4])
def test_tbg_pipelined_allreduce(n):
    res = ok(P.tbg_pipelined_allreduce(n))
    assert res.stats["resolution"] == 4


@pytest.mark.parametrize("nodes,per_node", [(2, 2), (2, 3), (4, 2), (3, 2), (1, 4)])
def test_hierarchical_allreduce(nodes, per_node):
    ok(P.hierarchical_allreduce(nodes, per_node, peers_per_block=2))


REFERENCE_PLANS = os.path.join(ROOT, "tests", "plans-reference")  # copied from shared/


@pytest.mark.parametrize("path", sorted(
    os.path.join(REFERENCE_PLANS, f) for f in os.listdir(REFERENCE_PLANS) if f.endswith(".json")))
def test_reference_plans_from_mscclpp_simulate_correct(path):
    res = mscclpp.verify_plan(path)
    assert res, str(res)


# ---- diagnostics ------------------------------------------------------------------------------

def _ag(n=3, wrong=None, sig_sync=SyncType.before, relaxed=False, drop_copy=False):
    with CollectiveProgram("t", AllGather(n, 1, False), n) as prog:
        for r in range(n):
            if not (drop_copy and r == 0):
                Rank(r).copy(Rank(r).get_output_buffer()[r:r + 1],
                             Rank(r).get_input_buffer()[0:1], tb=0)
            for q in range(n):
                if q != r:
                    c = MemoryChannel(q, r)
                    idx = 0 if wrong == (r, q) else r
                    c.put(Rank(q).get_output_buffer()[idx:idx + 1],
                          Rank(r).get_input_buffer()[0:1], tb=0)
                    c.signal(tb=0, data_sync=sig_sync, relaxed=relaxed)
                    c.wait(tb=0, relaxed=relaxed)
    return prog


def test_correct_baseline():
    ok(_ag())


def test_names_first_wrong_chunk():
    res = _ag(wrong=(1, 2)).check()
    assert not res
    assert res.first_wrong["rank"] == 2 and res.first_wrong["index"] == 1
    assert res.first_wrong["buffer"] == "output"
    assert "never written" in res.first_wrong["got"]
    assert "rank 2 output chunk 1" in str(res)


def test_missing_local_copy_is_reported():
    res = _ag(drop_copy=True).check()
    assert not res and res.first_wrong["rank"] == 0 and res.first_wrong["index"] == 0


def test_signal_without_block_sync_is_a_race():
    res = _ag(sig_sync=SyncType.none).check()
    assert not res and any("race" in e for e in res.errors)


def test_relaxed_only_ordering_is_a_warning_or_strict_error():
    res = _ag(relaxed=True).check()
    assert res and any("relaxed" in w for w in res.warnings)
    assert not _ag(relaxed=True).check(strict_relaxed=True)


def test_deadlock_is_reported():
    plan = _ag().to_dict()
    # dropping rank 1's signals unbalances the channels: refused as the C loader refuses it
    for tb in plan["gpus"][1]["threadblocks"]:
        tb["ops"] = [o for o in tb["ops"] if o["name"] != "signal"]
    res = mscclpp.simulate(plan)
    assert not res and "invalid plan" in str(res) and "the extra waits deadlock" in str(res)
    # every rank waits before it signals: balanced (it loads), but nobody moves
    plan = _ag().to_dict()
    for g in plan["gpus"]:
        for tb in g["threadblocks"]:
            tb["ops"] = [o for o in tb["ops"] if o["name"] == "wait"] + \
                [o for o in tb["ops"] if o["name"] != "wait"]
    res = mscclpp.simulate(plan)
    assert not res and res.deadlock
    assert "deadlock" in str(res) and "waiting for a signal from rank" in str(res)


def test_double_counted_reduction_is_wrong():
    with CollectiveProgram("t", AllReduce(2, 1, False), 2) as prog:
        s = [Buffer(r, 2) for r in range(2)]
        for r in range(2):
            q = 1 - r
            rk = Rank(r)
            i, o = rk.get_input_buffer(), rk.get_output_buffer()
            c = MemoryChannel(q, r)
            c.put(s[q][0:2], i[0:2], tb=0)
            c.signal(tb=0)
            c.wait(tb=0)
            rk.reduce(i[0:2], [s[r][0:2], s[r][0:2]], tb=0, dst_chunk=o[0:2])
    res = prog.check()
    assert not res and "twice" in str(res)


def test_unbalanced_semaphore_is_reported():
    with CollectiveProgram("t", AllGather(1, 1, False), 1) as prog:
        r = Rank(0)
        Semaphore(0, 0).release(tb=0)
        r.copy(r.get_output_buffer()[0:1], r.get_input_buffer()[0:1], tb=0)
    res = prog.check()
    assert not res and "semaphore 0" in str(res)


def test_invalid_plan_names_json_path():
    plan = _ag().to_dict()
    plan["gpus"][1]["threadblocks"][0]["ops"][0]["src_buff"][0]["index"] = 7
    res = mscclpp.simulate(plan)
    assert not res
    assert "gpus[1].threadblocks[0].ops[0].src_buff[0]" in str(res)


def test_custom_collective_checks_only_ordering():
    with CollectiveProgram("t", TestCollective(2, 1, 1), 2) as prog:
        MemoryChannel(1, 0).signal(tb=0)
        MemoryChannel(0, 1).wait(tb=0)
    res = prog.check()
    assert res and not res.checked_semantics
