"""Several CPU ranks with gloo and one GPU rank (tests/gpu/run_gpu_checks.sh, check 2).

Every rank joins a gloo world and all_reduces a CPU tensor. Where this process sees a GPU,
local rank 0 also runs an all_reduce on it in a one-rank NCCL group (dist.new_group([0],
backend="nccl"), which every rank calls): NCCL allows one rank per GPU, so on a machine with
one GPU that is the GPU rank there can be. Prints `GPUCHECK {json}`.
"""
import json
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    result = {"rank": rank, "world": world, "local_rank": int(os.environ["LOCAL_RANK"]),
              "gloo_sum_ok": t.item() == world * (world + 1) / 2, "nccl_group": None,
              "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    gpu = torch.cuda.is_available()
    # Every rank decides alike: new_group is collective. GPU_RANK is the world rank that uses
    # the GPU (rank 0, local rank 0 on the first node).
    if gpu and dist.is_nccl_available():
        group = dist.new_group([0], backend="nccl")
        if rank == 0:
            torch.cuda.set_device(0)
            g = torch.full((1024,), 2.0, device="cuda")
            dist.all_reduce(g, group=group)
            torch.cuda.synchronize()
            result["nccl_group"] = {"ok": bool(torch.all(g == 2.0).item()),
                                    "device_name": torch.cuda.get_device_name(0)}
    dist.barrier()
    print("GPUCHECK " + json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
