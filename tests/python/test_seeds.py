"""The seed documents' programs and API, used exactly as the seeds use them."""

import contextlib
import io
import json
import os
import runpy

import pytest

import mscclpp
from mscclpp.language import *  # noqa: F401,F403  (the quick start's import)

SEEDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")


def test_simple_allgather_runs_unmodified():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(os.path.join(SEEDS, "simple_allgather.py"), run_name="__main__")
    plan = json.loads(out.getvalue())
    assert plan["format"] == "mscclpp-plan/1"
    assert plan["name"] == "simple_allgather_2gpus"
    assert plan["collective"] == "allgather" and plan["inplace"] is True
    assert plan["max_message_size"] == 2**30
    assert [g["id"] for g in plan["gpus"]] == [0, 1]
    ops = [op["name"] for op in plan["gpus"][0]["threadblocks"][0]["ops"]]
    assert ops == ["rlxsignal", "nop", "rlxwait", "nop", "put", "nop", "signal", "wait"]
    res = mscclpp.verify_plan(plan)
    assert res, str(res)


def test_nvls_allreduce_runs_unmodified(tmp_path, monkeypatch):
    monkeypatch.setenv("MSCCLPP_CACHE_DIR", str(tmp_path))
    mod = runpy.run_path(os.path.join(SEEDS, "allreduce_nvls.py"))
    algo = mod["setup_algorithm"](rank=0, world_size=8, nranks_per_node=8)
    assert algo.name == "allreduce_nvls" and algo.collective == "allreduce"
    assert algo.tags == {"nvls": 1}
    assert algo.constraint.world_size == 8 and algo.constraint.nranks_per_node == 8
    assert os.path.dirname(algo.plan_path) == str(tmp_path)
    plan = algo.plan
    g = plan["gpus"][3]
    assert len(g["threadblocks"]) == 8            # instances=8, post-processed once (P16)
    assert g["input_chunks"] == 64
    assert [c["channel_type"] for c in g["channels"]].count("switch") == 8
    names = [op["name"] for op in g["threadblocks"][0]["ops"]]
    assert "glres" in names and "glre" not in names
    res = algo.check()
    assert res, str(res)
    # compiling again hits the cache
    again = mod["setup_algorithm"](rank=0, world_size=8, nranks_per_node=8)
    assert again.plan_path == algo.plan_path


def test_quickstart_imports():
    import mscclpp.language.channel as ch
    import mscclpp.language.collectives as co
    import mscclpp.language.general as ge
    import mscclpp.language.program as pr
    import mscclpp.language.rank as ra
    from mscclpp.language.utils import AlgoSpec as A2

    assert ch.SwitchChannel and ch.MemoryChannel and ch.PortChannel
    assert ch.BufferType.input.value == "i" and ch.SyncType.after
    assert co.AllReduce and co.AllGather and co.ReduceScatter and co.AllToAll and co.SendRecv
    assert ge.JSON and pr.CollectiveProgram and ra.Rank and ra.Buffer and ra.Semaphore
    assert mscclpp.AlgoSpec is A2 is mscclpp.language.AlgoSpec
    assert callable(mscclpp.compile)
    for name in mscclpp.language.__all__:
        assert name in globals(), name


def test_concepts_buffer_chunk_copy_reduce():
    with CollectiveProgram("c", TestCollective(2, 2, 2), 2) as prog:
        rank = Rank(0)
        input_buffer = rank.get_input_buffer()
        dst_chunk = input_buffer[0:1]
        src_chunk = input_buffer[1:2]
        rank.copy(dst_chunk, src_chunk, tb=0)
        rank.reduce(dst_chunk, src_chunk, op=ReduceOperationType.sum, tb=0)
        plan = json.loads(JSON())
    ops = plan["gpus"][0]["threadblocks"][0]["ops"]
    assert [o["name"] for o in ops] == ["copy", "nop", "re"]
    assert ops[2]["reduce_op"] == "sum"


def test_concepts_relaxed_signal_wait_ring():
    nranks = 2
    with CollectiveProgram("r", TestCollective(2, 1, 1), nranks) as prog:
        for i in range(nranks):
            src_rank = i
            dst_rank = (i + 1) % nranks
            channel = MemoryChannel(dst_rank, src_rank)
            channel.relaxedSignal(tb=0, data_sync=SyncType.none)
            channel.relaxedWait(tb=0, data_sync=SyncType.after)
        plan = prog.to_dict()
    ops = [o["name"] for o in plan["gpus"][0]["threadblocks"][0]["ops"]]
    assert ops == ["rlxsignal", "rlxwait"]  # trailing nop dropped at block end
    assert prog.check()


