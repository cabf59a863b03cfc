"""DSL programs run on the C library (host backend) through mscclpp.runtime, every byte checked.

Needs libmscclpp.so (./scripts/build.sh, or MSCCLPP_LIBRARY): skipped with the reason otherwise.
"""

import contextlib
import io
import json
import os
import runpy
import struct

import pytest

from mscclpp import runtime

SEEDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")

pytestmark = pytest.mark.skipif(
    runtime.library_path() is None,
    reason="libmscclpp.so not built (run ./scripts/build.sh or set MSCCLPP_LIBRARY)")


def floats(values):
    return struct.pack(f"<{len(values)}f", *values)


def unfloats(data):
    return list(struct.unpack(f"<{len(data) // 4}f", data))


def test_seed_simple_allgather_runs_on_the_executor():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(os.path.join(SEEDS, "simple_allgather.py"), run_name="__main__")
    plan = json.loads(out.getvalue())
    n, count = 2, 1000
    inputs = [floats([r * 10000 + i for i in range(count)]) for r in range(n)]
    outs = runtime.run_plan(plan, n, inputs, 4 * count, 4 * count * n)
    want = [r * 10000 + i for r in range(n) for i in range(count)]
    for r in range(n):
        assert unfloats(outs[r]) == want, f"rank {r}"


@pytest.mark.parametrize("world", [2, 4])
def test_seed_nvls_allreduce_runs_on_the_executor(world, tmp_path, monkeypatch):
    """The seed's NVLS allreduce: switch channels run on the host as member-pointer loads."""
    monkeypatch.setenv("MSCCLPP_CACHE_DIR", str(tmp_path))
    mod = runpy.run_path(os.path.join(SEEDS, "allreduce_nvls.py"))
    algo = mod["setup_algorithm"](rank=0, world_size=world, nranks_per_node=world)
    count = 1 << 18  # 1 MiB: the seed asks for min_message_size 1 MiB
    inputs = [floats([(r + 1) * (i % 13) for i in range(count)]) for r in range(world)]
    outs = runtime.run_plan(algo.plan, world, inputs, 4 * count, 4 * count, op="sum")
    s = world * (world + 1) // 2
    want = [s * (i % 13) for i in range(count)]
    for r in range(world):
        assert unfloats(outs[r]) == want, f"rank {r}"


def test_dsl_alltoall_program_runs_on_the_executor():
    from mscclpp.language import AllToAll, CollectiveProgram, MemoryChannel, Rank, SyncType

    n = 3
    with CollectiveProgram("a2a_py", AllToAll(n, 1, False), n) as prog:
        chans = {(r, p): MemoryChannel(p, r) for r in range(n) for p in range(n) if p != r}
        for r in range(n):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            rank.copy(out[r:r + 1], inp[r:r + 1], tb=0)
            for p in range(n):
                if p == r:
                    continue
                chans[(r, p)].signal(tb=0, relaxed=True)
                chans[(r, p)].wait(tb=0, relaxed=True, data_sync=SyncType.after)
                peer_out = Rank(p).get_output_buffer()
                chans[(r, p)].put(peer_out[r:r + 1], inp[p:p + 1], tb=0)
                chans[(r, p)].signal(tb=0, data_sync=SyncType.before)
                chans[(r, p)].wait(tb=0, data_sync=SyncType.after)
        plan = json.loads(prog.to_json())
    assert prog.check()
    per = 333
    inputs = [floats([r * 1000 + i for i in range(per * n)]) for r in range(n)]
    outs = runtime.run_plan(plan, n, inputs, 4 * per * n, 4 * per * n)
    for r in range(n):
        got = unfloats(outs[r])
        for p in range(n):
            assert got[p * per:(p + 1) * per] == [p * 1000 + r * per + i for i in range(per)]


def test_errors_come_back_with_the_library_message():
    broken = {"name": "x", "collective": "allreduce", "protocol": "Simple", "inplace": False,
              "gpus": []}
    with pytest.raises(runtime.MscclppError, match="gpus"):
        runtime.run_plan(broken, 1, [b"\0" * 64], 64, 64)
