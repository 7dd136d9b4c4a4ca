"""Rank FAIL_RANK dies of SIGSEGV (no core file); the other ranks wait to be stopped.
    segfault.py FAIL_RANK"""
import ctypes
import os
import resource
import sys

from wait_forever import wait_forever

fail_rank = int(sys.argv[1])
rank = int(os.environ["RANK"])
print(f"rank {rank} pid {os.getpid()}")
if rank == fail_rank:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    print(f"rank {rank} about to dereference NULL", file=sys.stderr)
    ctypes.string_at(0)  # a real invalid read: the kernel sends SIGSEGV
    sys.exit("unreachable: still alive after reading address 0")
wait_forever()
