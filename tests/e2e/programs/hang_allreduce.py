"""gloo all_reduce in a loop; rank HANG_RANK (default 2) enters stuck() at step HANG_STEP
(default 5) and sleeps forever, after writing the time it did so to $HANG_MARK and printing
"stuck at step N"."""
import os
import time

import torch
import torch.distributed as dist


def stuck(step):
    with open(os.environ["HANG_MARK"], "w") as f:
        f.write(repr(time.time()))
    print(f"stuck at step {step}", flush=True)
    time.sleep(10**6)  # HANG LINE


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(1)
    for step in range(int(os.environ.get("STEPS", "100"))):
        if rank == int(os.environ.get("HANG_RANK", "2")) and step == int(os.environ.get("HANG_STEP", "5")):
            stuck(step)
        dist.all_reduce(t)
        print(f"step {step}", flush=True)


main()
