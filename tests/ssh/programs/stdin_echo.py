"""A worker for the stdin tests (no PyTorch):

    stdin_echo.py echo      each line read on stdin: "echo rank=R line=L"; at its end:
                            "eof rank=R lines=N"
    stdin_echo.py ticks N   rank 0: N progress redraws "\\rtick I t=T" (T: time.time() when
                            written, no newline), each after a line on its stdin (the first
                            at once); then "\\n" and "ticks done". The other ranks print 200
                            whole lines "noise rank=R i=I" meanwhile, to cross its open line.
"""
import os
import sys
import time

rank = int(os.environ["RANK"])
mode = sys.argv[1]

if mode == "echo":
    n = 0
    for line in sys.stdin:
        n += 1
        print(f"echo rank={rank} line={line.rstrip()}", flush=True)
    print(f"eof rank={rank} lines={n}", flush=True)
elif mode == "ticks":
    if rank == 0:
        for i in range(int(sys.argv[2])):
            if i > 0 and not sys.stdin.readline():
                break
            sys.stdout.write(f"\rtick {i} t={time.time():.6f}")
            sys.stdout.flush()
        sys.stdout.write("\n")
        print("ticks done", flush=True)
    else:
        for i in range(200):
            print(f"noise rank={rank} i={i}", flush=True)
