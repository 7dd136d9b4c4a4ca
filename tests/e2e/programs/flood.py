"""Writes MEGABYTES MB to stdout in 100-byte lines, then "flood done" on its own line."""
import os
import sys

megabytes = int(sys.argv[1])
block = (b"x" * 99 + b"\n") * 10486  # ~1 MiB, whole lines
for _ in range(megabytes):
    view = memoryview(block)
    while view:
        view = view[os.write(1, view):]
os.write(1, b"flood done\n")
