"""Worker for bench/io_bench.py's latency measure: writes COUNT partial lines
("p<i>" without newline, finished 150 ms later) and COUNT full lines ("f<i>\n"),
recording time.monotonic_ns() just before each write in $PROBE_OUT."""
import os
import sys
import time

count = int(sys.argv[1])
stamps = []
out = sys.stdout.buffer
for kind in ("p", "f"):
    for i in range(count):
        token = f"{kind}{i:05d}".encode()
        t = time.monotonic_ns()
        out.write(token if kind == "p" else token + b"\n")
        out.flush()
        stamps.append(f"{kind}{i:05d} {t}")
        time.sleep(0.15 if kind == "p" else 0.01)
        if kind == "p":
            out.write(b"\n")
            out.flush()
with open(os.environ["PROBE_OUT"], "w") as f:
    f.write("\n".join(stamps) + "\n")
