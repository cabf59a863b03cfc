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
