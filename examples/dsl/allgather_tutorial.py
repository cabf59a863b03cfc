"""The program of docs/dsl-tutorial.md: an all-pairs allgather, verified, run and tuned.

    python3 examples/dsl/allgather_tutorial.py --num_ranks 4 -o allgather_4.json
    python3 -m mscclpp verify allgather_4.json
    ./build/tools/mscclpp-bench --np 4 --plan allgather_4.json -b 4K -e 16M

tests/python/test_examples.py runs every step of the tutorial with this file.
"""

import argparse
import os
import sys

try:
    import mscclpp  # noqa: F401
except ImportError:  # a source tree: use the package beside this folder
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))

from mscclpp.language import (AllGather, CollectiveProgram, MemoryChannel, Rank, SyncType)


def allgather(num_ranks, instances=1, name=None):
    """Out-of-place allgather: every rank puts its input straight into every peer's output.

    Rank r, in thread block 0:
      1. put its input into chunk r of every peer's output (memory channels: direct stores);
      2. copy its input into chunk r of its own output;
      3. signal every peer (after a block sync, so the whole block's puts are published) and
         wait for every peer's signal: then all chunks of its output have arrived.
    """
    n = num_ranks
    with CollectiveProgram(name or f"tutorial_allgather_{n}", AllGather(n, 1, False), n,
                           instances=instances, protocol="Simple") as prog:
        # one channel from every rank to every other; chan[(r, p)] carries r -> p
        chan = {(r, p): MemoryChannel(p, r) for r in range(n) for p in range(n) if p != r}
        for r in range(n):
            rank = Rank(r)
            inp = rank.get_input_buffer()
            peers = [(r + k) % n for k in range(1, n)]  # start after r: no hot spot on rank 0
            for p in peers:
                out_p = Rank(p).get_output_buffer()
                chan[(r, p)].put(out_p[r:r + 1], inp[0:1], tb=0)
            rank.copy(rank.get_output_buffer()[r:r + 1], inp[0:1], tb=0)
            for p in peers:
                chan[(r, p)].signal(tb=0, data_sync=SyncType.before)
            for p in peers:
                chan[(r, p)].wait(tb=0, data_sync=SyncType.after)
    return prog


def main(argv=None):
    ap = argparse.ArgumentParser(description=allgather.__doc__.splitlines()[0])
    ap.add_argument("--num_ranks", type=int, default=4)
    ap.add_argument("--instances", type=int, default=1,
                    help="copies of the program side by side (more thread blocks)")
    ap.add_argument("-o", "--output", default="-", help="plan file (default: stdout)")
    args = ap.parse_args(argv)
    text = allgather(args.num_ranks, args.instances).to_json()
    if args.output == "-":
        sys.stdout.write(text + "\n")
    else:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
