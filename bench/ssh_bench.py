#!/usr/bin/env python3
"""Benchmark of the ssh launcher on the tests/ssh testbed (hosts in network namespaces, each
with its own sshd; needs root). Measures:

  versus    drun --hostfile beside Open MPI's mpirun --hostfile (Debian's openmpi-bin; the
            benchmark installs it with apt-get when missing, it is never drun's dependency),
            interleaved in the same run, on 3 and on 8 hosts x 2 processes: command -> every
            process running (each prints its start time, `date +%s%N`), command -> exit for
            /bin/true, and a host that is down before the start: drun's line naming it, and
            each tool's exit;

  start     from the command to every worker running on 4 hosts (the 4th worker's line
            arrives at the launcher's console);
  takeover  from losing a host (kill -9 of its agent, or cutting its link) to the job
            running again on a spare (every worker of the new round has printed).

    DRUN=build/launcher/drun PYTHON_EXEC=/usr/bin/python3 bench/ssh_bench.py [--runs N]
        [--part versus|start|takeover|all]

Prints a Markdown table (docs/benchmarks_ssh.md records one).
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
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
    lines.wait_for(r"worker host=", count=4 * nproc)
    t_all = time.monotonic() - t0
    gate.open()
    code = proc.wait(timeout=60)
    lines.join()
    assert code == 0, lines.describe()
    return t_all


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


def timed(bed, argv, timeout=180):
    """Runs argv in the client namespace; (seconds to exit, wall time at start, exit code,
    stdout + stderr)."""
    wall, t0 = time.time(), time.monotonic()
    p = subprocess.run(bed.client_cmd(argv), env=bed.env(), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return time.monotonic() - t0, wall, p.returncode, p.stdout


def mpirun_argv(bed, hosts, nproc, program):
    hostfile = bed.write_hostfile("".join(f"{h} slots={nproc}\n" for h in hosts), "mpi_hosts")
    # Flat launch (no tree spawn: the hosts hold no key for each other), the test subnet only.
    return ["mpirun", "--allow-run-as-root", "--hostfile", hostfile, "-np", str(len(hosts) * nproc),
            "--mca", "plm_rsh_no_tree_spawn", "1", "--mca", "oob_tcp_if_include", t.SUBNET] + program


def drun_argv(bed, hosts, nproc, program):
    return [bed.drun, "-H", ",".join(hosts), "--nproc-per-node", str(nproc), "--no-python"] + program


STAMP = ["sh", "-c", "date +%s%N"]


def all_running(bed, make, hosts, nproc):
    """Seconds from the command to the last process's own start time."""
    _, wall, code, out = timed(bed, make(bed, hosts, nproc, STAMP))
    last = [line.split()[-1] for line in out.splitlines() if line.split()]
    stamps = [int(w) / 1e9 for w in last if w.isdigit() and len(w) >= 18]  # date +%s%N
    assert code == 0 and len(stamps) == len(hosts) * nproc, out
    return max(stamps) - wall


def to_exit(bed, make, hosts, nproc):
    dt, _, code, out = timed(bed, make(bed, hosts, nproc, ["/bin/true"]))
    assert code == 0, out
    return dt


def down_host(bed, hosts):
    """drun with a host that is down: (seconds to the line naming it, to exit)."""
    t0 = time.monotonic()
    proc, lines = bed.drun_run(drun_argv(bed, hosts + [t.GHOST[0]], 1, ["/bin/true"])[1:])
    lines.wait_for(rf"^drun: {t.GHOST[0]}: cannot connect", stream="stderr")
    named = time.monotonic() - t0
    code = proc.wait(timeout=60)
    lines.join()
    assert code == 1, lines.describe()
    return named, time.monotonic() - t0


def ensure_mpirun():
    if shutil.which("mpirun"):
        return
    subprocess.run(["apt-get", "install", "-y", "openmpi-bin"], check=True,
                   stdout=subprocess.DEVNULL)


