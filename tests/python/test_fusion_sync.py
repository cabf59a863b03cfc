"""Fusion (plan-format §7.5), data-sync and dependency nops (7.4, 7.6), replication (7.7)."""

import pytest

from mscclpp.language import *


def ops_of(prog, rank=0, tb=0):
    return prog.to_dict()["gpus"][rank]["threadblocks"][tb]["ops"]


def names(prog, rank=0, tb=0):
    return [o["name"] for o in ops_of(prog, rank, tb)]


def prog3(**kw):
    return CollectiveProgram("t", TestCollective(3, 4, 4), 3, **kw)


def test_signal_and_wait_fuse_over_channels():
    with prog3() as p:
        c1, c2 = MemoryChannel(1, 0), MemoryChannel(2, 0)
        b1, b2 = MemoryChannel(0, 1), MemoryChannel(0, 2)
        c1.signal(tb=0)
        c2.signal(tb=0)
        c1.wait(tb=0)
        c2.wait(tb=0)
        for b in (b1, b2):
            b.signal(tb=0)
            b.wait(tb=0)
    ops = ops_of(p)
    assert [o["name"] for o in ops] == ["signal", "nop", "wait"]
    assert ops[0]["channel_ids"] == [0, 1] and ops[2]["channel_ids"] == [0, 1]
    assert p.check()


def test_relaxed_and_normal_signals_do_not_fuse():
    with prog3() as p:
        c1, c2 = MemoryChannel(1, 0), MemoryChannel(2, 0)
        b1, b2 = MemoryChannel(0, 1), MemoryChannel(0, 2)
        c1.signal(tb=0, relaxed=True, data_sync=SyncType.none)
        c2.signal(tb=0, data_sync=SyncType.none)
        b1.wait(tb=0, relaxed=True, data_sync=SyncType.none)
        b2.wait(tb=0, data_sync=SyncType.none)
    assert names(p) == ["rlxsignal", "signal"]


def test_puts_fuse_and_keep_parallel_lists():
    with prog3() as p:
        s = [Buffer(r, 3) for r in range(3)]
        inp = Rank(0).get_input_buffer()
        MemoryChannel(1, 0).put(s[1][0:1], inp[1:2], tb=0)
        MemoryChannel(2, 0).put(s[2][0:1], inp[2:3], tb=0)
    op, = ops_of(p)
    assert op["name"] == "put" and "channel_ids" not in op
    assert op["src_buff"] == [{"type": "i", "index": 1, "size": 1},
                              {"type": "i", "index": 2, "size": 1}]
    assert [d["buffer_id"] for d in op["dst_buff"]] == [0, 1]


def test_puts_from_different_buffer_types_do_not_fuse():
    with prog3() as p:
        s = [Buffer(r, 3) for r in range(3)]
        MemoryChannel(1, 0).put(s[1][0:1], Rank(0).get_input_buffer()[1:2], tb=0)
        MemoryChannel(2, 0).put(s[2][0:1], Rank(0).get_output_buffer()[2:3], tb=0)
    assert names(p) == ["put", "put"]


def test_copy_of_the_put_source_becomes_a_local_destination():
    # plan-format 2.4: one load of inp[0] feeds the peers' stores and the rank's own
    with prog3() as p:
        inp, out = Rank(0).get_input_buffer(), Rank(0).get_output_buffer()
        for r in (1, 2):
            MemoryChannel(r, 0).put(Rank(r).get_output_buffer()[0:1], inp[0:1], tb=0)
        Rank(0).copy(out[0:1], inp[0:1], tb=0)
    op, = ops_of(p)
    assert op["name"] == "put"
    assert op["src_buff"] == [{"type": "i", "index": 0, "size": 1}] * 3
    assert [d.get("buffer_id") for d in op["dst_buff"]] == [0, 1, None]
    assert op["dst_buff"][2] == {"type": "o", "index": 0, "size": 1}


def test_copy_before_the_put_goes_first():
    with prog3() as p:
        inp, out = Rank(0).get_input_buffer(), Rank(0).get_output_buffer()
        Rank(0).copy(out[0:1], inp[0:1], tb=0)
        MemoryChannel(1, 0).put(Rank(1).get_output_buffer()[0:1], inp[0:1], tb=0)
    op, = ops_of(p)
    assert op["name"] == "put" and op["dst_buff"][0] == {"type": "o", "index": 0, "size": 1}
    assert "buffer_id" in op["dst_buff"][1]


