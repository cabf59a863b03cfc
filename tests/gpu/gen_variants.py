#!/usr/bin/env python3
"""Candidate plans for GPU tuning (scripts/gpu-check.sh --variants DIR measures them).

Writes, into DIR, the default plan programs of plans/ at other thread-block counts
(`instances`) and threads per block, each valid for every message size, named
FAMILY_iINSTANCES[_tTHREADS]_N.json. The winners per size range become plans/cuda/ (generated
by the programs themselves, see plans/README.md); these files are only measured, never
installed. Blocks per rank are capped so that all ranks' blocks of one plan fit on one H100 at
once (132 SMs x 2 blocks of 1024 threads): ranks sharing a GPU under MPS must be co-resident.

usage: tests/gpu/gen_variants.py DIR [--quick | --threads]
  --threads: only the second round, allreduce at 512 threads per block
"""
import json
import os
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(TOP, "plans"), os.path.join(TOP, "python")]

from allgather import allgather  # noqa: E402
from allreduce_pkt import allreduce_pkt  # noqa: E402
from allreduce_simple import allreduce_simple  # noqa: E402
from alltoall import alltoall  # noqa: E402
from broadcast import broadcast  # noqa: E402
from reducescatter import reducescatter  # noqa: E402

MAX = 2**64 - 1
RESIDENT_BLOCKS = 264  # H100: 132 SMs x 2 blocks of 1024 threads


def variants(quick):
    ranks = (2, 4, 8)
    for n in ranks:
        for i in (1, 2, 4, 8, 16, 32, 64, 128):
            if n * i <= RESIDENT_BLOCKS:
                yield f"allreduce_simple_i{i}_{n}", allreduce_simple(n, instances=i,
                                                                     min_message_size=0)
        for i in (1, 2, 4, 8):
            if n * (n - 1) * i <= RESIDENT_BLOCKS:
                yield f"allreduce_pkt_i{i}_{n}", allreduce_pkt(n, max_message_size=MAX,
                                                               instances=i)
        for fam, fn in (("allgather", allgather), ("reducescatter", reducescatter),
                        ("alltoall", alltoall), ("broadcast", broadcast)):
            for i in ((4, 32) if quick else (4, 16, 32, 64)):
                if n * i <= RESIDENT_BLOCKS:
                    yield f"{fam}_i{i}_{n}", fn(n, instances=i)


def variants_threads():
    """Second round: 512 threads per block fit 2 blocks per SM, so twice the blocks stay
    co-resident; only the large-message allreduce."""
    for n, insts in ((2, (64, 128)), (4, (32, 64)), (8, (16, 32))):
        for i in insts:
            prog = allreduce_simple(n, instances=i, min_message_size=0)
            yield f"allreduce_simple_i{i}_t512_{n}", prog, 512


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    count = 0
    if "--threads" in sys.argv:
        items = variants_threads()
    else:
        items = ((name, prog, None) for name, prog in variants("--quick" in sys.argv))
    for name, prog, threads in items:
        d = prog.to_dict()
        d["name"] = name
        d["min_message_size"] = 0
        if threads:
            d["num_threads_per_block"] = threads
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(d, f)
        count += 1
    print(f"{count} variant plans written to {out}")


if __name__ == "__main__":
    main()