def versus(runs, rows):
    ensure_mpirun()
    for plain in (False, True):
        versus_homes(runs, rows, plain)


def versus_homes(runs, rows, plain):
    """plain: the hosts' root has an empty home, so the remote shell sources no ~/.bashrc
    (on this machine root's runs `pyenv init`, ~130 ms per shell, taken in turn by hosts
    that share one ~/.pyenv)."""
    shell = "empty ~" if plain else "~/.bashrc"
    for n in (3, 8):
        hosts = [f"h{i:02d}" for i in range(n)]
        with t.Testbed(hosts, tag=f"vs{n}", plain_home=plain) as bed:
            for make in (drun_argv, mpirun_argv):  # warm the page cache
                to_exit(bed, make, hosts, 2)
            res = {k: [] for k in ("dr", "mr", "de", "me")}
            for i in range(runs):
                order = [(drun_argv, "d"), (mpirun_argv, "m")][::1 if i % 2 == 0 else -1]
                for make, k in order:
                    res[k + "r"].append(all_running(bed, make, hosts, 2))
                for make, k in order:
                    res[k + "e"].append(to_exit(bed, make, hosts, 2))
            for what, k in (("every process running", "r"), ("exit, /bin/true", "e")):
                d, m = statistics.median(res["d" + k]), statistics.median(res["m" + k])
                label = f"{n} hosts x 2, {shell}: command -> {what}"
                rows.append((f"{label}: drun", fmt(res["d" + k])))
                rows.append((f"{label}: mpirun", fmt(res["m" + k])))
                rows.append((f"{label}: drun / mpirun", f"{d / m:.2f}"))
            if n == 3 and not plain:
                down = [down_host(bed, hosts) for _ in range(max(1, runs // 2))]
                rows.append(("3 hosts + 1 down: command -> drun names it", fmt([d[0] for d in down])))
                rows.append(("3 hosts + 1 down: command -> drun exits (1)", fmt([d[1] for d in down])))
                dt, _, code, _ = timed(bed, mpirun_argv(bed, hosts + [t.GHOST[0]], 1, ["/bin/true"]))
                rows.append((f"3 hosts + 1 down: command -> mpirun exits ({code}), one run",
                             f"{dt * 1000:.0f} ms"))


def fmt(xs):
    return (f"{statistics.median(xs) * 1000:.0f} ms (min {min(xs) * 1000:.0f}, "
            f"max {max(xs) * 1000:.0f})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--part", choices=["versus", "start", "takeover", "all"], default="all")
    args = ap.parse_args()
    reason = t.unavailable_reason()
    if reason:
        sys.exit(f"ssh_bench: {reason}")
    t.drun_path()
    t.become_subreaper()
    rows = []
    if args.part in ("versus", "all"):
        versus(args.runs, rows)
    if args.part in ("start", "takeover", "all"):
        with t.Testbed(HOSTS, tag="bench") as bed:
            start_and_takeover(bed, args, rows)
    print("| measurement | median (min, max) |")
    print("| --- | --- |")
    for name, value in rows:
        print(f"| {name} | {value} |")


def start_and_takeover(bed, args, rows):
    if args.part in ("start", "all"):
        start_once(bed, 1)  # warm the page cache
        for nproc in (1, 2):
            res = [start_once(bed, nproc) for _ in range(args.runs)]
            rows.append((f"command -> all {4 * nproc} workers running (4 hosts x {nproc})", fmt(res)))
    if args.part in ("takeover", "all"):
        rows.append(("lost host (agent kill -9) -> running again on the spare",
                     fmt([takeover_once(bed, "kill") for _ in range(args.runs)])))
        rows.append(("lost host (link cut) -> running again on the spare",
                     fmt([takeover_once(bed, "cut") for _ in range(max(2, args.runs // 2))])))


if __name__ == "__main__":
    main()
