"""Rank 0 prints every 2 s for SECONDS seconds; the other ranks wait for it in a barrier.
Slow but alive: never a hang."""
import os
import time

import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 0:
    end = time.monotonic() + float(os.environ.get("SECONDS", "14"))
    while time.monotonic() < end:
        print("still working", flush=True)
        time.sleep(2)
dist.barrier()
print("done", flush=True)
