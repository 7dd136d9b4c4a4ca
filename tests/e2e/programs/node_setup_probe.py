"""Records what the node setup left: OUTDIR/probe_<rank>.json with the lines of
SETUP_LOG and whether DATA_DIR holds the unpacked dataset.
    node_setup_probe.py OUTDIR SETUP_LOG [DATA_DIR]"""
import json
import os
import sys

outdir, setup_log = sys.argv[1], sys.argv[2]
data_dir = sys.argv[3] if len(sys.argv) > 3 else None
rank = int(os.environ["RANK"])
record = {"rank": rank, "setup_log": None, "dataset_files": None}
if os.path.exists(setup_log):
    with open(setup_log) as f:
        record["setup_log"] = f.read().splitlines()
if data_dir:
    raw = os.path.join(data_dir, "FashionMNIST", "raw")
    record["dataset_files"] = sorted(os.listdir(raw)) if os.path.isdir(raw) else None
path = os.path.join(outdir, f"probe_{rank}.json")
with open(path, "w") as f:
    json.dump(record, f)
print(f"rank {rank} probed")
