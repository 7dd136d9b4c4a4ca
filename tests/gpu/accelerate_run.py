"""A script using accelerate's Accelerator() under drun (tests/gpu/run_gpu_checks.sh,
check 4): prepare, a few training steps, gather. accelerate reads torchrun's variables.

    accelerate_run.py [--cpu]

--cpu: Accelerator(cpu=True) (several processes on one GPU machine: gloo on the CPU).
Prints `GPUCHECK {json}` on every rank.
"""
import argparse
import json
import os

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cpu", action="store_true")
    args = p.parse_args()
    acc = Accelerator(cpu=args.cpu)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(128, 8)
    loader = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=16)
    model, opt, loader = acc.prepare(model, opt, loader)
    for xb, yb in loader:
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        acc.backward(loss)
        opt.step()
        opt.zero_grad()
    ranks = acc.gather(torch.tensor([acc.process_index], device=acc.device))
    print("GPUCHECK " + json.dumps({
        "rank": acc.process_index, "world": acc.num_processes,
        "distributed_type": str(acc.distributed_type), "device": str(acc.device),
        "gathered_ranks": ranks.tolist(), "loss": float(loss.item()),
        "drun_rank": int(os.environ["RANK"]),
    }), flush=True)
    acc.end_training()


if __name__ == "__main__":
    main()
