"""Every rank drawing a `\\r` progress bar in lockstep (a gloo barrier between steps), like
tqdm bars, for the terminal tests of `--launcher slurm` (two nodes of one rank, three of two).
Each ends its line with " done". At step 10 rank 0 waits until the test opens the FIFO argv[1]
(the other ranks wait at the barrier), so the test sees the screen mid-run."""
import os
import sys

import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    for i in range(1, 22):
        sys.stdout.write(f"\rstep {i}/21")
        sys.stdout.flush()
        if i == 10 and os.environ["RANK"] == "0":
            with open(sys.argv[1]) as f:
                f.read()
        dist.barrier()
    sys.stdout.write(" done\n")
    sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
