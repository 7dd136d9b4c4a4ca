"""Attempt 0 (TORCHELASTIC_RESTART_COUNT=0): rank 1 fails with exit code 1 and the other
ranks wait to be stopped. Later attempts: every rank succeeds."""
import os
import sys

from wait_forever import wait_forever

rank = int(os.environ["RANK"])
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
max_restarts = os.environ["TORCHELASTIC_MAX_RESTARTS"]
print(f"attempt {attempt} of max_restarts {max_restarts}: rank {rank} started")
if attempt == 0:
    if rank == 1:
        print(f"attempt {attempt}: rank {rank} failing", file=sys.stderr)
        sys.exit(1)
    wait_forever()
print(f"attempt {attempt}: rank {rank} succeeded")