def test_copy_stays_apart_from_the_put():
    # another source (nothing to share), a write the put reads, a port put, target mscclpp
    with prog3() as p:
        inp, out = Rank(0).get_input_buffer(), Rank(0).get_output_buffer()
        MemoryChannel(1, 0).put(Rank(1).get_output_buffer()[0:1], inp[0:1], tb=0)
        Rank(0).copy(out[0:1], inp[1:2], tb=0)
    assert names(p) == ["put", "copy"]
    with prog3() as p:
        inp, out = Rank(0).get_input_buffer(), Rank(0).get_output_buffer()
        MemoryChannel(1, 0).put(Rank(1).get_output_buffer()[0:1], out[1:2], tb=0)
        Rank(0).copy(out[1:2], out[1:2], tb=0)
    assert names(p)[0] == "put" and "copy" in names(p)
    with prog3() as p:
        inp, out = Rank(0).get_input_buffer(), Rank(0).get_output_buffer()
        PortChannel(1, 0).put(Rank(1).get_output_buffer()[0:1], inp[0:1], tb=0)
        Rank(0).copy(out[0:1], inp[0:1], tb=0)
    assert names(p) == ["put", "copy"]
    with prog3(target="mscclpp") as p:
        inp, out = Rank(0).get_input_buffer(), Rank(0).get_output_buffer()
        MemoryChannel(1, 0).put(Rank(1).get_output_buffer()[0:1], inp[0:1], tb=0)
        Rank(0).copy(out[0:1], inp[0:1], tb=0)
    assert names(p) == ["put", "copy"]


def test_port_puts_carry_channel_ids():
    with prog3() as p:
        s = [Buffer(r, 3) for r in range(3)]
        PortChannel(1, 0).put(s[1][0:1], Rank(0).get_input_buffer()[1:2], tb=0)
        PortChannel(2, 0).put(s[2][0:1], Rank(0).get_input_buffer()[2:3], tb=0)
    op, = ops_of(p)
    assert op["channel_ids"] == [0, 1] and op["channel_type"] == "port"


def test_reduce_then_put_fuses_to_reduce_send():
    with prog3() as p:
        s = [Buffer(r, 3) for r in range(3)]
        r0 = Rank(0)
        inp, out = r0.get_input_buffer(), r0.get_output_buffer()
        r0.reduce(inp[0:1], [s[0][1:2], s[0][2:3]], tb=0, dst_chunk=out[0:1])
        MemoryChannel(1, 0).put(s[1][0:1], out[0:1], tb=0)
        MemoryChannel(2, 0).put(s[2][0:1], out[0:1], tb=0)
    op, = ops_of(p)
    assert op["name"] == "res" and op["channel_type"] == "memory"
    assert len(op["src_buff"]) == 3 and len(op["dst_buff"]) == 3
    assert op["dst_buff"][0] == {"type": "o", "index": 0, "size": 1}


def test_read_reduce_chain_and_send_fuse_to_rres():
    with prog3() as p:
        buf = Rank(0).get_input_buffer()
        for peer in (1, 2):
            MemoryChannel(peer, 0).reduce(buf[0:1], [Rank(peer).get_input_buffer()[0:1]], tb=0)
        for peer in (1, 2):
            MemoryChannel(peer, 0).put(Rank(peer).get_input_buffer()[0:1], buf[0:1], tb=0)
    op, = ops_of(p)
    assert op["name"] == "rres"
    assert [d.get("buffer_id", d.get("type")) for d in op["src_buff"]] == ["i", 0, 1]


def test_out_of_place_reduce_accumulation_fuses_only_when_it_chains():
    with prog3() as p:
        r0 = Rank(0)
        inp, out = r0.get_input_buffer(), r0.get_output_buffer()
        r0.reduce(inp[0:1], [inp[1:2]], tb=0, dst_chunk=out[0:1])
        r0.reduce(out[0:1], [inp[2:3]], tb=0)          # out += inp[2]: chains
        r0.reduce(inp[0:1], [inp[3:4]], tb=0, dst_chunk=out[0:1])  # overwrites: no fusion
    ops = ops_of(p)
    assert [o["name"] for o in ops] == ["re", "nop", "re"]
    assert len(ops[0]["src_buff"]) == 3


