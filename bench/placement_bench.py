#!/usr/bin/python3
"""CPU placement: drun --numa-binding against torchrun's default OMP_NUM_THREADS=1.

    /usr/bin/python3 bench/placement_bench.py --drun build/launcher/drun [--nprocs 2,4]
        [--reps 5] [--epochs 1] [--limit N] [--torchrun] [--markdown out.md] [--json out.json]

A benchmark, not a test. It trains the seeds' DDP model (examples/mnist_ddp.py, Fashion-MNIST,
CPU, gloo) with N workers on one node (--standalone) under each placement, the runs of the
placements interleaved so background load hits them alike, and prints per N the median (with
min-max and the repetition count) of the training time rank 0 reports ("Learning took X s":
the epochs, without interpreter start, imports and evaluation) and of the launcher's wall time,
and the ratio default / placed (above 1: placement is faster).

Placements:
  default     drun without --numa-binding: every worker inherits drun's CPUs and gets
              OMP_NUM_THREADS=1, torchrun's rule for more than one worker
  placed      drun --numa-binding exclusive: each worker its own disjoint share of whole cores
              (SMT siblings together, NUMA nodes respected) and OMP_NUM_THREADS = its cores
  torchrun    (--torchrun) Debian's torchrun 1.13 itself, OMP_NUM_THREADS=1, as a cross-check
              of "default"

The workers' environment must not set OMP_NUM_THREADS (it is removed here): a user's value
wins over both rules. Also prints the machine (CPU model, CPUs this process may use, cores,
NUMA nodes, GPUs) and the load average before and after. Issue 25's GPU-machine script calls
this with --json to record the 16-core figure.
"""
import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINER = os.path.join(REPO, "examples", "mnist_ddp.py")
PYTHON = os.environ.get("PYTHON_EXEC", "/usr/bin/python3")
LEARNING = re.compile(r"Learning took ([0-9.]+)s")


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def machine():
    """What the figures depend on: CPU model, usable CPUs, cores, NUMA nodes, GPUs."""
    model = next((line.split(":", 1)[1].strip() for line in read("/proc/cpuinfo").splitlines()
                  if line.startswith("model name")), platform.processor())
    allowed = sorted(os.sched_getaffinity(0))
    cores = {read(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list") or str(c)
             for c in allowed}
    nodes = [n for n in os.listdir("/sys/devices/system/node") if re.fullmatch(r"node\d+", n)] \
        if os.path.isdir("/sys/devices/system/node") else []
    gpus = 0
    if os.path.isdir("/proc/driver/nvidia/gpus"):
        gpus = len(os.listdir("/proc/driver/nvidia/gpus"))
    return {"host": platform.node(), "cpu_model": model, "usable_cpus": len(allowed),
            "cores": len(cores), "numa_nodes": max(1, len(nodes)), "gpus": gpus,
            "kernel": platform.release()}


def command(placement, args, nproc):
    trainer = [TRAINER, "--epochs", str(args.epochs)]
    if args.limit:
        trainer += ["--limit", str(args.limit)]
    if placement == "torchrun":
        # Debian's torchrun 1.13 under Python 3.11 needs -r/-t (docs/migrating.md).
        return [args.torchrun_path, "--standalone", "--nproc_per_node", str(nproc),
                "-r", "9:1", "-t", "9:1"] + trainer
    flags = ["--numa-binding", "exclusive"] if placement == "placed" else []
    return [args.drun, "--standalone", "--nproc-per-node", str(nproc), "--quiet"] + flags + trainer


def run_once(placement, args, nproc):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "DRUN_"))}
    env.pop("OMP_NUM_THREADS", None)
    env["PYTHON_EXEC"] = PYTHON
    start = time.monotonic()
    p = subprocess.run(command(placement, args, nproc), env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=args.timeout)
    wall = time.monotonic() - start
    m = LEARNING.search(p.stdout)
    if p.returncode != 0 or not m:
        sys.exit(f"placement_bench: {placement} with {nproc} workers failed (exit {p.returncode}):\n"
                 + p.stdout[-3000:])
    return {"train_s": float(m.group(1)), "wall_s": wall}


def stats(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def measure(args, placements):
    results = {}
    for nproc in args.nprocs:
        samples = {p: [] for p in placements}
        for rep in range(args.reps):
            order = placements if rep % 2 == 0 else list(reversed(placements))
            for p in order:
                samples[p].append(run_once(p, args, nproc))
                print(f"  {nproc} workers, {p:8s} rep {rep + 1}/{args.reps}: "
                      f"train {samples[p][-1]['train_s']:.2f}s wall {samples[p][-1]['wall_s']:.2f}s",
                      file=sys.stderr, flush=True)
        results[nproc] = {p: {k: stats([s[k] for s in samples[p]]) for k in ("train_s", "wall_s")}
                          for p in placements}
    return results


def fmt(s):
    return f"{s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f}, n={s['n']})"


def markdown(info, args, placements, results, load):
    lines = [f"Machine: {info['host']}, {info['cpu_model']}, {info['usable_cpus']} usable CPUs, "
             f"{info['cores']} cores, {info['numa_nodes']} NUMA node(s), {info['gpus']} GPU(s), "
             f"Linux {info['kernel']}; load average before/after: {load[0]} / {load[1]}.",
             f"examples/mnist_ddp.py --epochs {args.epochs}" + (f" --limit {args.limit}" if args.limit else "")
             + f", {args.reps} repetitions interleaved; seconds, median (min-max, n).", "",
             "| workers | placement | training (rank 0) | wall | default / placed (training) |",
             "| --- | --- | --- | --- | --- |"]
    for nproc, by in results.items():
        ratio = by["default"]["train_s"]["median"] / by["placed"]["train_s"]["median"]
        for p in placements:
            lines.append(f"| {nproc} | {p} | {fmt(by[p]['train_s'])} | {fmt(by[p]['wall_s'])} | "
                         + (f"{ratio:.2f}" if p == "placed" else "") + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--drun", default=os.path.join(REPO, "build", "launcher", "drun"))
    ap.add_argument("--nprocs", default="2,4", help="worker counts, comma-separated (default 2,4)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0, help="samples per worker (default: its whole shard)")
    ap.add_argument("--torchrun", action="store_true", help="also run Debian's torchrun")
    ap.add_argument("--torchrun-path", default=shutil.which("torchrun") or "/usr/bin/torchrun")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    ap.add_argument("--markdown", help="also write the table to this file")
    ap.add_argument("--json", help="write machine, settings and results as JSON")
    args = ap.parse_args()
    args.nprocs = [int(n) for n in args.nprocs.split(",")]
    placements = ["default", "placed"] + (["torchrun"] if args.torchrun else [])
    info = machine()
    load = [" ".join(read("/proc/loadavg").split()[:3])]
    results = measure(args, placements)
    load.append(" ".join(read("/proc/loadavg").split()[:3]))
    table = markdown(info, args, placements, results, load)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "epochs": args.epochs, "limit": args.limit, "reps": args.reps,
                       "load_average": load, "results": {str(k): v for k, v in results.items()}}, f,
                      indent=2)


if __name__ == "__main__":
    main()
