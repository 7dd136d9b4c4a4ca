"""A worker that asks the user something, for the terminal tests of `--launcher slurm`.

Every rank joins a gloo process group (env://, as drun set it up); rank 0 then prints the
prompt "rank 0: your name? " with input() (no newline: the terminal shows it as a partial
line), reads one line from its stdin and prints "rank 0 got '<line>'"; the others wait for it
at a barrier. Every rank finally prints "done <rank>".
"""
import os

import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank = int(os.environ["RANK"])
    if rank == 0:
        name = input("rank 0: your name? ")
        print(f"rank 0 got {name!r}", flush=True)
    dist.barrier()
    print(f"done {rank}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
