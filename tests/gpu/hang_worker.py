"""A rank stuck in a collective while the other sleeps (tests/gpu/run_gpu_checks.sh, check
5: drun stacks and --hang-timeout). Two ranks.

Rank 1 prints "rank 1 sleeping" and sleeps. Rank 0 prints "rank 0 entering all_reduce" and
calls all_reduce, which never completes:
  - on a GPU with NCCL (init is lazy in torch 2.x): rank 0's first collective creates the
    NCCL communicator and waits in NCCL's bootstrap for rank 1, which never comes. With two
    GPUs or more, both ranks first complete one all_reduce (the communicator exists), and
    rank 0's second one waits inside the NCCL kernel (its thread in cudaStreamSynchronize);
  - without a GPU (the dry run), in gloo's all_reduce.
`HANG_MODE` on rank 0's line says which.
"""
import os
import time

import torch
import torch.distributed as dist


def main():
    rank = int(os.environ["RANK"])
    gpu = torch.cuda.is_available()
    two_gpus = gpu and torch.cuda.device_count() >= 2
    device = torch.device("cuda", rank if two_gpus else 0) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if gpu else "gloo")
    t = torch.ones(1 << 20, device=device)
    if two_gpus:
        dist.all_reduce(t)
        torch.cuda.synchronize()
    if rank == 1:
        print("rank 1 sleeping", flush=True)
        time.sleep(3600)  # SLEEP LINE
        return
    mode = ("nccl kernel" if two_gpus else "nccl bootstrap") if gpu else "gloo"
    print(f"rank 0 entering all_reduce HANG_MODE={mode}", flush=True)
    dist.all_reduce(t)  # HANG LINE
    if gpu:
        torch.cuda.synchronize()
    print("rank 0: all_reduce returned (unexpected)", flush=True)


if __name__ == "__main__":
    main()
