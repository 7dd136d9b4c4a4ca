"""A worker that saves a checkpoint when it is told to stop, as training scripts do.

It handles only the signals named by --on (default TERM): any other stop signal (a SIGHUP
where a SIGTERM was meant) ends it at once, without a checkpoint. Once up it says so:

    worker host=H rank=R local_rank=L pid=P ppid=PP

on stdout, and with --gate HOST:PORT also as one JSON line to the test's gate (a TCP
listener; tests/slurm/slurm_testlib.py Gate), which it keeps open. Then it waits for a
signal without using CPU. On the first handled signal it works for --work seconds (the
checkpoint's write), then writes DIR/ckpt-<rank> holding the signal's name, prints

    checkpoint host=H rank=R signal=SIGTERM

and exits 0. A second signal while it works changes nothing.
"""
import argparse
import json
import os
import signal
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--on", default="TERM", help="comma-separated signal names it handles")
    ap.add_argument("--work", type=float, default=3.0)
    ap.add_argument("--gate", default="")
    args = ap.parse_args()

    env = os.environ
    rank, local_rank = int(env["RANK"]), int(env["LOCAL_RANK"])
    host = socket.gethostname()
    got = []

    def on_signal(signum, _frame):
        got.append(signum)

    for name in args.on.split(","):
        signal.signal(getattr(signal, "SIG" + name), on_signal)

    facts = {"rank": rank, "local_rank": local_rank, "host": host, "pid": os.getpid(),
             "ppid": os.getppid()}
    gate = None
    if args.gate:
        addr, port = args.gate.rsplit(":", 1)
        gate = socket.create_connection((addr, int(port)))
        gate.sendall((json.dumps(facts) + "\n").encode())
    print("worker " + " ".join(f"{k}={facts[k]}" for k in ("host", "rank", "local_rank", "pid",
                                                           "ppid")), flush=True)
    while not got:
        signal.pause()
    # The checkpoint takes a while to write; the launcher's grace must cover it.
    time.sleep(args.work)
    name = signal.Signals(got[0]).name
    path = os.path.join(args.dir, f"ckpt-{rank}")
    with open(path + ".tmp", "w") as f:
        f.write(f"{name} {host}\n")
    os.rename(path + ".tmp", path)
    print(f"checkpoint host={host} rank={rank} signal={name}", flush=True)
    if gate:
        gate.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
