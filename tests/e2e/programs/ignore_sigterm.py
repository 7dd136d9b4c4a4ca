"""Rank 0 ignores SIGTERM and waits forever; rank 1 fails with exit code 3 once rank 0 is
ignoring SIGTERM. Ordered by a FIFO (no sleeping): rank 0 opens it for writing after
installing SIG_IGN, rank 1's open for reading returns only then.
    ignore_sigterm.py PIDDIR FIFO"""
import os
import signal
import sys

from wait_forever import wait_forever

piddir, fifo = sys.argv[1], sys.argv[2]
rank = int(os.environ["RANK"])
with open(os.path.join(piddir, f"worker_{rank}.pid"), "w") as f:
    f.write(str(os.getpid()))
if rank == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    fd = os.open(fifo, os.O_WRONLY)  # blocks until rank 1 opens for reading
    print("rank 0 ignores SIGTERM", flush=True)
    wait_forever()
elif rank == 1:
    fd = os.open(fifo, os.O_RDONLY)  # blocks until rank 0 opened it, SIGTERM ignored
    print("rank 1 failing with exit code 3", file=sys.stderr)
    sys.exit(3)
else:
    wait_forever()
