"""Compile-speed benchmark of the DSL (not a test): python3 tests/python/bench_compile.py

Each case runs in a fresh interpreter and reports the time to record the program (run the DSL
calls), to compile it (fusion, sync insertion, replication, JSON text), the JSON size, and the
process's peak resident memory above an idle interpreter that has imported the package."""

import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

CASES = [
    ("alltoall, 64 ranks (8 blocks/rank)", "programs.alltoall_blocks(64)", None),
    ("alltoall, 128 ranks", "programs.alltoall_blocks(128)", None),
    ("allreduce, 256 ranks (32 nodes x 8, hierarchical)", "programs.hierarchical_allreduce(32, 8)",
     None),
    ("allreduce, 512 ranks (64 nodes x 8)", "programs.hierarchical_allreduce(64, 8)", None),
    ("allreduce, 256 ranks, only rank 5 recorded and written",
     "programs.hierarchical_allreduce(32, 8, rank_subset=[5])", 5),
    ("allreduce, 512 ranks, only rank 5 recorded and written",
     "programs.hierarchical_allreduce(64, 8, rank_subset=[5])", 5),
]


def one(expr, rank):
    import programs  # noqa: F401
    import mscclpp.language  # noqa: F401

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    prog = eval(expr)
    t1 = time.perf_counter()
    text = prog.to_json(indent=None, rank=rank)
    t2 = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
    nops = sum(len(ops) for g in prog.gpus for ops in g.tbs.values())
    print(f"{nops} {t1 - t0:.2f} {t2 - t1:.2f} {t2 - t0:.2f} {len(text) / 2**20:.1f} "
          f"{peak / 1024:.0f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        one(sys.argv[2], None if sys.argv[3] == "-" else int(sys.argv[3]))
        sys.exit(0)
    print("| case | recorded ops | record s | compile s | total s | JSON MiB | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    for label, expr, rank in CASES:
        out = subprocess.run([sys.executable, __file__, "--one", expr,
                              "-" if rank is None else str(rank)],
                             check=True, capture_output=True, text=True).stdout.split()
        print(f"| {label} | " + " | ".join(out) + " |")
