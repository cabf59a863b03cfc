"""Shared by the examples: start ranks and make tensors, with PyTorch on CUDA when there is one
and NumPy on the host backend otherwise.

Launched by torchrun (RANK and WORLD_SIZE set, MSCCLPP_MASTER_ADDR/PORT naming rank 0), each
process is one rank. Run directly (``python3 example.py --nranks 2``), the example forks its
ranks itself and bootstraps them on 127.0.0.1.
"""

import argparse
import os
import socket
import sys
import traceback


def have_torch_cuda():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


class Tensors:
    """Allocate, fill, read and describe tensors: torch on CUDA, or NumPy arrays in memory of
    the library's allocator (the host backend runs plans only on memory it allocated)."""

    def __init__(self):
        self.torch = have_torch_cuda()
        self._keep = []

    def empty(self, n, dtype="float32"):
        import mscclpp

        if self.torch:
            import torch

            return torch.empty(n, dtype=getattr(torch, dtype), device="cuda")
        import numpy as np

        buf = mscclpp.RawGpuBuffer(n * np.dtype(dtype).itemsize)
        self._keep.append(buf)
        return np.from_dlpack(buf.to_dlpack(dtype, [n]))

    def fill(self, t, values):
        if self.torch:
            import torch

            t.copy_(torch.as_tensor(values, dtype=t.dtype))
        else:
            t[:] = values

    def host(self, t):
        return t.cpu().numpy() if self.torch else t.copy()

    def ptr(self, t):
        return t.data_ptr() if self.torch else t.ctypes.data

    def dtype(self, t):
        import mscclpp.utils as mscclpp_utils

        if self.torch:
            return mscclpp_utils.torch_dtype_to_mscclpp_dtype(t.dtype)
        return mscclpp_utils.numpy_dtype_to_mscclpp_dtype(t.dtype)

    def stream(self):
        if self.torch:
            import torch

            return torch.cuda.current_stream().cuda_stream
        return 0

    def synchronize(self):
        if self.torch:
            import torch

            torch.cuda.synchronize()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(main):
    """Run ``main(rank, world_size, trio)`` on every rank; exit 0 when all ranks pass."""
    p = argparse.ArgumentParser()
    p.add_argument("--nranks", type=int, default=2)
    args = p.parse_args()
    if "RANK" in os.environ:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if have_torch_cuda():
            import torch

            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
        trio = f"{os.environ['MSCCLPP_MASTER_ADDR']}:{os.environ['MSCCLPP_MASTER_PORT']}"
        main(rank, world, trio)
        return 0
    trio = f"127.0.0.1:{_free_port()}"
    pids = []
    for r in range(args.nranks):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                main(r, args.nranks, trio)
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        pids.append(pid)
    failed = [r for r, pid in enumerate(pids) if os.waitpid(pid, 0)[1] != 0]
    if failed:
        print(f"ranks {failed} failed", file=sys.stderr)
        return 1
    print(f"all {args.nranks} ranks passed")
    return 0
