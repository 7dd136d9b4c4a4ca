"""Library reduce: every rank sends its rank number, rank 0 prints the sum (notebook example 2).

With 4 workers rank 0 prints "Rank 0: Sum of all messages is 6".
"""
import os

import torch
import torch.distributed as dist

WORLD_SIZE = int(os.environ["WORLD_SIZE"])
RANK = int(os.environ["RANK"])
dist.init_process_group("gloo", rank=RANK, world_size=WORLD_SIZE)

message = torch.tensor(RANK)
print(f"Rank {RANK}: Sending {message.item()}")
dist.reduce(message, 0, dist.ReduceOp.SUM)

if RANK == 0:
    print(f"Rank 0: Sum of all messages is {message.item()}")

dist.destroy_process_group()
