"""Each worker forks a grandchild that stays in its process group and blocks forever,
writes PIDDIR/worker_<rank>.pid and PIDDIR/grandchild_<rank>.pid, prints "ready", then
either exits 0 (MODE=exit) or waits to be stopped (MODE=wait).
    fork_grandchild.py PIDDIR MODE"""
import os
import sys

from wait_forever import wait_forever

piddir, mode = sys.argv[1], sys.argv[2]
rank = int(os.environ["RANK"])


def write_pid(name, pid):
    path = os.path.join(piddir, name)
    with open(path + ".tmp", "w") as f:
        f.write(str(pid))
    os.rename(path + ".tmp", path)


child = os.fork()
if child == 0:
    # The grandchild keeps the worker's stdout/stderr and process group, like a data
    # loader process would.
    wait_forever()
write_pid(f"grandchild_{rank}.pid", child)
write_pid(f"worker_{rank}.pid", os.getpid())
print(f"ready rank {rank} worker {os.getpid()} grandchild {child}")
if mode == "exit":
    sys.exit(0)
wait_forever()
