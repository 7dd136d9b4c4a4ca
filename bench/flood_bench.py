#!/usr/bin/env python3
"""A non-member flooding a job's port (issue #14), measured: two drun agents in network
namespaces (tests/multinode's NetnsLab; needs root) run 4 gloo ranks that all_reduce a
256 KiB tensor and round-trip the store every step (bench/programs/reduce_loop.py), on one
port for the rendezvous and the store (--master-port = the endpoint's port). A third
namespace, not in the job, runs bench/programs/conn_flood.c against that port: 10 000
connections/s closed at once plus 1 000/s left silent. Runs with and without the flood
alternate; the table gives the medians of the loop's wall time and the flooder's counts.

    DRUN=build/launcher/drun PYTHON_EXEC=/usr/bin/python3 bench/flood_bench.py [--runs N]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "multinode"))
import mn_testlib as t  # noqa: E402

SUBNET = "10.213.36"
PORT = 29400
STEPS = 300


def job(lab, flood_bin, floods):
    args = ["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"{lab.addr(0)}:{PORT}", "--master-port", str(PORT),
            "--rdzv-conf", "last_call_timeout=1",
            os.path.join(HERE, "programs", "reduce_loop.py"), str(STEPS)]
    agents = [t.DrunProcess(args[:2] + ["--local-addr", lab.addr(i)] + args[2:],
                            wrapper=lab.wrapper(i), name=f"ns{i}") for i in range(2)]
    flooders = [subprocess.Popen(lab.wrapper(2) + [flood_bin, lab.addr(0), str(PORT)] + list(f),
                                 stdout=subprocess.PIPE, text=True) for f in floods]
    for a in agents:
        assert a.wait() == 0, a.describe()
    stats = [f.communicate(timeout=120)[0].split() for f in flooders]
    line = [l for a in agents for l in a.stdout_lines if "reduce world=4" in l]
    assert len(line) == 1, agents[0].describe()
    return float(re.search(r"seconds=([\d.]+)", line[0]).group(1)), stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args().runs
    reason = t.netns_unavailable_reason()
    if reason:
        sys.exit(f"flood_bench: {reason}")
    t.drun_path()
    t.become_subreaper()
    work = tempfile.mkdtemp(prefix="drun-flood-bench-")
    flood_bin = os.path.join(work, "conn_flood")
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-o", flood_bin,
                    os.path.join(HERE, "programs", "conn_flood.c")], check=True)
    lab = t.NetnsLab(SUBNET, 3)
    quiet, flooded, counts = [], [], []
    try:
        lab.setup()
        job(lab, flood_bin, ())  # warm the page cache
        for _ in range(runs):
            quiet.append(job(lab, flood_bin, ())[0])
            secs, stats = job(lab, flood_bin, [("10000", "6", "close"), ("1000", "6", "silent")])
            flooded.append(secs)
            counts.append(stats)
    finally:
        t.kill_and_reap_descendants()
        lab.teardown()
    q, f = statistics.median(quiet), statistics.median(flooded)
    print("| measurement | median (min, max) |")
    print("| --- | --- |")
    print(f"| {STEPS} steps, 4 ranks, no flood | {q:.2f} s ({min(quiet):.2f}, {max(quiet):.2f}) |")
    print(f"| the same, flooded | {f:.2f} s ({min(flooded):.2f}, {max(flooded):.2f}) |")
    print(f"| flooded / no flood | {f / q:.2f} |")
    for stats in counts:
        print(f"| flooder (close; silent) | {' '.join(stats[0])}; {' '.join(stats[1])} |")


if __name__ == "__main__":
    main()
