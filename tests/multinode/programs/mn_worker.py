"""A worker for the multi-node tests; no PyTorch, so it starts in milliseconds.

Prints one line describing what drun gave it, optionally fails, then either exits 0, waits
to be stopped, or waits for a gate to open and then exits 0:

    mn_worker.py [--fail-local-rank L --code N [--fail-restarts all|0,1,...]]
                 [--then exit|wait|gate] [--gate FIFO]

The line: "worker rank=R local_rank=L group_rank=G world=W local_world=LW group_world=GW
restart=C max_restarts=M run_id=ID master=ADDR:PORT pid=P".

The gate is a FIFO the test holds open for writing: while it does, a nonblocking read
finds no data (EAGAIN) and select() waits; once the test closes it, read() returns EOF and
the worker exits 0. A worker started after the gate opened sees EOF at once.
"""
import argparse
import os
import select
import signal
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--fail-local-rank", type=int, default=None)
parser.add_argument("--code", type=int, default=1)
parser.add_argument("--fail-restarts", default="all")
parser.add_argument("--then", choices=["exit", "wait", "gate"], default="exit")
parser.add_argument("--gate", default=None)
args = parser.parse_args()

env = os.environ
restart = int(env.get("TORCHELASTIC_RESTART_COUNT", "-1"))
local_rank = int(env["LOCAL_RANK"])
print(f"worker rank={env['RANK']} local_rank={local_rank} group_rank={env['GROUP_RANK']} "
      f"world={env['WORLD_SIZE']} local_world={env['LOCAL_WORLD_SIZE']} "
      f"group_world={env['GROUP_WORLD_SIZE']} restart={restart} "
      f"max_restarts={env.get('TORCHELASTIC_MAX_RESTARTS')} "
      f"run_id={env.get('TORCHELASTIC_RUN_ID')} "
      f"master={env.get('MASTER_ADDR')}:{env.get('MASTER_PORT')} pid={os.getpid()}", flush=True)

if args.fail_local_rank == local_rank and (
        args.fail_restarts == "all"
        or str(restart) in args.fail_restarts.split(",")):
    print(f"rank {env['RANK']} failing on purpose with exit code {args.code} "
          f"(restart {restart})", file=sys.stderr, flush=True)
    sys.exit(args.code)

if args.then == "wait":
    while True:
        signal.pause()
elif args.then == "gate":
    fd = os.open(args.gate, os.O_RDONLY | os.O_NONBLOCK)
    while True:
        try:
            if not os.read(fd, 64):
                break  # EOF: no writer left, the gate is open
        except BlockingIOError:
            select.select([fd], [], [])  # wakes when the test closes its end
    print(f"rank {env['RANK']} passed the gate", flush=True)
sys.exit(0)
