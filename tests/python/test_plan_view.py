"""python3 -m mscclpp show PLAN --svg: the plan timeline picture (plan_view.py)."""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

from conftest import ROOT
from mscclpp.plan_view import SIGNALS, WAITS, Timeline

NS = {"s": "http://www.w3.org/2000/svg"}
PLANS = os.path.join(ROOT, "plans")


def flat_ops(ops):
    for op in ops:
        yield op
        if op.get("name") == "pipeline":
            yield from flat_ops(op.get("ops", []))


def parse(svg_text):
    root = ET.fromstring(svg_text)  # raises on malformed XML
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root


def test_allgather_boxes_and_arrows():
    path = os.path.join(PLANS, "allgather_2.json")
    plan = json.load(open(path))
    root = parse(Timeline(path).to_svg())
    boxes = root.findall(".//s:g[@class='op']", NS)
    # one box per operation of every block of every rank, named as in the plan
    want = [(g["id"], tb["id"], i, op["name"]) for g in plan["gpus"]
            for tb in g["threadblocks"] for i, op in enumerate(flat_ops(tb["ops"]))]
    got = [(int(b.get("data-rank")), int(b.get("data-tb")), int(b.get("data-index")),
            b.get("data-name")) for b in boxes]
    assert got == want
    names = {(r, tb, i): n for r, tb, i, n in want}
    arrows = root.findall(".//s:path[@class='arrow']", NS)
    nsig = sum(1 for r, tb, i, n in want if n in SIGNALS)
    assert nsig > 0 and len(arrows) == nsig  # every signal of this plan releases one wait
    for a in arrows:
        fr = tuple(int(v) for v in a.get("data-from").split("/"))
        to = tuple(int(v) for v in a.get("data-to").split("/"))
        assert names[fr] in SIGNALS and names[to] in WAITS, (fr, to)
        assert fr[0] != to[0]  # memory channels connect two ranks
        # rlxsignal releases rlxwait, signal releases wait
        assert names[fr].startswith("rlx") == names[to].startswith("rlx"), (fr, to)


def test_waits_are_placed_after_their_signals():
    tl = Timeline(os.path.join(ROOT, "tests", "plans-reference", "allreduce_4.json"))
    assert not tl.cyclic and tl.arrows
    for s, w in tl.arrows:
        assert tl.start[w] > tl.start[s]
    for row, (_, _, ops) in enumerate(tl.rows):
        for i in range(1, len(ops)):
            assert tl.start[(row, i)] > tl.start[(row, i - 1)]


def test_deadlocking_plan_is_drawn_in_program_order_and_said():
    # both ranks wait before they signal: the waits form a cycle
    def gpu(r):
        ops = [{"name": "wait", "channel_ids": [0], "channel_type": "memory"},
               {"name": "signal", "channel_ids": [0], "channel_type": "memory"}]
        return {"id": r, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 0,
                "channels": [{"channel_type": "memory", "connected_to": [1 - r]}],
                "remote_buffers": [], "semaphores": [],
                "threadblocks": [{"id": 0, "ops": ops, "channels": [
                    {"channel_type": "memory", "channel_ids": [0]}]}]}
    plan = {"name": "cycle", "collective": "allgather", "protocol": "Simple", "inplace": False,
            "gpus": [gpu(0), gpu(1)]}
    tl = Timeline(plan)
    assert tl.cyclic and len(tl.arrows) == 2
    assert all(tl.start[k] == k[1] for k in tl.start)
    svg = tl.to_svg()
    parse(svg)
    assert "would deadlock" in svg and "would deadlock" in tl.summary()


