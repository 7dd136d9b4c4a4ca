"""A real torch.distributed job: init_process_group(gloo, env://), one all_reduce, then
writes OUTDIR/allreduce_<RANK>.json with the launcher variables it was given and the
reduced value (the sum of RANK+1 over the world)."""
import datetime
import json
import os
import sys

import torch
import torch.distributed as dist

outdir = sys.argv[1]
dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
record = {k: os.environ.get(k) for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE",
                                          "LOCAL_RANK", "GROUP_RANK", "FOO")}
record["sum"] = value.item()
record["world"] = dist.get_world_size()
dist.barrier()
dist.destroy_process_group()
path = os.path.join(outdir, f"allreduce_{record['RANK']}.json")
with open(path + ".tmp", "w") as f:
    json.dump(record, f)
os.rename(path + ".tmp", path)
print(f"allreduce done rank {record['RANK']} sum {record['sum']}")
