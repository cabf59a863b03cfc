"""CUDA graph capture from PyTorch (issue 18 item 6), run by scripts/gpu-check.sh under torchrun:

    torchrun --nproc_per_node=2 tests/gpu/torch_graphs.py runtime
    LD_PRELOAD=<build>/.libs/libmscclpp_nccl.so torchrun --nproc_per_node=2 \\
        tests/gpu/torch_graphs.py nccl

``runtime``: the Python runtime's default allreduce (``Algorithm.execute`` on torch tensors, the
stream given as the int torch gives). ``nccl``: ``dist.all_reduce`` with ``backend="nccl"``,
served by the preloaded NCCL-API library. Either way: warm-up on a side stream (torch's rule),
then ``torch.cuda.graph`` captures three allreduces (two warmed-up shapes, one never seen, so its
setup happens during the capture), replayed 100 times with new data each time, every element
checked, with direct calls of another size between replays. Rank 0 prints one line:
"torch_graphs MODE: N ranks, 100 replays ok; replay T1 us, direct T2 us per 3 allreduces".
"""

import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "runtime"
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = local % torch.cuda.device_count()
    torch.cuda.set_device(dev)
    if mode == "nccl":
        dist.init_process_group("nccl", device_id=torch.device("cuda", dev))

        def allreduce(x):
            dist.all_reduce(x)
    elif mode == "runtime":
        dist.init_process_group("gloo")
        import mscclpp
        import mscclpp.utils as mu

        group = mscclpp.CommGroup(torch_group=True)
        algo = [a for a in mscclpp.AlgorithmCollectionBuilder().build_default_algorithms()
                if a.name == "default_allreduce"][0]

        def allreduce(x):
            # the tensor itself as the buffer, torch's int stream handle as the stream
            algo.execute(group.communicator, x, x, x.nbytes, x.nbytes,
                         mu.torch_dtype_to_mscclpp_dtype(x.dtype), op=mscclpp.ReduceOp.SUM,
                         stream=torch.cuda.current_stream().cuda_stream)
    else:
        raise SystemExit(f"torch_graphs: unknown mode {mode!r} (runtime or nccl)")

    sizes = [1024, 1 << 20, 12345]   # floats; the last one is first used inside the capture
    xs = [torch.empty(n, device="cuda") for n in sizes]
    base = [torch.arange(n, device="cuda", dtype=torch.float32) % 97 for n in sizes]
    other = torch.empty(5000, device="cuda")

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            for x in xs[:2]:
                x.fill_(1.0)
                allreduce(x)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for x in xs:
            allreduce(x)
    torch.cuda.synchronize()

    replays = 100
    t_replay = 0.0
    for rep in range(replays):
        for x, b in zip(xs, base):
            x.copy_(b + rank + rep)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        graph.replay()
        torch.cuda.synchronize()
        t_replay += time.perf_counter() - t0
        for k, (x, b) in enumerate(zip(xs, base)):
            want = world * (b + rep) + world * (world - 1) / 2
            if not torch.equal(x, want):
                bad = (x != want).nonzero()[0].item()
                raise SystemExit(f"rank {rank}: replay {rep}, allreduce {k} ({sizes[k]} floats): "
                                 f"[{bad}] = {x[bad].item()}, want {want[bad].item()}")
        if rep % 10 == 9:
            other.fill_(float(rank + rep))
            allreduce(other)
            torch.cuda.synchronize()
            want = world * rep + world * (world - 1) / 2
            if not bool((other == want).all()):
                raise SystemExit(f"rank {rank}: direct call after replay {rep} is wrong")
    # the same three calls directly, for the time next to the replays
    t_direct = 0.0
    for rep in range(20):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for x in xs:
            allreduce(x)
        torch.cuda.synchronize()
        t_direct += time.perf_counter() - t0
    dist.barrier()
    if rank == 0:
        print(f"torch_graphs {mode}: {world} ranks, {replays} replays ok; replay "
              f"{t_replay / replays * 1e6:.1f} us, direct {t_direct / 20 * 1e6:.1f} us per "
              f"{len(xs)} allreduces")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
