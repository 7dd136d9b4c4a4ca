"""Writes LINES long lines of LENGTH characters to stdout (and a few to stderr), each in
many small write(2)s, so that the ranks' writes interleave at the byte level.
Line i of rank r: "r<r>l<i>:" followed by the digit r repeated.
    chunked_lines.py LINES LENGTH CHUNK"""
import os
import sys

lines, length, chunk = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rank = int(os.environ["RANK"])
for i in range(lines):
    head = f"r{rank}l{i}:"
    data = (head + str(rank % 10) * (length - len(head)) + "\n").encode()
    fd = 2 if i % 10 == 9 else 1
    for start in range(0, len(data), chunk):
        os.write(fd, data[start:start + chunk])
