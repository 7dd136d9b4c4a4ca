"""A worker for the shared log directory test: imports PyTorch, then prints COUNT numbered
lines on stdout and one on stderr, each naming its rank, so the test can find every line in
the log files."""
import os
import sys

import torch

count = int(sys.argv[1])
rank = os.environ["RANK"]
for i in range(count):
    print(f"rank {rank} line {i} sum {int(torch.arange(i + 1).sum())}")
print(f"rank {rank} stderr", file=sys.stderr)
