#!/usr/bin/env python3
"""One verdict on every plan: the C loader + mscclpp_plan_verify() against
`python3 -m mscclpp verify` (issue 22 item 2).

    tests/fuzz/verify_agree.py [--lib build/.libs/libmscclpp.so] [--mutants N] [--seed S]
                               [--keep DIR] [PLAN_OR_DIR...]

Runs both checkers over the given plans (default: tests/plans-bad, tests/fuzz/plan-corpus,
tests/plans-reference and the 2- and 4-rank default plans) and N mutants of small seed plans
(deterministic from S: one or two JSON-aware edits each: an integer moved, an op dropped,
duplicated, swapped, moved to another block or renamed within its family, a buffer type or
channel type changed, a flag flipped). A plan is accepted when it loads and verifies (C) or
verifies (Python). Prints one line per disagreement and a summary; exits 1 on any
disagreement. --keep writes the disagreeing plans to DIR. tests/python/test_verify_agree.py runs
it bounded; run it longer to fuzz:  tests/fuzz/verify_agree.py --mutants 20000 --seed $RANDOM
"""

import argparse
import copy
import ctypes
import glob
import json
import os
import random
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "python"))

from mscclpp import plan_check  # noqa: E402
from mscclpp.simulator import simulate  # noqa: E402

SEEDS = ["tests/fuzz/plan-corpus/*.json", "plans/allreduce_simple_2.json",
         "plans/allreduce_pkt_2.json", "plans/allgather_2.json", "plans/reducescatter_2.json",
         "plans/alltoall_2.json", "plans/broadcast_2.json", "plans/allreduce_pkt_3.json",
         "plans/cuda/allreduce_simple_2.json", "plans/cuda/allgather_2.json",
         "tests/plans-reference/allreduce_pkt_4.json",
         "tests/plans-reference/allgather_pkt_rppkt_4.json"]
CORPUS = ["tests/plans-bad/*.json", "tests/fuzz/plan-corpus/*.json",
          "tests/plans-reference/*.json", "plans/*_2.json", "plans/*_4.json",
          "plans/cuda/*_2.json", "plans/cuda/*_4.json"]

FAMILIES = [["signal", "rlxsignal"], ["wait", "rlxwait"], ["copy", "cpkt", "upkt"],
            ["put", "pws", "pwsf", "ppkt"], ["re", "repkt", "res", "respkt", "rre", "rres"],
            ["recpkt", "recspkt", "repkt"], ["rppkt", "ppkt", "put"], ["gstore", "gstorepkt"],
            ["glres", "glre"], ["nop", "flush"], ["sem_acquire", "sem_release"],
            ["barrier", "nop"]]


