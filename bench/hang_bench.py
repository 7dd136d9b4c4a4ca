#!/usr/bin/python3
"""`drun stacks` and `--hang-timeout` on this machine, with real /usr/bin/python3 workers.

    /usr/bin/python3 bench/hang_bench.py --drun build/launcher/drun [--quick] [--markdown out.md]

A benchmark, not a test: it prints medians (min-max, repetitions), the machine and how busy
it was. Every job is one node (`drun --standalone --nproc-per-node N`) with a private
XDG_RUNTIME_DIR (a fresh 0700 directory, passed to `drun stacks` too), so other drun jobs
on the machine are neither seen nor asked. A job counts as ready when every rank has
printed its 'ready' line on drun's stdout.

Measures:
  1 dump time   every rank blocked (each sleeps in blocked(); or, with torch, rank 0 sleeps
                in stuck() while the others wait in a gloo all_reduce): the wall time of
                `drun stacks` (start of the command to its exit, the whole dump on its
                stdout) and the agent's own "taken in X ms", REPS (default 5) requests per
                job, for 4, 16 and 64 plain Python ranks and 4 and 16 torch ranks. Each job
                twice: without --hang-timeout (the dump measures each rank's CPU over at
                least 250 ms, agent/stack_dump.cc kCpuWindow) and with --hang-timeout 3600
                (the monitor has sampled each rank's CPU: no window). Every dump is checked
                to hold one section per rank, each showing the frame the rank waits in.
  2 monitor CPU 16 ranks, the drun process's own CPU time (utime + stime of /proc/PID/stat,
                all its threads; in a one-node job drun is the agent) over WINDOW (default
                30 s) after the job is ready, with --hang-timeout 600 and without, while
                the ranks sleep (idle) and while each prints a line every 100 ms (160
                lines/s in all). Runs with and without are interleaved, CPU_REPS (default
                3) each. Reported as % of one core, both from utime + stime (clock ticks,
                10 ms) and from the threads' schedstat (nanoseconds).
"""
import argparse
import datetime
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
TICK = os.sysconf("SC_CLK_TCK")
READY_TIMEOUT = 600  # s; 16 torch ranks importing torch on a loaded 2-core machine

# The workers. Each prints 'ready' once it is where the dump should find it.
PROGRAMS = {
    "sleeper.py": '''\
import time


def blocked():
    print("ready", flush=True)
    time.sleep(10**6)


blocked()
''',
    "printer.py": '''\
import time


def printing():
    print("ready", flush=True)
    n = 0
    while True:
        time.sleep(0.1)
        n += 1
        print(f"tick {n}", flush=True)


printing()
''',
    "torch_hang.py": '''\
import time

import torch
import torch.distributed as dist


def stuck():
    time.sleep(10**6)


dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)  # every rank is up
print("ready", flush=True)
if dist.get_rank() == 0:
    stuck()
dist.all_reduce(t)  # the others wait here for rank 0
''',
}
# What every rank's section of a dump must show (rank -> frame), per program.
EXPECTED = {
    "sleeper.py": lambda rank: "in blocked",
    "torch_hang.py": lambda rank: "in stuck" if rank == 0 else "in all_reduce",
}
READY_RE = re.compile(r"^\[rank(\d+)\]: ready$")
HEADER_RE = re.compile(r"^=== rank (\d+) \(local \d+\) on \S+, pid (\d+): .* over ([\d.]+)s")
TAKEN_RE = re.compile(r"^drun stacks: run '[^']*', (\d+) ranks on \S+, taken in (\d+) ms")


