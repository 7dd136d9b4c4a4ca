"""Records which signals reach this worker. Once its handlers are in place it prints
"ready <RANK> <pid>"; a SIGUSR1, SIGUSR2, SIGTERM, SIGINT or SIGHUP then makes it write
OUTDIR/got_<SIGNAME>_<RANK> and exit 0."""
import os
import signal
import sys

outdir = sys.argv[1]
rank = os.environ["RANK"]


def on_signal(sig, _frame):
    with open(os.path.join(outdir, f"got_{signal.Signals(sig).name}_{rank}"), "w") as f:
        f.write(str(os.getpid()))
    sys.exit(0)


for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, on_signal)
print(f"ready {rank} {os.getpid()}", flush=True)
while True:
    signal.pause()
