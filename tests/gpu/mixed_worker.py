"""Several CPU ranks with gloo and GPU ranks where NCCL allows them (tests/gpu/
run_gpu_checks.sh, group 2). One node.

Every rank joins a gloo world and all_reduces a CPU tensor. Where this node has GPUs, the
ranks below the GPU count (rank r on cuda:r; NCCL allows one rank per GPU, so on a machine
with one GPU that is rank 0 alone) also all_reduce on their GPU in an NCCL group of their
own (dist.new_group(..., backend="nccl"), which every rank calls). Prints
`GPUCHECK {json}`.
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
    # Every rank computes the same list (one node, every GPU visible): new_group is collective.
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    gpu_ranks = list(range(min(gpus, world)))
    if gpu_ranks and dist.is_nccl_available():
        group = dist.new_group(gpu_ranks, backend="nccl")
        if rank in gpu_ranks:
            torch.cuda.set_device(rank)
            g = torch.full((1024,), 2.0, device="cuda")
            dist.all_reduce(g, group=group)
            torch.cuda.synchronize()
            result["nccl_group"] = {"ranks": gpu_ranks,
                                    "ok": bool(torch.all(g == 2.0 * len(gpu_ranks)).item()),
                                    "device_name": torch.cuda.get_device_name(rank)}
    dist.barrier()
    print("GPUCHECK " + json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
