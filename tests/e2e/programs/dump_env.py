"""Writes this worker's environment, and whether stdout is unbuffered, to OUTDIR/env_<RANK>.json."""
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
}
path = os.path.join(outdir, f"env_{os.environ.get('RANK', 'unset')}.json")
with open(path + ".tmp", "w") as f:
    json.dump(record, f)
os.rename(path + ".tmp", path)
print(f"wrote {path}")