def proc_cpu(pid):
    """utime + stime of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def thread_ns(pid):
    """On-CPU nanoseconds of a process's live threads (/proc/PID/task/*/schedstat): finer
    than the clock ticks of utime + stime, blind to threads that have exited."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def children(pid):
    found = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return found


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Job:
    """One drun job: started, waited for until every rank printed 'ready', stopped with
    SIGTERM. drun's stdout is drained by a thread (ranks may print all along)."""

    def __init__(self, bench, nproc, program, hang_timeout=None):
        self.nproc = nproc
        opts = ["--hang-timeout", str(hang_timeout)] if hang_timeout else []
        self.err_path = os.path.join(bench.work, "drun_stderr.txt")
        self.err = open(self.err_path, "w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [bench.drun, "--standalone", "--nproc-per-node", str(nproc), *opts,
             os.path.join(bench.work, program)],
            stdout=subprocess.PIPE, stderr=self.err, env=bench.env)
        self.ready = set()
        self.cond = threading.Condition()
        self.eof = False
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self):
        for raw in self.proc.stdout:
            m = READY_RE.match(raw.decode(errors="replace").rstrip("\n"))
            if m:
                with self.cond:
                    self.ready.add(int(m.group(1)))
                    self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def wait_ready(self):
        deadline = time.monotonic() + READY_TIMEOUT
        with self.cond:
            while len(self.ready) < self.nproc and not self.eof:
                if not self.cond.wait(deadline - time.monotonic()):
                    break
            if len(self.ready) < self.nproc:
                self.stop()
                with open(self.err_path) as f:
                    raise RuntimeError(f"{len(self.ready)} of {self.nproc} ranks ready; drun said:\n{f.read()}")
        return time.monotonic() - self.started

    def stop(self):
        """SIGTERM to drun (which ends its workers); checks that no worker is left."""
        workers = children(self.proc.pid) if self.proc.poll() is None else []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.reader.join()
        self.err.close()
        deadline = time.monotonic() + 30
        while any(alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.1)  # drun has exited; nothing to wait on but the pids themselves
        left = [p for p in workers if alive(p)]
        for p in left:
            os.kill(p, signal.SIGKILL)
        assert not left, f"workers {left} outlived drun"
        assert code == 128 + signal.SIGTERM, f"drun exited {code} on SIGTERM"


class Bench:
    def __init__(self, args):
        self.args = args
        self.drun = os.path.abspath(args.drun)
        self.work = tempfile.mkdtemp(prefix="drun_hang_bench_")
        xdg = os.path.join(self.work, "xdg")
        os.mkdir(xdg, 0o700)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PET_")}
        self.env.update(XDG_RUNTIME_DIR=xdg, PYTHON_EXEC=PYTHON)
        for name, text in PROGRAMS.items():
            with open(os.path.join(self.work, name), "w") as f:
                f.write(text)

    def stacks_once(self, job, program):
        t0 = time.monotonic()
        out = subprocess.run([self.drun, "stacks"], env=self.env, capture_output=True, text=True,
                             timeout=120)
        wall = (time.monotonic() - t0) * 1000
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        m = TAKEN_RE.match(lines[0])
        assert m and int(m.group(1)) == job.nproc, lines[0]
        # Complete: one section per rank, each at its frame.
        sections, windows, rank = {}, [], None
        for line in lines[1:]:
            h = HEADER_RE.match(line)
            if h:
                rank = int(h.group(1))
                sections[rank] = []
                windows.append(float(h.group(3)))
            elif rank is not None:
                sections[rank].append(line)
        assert sorted(sections) == list(range(job.nproc)), f"ranks {sorted(sections)}"
        for r, text in sections.items():
            want = EXPECTED[program](r)
            assert any(want in l for l in text), f"rank {r}: no '{want}' in\n" + "\n".join(text)
        return wall, float(m.group(2)), max(windows)

    def dump_time(self, nproc, program, hang_timeout, reps):
        job = Job(self, nproc, program, hang_timeout)
        try:
            ready_s = job.wait_ready()
            if hang_timeout:
                # The monitor samples every second from the round's start; its first sample
                # is not observable from outside, so give it that second.
                time.sleep(max(0.0, 1.5 - (time.monotonic() - job.started)))
            rows = [self.stacks_once(job, program) for _ in range(reps)]
        finally:
            job.stop()
        return {"wall": [r[0] for r in rows], "taken": [r[1] for r in rows],
                "window": max(r[2] for r in rows), "ready_s": ready_s}

    def monitor_cpu(self, program, hang_timeout, window):
        job = Job(self, 16, program, hang_timeout)
        try:
            job.wait_ready()
            pid = job.proc.pid
            c0, n0, t0 = proc_cpu(pid), thread_ns(pid), time.monotonic()
            time.sleep(window)  # the measurement window itself
            c1, n1, t1 = proc_cpu(pid), thread_ns(pid), time.monotonic()
            assert job.proc.poll() is None, "drun ended during the window"
        finally:
            job.stop()
        return 100 * (c1 - c0) / (t1 - t0), 100 * (n1 - n0) / 1e9 / (t1 - t0)


