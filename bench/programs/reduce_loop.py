"""The flood benchmark's workload: gloo all_reduce of a 256 KiB tensor and a store
round-trip (set on rank 0, get everywhere) per step, STEPS steps (argv[1], default 200).
Rank 0 prints "reduce world=W steps=N seconds=S" with the loop's wall time."""
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
dist.init_process_group("gloo", timeout=timedelta(seconds=120))
rank, world = dist.get_rank(), dist.get_world_size()
store = dist.distributed_c10d._get_default_store()
t = torch.ones(64 * 1024)
dist.barrier()
start = time.monotonic()
for i in range(steps):
    dist.all_reduce(t)
    if rank == 0:
        store.set(f"step{i}", str(i))
    assert store.get(f"step{i}") == str(i).encode()
    t.fill_(1.0)
dist.barrier()
if rank == 0:
    print(f"reduce world={world} steps={steps} seconds={time.monotonic() - start:.3f}", flush=True)
