"""A worker that asks the user something, for the terminal tests of `--launcher slurm`.

Every rank joins a gloo process group (env://, as drun set it up); rank 0 (every rank with
--every-rank) then prints the prompt "rank N: your name? " with input() (no newline: the
terminal shows it as a partial line), reads one line from its stdin and prints
"rank N got '<line>'"; the others wait for it at a barrier. Every rank finally prints
"done <rank>".
"""
import os
import sys

import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank = int(os.environ["RANK"])
    if rank == 0 or "--every-rank" in sys.argv:
        name = input(f"rank {rank}: your name? ")
        print(f"rank {rank} got {name!r}", flush=True)
    dist.barrier()
    print(f"done {rank}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
