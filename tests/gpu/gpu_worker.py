"""One worker of the GPU checks (tests/gpu/run_gpu_checks.sh): an all_reduce and one DDP
step, on the GPU with NCCL when this process sees one, else on the CPU with gloo (the dry
run's stand-in). Prints one line `GPUCHECK {json}` with what it saw and computed.

    gpu_worker.py [--cpu] [--exit-rank R --exit-code C]

--cpu: gloo on the CPU even when a GPU is visible (several ranks on one GPU).
--exit-rank/--exit-code: that rank exits with that code after the collectives (drun's exit
status is the failing worker's).
"""
import argparse
import json
import os
import re
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def pick_device(force_cpu):
    """cuda:LOCAL_RANK when this process sees that many GPUs, cuda:0 when it sees one
    (drun's gpu:LIST narrows CUDA_VISIBLE_DEVICES to the worker's own), else the CPU."""
    if force_cpu or not torch.cuda.is_available():
        return torch.device("cpu")
    local_rank = int(os.environ["LOCAL_RANK"])
    count = torch.cuda.device_count()
    return torch.device("cuda", local_rank if local_rank < count else 0)


def ddp_step(device, rank):
    """One DDP step of a small model; True when every rank holds the same gradient after
    DDP's all_reduce (their inputs differ)."""
    torch.manual_seed(0)
    model = nn.Linear(16, 4).to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(8, 16, generator=g).to(device)
    loss = ddp(x).square().mean()
    loss.backward()
    grad = model.weight.grad.detach().clone()
    hi, lo = grad.clone(), grad.clone()
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    opt.step()
    return bool(torch.equal(hi, lo)), float(loss.item())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--exit-rank", type=int, default=-1)
    p.add_argument("--exit-code", type=int, default=0)
    args = p.parse_args()

    device = pick_device(args.cpu)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()

    t = torch.full((4,), float(rank + 1), device=device)
    dist.all_reduce(t)
    all_reduce_ok = bool(torch.all(t == world * (world + 1) / 2).item())
    grads_equal, loss = ddp_step(device, rank)
    if device.type == "cuda":
        torch.cuda.synchronize()

    nccl = torch.cuda.nccl.version() if device.type == "cuda" else None
    nccl = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl
    print("GPUCHECK " + json.dumps({
        "rank": rank, "world": world, "local_rank": int(os.environ["LOCAL_RANK"]),
        "local_world_size": int(os.environ["LOCAL_WORLD_SIZE"]),
        "backend": backend, "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "device_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        # the one name this torch reads: TORCH_NCCL_... from 2.2 on, NCCL_... before
        "nccl_async_error_handling": os.environ.get(
            "TORCH_NCCL_ASYNC_ERROR_HANDLING" if tuple(map(int, re.findall(r"\d+", torch.__version__)[:2])) >= (2, 2)
            else "NCCL_ASYNC_ERROR_HANDLING"),
        "nccl_socket_ifname": os.environ.get("NCCL_SOCKET_IFNAME"),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "all_reduce_ok": all_reduce_ok, "ddp_grads_equal": grads_equal, "loss": loss,
        "torch": torch.__version__, "nccl": nccl,
    }), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    if rank == args.exit_rank:
        sys.exit(args.exit_code)


if __name__ == "__main__":
    main()
