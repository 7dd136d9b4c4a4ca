"""A worker for the ssh tests; no PyTorch, so it starts in milliseconds.

Prints one line describing where it runs and what drun gave it, then exits 0, or waits for
a gate (a FIFO the test holds open) and then exits 0:

    worker.py [--then exit|gate] [--gate FIFO] [--env VAR,VAR...]

The line: "worker host=H rank=R local_rank=L resolved=A group_rank=G world=W local_world=LW
restart=C pid=P [VAR=value ...]" (A: what its own hostname resolves to; an unset VAR prints
as VAR=<unset>).
"""
import argparse
import os
import select
import socket
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--then", choices=["exit", "gate"], default="exit")
parser.add_argument("--gate", default=None)
parser.add_argument("--env", default="")
args = parser.parse_args()

env = os.environ
extra = " ".join(f"{v}={env.get(v, '<unset>')}" for v in args.env.split(",") if v)
print(f"worker host={socket.gethostname()} rank={env['RANK']} local_rank={env['LOCAL_RANK']} "
      f"resolved={socket.gethostbyname(socket.gethostname())} "
      f"group_rank={env['GROUP_RANK']} world={env['WORLD_SIZE']} "
      f"local_world={env['LOCAL_WORLD_SIZE']} "
      f"restart={env.get('TORCHELASTIC_RESTART_COUNT')} pid={os.getpid()} {extra}".rstrip(),
      flush=True)

if args.then == "gate":
    fd = os.open(args.gate, os.O_RDONLY | os.O_NONBLOCK)
    while True:
        try:
            if not os.read(fd, 64):
                break
        except BlockingIOError:
            select.select([fd], [], [])
    print(f"rank {env['RANK']} passed the gate", flush=True)
sys.exit(0)
