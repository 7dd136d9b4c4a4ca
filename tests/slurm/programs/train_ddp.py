"""A small real DDP training over gloo, for the Slurm tests.

Each worker checks the environment drun gave it, trains a two-layer model on synthetic data
(its own shard, seeded by RANK) for --steps steps, and checks that every rank ended with the
same parameters (DDP averaged the gradients). It prints one line

    WORKER rank=R world=W local_rank=L local_world=LW group_rank=G group_world=GW host=H
           master=ADDR:PORT agent_store=True pid=P ppid=PP

and rank 0 finally prints "TRAINING OK world=W steps=N loss=X checksum=C".

--gate HOST:PORT: after training, each worker connects to the test's gate, sends its facts
(with its SLURM_* variables) as one JSON line and blocks, without using CPU, until the gate
sends a byte (then it finishes) or closes (then it exits 4). A test thereby knows when every
worker is up, can hold them there (to kill or cancel something mid-run) and release them.
While at the gate, each SIGUSR1 makes the worker send the line "SIGUSR1 <rank>" to the gate.
--fail-rank R makes rank R exit 3 before it joins the process group (a failure for the
root-cause summary; the others wait in init_process_group, so theirs cannot race it).
"""
import argparse
import json
import os
import signal
import socket
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--gate", default="")
    ap.add_argument("--fail-rank", type=int, default=-1)
    args = ap.parse_args()

    env = os.environ
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    facts = {
        "rank": rank, "world": world,
        "local_rank": int(env["LOCAL_RANK"]), "local_world": int(env["LOCAL_WORLD_SIZE"]),
        "group_rank": int(env["GROUP_RANK"]), "group_world": int(env["GROUP_WORLD_SIZE"]),
        "host": socket.gethostname(),
        "master": f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}",
        "agent_store": env.get("TORCHELASTIC_USE_AGENT_STORE"),
        "restart_count": env.get("TORCHELASTIC_RESTART_COUNT"),
        "run_id": env.get("TORCHELASTIC_RUN_ID"),
        "omp": env.get("OMP_NUM_THREADS"),
        "pid": os.getpid(), "ppid": os.getppid(),
    }
    print("WORKER " + " ".join(f"{k}={facts[k]}" for k in (
        "rank", "world", "local_rank", "local_world", "group_rank", "group_world", "host",
        "master", "agent_store", "pid", "ppid")), flush=True)

    torch.set_num_threads(1)
    if rank == args.fail_rank:
        print(f"rank {rank}: failing on purpose", file=sys.stderr, flush=True)
        sys.exit(3)
    dist.init_process_group("gloo")  # env://: MASTER_ADDR/PORT, RANK, WORLD_SIZE
    torch.manual_seed(0)  # the same initial model everywhere (DDP broadcasts it anyway)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1000 + rank)  # each rank its own data
    w_true = torch.randn(16, 4, generator=torch.Generator().manual_seed(7))
    loss = torch.tensor(0.0)
    for _ in range(args.steps):
        x = torch.randn(32, 16, generator=gen)
        y = x @ w_true
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    # Every rank must hold the same parameters: compare checksums across the world.
    checksum = torch.tensor([sum(p.double().sum().item() for p in model.parameters())],
                            dtype=torch.float64)
    sums = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(sums, checksum)
    if any(abs(s.item() - checksum.item()) > 1e-9 for s in sums):
        print(f"rank {rank}: parameters differ across ranks: {[s.item() for s in sums]}",
              file=sys.stderr, flush=True)
        sys.exit(2)
    total = torch.tensor([float(rank)])
    dist.all_reduce(total)
    assert total.item() == world * (world - 1) / 2, total

    facts["slurm"] = {k: v for k, v in env.items() if k.startswith("SLURM_")}
    facts["checksum"] = checksum.item()
    if args.gate:
        host, port = args.gate.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as s:
            s.settimeout(None)
            s.sendall((json.dumps(facts) + "\n").encode())

            def on_usr1(*_):
                # Under srun a signal may come twice: from slurmstepd, which signals every
                # process of the step, and from the worker's drun agent, which forwards it.
                try:
                    s.sendall(f"SIGUSR1 {rank}\n".encode())
                except OSError:
                    pass  # after the gate closed

            signal.signal(signal.SIGUSR1, on_usr1)
            if not s.recv(1):
                print(f"rank {rank}: the test's gate closed", file=sys.stderr, flush=True)
                sys.exit(4)

    dist.barrier()
    if rank == 0:
        print(f"TRAINING OK world={world} steps={args.steps} loss={loss.item():.4f} "
              f"checksum={checksum.item():.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