def test_packet_reduce_fusions():
    with prog3() as p:
        s = [Buffer(r, 6) for r in range(3)]
        r0 = Rank(0)
        inp, out = r0.get_input_buffer(), r0.get_output_buffer()
        r0.reduce(inp[0:1], [s[0][1:2], s[0][2:3]], tb=0, dst_chunk=out[0:1], packet=True)
        r0.copy_packets(s[0][3:4], out[0:1], tb=0)
        MemoryChannel(1, 0).put_packets(s[1][4:5], out[0:1], tb=0)
        MemoryChannel(2, 0).read_put_packets(s[2][4:5], s[0][3:4], tb=0)
    op, = ops_of(p)
    assert op["name"] == "recspkt"
    assert op["dst_buff"][1] == {"type": "s", "index": 3, "size": 1}
    assert len(op["dst_buff"]) == 4


def test_repkt_then_ppkt_is_respkt():
    with prog3() as p:
        s = [Buffer(r, 6) for r in range(3)]
        r0 = Rank(0)
        inp = r0.get_input_buffer()
        r0.reduce(inp[0:1], [s[0][1:2]], tb=0, packet=True)
        MemoryChannel(1, 0).put_packets(s[1][4:5], inp[0:1], tb=0)
    assert names(p) == ["respkt"]


def test_semaphore_ops_fuse():
    with prog3() as p:
        a, b = Semaphore(0, 1), Semaphore(0, 1)
        a.acquire(tb=0, data_sync=SyncType.none)
        b.acquire(tb=0, data_sync=SyncType.none)
        a.release(tb=0, data_sync=SyncType.none)
        b.release(tb=0, data_sync=SyncType.none)
    ops = ops_of(p)
    assert ops == [{"name": "sem_acquire", "semaphore_ids": [0, 1]},
                   {"name": "sem_release", "semaphore_ids": [0, 1]}]


def test_fusion_can_be_disabled():
    with prog3(instr_fusion=False) as p:
        s = [Buffer(r, 3) for r in range(3)]
        inp = Rank(0).get_input_buffer()
        MemoryChannel(1, 0).put(s[1][0:1], inp[1:2], tb=0)
        MemoryChannel(2, 0).put(s[2][0:1], inp[2:3], tb=0)
    assert names(p) == ["put", "put"]


def test_data_sync_inserts_nops_and_merges_adjacent_ones():
    with prog3() as p:
        c = MemoryChannel(1, 0)
        b = MemoryChannel(0, 1)
        r0 = Rank(0)
        r0.copy(r0.get_output_buffer()[0:1], r0.get_input_buffer()[0:1], tb=0)
        c.signal(tb=0, data_sync=SyncType.both)
        c.wait(tb=0, data_sync=SyncType.both)
        r0.copy(r0.get_output_buffer()[1:2], r0.get_input_buffer()[1:2], tb=0)
        b.wait(tb=0, data_sync=SyncType.none)
        b.signal(tb=0, data_sync=SyncType.none)
    assert names(p) == ["copy", "nop", "signal", "nop", "wait", "nop", "copy"]


def test_dependency_sync_raw_war_waw_and_independent():
    with prog3() as p:
        r0 = Rank(0)
        i, o = r0.get_input_buffer(), r0.get_output_buffer()
        r0.copy(o[0:1], i[0:1], tb=0)     # write o0
        r0.copy(o[1:2], i[1:2], tb=0)     # independent
        r0.copy(i[2:3], o[0:1], tb=0)     # RAW on o0 -> nop
        r0.copy(o[0:1], i[3:4], tb=0)     # WAR on o0 (read above) -> nop
        r0.copy(o[0:1], i[1:2], tb=0)     # WAW on o0 -> nop
        r0.copy(o[3:4], i[1:2], tb=0)     # read-read on i1: no nop
    assert names(p) == ["copy", "copy", "nop", "copy", "nop", "copy", "nop", "copy", "copy"]


def test_auto_sync_can_be_disabled():
    with prog3(auto_sync=False) as p:
        r0 = Rank(0)
        i, o = r0.get_input_buffer(), r0.get_output_buffer()
        r0.copy(o[0:1], i[0:1], tb=0)
        r0.copy(i[2:3], o[0:1], tb=0)
    assert names(p) == ["copy", "copy"]
    res = p.check()
    assert not res and "race" in str(res)


