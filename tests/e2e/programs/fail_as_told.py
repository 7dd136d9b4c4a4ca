"""Rank 1 fails at startup in every round, as argv[1] says; the other ranks wait to be
stopped. Every start is appended to argv[2] as "start RANK ATTEMPT".
  same      ValueError('bad config') from the same line every time (a deterministic bug)
  differs   RuntimeError naming the attempt (its output changes from round to round)
  sigkill   killed by SIGKILL (as the OOM killer does)
  exit3     exit code 3 with no output at all"""
import os
import signal
import sys

from wait_forever import wait_forever

mode, starts = sys.argv[1], sys.argv[2]
rank = int(os.environ["RANK"])
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
with open(starts, "a") as f:
    f.write(f"start {rank} {attempt}\n")
if rank != 1:
    wait_forever()
if mode == "same":
    raise ValueError("bad config")
if mode == "differs":
    raise RuntimeError(f"failed in attempt {attempt}")
if mode == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
if mode == "exit3":
    sys.exit(3)
raise SystemExit(f"unknown mode {mode}")
