"""Appends "start RANK ATTEMPT" to argv[1]; then the rank named by argv[3] waits until the
FIFO argv[2] is opened and closed by the test, and every other rank exits 0 at once."""
import os
import sys

starts, gate, waiter = sys.argv[1], sys.argv[2], int(sys.argv[3])
rank = int(os.environ["RANK"])
with open(starts, "a") as f:
    f.write(f"start {rank} {os.environ['TORCHELASTIC_RESTART_COUNT']}\n")
if rank == waiter:
    with open(gate) as g:  # blocks until the test opens the FIFO for writing
        g.read()           # and returns at its end
print(f"rank {rank} done", flush=True)