def test_packet_reduce_plain_source_is_tracked():
    # the reference skips src[0] of packet reduces (P24); a write to it after must sync
    with prog3() as p:
        s = Buffer(0, 2)
        r0 = Rank(0)
        i = r0.get_input_buffer()
        r0.reduce(i[0:1], [s[0:1]], tb=0, dst_chunk=r0.get_output_buffer()[0:1], packet=True)
        r0.copy(i[0:1], i[1:2], tb=0)
    assert names(p) == ["repkt", "nop", "copy"]


def test_barrier_nop_merging():
    with prog3() as p:
        r0 = Rank(0)
        Semaphore(0, 0).release(tb=0)   # nop, sem_release, nop
        r0.barrier([0, 1])             # the trailing nop folds into the barrier
    assert names(p) == ["sem_release", "barrier"]


def test_instances_replicate_once_and_to_json_is_idempotent():
    with CollectiveProgram("x", AllGather(2, 1, False), 2, instances=2) as p:
        s = [Buffer(r, 2) for r in range(2)]
        for r in range(2):
            q = 1 - r
            c = MemoryChannel(q, r)
            c.put(s[q][r:r + 1], Rank(r).get_input_buffer()[0:1], tb=0)
            c.signal(tb=0)
            c.wait(tb=0)
            Rank(r).copy(Rank(r).get_output_buffer()[q:q + 1], s[r][q:q + 1], tb=0)
            Rank(r).copy(Rank(r).get_output_buffer()[r:r + 1], Rank(r).get_input_buffer()[0:1],
                         tb=0)
    a = p.to_json()
    p.post_process_operations()
    b = p.to_json()
    assert a == b
    plan = p.to_dict()
    g = plan["gpus"][0]
    assert len(g["threadblocks"]) == 2                       # not 4 (P16)
    assert g["input_chunks"] == 2 and g["output_chunks"] == 4 and g["scratch_chunks"] == 4
    assert g["channels"][0]["connected_to"] == [1, 1]
    tb1 = g["threadblocks"][1]
    assert tb1["channels"] == [{"channel_type": "memory", "channel_ids": [1]}]
    put = tb1["ops"][0]
    assert put["src_buff"][0] == {"type": "i", "index": 1, "size": 1}
    assert put["dst_buff"][0]["index"] == 1
    assert p.check()


def test_replication_policy_none_keeps_chunks():
    with CollectiveProgram("x", TestCollective(1, 2, 2), 1, instances=2,
                           replication_policy=ReplicationPolicy.none) as p:
        r = Rank(0)
        r.copy(r.get_output_buffer()[0:1], r.get_input_buffer()[0:1], tb=0)
    g = p.to_dict()["gpus"][0]
    assert g["input_chunks"] == 2 and len(g["threadblocks"]) == 2
    assert g["threadblocks"][1]["ops"][0]["src_buff"][0]["index"] == 0


def test_barrier_ids_are_per_program():
    for _ in range(2):
        with prog3() as p:
            Rank(0).barrier([0, 1])
            Rank(0).barrier([2, 3])
        ids = [tb["ops"][0]["barrier_id"] for tb in p.to_dict()["gpus"][0]["threadblocks"]]
        assert ids == [0, 0, 1, 1]


def test_thread_block_group_emits_tbg_info():
    with prog3() as p:
        r0 = Rank(0)
        g = ThreadBlockGroup([2, 3])
        r0.copy(r0.get_output_buffer()[0:4], r0.get_input_buffer()[0:4], tb_group=g)
    plan = p.to_dict()
    tbs = plan["gpus"][0]["threadblocks"]
    assert tbs[0]["ops"] == [] and tbs[1]["ops"] == []
    assert tbs[2]["ops"][0]["tbg_info"] == {"tb_id": 0, "tbg_size": 2}
    assert tbs[3]["ops"][0]["tbg_info"] == {"tb_id": 1, "tbg_size": 2}
    assert g.numtb() == 2 and g.get_internal_id(3) == 1


def test_reduce_op_is_emitted_honestly():
    with prog3() as p:
        r0 = Rank(0)
        i = r0.get_input_buffer()
        r0.reduce(i[0:1], [i[1:2]], tb=0, reduce_op=ReduceOperationType.prod)
        r0.reduce(i[2:3], [i[3:4]], tb=1, reduce_op="max")
    plan = p.to_dict()
    assert plan["gpus"][0]["threadblocks"][0]["ops"][0]["reduce_op"] == "prod"
    assert plan["gpus"][0]["threadblocks"][1]["ops"][0]["reduce_op"] == "max"
