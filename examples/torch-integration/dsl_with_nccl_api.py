"""Seed 000's NCCL interposition flow: a DSL allreduce, compiled with ``mscclpp.compile``, added
with ``mscclpp.ext.AlgorithmCollectionBuilder().add_algorithm_builder``, chosen by a Python
selector for allreduces of 1 MiB and more; PyTorch keeps ``backend="nccl"``, and the NCCL calls
go to libmscclpp's NCCL-API library, preloaded:

    LD_PRELOAD=<build>/.libs/libmscclpp_nccl.so \\
        torchrun --nnodes=1 --nproc_per_node=8 dsl_with_nccl_api.py

Selection order (seed 000): the selector's DSL plan, else the library's own algorithms, else the
real NCCL (set MSCCLPP_NCCL_LIB_PATH to libnccl.so.2 for what libmscclpp does not serve). Each
rank checks the result and says how many calls the DSL plan served.
"""

import os
from typing import Any, Dict

import torch
import torch.distributed as dist

import mscclpp
import mscclpp.ext
from mscclpp.language.channel import BufferType, MemoryChannel, SwitchChannel, SyncType
from mscclpp.language.collectives import AllReduce
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Rank
from mscclpp.language.utils import AlgoSpec


def allreduce_nvls(spec: AlgoSpec) -> CollectiveProgram:
    """Every rank reduces its slice of the input through a switch channel (NVLS multicast where
    the GPUs have it, a peer-memory reduction elsewhere) and broadcasts it back, between two
    rounds of signals with every peer."""
    gpu_size = spec.world_size
    with CollectiveProgram.from_spec(spec) as program:
        nvls_chan = SwitchChannel(rank_list=list(range(gpu_size)), buffer_type=BufferType.input)
        channels = {}
        for gpu in range(gpu_size):
            for peer in range(gpu_size):
                if peer != gpu:
                    channels[(peer, gpu)] = MemoryChannel(peer, gpu)

        # every GPU is ready
        for gpu in range(gpu_size):
            for peer in range(gpu_size):
                if peer != gpu:
                    channels[(peer, gpu)].signal(tb=0, relaxed=True)
            for peer in range(gpu_size):
                if peer != gpu:
                    channels[(peer, gpu)].wait(tb=0, relaxed=True, data_sync=SyncType.after)

        # reduce this rank's slice, store it back on every rank
        for gpu in range(gpu_size):
            input_buffer = Rank(gpu).get_input_buffer()
            nvls_chan.at_rank(gpu).reduce(buffer_offset=gpu, size=1,
                                          dst_chunk=input_buffer[gpu:gpu + 1], tb=0)
            nvls_chan.at_rank(gpu).broadcast(src_chunk=input_buffer[gpu:gpu + 1],
                                             buffer_offset=gpu, size=1, tb=0)

        # every GPU is done
        for gpu in range(gpu_size):
            for peer in range(gpu_size):
                if peer != gpu:
                    channels[(peer, gpu)].signal(tb=0, relaxed=True, data_sync=SyncType.before)
            for peer in range(gpu_size):
                if peer != gpu:
                    channels[(peer, gpu)].wait(tb=0, relaxed=True)
    return program


def setup_plan(builder: mscclpp.ext.AlgorithmCollectionBuilder, rank: int, world_size: int,
               nranks_per_node: int):
    spec = AlgoSpec(
        name="allreduce_nvls",
        collective=AllReduce(world_size, 1, True),
        nranks_per_node=nranks_per_node,
        world_size=world_size,
        in_place=True,
        instances=2,
        protocol="Simple",
        num_threads_per_block=1024,
        min_message_size=1 << 20,
        max_message_size=48 << 30,
        tags={"nvls": 1},
    )
    algo = mscclpp.compile(algo=allreduce_nvls, algo_spec=spec, rank=rank)
    return builder.add_algorithm_builder(algo)


def selector(algorithms: Dict[str, Dict[str, Any]], req):
    if req.collective != "allreduce":
        return None
    if req.message_size < 1 << 20:
        return None
    return algorithms["allreduce"]["allreduce_nvls"]


def init_dist():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    builder = mscclpp.ext.AlgorithmCollectionBuilder()
    algo = setup_plan(builder, rank, world, per_node)
    builder.set_algorithm_selector(selector)
    torch.cuda.set_device(local % torch.cuda.device_count())
    dist.init_process_group(backend="nccl",
                            device_id=torch.device("cuda", local % torch.cuda.device_count()))
    return rank, world, local, builder, algo


def main():
    rank, world, local, builder, algo = init_dist()
    buffer = mscclpp.RawGpuBuffer(24 << 20)
    x = torch.utils.dlpack.from_dlpack(buffer.to_dlpack(data_type=str(torch.bfloat16)))
    x.fill_(rank + 1)   # sums of small integers are exact in bfloat16
    dist.all_reduce(x, op=dist.ReduceOp.SUM)
    torch.cuda.synchronize()
    want = world * (world + 1) / 2
    assert bool((x == want).all()), f"rank {rank}: allreduce gave {x[:4].tolist()}, want {want}"
    small = torch.full((1024,), float(rank), device="cuda")   # 4 KiB: the library's own
    dist.all_reduce(small)
    torch.cuda.synchronize()
    assert bool((small == world * (world - 1) / 2).all()), f"rank {rank}: small allreduce"
    dist.barrier()
    calls = builder.nccl_calls(algo)
    if mscclpp.ext.nccl_library() is None:
        print(f"Rank {local}: libmscclpp_nccl.so is not loaded (LD_PRELOAD it): the real NCCL "
              f"ran")
    else:
        assert calls == 1, f"rank {rank}: the DSL plan served {calls} calls, expected 1"
    dist.destroy_process_group()
    print(f"Rank {local} allreduce completed successfully (DSL plan allreduce_nvls served "
          f"{calls} call(s)).")


if __name__ == "__main__":
    main()