def test_concepts_switch_group_load_reduce_and_store():
    gpu_size = 2
    with CollectiveProgram("s", AllReduce(gpu_size, 1, True), gpu_size) as prog:
        switch_chan = SwitchChannel(rank_list=[gpu for gpu in range(gpu_size)],
                                    buffer_type=BufferType.input)
        for gpu in range(gpu_size):
            buffer_offset = gpu
            rank = Rank(gpu)
            input_buffer = rank.get_input_buffer()
            switch_chan.at_rank(gpu).group_load_reduce(buffer_offset, size=1,
                                                       dst_chunk=input_buffer[gpu:gpu + 1], tb=0)
            switch_chan.at_rank(gpu).group_store(input_buffer[gpu:gpu + 1], buffer_offset,
                                                 size=1, tb=0)
        plan = prog.to_dict()
    op = plan["gpus"][1]["threadblocks"][0]["ops"][0]
    assert op["name"] == "glres" and op["channel_type"] == "switch"
    assert op["src_buff"] == [{"switch_channel_id": 0, "index": 1, "size": 1}]
    assert op["dst_buff"] == [{"switch_channel_id": 0, "index": 1, "size": 1}]
    assert plan["gpus"][0]["channels"] == [{"channel_type": "switch", "buffer_type": "i",
                                            "rank_groups": [{"size": 2, "ranks": [0, 1]}]}]


def test_concepts_barrier_and_semaphore():
    with CollectiveProgram("b", TestCollective(1, 1, 1), 1) as prog:
        rank = Rank(0)
        rank.barrier([0, 1])
        sem = Semaphore(rank=0, initial_value=1)
        sem.acquire(tb=0, data_sync=SyncType.after)
        sem.release(tb=0, data_sync=SyncType.before)
        plan = prog.to_dict()
    g = plan["gpus"][0]
    assert g["semaphores"] == [{"init_value": 1}]
    assert g["threadblocks"][0]["ops"] == [
        {"name": "barrier", "barrier_id": 0, "num_threadblocks": 2},
        {"name": "sem_acquire", "semaphore_ids": [0]},
        {"name": "nop"},
        {"name": "sem_release", "semaphore_ids": [0]},
    ]
    assert g["threadblocks"][1]["ops"] == [{"name": "barrier", "barrier_id": 0,
                                            "num_threadblocks": 2}]
    assert prog.check()


def test_concepts_pipeline_loop_with_semaphores():
    nranks = 2
    with CollectiveProgram("p", AllGather(nranks, 1, False), nranks) as prog:
        scratch = [Buffer(r, 1) for r in range(nranks)]
        for i in range(nranks):
            rank = Rank(i)
            dst_rank = (i + 1) % nranks
            sem = Rank.Semaphore(rank=i, initial_value=0)
            chan = Channel(dst_rank, i, channel_type=Channel.memory)
            with Loop.iteration(unit=2**20, num_chunks=1) as iter:
                rank.copy(scratch[i][0:1], rank.get_input_buffer()[0:1], tb=0,
                          iter_context=iter)
                sem.release(tb=0)
                sem.acquire(tb=1)
                chan.put(Rank(dst_rank).get_output_buffer()[i:i + 1], scratch[i][0:1], tb=1,
                         iter_context=iter)
                chan.signal(tb=1, sync="before")
                chan.wait(tb=1, sync="after")
            rank.copy(rank.get_output_buffer()[i:i + 1], rank.get_input_buffer()[0:1], tb=2)
        plan = prog.to_dict()
    tb0 = plan["gpus"][0]["threadblocks"][0]["ops"]
    assert len(tb0) == 1 and tb0[0]["name"] == "pipeline"
    assert tb0[0]["iter_context"] == {"unit_size": 2**20, "num_chunks": 1}
    assert [o["name"] for o in tb0[0]["ops"]] == ["copy", "nop", "sem_release", "nop"]
    res = prog.check()
    assert res, str(res)


def test_iter_context_must_be_current():
    with CollectiveProgram("p", TestCollective(1, 2, 2), 1):
        other = Loop.iteration(unit=64, num_chunks=1)
        with pytest.raises(DSLError):
            Rank(0).copy(Rank(0).get_output_buffer()[0:1], Rank(0).get_input_buffer()[0:1],
                         tb=0, iter_context=other)
