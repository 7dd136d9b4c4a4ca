"""Each worker forks a grandchild that stays in its process group and blocks forever,
writes PIDDIR/worker_<rank>.pid and PIDDIR/grandchild_<rank>.pid, prints "ready", then
either exits 0 (MODE=exit) or waits to be stopped (MODE=wait). A worker (not the
grandchild) stopped by SIGINT or SIGTERM records it in PIDDIR/signal_<rank> and dies of it.
    fork_grandchild.py PIDDIR MODE"""
import os
import signal
import sys

from wait_forever import wait_forever

piddir, mode = sys.argv[1], sys.argv[2]
rank = int(os.environ["RANK"])


def write_file(name, content):
    path = os.path.join(piddir, name)
    with open(path + ".tmp", "w") as f:
        f.write(str(content))
    os.rename(path + ".tmp", path)


def record_and_die(signum, frame):
    write_file(f"signal_{rank}", signal.Signals(signum).name)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


child = os.fork()
if child == 0:
    # The grandchild keeps the worker's stdout/stderr and process group, like a data
    # loader process would, and Python's default signal handling.
    wait_forever()
signal.signal(signal.SIGINT, record_and_die)  # before "ready": the test signals after it
signal.signal(signal.SIGTERM, record_and_die)
write_file(f"grandchild_{rank}.pid", child)
write_file(f"worker_{rank}.pid", os.getpid())
print(f"ready rank {rank} worker {os.getpid()} grandchild {child}")
if mode == "exit":
    sys.exit(0)
wait_forever()
