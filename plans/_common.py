"""Shared settings of the default plans (imported by the plan programs beside it)."""

import os
import sys

try:
    import mscclpp  # noqa: F401
except ImportError:  # running from a source tree without installing the package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

RANK_COUNTS = range(2, 9)          # one node, 2..8 ranks
PACKET_MAX_MESSAGE = 256 * 1024    # LL allreduce up to 256 KiB (inclusive) ...
SIMPLE_MIN_MESSAGE = PACKET_MAX_MESSAGE + 1  # ... Simple allreduce right above it
# The host backend (CPU ranks) moves LL packets far slower than plain copies: measured idle on
# 2 cores, the Simple allreduce beats the LL one from 128 B at 2 ranks and at every size at 4
# (docs/performance.md, "Re-measured on the idle machine"). Its own variants live in
# plans/host/, which the executor registers before the generic plans.
HOST_PACKET_MAX_MESSAGE = 64
# The one-hop all-pairs LL allreduce (allreduce_allpairs.py) below the two-hop LL plan: every
# rank moves (N-1) packet copies of the whole message, so it wins while latency dominates.
# Its range and shape wait for a GPU measurement (scripts/gpu-check.sh, "small" step); 32 KiB
# is where the two-hop plan's time had grown from 17.7 to 23 us on an H200 (2 ranks).
ALLPAIRS_MAX_MESSAGE = 32 * 1024
ALLPAIRS_BLOCKS = 4     # thread blocks per rank (each owns a quarter of the message)
ALLPAIRS_THREADS = 256  # threads per block (8 B on an H200: 12.5 us at 256, 17.6 at 1024)
MAX_MESSAGE = 2**64 - 1
INSTANCES = 4                      # thread blocks per rank for the Simple plans

# CUDA backend (plans/cuda/, registered before the generic plans), chosen by measurement on one
# H100 with 2, 4 and 8 ranks sharing it under MPS (docs/performance.md, "GPU plans"):
# - large messages need many thread blocks per rank: 4 blocks reach 8% of the copy bound, 64
#   (2 ranks) 71%. Every block of every rank must be resident at once when ranks share a GPU
#   (1 block of 1024 threads per SM, 132 SMs on an H100): ranks x blocks <= 128.
# - the LL allreduce keeps its generic plan (1 block per peer): with more instances it was
#   faster from 64 KiB, but the lowering then splits chunks at offsets that are not whole packet
#   words for some sizes (INVALID_PLAN for 122 int8 bytes), so the Simple plan takes over
#   earlier instead: from 128 KiB on 2 ranks, from 256 KiB (the generic boundary) above.
CUDA_SIMPLE_MIN_MESSAGE = 1024 * 1024 + 1  # allgather/reducescatter/alltoall/broadcast
# - the one-hop LL allreduce below 1 KiB: one thread block per rank, not ALLPAIRS_BLOCKS. On an
#   H200 (session 9, mscclpp-bench -n 1000, 2 ranks, us per call at 8 B / 512 B / 32 KiB): 1 block
#   of 256 threads 8.80 / 8.68 / 23.5, 4 blocks 9.67 / 10.22 / 13.18; 8 ranks 18.08 / 17.63 /
#   66.9 against 18.81 / 19.48 / 29.7. Above about 1-4 KiB the 4 blocks win (interpolated: the
#   sizes between were not measured), so 1 KiB is where the generic plan takes over.
CUDA_ALLPAIRS_SMALL_MAX = 1024


def cuda_allreduce_simple_min(n):
    """Smallest message of the CUDA Simple allreduce for n ranks (the LL plan below it)."""
    return 128 * 1024 + 1 if n <= 2 else 256 * 1024 + 1


def cuda_instances(n):
    """Thread blocks per rank of the CUDA Simple plans for n ranks: the most that stay
    co-resident with n ranks on one GPU (n x blocks <= 128); a power of two."""
    return 64 if n <= 2 else 32 if n <= 4 else 16


def cuda_root_blocks(n):
    """Thread blocks of the root of the CUDA direct broadcast for n ranks, whose other ranks
    run one block each (only the root moves data): every block the co-residency rule leaves
    (the sum over ranks <= 128, as n x cuda_instances(n) for the replicated plans)."""
    return 128 - (n - 1)


def memory_channels(n):
    """One memory channel from every rank to every other: chan[(r, p)] goes r -> p."""
    from mscclpp.language import MemoryChannel
    return {(r, p): MemoryChannel(p, r) for r in range(n) for p in range(n) if p != r}


def peers_of(r, n):
    """The other ranks, starting after r (so ranks do not all hit rank 0 first)."""
    return [(r + k) % n for k in range(1, n)]


def ready_handshake(chan, r, peers):
    """Tell every peer r is ready (relaxed: it orders no data) and wait for theirs."""
    from mscclpp.language import SyncType
    for p in peers:
        chan[(r, p)].signal(tb=0, relaxed=True, data_sync=SyncType.none)
    for p in peers:
        chan[(r, p)].wait(tb=0, relaxed=True, data_sync=SyncType.after)


