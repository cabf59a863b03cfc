#!/usr/bin/env python3
"""Regenerates the malformed-plan corpus and its EXPECTED manifest in this directory.

Every case is a 2-rank AllGather like docs/plan-format.md §1.8 (BASE below) with one thing
broken, or raw text for the syntax cases. Usage: python3 make_corpus.py [outdir]
"""
import json, copy, os, sys
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))

def gpu(r):
    p = 1 - r
    return {"id": r, "input_chunks": 1, "output_chunks": 2, "scratch_chunks": 0,
            "channels": [{"channel_type": "memory", "connected_to": [p]}],
            "remote_buffers": [{"rank": p, "type": "o", "access_channel_types": ["memory"]}],
            "semaphores": [],
            "threadblocks": [{"id": 0,
                "channels": [{"channel_type": "memory", "channel_ids": [0]}],
                "remote_buffer_refs": [{"access_channel_type": "memory", "remote_buffer_ids": [0]}],
                "ops": [
                    {"name": "rlxsignal", "channel_ids": [0], "channel_type": "memory"},
                    {"name": "rlxwait", "channel_ids": [0], "channel_type": "memory"},
                    {"name": "nop"},
                    {"name": "copy", "src_buff": [{"type": "i", "index": 0, "size": 1}],
                                     "dst_buff": [{"type": "o", "index": r, "size": 1}]},
                    {"name": "put", "src_buff": [{"type": "i", "index": 0, "size": 1}],
                                    "dst_buff": [{"buffer_id": 0, "index": r, "size": 1}],
                                    "channel_type": "memory"},
                    {"name": "nop"},
                    {"name": "signal", "channel_ids": [0], "channel_type": "memory"},
                    {"name": "wait", "channel_ids": [0], "channel_type": "memory"},
                    {"name": "nop"}]}]}

BASE = {"name": "ag2", "collective": "allgather", "protocol": "Simple", "inplace": False,
        "reuse_resources": False, "use_double_scratch_buffer": False, "buffer_alignment": 16,
        "num_threads_per_block": 1024, "min_message_size": 0, "max_message_size": 1073741824,
        "gpus": [gpu(0), gpu(1)]}

cases = []
def case(name, expect, mut=None, raw=None):
    cases.append((name, expect, mut, raw))

def g0(p): return p["gpus"][0]
def tb0(p): return p["gpus"][0]["threadblocks"][0]
def ops0(p): return tb0(p)["ops"]
P0 = "gpus[0].threadblocks[0]"
O = lambda i: f"{P0}.ops[{i}]"

