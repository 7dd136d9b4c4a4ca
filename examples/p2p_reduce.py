"""reduce written with send/recv only (the student's exercise 4b, seed 000).

Every rank but 0 sends its rank to rank 0, which adds them up. With 4 workers rank 0
prints "Rank 0: Sum of all messages is 6".
"""
import os

import torch
import torch.distributed as dist

WORLD_SIZE = int(os.environ["WORLD_SIZE"])
RANK = int(os.environ["RANK"])
dist.init_process_group("gloo", rank=RANK, world_size=WORLD_SIZE)

print(f"Rank {RANK}: Sending {RANK}")
if RANK == 0:
    s = torch.tensor(RANK)  # rank 0's own contribution
    message = torch.tensor(0)
    for source in range(1, WORLD_SIZE):
        dist.recv(message, source)
        s += message
    print(f"Rank {RANK}: Sum of all messages is {s.item()}")
else:
    dist.send(torch.tensor(RANK), 0)

dist.destroy_process_group()
