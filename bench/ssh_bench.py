#!/usr/bin/env python3
"""Benchmark of the ssh launcher on the tests/ssh testbed (hosts in network namespaces, each
with its own sshd; needs root). Measures:

  start     from the command to every worker running on 4 hosts (the 4th worker's line
            arrives at the launcher's console), and the part spent in pre-flight (until the
            launcher's "starting agents" line);
  takeover  from losing a host (kill -9 of its agent, or cutting its link) to the job
            running again on a spare (every worker of the new round has printed).

    DRUN=build/launcher/drun PYTHON_EXEC=/usr/bin/python3 bench/ssh_bench.py [--runs N]

Prints a Markdown table (docs/benchmarks_ssh.md records one).
"""
import argparse
import os
import signal
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ssh"))
import ssh_testlib as t  # noqa: E402

WORKER = os.path.join(t.PROGRAMS, "worker.py")
HOSTS = ["red01", "orange07", "purple11", "green02", "blue03"]


def start_once(bed, nproc):
    gate = t.Gate(bed.tmp, name=f"g{time.monotonic_ns()}")
    t0 = time.monotonic()
    proc, lines = bed.drun_run(["-H", ",".join(HOSTS[:4]), "--nproc-per-node", str(nproc),
                                WORKER, "--then", "gate", "--gate", gate.path])
    lines.wait_for(r"^drun: starting agents", stream="stderr")
    t_pre = time.monotonic() - t0
    lines.wait_for(r"worker host=", count=4 * nproc)
    t_all = time.monotonic() - t0
    gate.open()
    code = proc.wait(timeout=60)
    lines.join()
    assert code == 0, lines.describe()
    return t_pre, t_all


def takeover_once(bed, how):
    gate = t.Gate(bed.tmp, name=f"g{time.monotonic_ns()}")
    proc, lines = bed.drun_run(["-H", ",".join(HOSTS), "--nnodes", "4", WORKER, "--then",
                                "gate", "--gate", gate.path])
    lines.wait_for(r"worker host=", count=4)
    running = {r["host"] for r in t.records(lines.lines())}
    victim = sorted(running)[0]
    t0 = time.monotonic()
    if how == "kill":
        for pid in bed.agent_pids(victim):
            os.kill(pid, signal.SIGKILL)
    else:
        bed.cut(victim)
    lines.wait_for(r"worker host=", count=8)
    dt = time.monotonic() - t0
    gate.open()
    code = proc.wait(timeout=90)
    lines.join()
    if how == "cut":
        t.run("ip", "-n", bed.host_ns[victim], "link", "set", "eth0", "up")
    assert code == 0, lines.describe()
    left = bed.wait_back_to_baseline(timeout=30)
    assert not left, left
    return dt


def fmt(xs):
    return (f"{statistics.median(xs) * 1000:.0f} ms (min {min(xs) * 1000:.0f}, "
            f"max {max(xs) * 1000:.0f})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    reason = t.unavailable_reason()
    if reason:
        sys.exit(f"ssh_bench: {reason}")
    t.drun_path()
    t.become_subreaper()
    rows = []
    with t.Testbed(HOSTS, tag="bench") as bed:
        start_once(bed, 1)  # warm the page cache
        for nproc in (1, 2):
            res = [start_once(bed, nproc) for _ in range(args.runs)]
            rows.append((f"command -> all {4 * nproc} workers running (4 hosts x {nproc})",
                         fmt([r[1] for r in res])))
            rows.append((f"  of which pre-flight (4 hosts in parallel)", fmt([r[0] for r in res])))
        rows.append(("lost host (agent kill -9) -> running again on the spare",
                     fmt([takeover_once(bed, "kill") for _ in range(args.runs)])))
        rows.append(("lost host (link cut) -> running again on the spare",
                     fmt([takeover_once(bed, "cut") for _ in range(max(2, args.runs // 2))])))
    print("| measurement | median (min, max) |")
    print("| --- | --- |")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
