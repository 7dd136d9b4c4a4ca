"""Rank FAIL_RANK writes a line to stderr and exits with CODE; the other ranks wait to be
stopped. Every rank first prints its pid.    exit_code.py FAIL_RANK CODE"""
import os
import sys

from wait_forever import wait_forever

fail_rank, code = int(sys.argv[1]), int(sys.argv[2])
rank = int(os.environ["RANK"])
print(f"rank {rank} pid {os.getpid()}")
if rank == fail_rank:
    print(f"rank {rank} failing on purpose with exit code {code}", file=sys.stderr)
    sys.exit(code)
wait_forever()
