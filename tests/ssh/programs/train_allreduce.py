"""Real PyTorch across hosts: gloo all_reduce / all_gather, then a few DDP steps.

Every rank prints
    "allreduce rank=R world=W sum=S gathered=0,1,..."   (S = 1 + 2 + ... + W)
    "trained rank=R steps=N weight=<repr of the summed parameters>"
DDP averages gradients, so every rank must end with the same weights.
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo", timeout=timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])

t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
gathered = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
dist.all_gather(gathered, torch.tensor([rank], dtype=torch.int64))
print(f"allreduce rank={rank} world={world} sum={t.item():g} "
      f"gathered={','.join(str(int(g.item())) for g in gathered)}", flush=True)

torch.manual_seed(0)  # same initial weights everywhere (DDP also broadcasts rank 0's)
model = DistributedDataParallel(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
gen = torch.Generator().manual_seed(1000 + rank)  # different data per rank
steps = 5
for _ in range(steps):
    x = torch.randn(8, 4, generator=gen)
    y = x.sum(dim=1, keepdim=True)
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
with torch.no_grad():
    weight = sum(p.double().sum() for p in model.parameters()).item()
print(f"trained rank={rank} steps={steps} weight={weight!r}", flush=True)
dist.barrier()
dist.destroy_process_group()