class CLib:
    """The C verdict through ctypes: load (mscclpp_plan_load_string), then verify."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.mscclpp_last_error.restype = ctypes.c_char_p
        self.lib.mscclpp_plan_load_string.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                                      ctypes.POINTER(ctypes.c_void_p)]
        self.lib.mscclpp_plan_verify.argtypes = [ctypes.c_void_p]
        self.lib.mscclpp_plan_destroy.argtypes = [ctypes.c_void_p]

    def verdict(self, text):
        h = ctypes.c_void_p()
        r = self.lib.mscclpp_plan_load_string(text, len(text), ctypes.byref(h))
        if r != 0:
            return False, "load: " + self.lib.mscclpp_last_error().decode(errors="replace")
        r = self.lib.mscclpp_plan_verify(h)
        msg = self.lib.mscclpp_last_error().decode(errors="replace") if r else "OK"
        self.lib.mscclpp_plan_destroy(h)
        return r == 0, msg


def py_verdict(text):
    try:
        plan = plan_check.parse(text)
    except plan_check.PlanError as e:
        return False, f"invalid plan: {e}"
    res = simulate(plan)
    return bool(res), "OK" if res else (res.errors[0] if res.errors else str(res))


# ---- mutations ----------------------------------------------------------------------------------

def _sites(v, path=()):
    """Every (container, key) in a JSON value, with its path."""
    out = []
    if isinstance(v, dict):
        for k, x in v.items():
            out.append((v, k, path + (k,)))
            out += _sites(x, path + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out.append((v, i, path + (i,)))
            out += _sites(x, path + (i,))
    return out


def _op_lists(plan):
    lists = []
    for g in plan.get("gpus", []):
        for tb in g.get("threadblocks", []):
            ops = tb.get("ops", [])
            lists.append((g, tb, ops))
            for op in ops:
                if isinstance(op, dict) and op.get("name") == "pipeline":
                    lists.append((g, tb, op.get("ops", [])))
    return [x for x in lists if isinstance(x[2], list)]


def mutate(plan, rng):
    p = copy.deepcopy(plan)
    for _ in range(rng.choice((1, 1, 2))):
        kind = rng.randrange(10)
        lists = _op_lists(p)
        if kind <= 2:   # an integer somewhere
            ints = [(c, k) for c, k, _ in _sites(p) if isinstance(c[k], int)
                    and not isinstance(c[k], bool)]
            if ints:
                c, k = rng.choice(ints)
                c[k] = rng.choice((c[k] + 1, c[k] - 1, 0, c[k] + 2, c[k] * 2, 1))
        elif kind == 3 and lists:   # drop an op
            _, _, ops = rng.choice(lists)
            if ops:
                ops.pop(rng.randrange(len(ops)))
        elif kind == 4 and lists:   # duplicate an op
            _, _, ops = rng.choice(lists)
            if ops:
                i = rng.randrange(len(ops))
                ops.insert(rng.randrange(len(ops) + 1), copy.deepcopy(ops[i]))
        elif kind == 5 and lists:   # swap two neighbours
            _, _, ops = rng.choice(lists)
            if len(ops) > 1:
                i = rng.randrange(len(ops) - 1)
                ops[i], ops[i + 1] = ops[i + 1], ops[i]
        elif kind == 6 and lists:   # move an op to another block of the same rank
            g, _, ops = rng.choice(lists)
            tbs = g.get("threadblocks", [])
            if ops and tbs:
                op = ops.pop(rng.randrange(len(ops)))
                other = rng.choice(tbs).get("ops")
                if isinstance(other, list):
                    other.insert(rng.randrange(len(other) + 1), op)
        elif kind == 7 and lists:   # rename within a family
            _, _, ops = rng.choice(lists)
            named = [op for op in ops if isinstance(op, dict)]
            if named:
                op = rng.choice(named)
                fams = [f for f in FAMILIES if op.get("name") in f]
                if fams:
                    op["name"] = rng.choice(rng.choice(fams))
        elif kind == 8:   # a buffer or channel type
            strs = [(c, k) for c, k, path in _sites(p) if isinstance(c[k], str)
                    and path and path[-1] in ("type", "channel_type", "buffer_type")]
            if strs:
                c, k = rng.choice(strs)
                c[k] = rng.choice(("i", "o", "s") if k != "channel_type" else
                                  ("memory", "port", "none"))
        else:   # a flag or the collective
            what = rng.randrange(3)
            if what == 0:
                p["inplace"] = not p.get("inplace", False)
            elif what == 1:
                p["collective"] = rng.choice(("allreduce", "allgather", "reducescatter",
                                              "alltoall", "test", "sendrecv", "broadcast"))
            else:
                ops = [op for _, _, o in lists for op in o if isinstance(op, dict)
                       and op.get("name") in ("re", "res", "rre", "rres", "repkt", "recpkt",
                                              "respkt", "recspkt", "glres", "glre")]
                if ops:
                    rng.choice(ops)["reduce_op"] = rng.choice(("sum", "max", "min"))
    return p


def expand(patterns):
    files = []
    for pat in patterns:
        path = pat if os.path.isabs(pat) else os.path.join(TOP, pat)
        if os.path.isdir(path):
            files += sorted(glob.glob(os.path.join(path, "*.json")))
        else:
            files += sorted(glob.glob(path))
    return files


def default_lib():
    env = os.environ.get("MSCCLPP_LIBRARY")
    if env:
        return env
    return os.path.join(TOP, "build", ".libs", "libmscclpp.so")


def run(lib, files, n_mutants, seed, keep=None, out=sys.stdout):
    """Returns (cases, accepted by both, refused by both, disagreements)."""
    c = CLib(lib)
    cases = []
    for f in files:
        with open(f, "rb") as fh:
            cases.append((os.path.relpath(f, TOP), fh.read()))
    rng = random.Random(seed)
    seeds = [json.load(open(f)) for f in expand(SEEDS)]
    for i in range(n_mutants):
        cases.append((f"mutant {seed}:{i}", json.dumps(mutate(rng.choice(seeds), rng)).encode()))
    both_ok = both_bad = 0
    diff = []
    for name, text in cases:
        cv, cmsg = c.verdict(text)
        pv, pmsg = py_verdict(text)
        if cv != pv:
            diff.append(name)
            print(f"DISAGREE {name}: C {'accepts' if cv else 'refuses'} ({cmsg}); Python "
                  f"{'accepts' if pv else 'refuses'} ({pmsg})", file=out)
            if keep:
                os.makedirs(keep, exist_ok=True)
                fn = name.replace("/", "_").replace(" ", "_").replace(":", "_")
                with open(os.path.join(keep, fn if fn.endswith(".json") else fn + ".json"),
                          "wb") as fh:
                    fh.write(text)
        elif cv:
            both_ok += 1
        else:
            both_bad += 1
    print(f"verify_agree: {len(cases)} plans ({len(files)} files, {n_mutants} mutants, seed "
          f"{seed}): {both_ok} accepted by both, {both_bad} refused by both, {len(diff)} "
          "disagree", file=out)
    return len(cases), both_ok, both_bad, diff


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("plans", nargs="*")
    ap.add_argument("--lib", default=default_lib())
    ap.add_argument("--mutants", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", metavar="DIR")
    a = ap.parse_args()
    os.environ.setdefault("MSCCLPP_DEBUG", "NONE")
    files = expand(a.plans or CORPUS)
    _, _, _, diff = run(a.lib, files, a.mutants, a.seed, a.keep)
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
