"""Writes this worker's environment, whether stdout is unbuffered, and its CPU affinity to
OUTDIR/env_<RANK>.json."""
import json
import os
import sys

outdir = sys.argv[1]
record = {
    "env": dict(os.environ),
    # python -u (or PYTHONUNBUFFERED) makes the text layer write through to the fd.
    "stdout_write_through": sys.stdout.write_through,
    "stderr_write_through": sys.stderr.write_through,
    "argv": sys.argv,
    "pid": os.getpid(),
    "affinity": sorted(os.sched_getaffinity(0)),
}
path = os.path.join(outdir, f"env_{os.environ.get('RANK', 'unset')}.json")
with open(path + ".tmp", "w") as f:
    json.dump(record, f)
os.rename(path + ".tmp", path)
print(f"wrote {path}")
