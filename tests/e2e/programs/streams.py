"""Prints "out <rank> <i>" to stdout and "err <rank> <i>" to stderr, N times each, and a
last stdout line without a newline.    streams.py [N]"""
import os
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
rank = int(os.environ["RANK"])
for i in range(n):
    print(f"out {rank} {i}")
    print(f"err {rank} {i}", file=sys.stderr)
sys.stdout.write(f"last {rank} without newline")
sys.stdout.flush()