base_text = json.dumps(BASE, indent=1)
# --- syntax
case("syntax_truncated", "JSON syntax error", raw=base_text[: len(base_text) // 2])
case("syntax_trailing_garbage", "JSON syntax error at line", raw=base_text + "\n}x\n")
case("syntax_not_object", "the plan must be a JSON object, got an array", raw="[1, 2, 3]\n")
case("syntax_empty", "JSON syntax error", raw="")
case("syntax_comment", "JSON syntax error", raw=base_text.replace('"name": "ag2",', '"name": "ag2", // jsonc comment', 1))
# --- missing keys
def delkey(path_fn, key):
    def m(p): del path_fn(p)[key]
    return m
case("missing_name", "name: required key is missing", delkey(lambda p: p, "name"))
case("missing_collective", "collective: required key is missing", delkey(lambda p: p, "collective"))
case("missing_protocol", "protocol: required key is missing", delkey(lambda p: p, "protocol"))
case("missing_inplace", "inplace: required key is missing", delkey(lambda p: p, "inplace"))
case("missing_gpus", "gpus: required key is missing", delkey(lambda p: p, "gpus"))
case("missing_gpu_id", "gpus[0].id: required key is missing", delkey(g0, "id"))
case("missing_input_chunks", "gpus[1].input_chunks: required key is missing", delkey(lambda p: p["gpus"][1], "input_chunks"))
case("missing_threadblocks", "gpus[0].threadblocks: required key is missing", delkey(g0, "threadblocks"))
case("missing_remote_buffers", "gpus[0].remote_buffers: required key is missing", delkey(g0, "remote_buffers"))
case("missing_ops", f"{P0}.ops: required key is missing", delkey(tb0, "ops"))
case("missing_op_name", f"{O(3)}.name: required key is missing", delkey(lambda p: ops0(p)[3], "name"))
case("missing_desc_index", f"{O(3)}.src_buff[0].index: required key is missing", delkey(lambda p: ops0(p)[3]["src_buff"][0], "index"))
# --- wrong types
def setkey(path_fn, key, val):
    def m(p): path_fn(p)[key] = val
    return m
case("type_gpus_object", "gpus: expected an array, got an object", setkey(lambda p: p, "gpus", {}))
case("type_input_chunks_string", "gpus[0].input_chunks: expected a non-negative integer, got a string", setkey(g0, "input_chunks", "1"))
case("type_inplace_string", "inplace: expected true or false, got a string", setkey(lambda p: p, "inplace", "false"))
case("type_index_real", f"{O(3)}.src_buff[0].index: 0.5 is not an integer", setkey(lambda p: ops0(p)[3]["src_buff"][0], "index", 0.5))
case("type_index_negative", f"{O(3)}.src_buff[0].index: -1 is negative", setkey(lambda p: ops0(p)[3]["src_buff"][0], "index", -1))
def op_int(p): ops0(p)[0] = 5
case("type_op_not_object", f"{O(0)}: expected an object, got an integer", op_int)
def desc_int(p): ops0(p)[3]["src_buff"][0] = 7
case("type_desc_not_object", f"{O(3)}.src_buff[0]: expected an object, got an integer", desc_int)
case("type_name_number", "name: expected a string, got an integer", setkey(lambda p: p, "name", 42))
# --- out of range
case("range_chunk_index", f"{O(3)}.src_buff[0].index: 1 is out of range for input_chunks=1",
     setkey(lambda p: ops0(p)[3]["src_buff"][0], "index", 1))
def chunk_size(p):
    ops0(p)[3]["dst_buff"][0].update(index=1, size=2)
case("range_chunk_size", f"{O(3)}.dst_buff[0].size: 2 chunks from index 1 end past output_chunks=2", chunk_size)
case("range_remote_chunk", f"{O(4)}.dst_buff[0].index: 2 is out of range for output_chunks=2 of rank 1",
     setkey(lambda p: ops0(p)[4]["dst_buff"][0], "index", 2))
def owner_counts(p):
    p["gpus"][1]["output_chunks"] = 1   # rank 0 keeps 2: the owner's count must be used
    p["gpus"][1]["threadblocks"][0]["ops"][3]["dst_buff"][0]["index"] = 0
    ops0(p)[4]["dst_buff"][0]["index"] = 1
case("range_remote_owner_chunks", f"{O(4)}.dst_buff[0].index: 1 is out of range for output_chunks=1 of rank 1", owner_counts)
case("range_remote_buffer_id", f"{O(4)}.dst_buff[0].buffer_id: 1 is out of range",
     setkey(lambda p: ops0(p)[4]["dst_buff"][0], "buffer_id", 1))
case("range_op_channel_id", f"{O(6)}.channel_ids[0]: memory channel 1 is out of range",
     setkey(lambda p: ops0(p)[6], "channel_ids", [1]))
case("range_block_channel_id", f"{P0}.channels[0].channel_ids[0]: memory channel 1 is out of range (gpus[0] has 1 memory channels)",
     setkey(lambda p: tb0(p)["channels"][0], "channel_ids", [1]))
case("range_peer_rank", "gpus[0].channels[0].connected_to[0]: peer rank 2 is out of range",
     setkey(lambda p: g0(p)["channels"][0], "connected_to", [2]))
case("self_channel", "gpus[1].channels[0].connected_to[0]: a channel to the rank itself",
     setkey(lambda p: p["gpus"][1]["channels"][0], "connected_to", [1]))
def sem_range(p):
    g0(p)["semaphores"] = [{"init_value": 0}]
    ops0(p).insert(0, {"name": "sem_release", "semaphore_ids": [1]})
case("range_semaphore_id", f"{O(0)}.semaphore_ids[0]: semaphore 1 is out of range", sem_range)
def barrier(bid, nb):
    def m(p): ops0(p).insert(0, {"name": "barrier", "barrier_id": bid, "num_threadblocks": nb})
    return m
case("range_barrier_id", f"{O(0)}.barrier_id: 16 is out of range", barrier(16, 1))
case("range_barrier_nblocks", f"{O(0)}.num_threadblocks: 2 is out of range", barrier(0, 2))
def add_switch(p):
    for g in p["gpus"]:
        g["channels"].append({"channel_type": "switch", "buffer_type": "o",
                              "rank_groups": [{"size": 2, "ranks": [0, 1]}]})
        g["threadblocks"][0]["channels"].append({"channel_type": "switch", "channel_ids": [0]})
def sw_id(p):
    add_switch(p)
    ops0(p).append({"name": "gstore", "channel_type": "switch",
                    "src_buff": [{"type": "i", "index": 0, "size": 1}],
                    "dst_buff": [{"switch_channel_id": 1, "index": 0, "size": 1}]})
case("range_switch_channel_id", f"{O(9)}.dst_buff[0].switch_channel_id: 1 is out of range (the thread block has 1 switch channels)", sw_id)
def sw_block(p):
    add_switch(p)
    tb0(p)["channels"][1]["channel_ids"] = [1]
case("range_block_switch_id", f"{P0}.channels[1].channel_ids[0]: switch channel 1 is out of range", sw_block)
def sw_member(p):
    add_switch(p)
    g0(p)["channels"][1]["rank_groups"][0]["ranks"] = [1]
case("switch_not_member", "gpus[0].channels[1].rank_groups[0].ranks: rank 0 is not a member of its own switch channel", sw_member)
case("gpu_id_mismatch", "gpus[1].id: 0 does not match its position 1", setkey(lambda p: p["gpus"][1], "id", 0))
case("block_id_mismatch", f"{P0}.id: 1 does not match its position 0", setkey(tb0, "id", 1))
case("remote_buffer_owner_range", "gpus[0].remote_buffers[0].rank: owner rank 5 is out of range",
     setkey(lambda p: g0(p)["remote_buffers"][0], "rank", 5))
case("remote_buffer_self", "gpus[0].remote_buffers[0].rank: a remote buffer of the rank itself",
     setkey(lambda p: g0(p)["remote_buffers"][0], "rank", 0))
case("remote_ref_range", f"{P0}.remote_buffer_refs[0].remote_buffer_ids[0]: remote buffer 3 is out of range",
     setkey(lambda p: tb0(p)["remote_buffer_refs"][0], "remote_buffer_ids", [3]))
case("remote_ref_access", f"{P0}.remote_buffer_refs[0].remote_buffer_ids[0]: remote buffer 0 is not accessible through port channels",
     setkey(lambda p: tb0(p)["remote_buffer_refs"][0], "access_channel_type", "port"))
case("huge_chunk_count", "gpus[0].input_chunks: 4294967296 is out of range (expected 0..4294967295)",
     setkey(g0, "input_chunks", 4294967296))
case("zero_chunks_used", f"{O(3)}.src_buff[0].index: 0 is out of range for input_chunks=0",
     setkey(g0, "input_chunks", 0))
case("huge_message_size", "max_message_size: 36893488147419103232 does not fit in 64 bits",
     setkey(lambda p: p, "max_message_size", 36893488147419103232))
# --- limits
# (ops per block: MSCCL++'s 64 is lifted; the sanity bound of 65535 is tested in test_plan.c,
# whose plan would be a megabyte here)
case("too_many_channels_per_op", f"{O(6)}.channel_ids: 9 channels exceed the limit of 8 per op",
     setkey(lambda p: ops0(p)[6], "channel_ids", [0] * 9))
def many_descs(p):
    ops0(p)[4]["src_buff"] = [{"type": "i", "index": 0, "size": 1}] * 73
    ops0(p)[4]["dst_buff"] = [{"buffer_id": 0, "index": 0, "size": 1}] * 73
case("too_many_descriptors", f"{O(4)}.src_buff: 73 descriptors exceed the limit of 72 per op", many_descs)
def many_block_chans(p):
    g0(p)["channels"][0]["connected_to"] = [1] * 17   # unpaired with rank 1: accepted
    tb0(p)["channels"][0]["channel_ids"] = list(range(17))
case("too_many_block_channels", f"{P0}.channels[0].channel_ids[16]: more than 16 memory channels in one thread block", many_block_chans)
def many_sem_ids(p):
    g0(p)["semaphores"] = [{"init_value": 0}] * 17
    ops0(p).insert(0, {"name": "sem_acquire", "semaphore_ids": list(range(17))})
case("too_many_semaphore_ids", f"{O(0)}.semaphore_ids: 17 semaphore ids exceed the limit of 16 per op", many_sem_ids)
def nested(p):
    inner = {"name": "pipeline", "iter_context": {"unit_size": 64, "num_chunks": 1}, "ops": [{"name": "nop"}]}
    ops0(p).insert(0, {"name": "pipeline", "iter_context": {"unit_size": 1024, "num_chunks": 1}, "ops": [inner]})
case("nested_pipeline", f"{O(0)}.ops[0].name: nested pipelines are not supported", nested)
def unit0(p):
    ops0(p).insert(0, {"name": "pipeline", "iter_context": {"unit_size": 0, "num_chunks": 1}, "ops": [{"name": "nop"}]})
case("pipeline_unit_size_zero", f"{O(0)}.iter_context.unit_size: 0 is out of range", unit0)
# --- names and formats
case("unknown_op", f'{O(2)}.name: unknown operation "teleport"', setkey(lambda p: ops0(p)[2], "name", "teleport"))
case("unknown_channel_type", 'gpus[0].channels[0].channel_type: unknown channel type "nvlink"',
     setkey(lambda p: g0(p)["channels"][0], "channel_type", "nvlink"))
case("unknown_op_channel_type", f'{O(6)}.channel_type: unknown channel type "sm"',
     setkey(lambda p: ops0(p)[6], "channel_type", "sm"))
case("unknown_buffer_type", f'{O(3)}.dst_buff[0].type: unknown buffer type "x"',
     setkey(lambda p: ops0(p)[3]["dst_buff"][0], "type", "x"))
def reduce_avg(p):
    ops0(p)[3] = {"name": "re", "reduce_op": "avg", "src_buff": [{"type": "i", "index": 0, "size": 1}],
                  "dst_buff": [{"type": "o", "index": 0, "size": 1}]}
case("unknown_reduce_op", f'{O(3)}.reduce_op: unknown reduction "avg"', reduce_avg)
def camel(p):
    for g in p["gpus"]:
        g["inputChunks"] = g.pop("input_chunks")
        g["outputChunks"] = g.pop("output_chunks")
        g["scratchChunks"] = g.pop("scratch_chunks")
case("old_format_camelcase", "old MSCCL++ plan format (camelCase keys) is not supported", camel)
case("unknown_format", 'format: unknown format version "mscclpp-plan/2"', setkey(lambda p: p, "format", "mscclpp-plan/2"))
case("bad_protocol", 'protocol: unknown protocol "LL128"', setkey(lambda p: p, "protocol", "LL128"))
case("empty_name", "name: must not be empty", setkey(lambda p: p, "name", ""))
case("zero_gpus", "gpus: a plan needs at least one rank", setkey(lambda p: p, "gpus", []))
case("threads_out_of_range", "num_threads_per_block: 2048 is out of range (expected 1..1024)",
     setkey(lambda p: p, "num_threads_per_block", 2048))
case("alignment_not_power_of_two", "buffer_alignment: 24 is not a power of two", setkey(lambda p: p, "buffer_alignment", 24))
case("min_above_max", "min_message_size: 2048 is larger than max_message_size=1024",
     lambda p: p.update(min_message_size=2048, max_message_size=1024))
case("rank_subset", "rank_subset: partial plans are not supported", setkey(lambda p: p, "rank_subset", [0, 1]))
# --- op requirements
case("tbg_id_range", f"{O(3)}.tbg_info.tb_id: 2 is out of range for tbg_size=2",
     setkey(lambda p: ops0(p)[3], "tbg_info", {"tb_id": 2, "tbg_size": 2}))
case("put_without_dst", f"{O(4)}.dst_buff: put needs at least 1 destination descriptor", delkey(lambda p: ops0(p)[4], "dst_buff"))
case("signal_without_channels", f"{O(6)}.channel_ids: signal needs at least one channel id", delkey(lambda p: ops0(p)[6], "channel_ids"))
case("wait_on_switch", f"{O(7)}.channel_type: wait cannot use switch channels", setkey(lambda p: ops0(p)[7], "channel_type", "switch"))
case("flush_on_memory", f"{O(7)}.channel_type: flush cannot use memory channels", setkey(lambda p: ops0(p)[7], "name", "flush"))
case("copy_remote_descriptor", f'{O(3)}.dst_buff[0].buffer_id: copy needs a local buffer ("type") here, not a remote buffer',
     setkey(lambda p: ops0(p)[3], "dst_buff", [{"buffer_id": 0, "index": 0, "size": 1}]))
case("copy_channel_ids", f"{O(3)}.channel_ids: copy uses no channels", setkey(lambda p: ops0(p)[3], "channel_ids", [0]))
case("put_unpaired_descriptors", f"{O(4)}.src_buff: put pairs src_buff[i] with dst_buff[i]: 2 sources for 1 destinations",
     setkey(lambda p: ops0(p)[4], "src_buff", [{"type": "i", "index": 0, "size": 1}] * 2))
def port_put(p):
    for g in p["gpus"]:
        g["channels"].append({"channel_type": "port", "connected_to": [1 - g["id"]]})
        g["remote_buffers"][0]["access_channel_types"].append("port")
        g["threadblocks"][0]["channels"].append({"channel_type": "port", "channel_ids": [0]})
        g["threadblocks"][0]["remote_buffer_refs"].append({"access_channel_type": "port", "remote_buffer_ids": [0]})
    ops0(p)[4]["channel_type"] = "port"
case("port_put_without_channel", f"{O(4)}.channel_ids: put on port channels needs one channel id per destination", port_put)
def port_put_local(p):
    # a memory put may store into its own rank's buffers too (plan-format §2.4); a port put is one
    # proxy transfer per channel, to the peer only
    port_put(p)
    ops0(p)[4]["channel_ids"] = [0]
    ops0(p)[4]["dst_buff"] = [{"type": "o", "index": 0, "size": 1}]
case("put_local_destination", f'{O(4)}.dst_buff[0].type: put needs a remote buffer ("buffer_id") here, not a local buffer',
     port_put_local)
case("sem_acquire_without_ids", f"{O(0)}.semaphore_ids: required key is missing",
     lambda p: ops0(p).insert(0, {"name": "sem_acquire"}))
case("barrier_without_id", f"{O(0)}.barrier_id: required key is missing",
     lambda p: ops0(p).insert(0, {"name": "barrier", "num_threadblocks": 1}))
case("nop_with_descriptors", f"{O(2)}.src_buff: nop takes no src_buff",
     setkey(lambda p: ops0(p)[2], "src_buff", [{"type": "i", "index": 0, "size": 1}]))
case("gpu_channel_type_none", 'gpus[0].channels[0].channel_type: channel type "none" is not allowed here',
     setkey(lambda p: g0(p)["channels"][0], "channel_type", "none"))
# --- whole-plan checks (issue 8 item 8): each loaded before them and computed garbage or hung
def both(fn):
    def m(p):
        for g in p["gpus"]:
            fn(g)
    return m
case("collective_allgather_chunks", "gpus[0].output_chunks: 3 chunks do not fit an allgather of 2 ranks with input_chunks=1",
     both(lambda g: g.update(output_chunks=3)))
case("collective_allreduce_chunks", "gpus[0].output_chunks: 2 chunks do not fit an allreduce of 2 ranks with input_chunks=1",
     setkey(lambda p: p, "collective", "allreduce"))
case("collective_reducescatter_chunks", "gpus[0].input_chunks: 1 chunks do not fit a reducescatter of 2 ranks with output_chunks=2",
     setkey(lambda p: p, "collective", "reducescatter"))
case("scratch_absurd", "gpus[0].scratch_chunks: 4294967295 scratch chunks for 2 chunks of input/output would make the scratch buffer",
     setkey(g0, "scratch_chunks", 4294967295))
case("signal_missing", "rank 0 signals rank 1 1 time per launch on memory channel 0 (paired with rank 1's memory channel 0) but rank 1 waits 2 times on it: the extra waits deadlock",
     lambda p: ops0(p).pop(6))
case("wait_missing", "rank 0 signals rank 1 2 times per launch on memory channel 0 (paired with rank 1's memory channel 0) but rank 1 waits 1 time on it: the extra signals race",
     lambda p: p["gpus"][1]["threadblocks"][0]["ops"].pop(7))
def two_channels(p):
    for g in p["gpus"]:
        g["channels"][0]["connected_to"] *= 2
        g["threadblocks"][0]["channels"][0]["channel_ids"] = [0, 1]
def signal_wrong_channel(p):
    two_channels(p)
    ops0(p)[6]["channel_ids"] = [1]
case("signal_wrong_channel", "rank 0 signals rank 1 1 time per launch on memory channel 0 (paired with rank 1's memory channel 0) but rank 1 waits 2 times on it",
     signal_wrong_channel)
def wait_unpaired(p):
    g0(p)["channels"][0]["connected_to"] = [1, 1]
    tb0(p)["channels"][0]["channel_ids"] = [0, 1]
    ops0(p)[7]["channel_ids"] = [1]
case("wait_unpaired_channel", "rank 0 waits for rank 1 1 time per launch on memory channel 1, which has no channel paired on rank 1",
     wait_unpaired)
def sem_unbalanced(p):
    g0(p)["semaphores"] = [{"init_value": 1}]
    ops0(p).insert(0, {"name": "sem_acquire", "semaphore_ids": [0]})
case("semaphore_unbalanced", "gpus[0].semaphores[0]: rank 0 releases semaphore 0 0 times and acquires it 1 time per launch",
     sem_unbalanced)

# --- cheap checks the simulator made before the loader (issue 22 item 2, issue 21 item 10)
def reduce_sizes(p):
    ops0(p)[3] = {"name": "re", "src_buff": [{"type": "i", "index": 0, "size": 1}],
                  "dst_buff": [{"type": "o", "index": 0, "size": 2}]}
case("size_mismatch_reduce", f"{O(3)}.dst_buff[0].size: 2 chunks where src_buff[0] has 1", reduce_sizes)
case("size_mismatch_put", f"{O(4)}.dst_buff[0].size: 0 chunks where src_buff[0] has 1",
     setkey(lambda p: ops0(p)[4]["dst_buff"][0], "size", 0))
case("pipeline_zero_chunks", f"{O(0)}.iter_context.num_chunks: 0 is out of range",
     lambda p: ops0(p).insert(0, {"name": "pipeline", "iter_context": {"unit_size": 1024, "num_chunks": 0},
                                  "ops": [{"name": "nop"}]}))
def a2a_uneven(p):
    p["collective"] = "alltoall"
    for g in p["gpus"]:
        g.update(input_chunks=3, output_chunks=3)
case("collective_alltoall_uneven", "gpus[0].input_chunks: 3 chunks do not split into 2 equal blocks",
     a2a_uneven)
def ranks_differ(p):
    g = p["gpus"][1]
    g.update(input_chunks=2, output_chunks=4)
case("collective_ranks_differ", "gpus[1].input_chunks: 2 differs from gpus[0].input_chunks=1", ranks_differ)
case("broadcast_root_range", "root: 2 is out of range (the plan has 2 ranks)",
     lambda p: p.update(collective="broadcast", root=2))
def two_blocks(p):
    for g in p["gpus"]:
        g["threadblocks"].append({"id": 1, "channels": [], "ops": []})
def barrier_counts(p):
    two_blocks(p)
    ops0(p).insert(0, {"name": "barrier", "barrier_id": 3, "num_threadblocks": 1})
    g0(p)["threadblocks"][1]["ops"] = [{"name": "barrier", "barrier_id": 3, "num_threadblocks": 2}]
case("barrier_count_mismatch", "gpus[0].threadblocks[1].ops[0].num_threadblocks: 2, but gpus[0].threadblocks[0].ops[0] uses barrier 3 with 1",
     barrier_counts)
case("unknown_key_top", 'max_mesage_size: unknown key (did you mean "max_message_size"?)',
     lambda p: p.update(max_mesage_size=1024))
case("unknown_key_op", f'{O(6)}.chanel_ids: unknown key (did you mean "channel_ids"?)',
     setkey(lambda p: ops0(p)[6], "chanel_ids", [0]))
case("unknown_key_desc", f'{O(3)}.src_buff[0].offset: unknown key',
     setkey(lambda p: ops0(p)[3]["src_buff"][0], "offset", 0))
case("unknown_key_gpu", 'gpus[1].scratch_chunk: unknown key (did you mean "scratch_chunks"?)',
     setkey(lambda p: p["gpus"][1], "scratch_chunk", 0))
case("unknown_collective", 'collective: unknown collective "allgahter" (did you mean "allgather"?',
     setkey(lambda p: p, "collective", "allgahter"))

os.makedirs(OUT, exist_ok=True)
with open(os.path.join(OUT, "EXPECTED"), "w") as man:
    man.write("# Malformed plans: <file><TAB><substring that mscclpp_last_error() must contain>.\n")
    man.write("# Each must fail with MSCCLPP_ERR_INVALID_PLAN. Most derive from the 2-rank AllGather\n")
    man.write("# like the one of docs/plan-format.md section 1.8 (see README.md).\n")
    for name, expect, mut, raw in cases:
        fn = name + ".json"
        if raw is not None:
            text = raw
        else:
            p = copy.deepcopy(BASE)
            mut(p)
            text = json.dumps(p, indent=1) + "\n"
        open(os.path.join(OUT, fn), "w").write(text)
        man.write(f"{fn}\t{expect}\n")
print(len(cases), "cases")


# --- plans that load but compute garbage, deadlock or race: mscclpp_plan_verify() and
# `python3 -m mscclpp verify` must refuse each (issue 22 item 2); written to verify/ with the
# substring of the C message in verify/EXPECTED.
vcases = []
def vcase(name, expect, mut, base=None):
    vcases.append((name, expect, mut, base))

def ar_gpu(r):
    """2-rank allreduce: put the input into the peer's scratch, signal, wait, reduce."""
    p = 1 - r
    return {"id": r, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 1,
            "channels": [{"channel_type": "memory", "connected_to": [p]}],
            "remote_buffers": [{"rank": p, "type": "s", "access_channel_types": ["memory"]}],
            "semaphores": [],
            "threadblocks": [{"id": 0,
                "channels": [{"channel_type": "memory", "channel_ids": [0]}],
                "remote_buffer_refs": [{"access_channel_type": "memory", "remote_buffer_ids": [0]}],
                "ops": [
                    {"name": "rlxsignal", "channel_ids": [0], "channel_type": "memory"},
                    {"name": "rlxwait", "channel_ids": [0], "channel_type": "memory"},
                    {"name": "put", "src_buff": [{"type": "i", "index": 0, "size": 1}],
                                    "dst_buff": [{"buffer_id": 0, "index": 0, "size": 1}],
                                    "channel_type": "memory"},
                    {"name": "nop"},
                    {"name": "signal", "channel_ids": [0], "channel_type": "memory"},
                    {"name": "wait", "channel_ids": [0], "channel_type": "memory"},
                    {"name": "nop"},
                    {"name": "re", "reduce_op": "sum",
                     "src_buff": [{"type": "i", "index": 0, "size": 1}, {"type": "s", "index": 0, "size": 1}],
                     "dst_buff": [{"type": "o", "index": 0, "size": 1}]},
                    {"name": "nop"},
                    {"name": "signal", "channel_ids": [0], "channel_type": "memory"},
                    {"name": "wait", "channel_ids": [0], "channel_type": "memory"}]}]}

AR = {"name": "ar2", "collective": "allreduce", "protocol": "Simple", "inplace": False,
      "gpus": [ar_gpu(0), ar_gpu(1)]}
def arops(p, r=0): return p["gpus"][r]["threadblocks"][0]["ops"]

vcase("ok_allgather", None, lambda p: None)
def put_own_output(p):
    # the copy of op 3 as one more destination of the put (one load feeds both stores)
    for g in p["gpus"]:
        o = g["threadblocks"][0]["ops"]
        o[4]["src_buff"].append(dict(o[3]["src_buff"][0]))
        o[4]["dst_buff"].append(dict(o[3]["dst_buff"][0]))
        del o[3]
vcase("ok_put_own_output", None, put_own_output)
def put_own_output_wrong(p):
    # the local store lands on the chunk the peer's put writes
    put_own_output(p)
    p["gpus"][0]["threadblocks"][0]["ops"][3]["dst_buff"][1]["index"] = 1
vcase("put_own_output_wrong_chunk", "write-after-write race at gpus[0].threadblocks[0].ops[3]", put_own_output_wrong)
vcase("ok_allreduce", None, lambda p: None, AR)
def wrong_chunk(p):
    for r in (0, 1):
        p["gpus"][r]["threadblocks"][0]["ops"][3]["dst_buff"][0]["index"] = 1 - r
        p["gpus"][r]["threadblocks"][0]["ops"][4]["dst_buff"][0]["index"] = 1 - r
vcase("wrong_chunk", "computes a wrong allgather: rank 0 output chunk 0 holds input chunk 0 of rank 1, expected input chunk 0 of rank 0", wrong_chunk)
def pkt_deadlock(p):
    for g in p["gpus"]:
        g["scratch_chunks"] = 1
    ops0(p).insert(3, {"name": "upkt", "src_buff": [{"type": "s", "index": 0, "size": 1}],
                       "dst_buff": [{"type": "s", "index": 0, "size": 1}]})
vcase("packet_never_written", "deadlocks: gpus[0].threadblocks[0].ops[3] (upkt) reads packets of rank 0's scratch[0] (src_buff[0]) that no op writes", pkt_deadlock)
def missing_nop(p):
    for g in p["gpus"]:
        g["threadblocks"][0]["ops"].pop(5)
vcase("put_not_ordered", "end-of-launch race: rank 0's output[1] is written by rank 1 block 0", missing_nop)
def read_before_sync(p):
    for r in (0, 1):
        arops(p, r).pop(6)
vcase("reduce_before_sync", "read-after-write race at gpus[0].threadblocks[0].ops[6]", read_before_sync, AR)
def double_count(p):
    for r in (0, 1):
        arops(p, r)[7]["src_buff"][1] = {"type": "i", "index": 0, "size": 1}
vcase("reduce_counts_twice", "computes a wrong allreduce: rank 0 output chunk 0 holds a reduction that counts an input twice", double_count, AR)
def mixed(p):
    arops(p, 1)[7]["reduce_op"] = "max"
vcase("reduce_ops_mixed", "computes a wrong allreduce: rank 1 output chunk 0 holds max of", mixed, AR)
def uninit(p):
    for r in (0, 1):
        del arops(p, r)[2:6]
vcase("reduce_reads_unwritten", "computes a wrong allreduce: rank 0 output chunk 0 holds a reduction of data never written", uninit, AR)
def barrier_short(p):
    for g in p["gpus"]:
        g["threadblocks"].append({"id": 1, "channels": [], "ops": []})
    ops0(p).insert(3, {"name": "barrier", "barrier_id": 0, "num_threadblocks": 2})
vcase("barrier_never_full", "deadlocks: gpus[0].threadblocks[0].ops[3] (barrier) waits in barrier 0 for 2 blocks; only 1 arrive", barrier_short)
def wait_first(p):
    for g in p["gpus"]:
        o = g["threadblocks"][0]["ops"]
        o[0], o[1] = o[1], o[0]
vcase("wait_before_signal", "deadlocks: gpus[0].threadblocks[0].ops[0] (rlxwait) waits for a signal from rank 1 on memory channel 0", wait_first)
def sem_order(p):
    g0(p)["semaphores"] = [{"init_value": 0}]
    ops0(p)[0:0] = [{"name": "sem_acquire", "semaphore_ids": [0]}, {"name": "sem_release", "semaphore_ids": [0]}]
vcase("semaphore_acquired_first", "deadlocks: gpus[0].threadblocks[0].ops[0] (sem_acquire) acquires semaphore 0", sem_order)
def no_output(p):
    for r in (0, 1):
        del arops(p, r)[7]
vcase("output_never_written", "computes a wrong allreduce: rank 0 output chunk 0 holds nothing (never written)", no_output, AR)
def pipe_half(p):
    # a pipeline over 2 chunks whose body copies 1: the second half of the output is never written
    for g in p["gpus"]:
        g.update(input_chunks=2, output_chunks=4)
        o = g["threadblocks"][0]["ops"]
        r = g["id"]
        o[3] = {"name": "pipeline", "iter_context": {"unit_size": 1024, "num_chunks": 2}, "ops": [
            {"name": "copy", "src_buff": [{"type": "i", "index": 0, "size": 1}],
             "dst_buff": [{"type": "o", "index": 2 * r, "size": 1}]}]}
        o[4]["src_buff"][0]["size"] = 2
        o[4]["dst_buff"][0].update(index=2 * r, size=2)
vcase("pipeline_covers_half", "computes a wrong allgather: rank 0 output chunk 1 holds nothing (never written)", pipe_half)

vdir = os.path.join(OUT, "verify")
os.makedirs(vdir, exist_ok=True)
with open(os.path.join(vdir, "EXPECTED"), "w") as man:
    man.write("# Plans that load but must not verify: <file><TAB><substring of mscclpp_last_error()\n")
    man.write("# after mscclpp_plan_verify()>, or <file><TAB>OK for the controls that must verify.\n")
    man.write("# `python3 -m mscclpp verify` gives each the same verdict (tests/python/test_verify_agree.py).\n")
    for name, expect, mut, base in vcases:
        p = copy.deepcopy(base or BASE)
        mut(p)
        fn = name + ".json"
        open(os.path.join(vdir, fn), "w").write(json.dumps(p, indent=1) + "\n")
        man.write(f"{fn}\t{expect or 'OK'}\n")
print(len(vcases), "verify cases")