def publish_and_wait(chan, r, peers):
    """Release r's writes to every peer (signal after a block sync) and wait for theirs."""
    from mscclpp.language import SyncType
    for p in peers:
        chan[(r, p)].signal(tb=0, data_sync=SyncType.before)
    for p in peers:
        chan[(r, p)].wait(tb=0, data_sync=SyncType.after)


def direct_ranks(chan, n, ready=False):
    """The ranks of a direct plan (plans/*_direct.py: peers' input and output addressed
    directly, no scratch): yields (r, peers), and runs the closing handshake when the loop body
    for r ends (r releases its writes to every peer and waits for theirs: r's output is
    complete, and no peer still reads r's input or writes r's output when the call returns). A
    `break` would skip it.

    No handshake opens the call: the executor fences every launch of a plan that reaches the
    peers' input or output (executor.c, args.fence = reaches_io; kern_args.h, "Launch fence"),
    and a peer's fence record comes from its launch of this very call, so once the fence is
    through every peer is in this launch, its input written and its output free of the
    caller's earlier work and of its own last call, which is what an opening handshake told.
    ready=True adds it back (r signals every peer and waits for theirs before the body), for a
    side-by-side measurement of what that round trip costs (scripts/gpu-check.sh step ready)."""
    for r in range(n):
        peers = peers_of(r, n)
        if ready:
            publish_and_wait(chan, r, peers)
        yield r, peers
        publish_and_wait(chan, r, peers)


# The direct plans as a backend's defaults: plans/direct/<backend>/ holds each backend's
# variants (its block count, the sizes they serve), registered before plans/<backend>/ when
# MSCCLPP_PLAN_DIRECT=on, or where the backend's rule says so (executor/plan_dirs.c,
# direct_default: the host backend under auto, the default, for calls whose ranks all pass
# shareable buffers, agreed at every such call; docs/plan-selection.md). Host: one block per rank for the
# allreduce, as plans/host/'s Simple allreduce, INSTANCES otherwise (the scratch plans'
# counts), from 1 MiB + 1, where they beat the scratch plans on shared buffers (on malloc'd,
# staged, ones they lose: docs/performance.md, "Direct plans on shared and malloc'd buffers").
# None: no host variant of that collective.
HOST_DIRECT_MIN_MESSAGE = {"allreduce": 1024 * 1024 + 1, "allgather": 1024 * 1024 + 1,
                           "reducescatter": 1024 * 1024 + 1, "alltoall": 1024 * 1024 + 1,
                           "broadcast": 1024 * 1024 + 1}
# CUDA: the CUDA scratch plans' block counts and ranges (plans/cuda/), not loaded by default
# until a GPU measurement (scripts/gpu-check.sh step direct) says they win there.


def direct_variants(coll, build, inplace_twins=True, cuda_args=None, **extra):
    """What default_plans() of plans/<coll>_direct.py yields: the generic direct plans
    (plans/direct/), the host backend's (plans/direct/host/) and the CUDA ones
    (plans/direct/cuda/), each out of place and, with inplace_twins, in place (_ip).
    cuda_args(n): the CUDA variant's shape arguments for n ranks (default: instances =
    cuda_instances(n)). extra: passed to every build (ready=True: the opening handshake back,
    for scripts/gpu-check.sh step ready; the shipped files have none)."""
    host_min = HOST_DIRECT_MIN_MESSAGE[coll]
    cuda_min = CUDA_SIMPLE_MIN_MESSAGE
    for ip in ("", "_ip") if inplace_twins else ("",):
        for n in RANK_COUNTS:
            yield f"direct/{coll}_direct{ip}_{n}.json", build(n, inplace=bool(ip), **extra)
        for n in RANK_COUNTS if host_min is not None else ():
            yield (f"direct/host/{coll}_direct{ip}_{n}.json",
                   build(n, instances=1 if coll == "allreduce" else INSTANCES,
                         min_message_size=host_min, variant="_host", inplace=bool(ip), **extra))
        for n in RANK_COUNTS:
            shape = cuda_args(n) if cuda_args else dict(instances=cuda_instances(n))
            yield (f"direct/cuda/{coll}_direct{ip}_{n}.json",
                   build(n, **shape,
                         min_message_size=cuda_allreduce_simple_min(n) if coll == "allreduce"
                         else cuda_min, variant="_cuda", inplace=bool(ip), **extra))


def main(build, default_ranks=4):
    import argparse

    ap = argparse.ArgumentParser(description=build.__doc__)
    ap.add_argument("--num_ranks", type=int, default=default_ranks)
    args = ap.parse_args()
    print(build(args.num_ranks).to_json())


def main_variants(build, default_ranks=4):
    """main() with --instances, --inplace and --ready: for programs whose variants
    scripts/gpu-check.sh generates (step direct: the CUDA plans' block count; step ready: the
    opening handshake)."""
    import argparse

    ap = argparse.ArgumentParser(description=build.__doc__)
    ap.add_argument("--num_ranks", type=int, default=default_ranks)
    ap.add_argument("--instances", type=int, default=INSTANCES)
    ap.add_argument("--inplace", action="store_true")
    ap.add_argument("--ready", action="store_true",
                    help="open the call with a ready handshake (the fence makes it redundant)")
    args = ap.parse_args()
    print(build(args.num_ranks, instances=args.instances, inplace=args.inplace,
                ready=args.ready).to_json())
