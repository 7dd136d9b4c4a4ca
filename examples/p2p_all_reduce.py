"""all_reduce written with send/recv only (the student's exercise 4c, seed 000).

Rank 0 gathers the ranks, adds them up and sends the sum back to everyone; every rank
prints "Rank <r>: Sum of all messages is 6" with 4 workers.
"""
import os

import torch
import torch.distributed as dist

WORLD_SIZE = int(os.environ["WORLD_SIZE"])
RANK = int(os.environ["RANK"])
dist.init_process_group("gloo", rank=RANK, world_size=WORLD_SIZE)

print(f"Rank {RANK}: Sending {RANK}")
if RANK == 0:
    s = torch.tensor(RANK)
    message = torch.tensor(0)
    for source in range(1, WORLD_SIZE):
        dist.recv(message, source)
        s += message
    for dest in range(1, WORLD_SIZE):
        dist.send(s, dest)
else:
    dist.send(torch.tensor(RANK), 0)
    s = torch.tensor(0)
    dist.recv(s, 0)
print(f"Rank {RANK}: Sum of all messages is {s.item()}")

dist.destroy_process_group()
