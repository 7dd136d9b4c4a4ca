"""A worker for the stock-node tests (test_iface.py): says what its own hostname resolves to
and which socket interfaces drun gave it, in one line

    IFACE rank=R host=H resolved=A GLOO_SOCKET_IFNAME=V NCCL_SOCKET_IFNAME=V

(an unset variable prints as <unset>), then, with --train, runs the multi-node suite's gloo
program (tests/multinode/programs/train_allreduce.py: all_reduce, all_gather, a few DDP steps)
in this process. Without --train it needs no PyTorch and ends at once.
"""
import os
import runpy
import socket
import sys

TRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "multinode",
                     "programs", "train_allreduce.py")

env = os.environ
host = socket.gethostname()
print(f"IFACE rank={env['RANK']} host={host} resolved={socket.gethostbyname(host)} " +
      " ".join(f"{v}={env.get(v, '<unset>')}" for v in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")),
      flush=True)
if sys.argv[1:] == ["--train"]:
    sys.argv = [TRAIN]
    runpy.run_path(TRAIN, run_name="__main__")
