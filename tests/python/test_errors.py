"""Misuse gives a clear DSLError."""

import pytest

from mscclpp.language import *


def test_chunk_out_of_range():
    with CollectiveProgram("e", AllReduce(2, 1, False), 2):
        buf = Rank(0).get_input_buffer()
        with pytest.raises(DSLError, match="chunk out of range"):
            buf[1:3]
        with pytest.raises(DSLError, match="chunk out of range"):
            buf[-1:1]
        with pytest.raises(DSLError, match="contiguous"):
            buf[0:2:2]
        with pytest.raises(DSLError, match="chunk out of range"):
            Buffer(0, 2)[2:3]


def test_channel_to_self():
    with CollectiveProgram("e", AllReduce(2, 1, False), 2):
        with pytest.raises(DSLError, match="channel to self"):
            MemoryChannel(1, 1)
        with pytest.raises(DSLError, match="channel to self"):
            PortChannel(0, 0)


def test_rank_out_of_range():
    with CollectiveProgram("e", AllReduce(2, 1, False), 2):
        with pytest.raises(DSLError, match="out of range"):
            Rank(2)
        with pytest.raises(DSLError, match="out of range"):
            MemoryChannel(5, 0)


def test_mismatched_sizes():
    with CollectiveProgram("e", AllReduce(2, 2, False), 2):
        r = Rank(0)
        with pytest.raises(DSLError, match="mismatched sizes"):
            r.copy(r.get_output_buffer()[0:2], r.get_input_buffer()[0:1], tb=0)
        with pytest.raises(DSLError, match="mismatched sizes"):
            r.reduce(r.get_input_buffer()[0:1], [r.get_input_buffer()[1:3]], tb=0)
        with pytest.raises(DSLError, match="mismatched sizes"):
            MemoryChannel(1, 0).put(Rank(1).get_output_buffer()[0:2],
                                    r.get_input_buffer()[0:1], tb=0)


def test_wrong_ranks_for_channel_and_rank_ops():
    with CollectiveProgram("e", AllReduce(3, 1, False), 3):
        c = MemoryChannel(1, 0)
        with pytest.raises(DSLError, match="belongs to rank 2"):
            c.put(Rank(2).get_output_buffer()[0:1], Rank(0).get_input_buffer()[0:1], tb=0)
        with pytest.raises(DSLError, match="belongs to rank 1"):
            c.put(Rank(1).get_output_buffer()[0:1], Rank(1).get_input_buffer()[0:1], tb=0)
        with pytest.raises(DSLError, match="belongs to rank 1"):
            Rank(0).copy(Rank(1).get_output_buffer()[0:1], Rank(0).get_input_buffer()[0:1],
                         tb=0)


def test_wait_without_signal():
    with CollectiveProgram("e", AllReduce(2, 1, False), 2) as p:
        MemoryChannel(1, 0)
        MemoryChannel(0, 1).wait(tb=0)
    with pytest.raises(DSLError, match="wait without a signal"):
        p.to_json()


def test_signal_without_wait():
    with CollectiveProgram("e", AllReduce(2, 1, False), 2) as p:
        MemoryChannel(1, 0).signal(tb=0)
        MemoryChannel(0, 1)
    with pytest.raises(DSLError, match="signal without a wait"):
        p.to_json()


def test_signal_on_unpaired_channel():
    with CollectiveProgram("e", AllReduce(2, 1, False), 2) as p:
        MemoryChannel(1, 0).signal(tb=0)
    with pytest.raises(DSLError, match="no matching channel"):
        p.to_json()


def test_thread_block_required():
    with CollectiveProgram("e", AllReduce(2, 1, False), 2):
        r = Rank(0)
        with pytest.raises(DSLError, match="thread block"):
            r.copy(r.get_output_buffer()[0:1], r.get_input_buffer()[0:1])
        with pytest.raises(DSLError, match="non-negative"):
            r.copy(r.get_output_buffer()[0:1], r.get_input_buffer()[0:1], tb=-1)


def test_packets_need_scratch():
    with CollectiveProgram("e", AllReduce(2, 1, False), 2):
        with pytest.raises(DSLError, match="scratch"):
            MemoryChannel(1, 0).put_packets(Rank(1).get_output_buffer()[0:1],
                                            Rank(0).get_input_buffer()[0:1], tb=0)
        r = Rank(0)
        with pytest.raises(DSLError, match="scratch"):
            r.unpack_packets(r.get_output_buffer()[0:1], r.get_input_buffer()[0:1], tb=0)


def test_unfused_switch_reduce_is_rejected():
    # MSCCL++ cannot execute glre; this library can (tests/python/test_target_verify.py)
    with CollectiveProgram("e", AllReduce(2, 1, True), 2, target="mscclpp") as p:
        sw = SwitchChannel([0, 1], BufferType.input)
        sw.at_rank(0).reduce(0, 1, Rank(0).get_input_buffer()[0:1], tb=0)
    with pytest.raises(DSLError, match="unfused switch reduce"):
        p.to_json()


def test_switch_channel_errors():
    with CollectiveProgram("e", AllReduce(3, 1, True), 3):
        sw = SwitchChannel([0, 1], buffer_type="input")
        with pytest.raises(DSLError, match="not a member"):
            sw.at_rank(2)
        with pytest.raises(DSLError, match="out of range"):
            sw.at_rank(0).broadcast(Rank(0).get_input_buffer()[0:1], 3, 1, tb=0)


def test_limits_are_enforced():
    # MSCCL++'s limits hold for target="mscclpp"; this library's executor has no 64-op limit
    for target in ("mscclpp", None):
        with CollectiveProgram("e", TestCollective(1, 2, 2), 1, target=target) as p:
            r = Rank(0)
            for _ in range(40):
                r.copy(r.get_output_buffer()[0:1], r.get_input_buffer()[0:1], tb=0)
        if target is None:
            p.to_json()
            continue
        with pytest.raises(DSLError, match="limit 64"):
            p.to_json()
        p.check_limits = False
        p.to_json()


def test_nested_programs_and_dsl_outside_program():
    with pytest.raises(DSLError, match="no active CollectiveProgram"):
        Rank(0)
    with CollectiveProgram("a", AllReduce(2, 1, False), 2):
        with pytest.raises(DSLError, match="nested"):
            with CollectiveProgram("b", AllReduce(2, 1, False), 2):
                pass


def test_program_argument_errors():
    with pytest.raises(DSLError, match="protocol"):
        CollectiveProgram("a", AllReduce(2, 1, False), 2, protocol="LL128")
    with pytest.raises(DSLError, match="2 ranks"):
        CollectiveProgram("a", AllReduce(2, 1, False), 4)
    with pytest.raises(DSLError, match="Collective"):
        CollectiveProgram("a", "allreduce", 2)


def test_algospec_in_place_must_match():
    spec = AlgoSpec(name="x", collective=AllReduce(2, 1, True), nranks_per_node=2,
                    world_size=2, in_place=False, instances=1, protocol="Simple")
    with pytest.raises(DSLError, match="in_place"):
        CollectiveProgram.from_spec(spec)


def test_duplicate_barrier_blocks():
    with CollectiveProgram("a", AllReduce(2, 1, False), 2):
        with pytest.raises(DSLError, match="duplicate"):
            Rank(0).barrier([0, 0])
