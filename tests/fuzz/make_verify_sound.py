#!/usr/bin/env python3
"""Writes into OUTDIR mutants of small plans (tests/fuzz/verify_agree.py's mutator, fixed seed)
that `python3 -m mscclpp verify` (and so mscclpp_plan_verify) accepts (ok_NNN.json), and
mutants it finds computing a wrong result (wrong_NNN.json), of the four collectives the
in-process harness checks. tests/fuzz/verify_sound.sh runs every one on the host interpreter
(tests/fuzz/verify_sound_run): an accepted plan must compute its collective exactly, a "wrong"
one must compute something wrong or be refused at launch (issue 22 item 2: the verdict is held
to what execution does).

    python3 tests/fuzz/make_verify_sound.py OUTDIR [--seed 11] [--ok 80] [--wrong 40]
"""
import argparse
import hashlib
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import verify_agree as va  # noqa: E402

COLLS = ("allreduce", "allgather", "reducescatter", "alltoall")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--ok", type=int, default=80)
    ap.add_argument("--wrong", type=int, default=40)
    ap.add_argument("--max-bytes", type=int, default=65536, help="skip larger plans")
    a = ap.parse_args()
    out = a.outdir
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith(".json"):
            os.remove(os.path.join(out, f))
    seeds = [json.load(open(f)) for f in va.expand(va.SEEDS)]
    seeds = [s for s in seeds if s.get("collective") in COLLS]
    rng = random.Random(a.seed)
    seen = {hashlib.sha1(json.dumps(s).encode()).hexdigest() for s in seeds}
    ok = wrong = 0
    while ok < a.ok or wrong < a.wrong:
        m = va.mutate(rng.choice(seeds), rng)
        text = json.dumps(m, separators=(",", ":")).encode()
        h = hashlib.sha1(text).hexdigest()
        if h in seen or len(text) > a.max_bytes or m.get("collective") not in COLLS:
            continue
        seen.add(h)
        good, msg = va.py_verdict(text)
        if good and ok < a.ok:
            name = f"ok_{ok:03d}.json"
            ok += 1
        elif not good and "wrong result" in msg and wrong < a.wrong:
            name = f"wrong_{wrong:03d}.json"
            wrong += 1
        else:
            continue
        with open(os.path.join(out, name), "wb") as f:
            f.write(text + b"\n")
    print(f"{ok} accepted and {wrong} wrong-result mutants in {out}")


if __name__ == "__main__":
    main()
