"""dist.all_reduce repeated CALLS times in place on one tensor and stream, for counting what one
steady-state call asks of the backend (tests/gpu/hal_count.sh, issue 19 item 5):

    MSCCLPP_HAL_COUNT=1 LD_PRELOAD=<build>/.libs/libmscclpp_nccl.so torchrun \\
        --nproc_per_node=2 tests/gpu/torch_percall.py CALLS BYTES

Every rank prints nothing itself; the library prints its HAL operation counts to stderr when the
communicator goes (ncclCommDestroy -> mscclpp_comm_destroy) and at exit. Two runs with different
CALLS give the operations per call as the difference of the counts over the difference of CALLS.
"""

import os
import sys

import torch
import torch.distributed as dist


def main():
    calls, nbytes = int(sys.argv[1]), int(sys.argv[2])
    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = local % torch.cuda.device_count()
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=torch.device("cuda", dev))
    x = torch.ones(max(nbytes // 4, 1), dtype=torch.float32, device="cuda")
    for _ in range(5):  # warm-up: the context, the plan, the stream wrap
        dist.all_reduce(x)
    torch.cuda.synchronize()
    for _ in range(calls):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