def test_cli_show_svg(tmp_path):
    out = tmp_path / "ag.svg"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    res = subprocess.run([sys.executable, "-m", "mscclpp", "show",
                          os.path.join(PLANS, "allreduce_pkt_4.json"), "--svg", str(out)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "allreduce, 4 ranks" in res.stdout and "rank 3: " in res.stdout
    root = parse(out.read_text())
    assert len(root.findall(".//s:g[@class='block']", NS)) == 4 * 3  # 4 ranks x 3 blocks


def test_cli_show_missing_file():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    res = subprocess.run([sys.executable, "-m", "mscclpp", "show", "/no/such/plan.json"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 1 and "/no/such/plan.json" in res.stderr


PACKET_WRITERS = {"cpkt", "ppkt", "rppkt", "repkt", "recpkt", "respkt", "recspkt", "gstorepkt"}
PACKET_READERS = {"upkt", "ppkt", "rppkt", "repkt", "recpkt", "respkt", "recspkt", "gstorepkt"}


def test_packet_plans_show_their_dependencies():
    """LL plans synchronise through packets, not signals: the viewer draws writer -> reader
    (issue 21 item 11: packet plans showed no dependency at all)."""
    for name in ("allreduce_pkt_2.json", "allreduce_pkt_4.json"):
        tl = Timeline(os.path.join(PLANS, name))
        assert not tl.arrows and tl.packet_arrows, name
        op = {(row, i): o for row, (_, _, ops) in enumerate(tl.rows)
              for i, (o, _) in enumerate(ops)}
        for w, r in tl.packet_arrows:
            assert op[w]["name"] in PACKET_WRITERS and op[r]["name"] in PACKET_READERS, (w, r)
            assert tl.start[r] > tl.start[w]
        # every packet read has a writer
        readers = {r for _, r in tl.packet_arrows}
        for key, o in op.items():
            if o["name"] in ("upkt", "respkt"):
                assert key in readers, (name, key, o)
        root = parse(tl.to_svg())
        assert len(root.findall(".//s:path[@class='packet-arrow']", NS)) == len(tl.packet_arrows)


def test_rank_filter_draws_only_those_ranks():
    tl = Timeline(os.path.join(PLANS, "allgather_8.json"))
    full = parse(tl.to_svg())
    part = parse(tl.to_svg(ranks=[0, 3]))
    ranks = {int(b.get("data-rank")) for b in part.findall(".//s:g[@class='block']", NS)}
    assert ranks == {0, 3}
    arrows = part.findall(".//s:path[@class='arrow']", NS)
    assert arrows and len(arrows) < len(full.findall(".//s:path[@class='arrow']", NS))
    for a in arrows:
        assert int(a.get("data-from").split("/")[0]) in (0, 3)
        assert int(a.get("data-to").split("/")[0]) in (0, 3)


def test_trace_has_a_track_per_rank_and_block_and_flows():
    tl = Timeline(os.path.join(ROOT, "tests", "plans-reference", "allreduce_4.json"))
    trace = json.loads(json.dumps(tl.to_trace()))   # plain JSON
    ev = trace["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"}
    assert procs == {r: f"rank {r}" for r in range(4)}
    threads = {(e["pid"], e["tid"]) for e in ev if e["name"] == "thread_name"}
    assert threads == {(r, tb.get("id")) for r, tb, _ in tl.rows}
    slices = [e for e in ev if e["ph"] == "X"]
    assert len(slices) == sum(len(ops) for _, _, ops in tl.rows)
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    ends = {e["id"]: e for e in ev if e["ph"] == "f"}
    assert len(starts) == len(ends) == len(tl.arrows) + len(tl.packet_arrows) > 0
    for k, s in starts.items():
        assert ends[k]["ts"] > s["ts"] and ends[k]["bp"] == "e"
    # only the asked ranks
    part = tl.to_trace(ranks=[1])["traceEvents"]
    assert {e["pid"] for e in part} == {1}


def test_cli_show_trace_and_ranks(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    out = tmp_path / "t.json"
    plan = os.path.join(PLANS, "allreduce_pkt_4.json")
    res = subprocess.run([sys.executable, "-m", "mscclpp", "show", plan, "--trace", str(out),
                          "--ranks", "0,2-3", "--svg", str(tmp_path / "t.svg")],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "packet writer->reader pair(s)" in res.stdout
    assert {e["pid"] for e in json.load(open(out))["traceEvents"]} == {0, 2, 3}
    for bad, want in (("0,x", "expected ranks such as 0,2-3"), ("7", "the plan has ranks 0..3")):
        res = subprocess.run([sys.executable, "-m", "mscclpp", "show", plan, "--ranks", bad],
                             capture_output=True, text=True, env=env, timeout=120)
        assert res.returncode == 1 and want in res.stderr and "Traceback" not in res.stderr
