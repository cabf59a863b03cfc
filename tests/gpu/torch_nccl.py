"""PyTorch through libmscclpp_nccl.so (issue 18 items 1-3, 6), run by scripts/gpu-check.sh:

    LD_PRELOAD=<build>/.libs/libmscclpp_nccl.so torchrun --nproc_per_node=2 \\
        tests/gpu/torch_nccl.py [--quick] [--time-sizes LIST] [--json FILE]

``backend="nccl"`` with our library preloaded, 2 (or more) ranks. Three parts, rank 0 printing
one line each:

- ``torch_nccl check``: every collective torch's NCCL backend issues, every element checked:
  all_reduce (sum in place, max, avg), all_gather_into_tensor, reduce_scatter_tensor,
  broadcast from every root, reduce, all_to_all_single, a batch_isend_irecv ring and send/recv
  pairs, at sizes from 8 B to 256 MiB (16 MiB with --quick), on tensors of PyTorch's caching
  allocator (so inside larger segments, at whatever offsets it gives each rank).
- ``torch_nccl async``: the stream is kept busy (torch.cuda._sleep, about 50 ms) before each of
  all_reduce, all_gather, reduce_scatter and a send/recv ring; each call must return to the host
  well before the stream reaches it (no host synchronisation in the call), and be right after.
- ``torch_nccl time``: dist.all_reduce (float32, in place) per call, 8 B .. 256 MiB, CUDA events
  around back-to-back calls after warm-up, the best of 3 rounds of 200 calls (50 above 1 MiB).
  --json writes {bytes: microseconds} for the report, which gpu-check.sh puts next to
  mscclpp-bench's in-place allreduce (the direct mscclpp_allreduce) of the same run.

--time-sizes LIST (comma-separated byte counts, K/M/G suffixes: 8M,16M,32M) times those sizes
instead of the sweep, and the check covers each of them too (beside its sweep of 8 B .. 16 MiB
with --quick, 256 MiB without): gpu-check.sh step `auto` times the sizes around CUDA's direct
plan floor under each MSCCLPP_PLAN_DIRECT mode.
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist


def fail(rank, msg):
    raise SystemExit(f"torch_nccl: rank {rank}: {msg}")


def expect(rank, what, got, want):
    if not torch.equal(got, want):
        bad = (got != want).nonzero()[0].tolist()
        fail(rank, f"{what}: element {bad} is {got[tuple(bad)].item()}, "
                   f"want {want[tuple(bad)].item()}")


def sizes(limit):
    out, b = [], 8
    while b <= limit:
        out.append(b)
        b *= 8 if b < (1 << 20) else 4
    return out


def parse_sizes(text):
    """'8M,16M,1024' as byte counts, sorted, each a positive multiple of 4 (float32 elements)."""
    out = []
    for part in text.split(","):
        part = part.strip()
        shift = {"K": 10, "M": 20, "G": 30}.get(part[-1:].upper(), 0)
        digits = part[:-1] if shift else part
        if not digits.isdigit() or int(digits) == 0 or (int(digits) << shift) % 4:
            raise SystemExit(f"torch_nccl: --time-sizes: '{part}' is not a positive multiple of "
                             "4 bytes (K/M/G suffixes allowed)")
        out.append(int(digits) << shift)
    return sorted(set(out))


def check(rank, world, limit, extra=()):
    dev = torch.device("cuda")
    n_calls = 0
    for nbytes in sorted(set(sizes(limit)) | set(extra)):
        n = max(nbytes // 4, 1)
        base = torch.arange(n, device=dev, dtype=torch.float32) % 101
        # a tensor inside a larger segment, at an offset that differs between ranks
        seg = torch.empty(n + 64 * (rank + 1), device=dev)
        x = seg[64 * (rank + 1):]
        x.copy_(base + rank)
        dist.all_reduce(x)  # in place, as every framework calls it
        expect(rank, f"all_reduce sum {nbytes} B", x, world * base + world * (world - 1) / 2)
        x.copy_(base + rank)
        dist.all_reduce(x, op=dist.ReduceOp.MAX)
        expect(rank, f"all_reduce max {nbytes} B", x, base + world - 1)
        x.copy_((base + rank) * world)
        dist.all_reduce(x, op=dist.ReduceOp.AVG)
        expect(rank, f"all_reduce avg {nbytes} B", x, world * base + world * (world - 1) / 2)
        out = torch.empty(n * world, device=dev)
        dist.all_gather_into_tensor(out, base + rank)
        expect(rank, f"all_gather {nbytes} B", out,
               torch.cat([base + r for r in range(world)]))
        src = torch.cat([base + 1000 * r + rank for r in range(world)])
        part = torch.empty(n, device=dev)
        dist.reduce_scatter_tensor(part, src)
        expect(rank, f"reduce_scatter {nbytes} B", part,
               world * (base + 1000 * rank) + world * (world - 1) / 2)
        for root in range(world):
            y = base + rank * 7
            dist.broadcast(y, src=root)
            expect(rank, f"broadcast root {root} {nbytes} B", y, base + root * 7)
        y = base + rank
        dist.reduce(y, dst=0)
        if rank == 0:
            expect(rank, f"reduce {nbytes} B", y, world * base + world * (world - 1) / 2)
        if n % world == 0:
            a2a_in = torch.cat([torch.full((n // world,), float(100 * rank + r), device=dev)
                                for r in range(world)])
            a2a_out = torch.empty_like(a2a_in)
            dist.all_to_all_single(a2a_out, a2a_in)
            expect(rank, f"all_to_all {nbytes} B", a2a_out,
                   torch.cat([torch.full((n // world,), float(100 * r + rank), device=dev)
                              for r in range(world)]))
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        s, r = base + rank, torch.empty(n, device=dev)
        for req in dist.batch_isend_irecv([dist.P2POp(dist.isend, s, nxt),
                                           dist.P2POp(dist.irecv, r, prv)]):
            req.wait()
        expect(rank, f"batch_isend_irecv ring {nbytes} B", r, base + prv)
        if world % 2 == 0:  # pairs: even ranks send first, odd ranks receive first
            peer = rank ^ 1
            r2 = torch.empty(n, device=dev)
            if rank % 2 == 0:
                dist.send(s, peer)
                dist.recv(r2, peer)
            else:
                dist.recv(r2, peer)
                dist.send(s, peer)
            expect(rank, f"send/recv pair {nbytes} B", r2, base + peer)
        n_calls += 10 + world
    torch.cuda.synchronize()
    return n_calls


def host_async(rank, world):
    """Each call returns while the stream is still busy with work queued before it."""
    dev = torch.device("cuda")
    n = 1 << 20
    base = torch.arange(n, device=dev, dtype=torch.float32) % 89
    x, out, part = torch.empty(n, device=dev), torch.empty(n * world, device=dev), \
        torch.empty(n, device=dev)
    src = torch.cat([base + r for r in range(world)])
    r = torch.empty(n, device=dev)
    cycles = 100_000_000  # GPU clocks: some 50 ms at the clocks of current parts
    worst = 0.0
    # each call with the result it must leave, checked right after it (the next call's set-up
    # writes x again)
    calls = [
        ("all_reduce", lambda: dist.all_reduce(x),
         lambda: ("x", x, world * base + world * (world - 1) / 2)),
        ("all_gather", lambda: dist.all_gather_into_tensor(out, x),
         lambda: ("out", out, src)),
        ("reduce_scatter", lambda: dist.reduce_scatter_tensor(part, src),
         lambda: ("part", part, world * (base + rank))),
        ("send/recv", lambda: [q.wait() for q in dist.batch_isend_irecv(
            [dist.P2POp(dist.isend, base, (rank + 1) % world),
             dist.P2POp(dist.irecv, r, (rank - 1) % world)])],
         lambda: ("ring", r, base)),
    ]
    for name, call, result in calls:
        for _ in range(3):  # warm: contexts and plans exist before the timed call
            x.copy_(base + rank)
            call()
        torch.cuda.synchronize()
        dist.barrier()
        x.copy_(base + rank)
        torch.cuda._sleep(cycles)  # ~50 ms of busy stream before the call
        t0 = time.perf_counter()
        call()
        dt = time.perf_counter() - t0
        busy = not torch.cuda.current_stream().query()
        torch.cuda.synchronize()
        if not busy or dt > 0.02:
            fail(rank, f"{name}: the call took {dt * 1e3:.2f} ms on the host and the stream was "
                       f"{'still' if busy else 'no longer'} busy: it waited for the stream")
        worst = max(worst, dt)
        what, got, want = result()
        expect(rank, f"async {name} ({what})", got, want)
    return worst


def timing(rank, chosen):
    out = {}
    for nbytes in chosen:
        n = max(nbytes // 4, 1)
        x = torch.ones(n, device="cuda")
        for _ in range(5):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        # the best of 3 rounds: in one round of 20 calls a single 0.4 ms pause of the host
        # adds 20 us per call (sessions 9 and 10 read 24.9 and 43.7 us at 8 B with it)
        iters = 200 if nbytes <= (1 << 20) else 50
        best = None
        for _ in range(3):
            dist.barrier()
            torch.cuda.synchronize()
            s.record()
            for _ in range(iters):
                dist.all_reduce(x)
            e.record()
            torch.cuda.synchronize()
            t = s.elapsed_time(e) * 1000 / iters
            best = t if best is None else min(best, t)
        out[nbytes] = best
    return out


def main():
    args = sys.argv[1:]
    quick = "--quick" in args
    js = args[args.index("--json") + 1] if "--json" in args else None
    timed = parse_sizes(args[args.index("--time-sizes") + 1]) if "--time-sizes" in args else None
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = local % torch.cuda.device_count()
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=torch.device("cuda", dev))
    limit = (16 if quick else 256) << 20
    extra = [b for b in timed or () if b not in sizes(limit)]
    calls = check(rank, world, limit, extra)
    if rank == 0:
        more = f" and {', '.join(f'{b} B' for b in extra)}" if extra else ""
        print(f"torch_nccl check: {world} ranks, {calls} calls, 8 B .. {limit >> 20} MiB{more}, "
              "every element ok")
    worst = host_async(rank, world)
    if rank == 0:
        print(f"torch_nccl async: all_reduce, all_gather, reduce_scatter, send/recv returned "
              f"within {worst * 1e6:.0f} us while the stream was busy (no host sync)")
    t = timing(rank, timed or sizes(limit))
    if rank == 0:
        print("torch_nccl time: " + ", ".join(f"{b} B {us:.1f} us" for b, us in t.items()))
        if js:
            with open(js, "w") as f:
                json.dump({str(b): us for b, us in t.items()}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
