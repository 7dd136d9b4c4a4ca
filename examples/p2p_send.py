"""Point-to-point: rank 0 sends the number 42 to rank 1 (course notebook, example 1).

Run with at least two workers, e.g.:
    drun --standalone --nproc-per-node 4 examples/p2p_send.py
Ranks other than 0 and 1 join the process group and do nothing.
"""
import os

import torch
import torch.distributed as dist

WORLD_SIZE = int(os.environ["WORLD_SIZE"])
RANK = int(os.environ["RANK"])
# env:// reads MASTER_ADDR/MASTER_PORT (and works whichever of drun or rank 0 hosts the store).
dist.init_process_group("gloo", rank=RANK, world_size=WORLD_SIZE)

if WORLD_SIZE < 2:
    raise SystemExit("p2p_send.py needs at least 2 workers")

if RANK == 0:
    print("Rank 0: Sending 42 to rank 1")
    dist.send(torch.tensor(42.0), 1)
elif RANK == 1:
    message = torch.zeros(1)
    dist.recv(message, 0)
    print(f"Rank 1: Received {message.item()} from rank 0")

# torch 2.x returns from init_process_group before every peer has finished connecting
# (1.13 waited in a store-based barrier); a rank with nothing to do that exits at once can
# then break a slower peer's connections ("Gloo connectFullMesh failed ... Connection
# closed by peer", seen with torch 2.6 on a loaded machine). Wait for everyone first.
dist.barrier()
dist.destroy_process_group()