def med(xs, unit="ms", fmt="{:.0f}"):
    f = lambda x: fmt.format(x)
    return f"{f(statistics.median(xs))} {unit} ({f(min(xs))}-{f(max(xs))}, n={len(xs)})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--drun", required=True)
    ap.add_argument("--reps", type=int, default=5, help="drun stacks requests per job")
    ap.add_argument("--sizes", default="4,16,64", help="plain Python rank counts")
    ap.add_argument("--torch-sizes", default="4,16", help="torch gloo rank counts ('' for none)")
    ap.add_argument("--window", type=float, default=30, help="seconds of each CPU measurement")
    ap.add_argument("--cpu-reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="3 requests, 4 and 16 ranks, torch 4, 5 s x 1")
    ap.add_argument("--skip", default="", help="comma list of: dump,cpu")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    if args.quick:
        args.reps, args.sizes, args.torch_sizes, args.window, args.cpu_reps = 3, "4,16", "4", 5, 1
    skip = set(args.skip.split(",")) - {""}
    sizes = [int(x) for x in args.sizes.split(",") if x]
    torch_sizes = [int(x) for x in args.torch_sizes.split(",") if x]
    b = Bench(args)
    lines = [f"# drun hang benchmark, {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC",
             f"machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.release()}; "
             f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", ""]
    print("\n".join(lines), flush=True)

    def say(text=""):
        print(text, flush=True)
        lines.append(text)

    if "dump" not in skip:
        say(f"## 1 drun stacks: request to complete dump ({args.reps} requests per job)")
        say("| ranks | workers | --hang-timeout | wall of `drun stacks` | agent's \"taken in\" | CPU window |")
        say("| --- | --- | --- | --- | --- | --- |")
        cases = [(n, "sleeper.py") for n in sizes] + [(n, "torch_hang.py") for n in torch_sizes]
        for n, program in cases:
            for hang in (None, 3600):
                r = b.dump_time(n, program, hang, args.reps)
                kind = "python, sleeping" if program == "sleeper.py" else "torch gloo, all_reduce"
                say(f"| {n} | {kind} | {hang or 'off'} | {med(r['wall'])} | {med(r['taken'])} | "
                    f"{r['window']:.2f} s |")
        say()
    if "cpu" not in skip:
        say(f"## 2 drun's own CPU, 16 ranks, {args.window:.0f} s windows, % of one core")
        say("| the ranks | measure | --hang-timeout off | --hang-timeout 600 | difference of medians |")
        say("| --- | --- | --- | --- | --- |")
        for program, kind in (("sleeper.py", "sleep"), ("printer.py", "each print a line every 100 ms")):
            got = {None: [], 600: []}
            for _ in range(args.cpu_reps):
                for hang in (None, 600):
                    got[hang].append(b.monitor_cpu(program, hang, args.window))
            for i, measure in enumerate(("utime+stime (/proc/PID/stat)", "threads' schedstat")):
                off, on = [x[i] for x in got[None]], [x[i] for x in got[600]]
                diff = statistics.median(on) - statistics.median(off)
                say(f"| {kind} | {measure} | {med(off, '%', '{:.3f}')} | {med(on, '%', '{:.3f}')} | "
                    f"{diff:+.3f} % |")
        say()
    say(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")
    shutil.rmtree(b.work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
