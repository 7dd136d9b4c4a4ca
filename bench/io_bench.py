#!/usr/bin/python3
"""Worker I/O through drun against the same writers on their own, side by side in one run.

    /usr/bin/python3 bench/io_bench.py --drun build/launcher/drun [--quick] [--markdown out.md]

A benchmark, not a test: it prints medians (min-max, repetitions), the machine and how busy
it was. Runs of the different set-ups are interleaved, so background load hits them alike.

Measures:
  1 throughput  4 workers (bench/programs/line_writer.c, static C, --no-python) each write
                SIZE (default 256 MiB) of 100-byte lines in 1 MB writes. Set-ups:
                  direct      the 4 writers started by this script, each writing its own file
                  pipe floor  each writer into a pipe, and per pipe a process of its own that
                              splices it into the file (the least a pipe-based logger costs)
                  tee/null    drun --tee 3 --log-dir, console to /dev/null
                  tee/pipe    drun --tee 3 --log-dir, console to a pipe this script drains
                  redirect    drun -r 3 --log-dir (files only)
                  console     drun without logs, console to a pipe this script drains
                Wall time from start to the end of drun (and of the console's reader).
                Every log file is checked to hold SIZE bytes: nothing was lost.
  2 slow console  tee/pipe with a reader that takes 20 MiB/s: drun's wall time, the log
                files' completeness and the line count drun reports as not shown. And the
                console alone (no log files) with the same slow reader and 4 x 8 MiB: the
                workers are throttled to the reader's pace (drun never drops output that has
                no other copy).
  3 latency     bench/programs/latency_probe.py under drun (one worker, console to a pipe):
                a partial line ("p00042", no newline) and a full line, from just before the
                worker's write to this script's read of drun's stdout (CLOCK_MONOTONIC on
                both sides). Median and p99 of COUNT (default 100) each.
  4 memory      drun --max-restarts N --no-python /bin/false: drun's peak RSS (VmHWM at its
                exit, bench/programs/rss_probe.c preloaded) after 2 000 and after ROUNDS
                (default 100 000) rounds, and the range of its open descriptors sampled
                every 0.5 s during the long run.
"""
import argparse
import datetime
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(REPO, "bench", "programs")
PYTHON = "/usr/bin/python3"
NPROC = 4
MIB = 1 << 20
BEFORE = " (before)"  # a set-up run with --drun-before, e.g. the previous commit's drun
GIB = 1 << 30


# The least any logger that keeps a pipe between the worker and its log can cost (drun
# must: a full disk must not fail the worker's writes): per stream, one process of its
# own that splice(2)s the pipe into the file, all in parallel. Set-up "pipe floor".
PIPE_FLOOR_C = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char** argv) {  /* N WRITER SIZE DIR */
  int n = atoi(argv[1]);
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (pipe(p) != 0) return 1;
    fcntl(p[0], F_SETPIPE_SZ, 1 << 20);
    if (fork() == 0) {
      dup2(p[1], 1); close(p[0]); close(p[1]);
      execl(argv[2], argv[2], argv[3], "100", "-", (char*)0);
      _exit(127);
    }
    close(p[1]);
    if (fork() == 0) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%d.log", argv[4], r);
      int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      while (splice(p[0], NULL, f, NULL, 1 << 20, SPLICE_F_MOVE) > 0) {}
      _exit(0);
    }
    close(p[0]);
  }
  int status, bad = 0;
  while (wait(&status) > 0) bad |= status != 0;
  return bad;
}
"""


class Reader(threading.Thread):
    """Drains a pipe; `rate` (bytes/s) slows it down; `stamps` records token arrivals."""

    def __init__(self, fd, rate=None, tokens=False):
        super().__init__(daemon=True)
        self.fd, self.rate, self.tokens = fd, rate, tokens
        self.bytes = 0
        self.arrivals = {}
        self.tail = b""

    def run(self):
        t0 = time.monotonic()
        while True:
            data = os.read(self.fd, 1 << 20 if self.rate is None else 64 * 1024)
            now = time.monotonic_ns()
            if not data:
                return
            self.bytes += len(data)
            if self.tokens:
                text = self.tail + data
                for m in re.finditer(rb"([pf]\d{5})", text):
                    self.arrivals.setdefault(m.group(1).decode(), now)
                self.tail = text[-8:]
            if self.rate:
                ahead = self.bytes / self.rate - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Bench:
    def __init__(self, args):
        self.args = args
        self.drun = os.path.abspath(args.drun)
        self.drun_before = os.path.abspath(args.drun_before) if args.drun_before else None
        self.work = tempfile.mkdtemp(prefix="drun_io_bench_")
        self.size = args.size_mib * MIB
        self.cpu = {}  # set-up -> CPU seconds (drun and its workers, or the writers)
        cc = os.environ.get("CC", "cc")
        self.writer = os.path.join(self.work, "line_writer")
        src = os.path.join(PROGRAMS, "line_writer.c")
        if subprocess.run([cc, "-O2", "-static", "-o", self.writer, src]).returncode != 0:
            subprocess.run([cc, "-O2", "-o", self.writer, src], check=True)
        self.floor = os.path.join(self.work, "pipe_floor")
        floor_src = os.path.join(self.work, "pipe_floor.c")
        with open(floor_src, "w") as f:
            f.write(PIPE_FLOOR_C)
        subprocess.run([cc, "-O2", "-o", self.floor, floor_src], check=True)
        self.rss_lib = os.path.join(self.work, "rss_probe.so")
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", self.rss_lib,
                        os.path.join(PROGRAMS, "rss_probe.c")], check=True)

    def fresh(self, name):
        d = os.path.join(self.work, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        return d

    def check_logs(self, logs, stream="stdout"):
        sizes = [os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(logs)
                 for f in files if f == f"{stream}.log"]
        assert sizes == [self.size] * NPROC, f"log files {sizes}, expected {NPROC} x {self.size}"

    def direct(self):
        out = self.fresh("direct")
        t0 = time.monotonic()
        procs = [subprocess.Popen([self.writer, str(self.size), "100", os.path.join(out, f"{r}.log")])
                 for r in range(NPROC)]
        assert all(p.wait() == 0 for p in procs)
        return time.monotonic() - t0

    def pipe_floor(self):
        out = self.fresh("logs")
        t0 = time.monotonic()
        subprocess.run([self.floor, str(NPROC), self.writer, str(self.size), out], check=True)
        wall = time.monotonic() - t0
        sizes = sorted(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
        assert sizes == [self.size] * NPROC, sizes
        return wall

    def run_drun(self, opts, console, rate=None, size=None, drun=None):
        """console: 'null' or 'pipe'. Returns (wall s, reader bytes, drun's stderr)."""
        size = size or self.size
        argv = [drun or self.drun, "--standalone", "--nproc-per-node", str(NPROC), "--no-python", *opts,
                self.writer, str(size), "100", "-"]
        t0 = time.monotonic()
        if console == "null":
            p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            wall, got, err = time.monotonic() - t0, 0, p.stderr
            assert p.returncode == 0, err
        else:
            r, w = os.pipe()
            proc = subprocess.Popen(argv, stdout=w, stderr=subprocess.PIPE)
            os.close(w)
            reader = Reader(r, rate=rate)
            reader.start()
            err = proc.stderr.read()
            assert proc.wait() == 0, err
            reader.join()
            os.close(r)
            wall, got = time.monotonic() - t0, reader.bytes
        return wall, got, err.decode(errors="replace")

    SETUPS = ("direct", "pipe floor", "tee/null", "tee/pipe", "redirect", "console")

    def throughput(self, reps, setups):
        rows = {k: [] for k in setups}
        self.cpu = {k: [] for k in rows}
        self.ratios = {k: [] for k in rows}  # each run against the direct run of its round
        self.tee_console = []  # tee/pipe: (console bytes delivered, lines reported as not shown)
        console_bytes = 0

        def one(name):
            if name == "direct":
                return self.direct(), 0
            if name == "pipe floor":
                return self.pipe_floor(), 0
            logs = self.fresh("logs")
            before = name.endswith(BEFORE)
            name = name[:-len(BEFORE)] if before else name
            opts = {"tee/null": (["--tee", "3", "--log-dir", logs], "null"),
                    "tee/pipe": (["--tee", "3", "--log-dir", logs], "pipe"),
                    "redirect": (["-r", "3", "--log-dir", logs], "null"),
                    "console": ([], "pipe")}[name]
            wall, got, err = self.run_drun(*opts, drun=self.drun_before if before else None)
            if name != "console":
                self.check_logs(logs)
            if name == "tee/pipe" and not before:
                # A console slower than the workers loses whole lines (the logs have them).
                dropped = sum(int(x) for x in re.findall(r"could not keep up: (\d+) line", err))
                self.tee_console.append((got, dropped))
            return wall, got

        for rep in range(reps):
            # Rotate the order each round so no set-up always follows the same one.
            order = list(setups[rep % len(setups):]) + list(setups[:rep % len(setups)])
            walls = {}
            for name in order:
                # Start each run from a clean state: the previous run's 1 GiB must
                # not be written back to disk during this one.
                os.sync()
                c0 = child_cpu()
                walls[name], got = one(name)
                self.cpu[name].append(child_cpu() - c0)
                rows[name].append(walls[name])
                if name == "console":
                    console_bytes = got
                shutil.rmtree(os.path.join(self.work, "logs"), ignore_errors=True)
                shutil.rmtree(os.path.join(self.work, "direct"), ignore_errors=True)
            if "direct" in walls:
                for name, wall in walls.items():
                    self.ratios[name].append(wall / walls["direct"])
        return rows, console_bytes

    def slow_console(self):
        logs = self.fresh("logs")
        rate = 20 * MIB
        wall, got, err = self.run_drun(["--tee", "3", "--log-dir", logs], "pipe", rate=rate)
        self.check_logs(logs)
        m = re.search(r"could not keep up: (\d+) line", err)
        dropped = sum(int(x) for x in re.findall(r"could not keep up: (\d+) line", err))
        shutil.rmtree(logs, ignore_errors=True)
        small = 8 * MIB
        wall2, got2, _ = self.run_drun([], "pipe", rate=rate, size=small)
        return {"tee_wall": wall, "tee_shown": got, "tee_dropped_lines": dropped,
                "console_only_wall": wall2, "console_only_bytes": got2,
                "console_only_expected_s": got2 / rate, "rate": rate, "small": small,
                "said": m is not None}

    def latency(self, count, opts=()):
        """opts: e.g. --tee 3 --log-dir DIR (the console then reads the log pump's mirror)."""
        stamps = os.path.join(self.work, "stamps")
        env = dict(os.environ, PROBE_OUT=stamps, PYTHON_EXEC=PYTHON)
        r, w = os.pipe()
        proc = subprocess.Popen([self.drun, "--standalone", "--nproc-per-node", "1", *opts,
                                 os.path.join(PROGRAMS, "latency_probe.py"), str(count)],
                                stdout=w, env=env)
        os.close(w)
        reader = Reader(r, tokens=True)
        reader.start()
        assert proc.wait() == 0
        reader.join()
        os.close(r)
        lat = {"p": [], "f": []}
        with open(stamps) as f:
            for line in f:
                token, t = line.split()
                lat[token[0]].append((reader.arrivals[token] - int(t)) / 1e6)
        return lat

    def memory(self, rounds):
        out = {}
        for n in (2000, rounds):
            probe = os.path.join(self.work, f"rss_{n}")
            env = dict(os.environ, LD_PRELOAD=self.rss_lib, RSS_PROBE_OUT=probe)
            t0 = time.monotonic()
            p = subprocess.Popen([self.drun, "--standalone", "--nproc-per-node", "1", "--no-python",
                                  "-q", "--max-restarts", str(n), "--restart-policy", "always",
                                  "/bin/false"],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            fds = []
            while p.poll() is None:
                try:
                    fds.append(len(os.listdir(f"/proc/{p.pid}/fd")))
                except OSError:
                    pass
                time.sleep(0.5)
            with open(probe) as f:
                hwm = int(f.read().split()[1])
            out[n] = {"hwm_kb": hwm, "fds": (min(fds), max(fds)) if fds else None,
                      "wall": time.monotonic() - t0}
        return out


def med(xs):
    return f"{statistics.median(xs):.2f} s ({min(xs):.2f}-{max(xs):.2f}, n={len(xs)})"


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--drun", required=True)
    ap.add_argument("--drun-before", help="another drun (e.g. before a change) run beside it")
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--latency-count", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=100000)
    ap.add_argument("--quick", action="store_true", help="64 MiB, 1 rep, 20 latency probes, 10 000 rounds")
    ap.add_argument("--skip", default="", help="comma list of: throughput,slow,latency,memory")
    ap.add_argument("--setups", help="comma list of throughput set-ups to run (default: all): "
                    + ",".join(Bench.SETUPS))
    ap.add_argument("--markdown")
    args = ap.parse_args()
    if args.quick:
        args.size_mib, args.reps, args.latency_count, args.rounds = 64, 1, 20, 10000
    skip = set(args.skip.split(",")) - {""}
    b = Bench(args)
    lines = [f"# drun I/O benchmark, {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC",
             f"machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.release()}; "
             f"load average before: {os.getloadavg()[0]:.2f}", ""]
    print("\n".join(lines), flush=True)

    def say(text=""):
        print(text, flush=True)
        lines.append(text)

    if "throughput" not in skip:
        setups = [k for k in Bench.SETUPS if args.setups is None or k in args.setups.split(",")]
        if args.drun_before:  # the same drun set-ups with the other drun, in the same rounds
            setups += [k + BEFORE for k in setups if k not in ("direct", "pipe floor")]
        rows, console_bytes = b.throughput(args.reps, setups)
        total = NPROC * b.size
        direct = statistics.median(rows["direct"]) if "direct" in rows else None
        say(f"## 1 throughput: {NPROC} writers x {args.size_mib} MiB of 100-byte lines")
        say("| set-up | wall | vs direct (medians) | median of per-round ratios (min-max) "
            "| MiB/s of worker output | CPU s (all processes) |")
        say("| --- | --- | --- | --- | --- | --- |")
        for k, xs in rows.items():
            m = statistics.median(xs)
            rs = b.ratios[k]
            per_round = (f"{statistics.median(rs):.2f}x ({min(rs):.2f}-{max(rs):.2f})"
                         if rs else "-")
            versus = f"{m / direct:.2f}x" if direct else "-"
            say(f"| {k} | {med(xs)} | {versus} | {per_round} | {total / MIB / m:.0f} | "
                f"{statistics.median(b.cpu[k]):.2f} |")
        if "tee/pipe" in rows:
            shown = ", ".join(f"{g / MIB:.0f} MiB ({d} lines not shown)" for g, d in b.tee_console)
            say(f"tee/pipe: the console got {shown} of {total / MIB:.0f} MiB of lines")
        if "console" in rows:
            say(f"console bytes delivered through the pipe (prefixes included): "
                f"{console_bytes / MIB:.0f} MiB, "
                f"{console_bytes / GIB / statistics.median(rows['console']):.2f} GiB/s")
        say()
    if "slow" not in skip:
        s = b.slow_console()
        say(f"## 2 a console that takes {s['rate'] // MIB} MiB/s")
        say(f"- --tee 3 --log-dir: drun {s['tee_wall']:.2f} s; log files complete; the console got "
            f"{s['tee_shown'] / MIB:.0f} MiB, {s['tee_dropped_lines']} lines reported as not shown "
            f"(message printed: {s['said']})")
        say(f"- console only, {NPROC} x {s['small'] // MIB} MiB: {s['console_only_wall']:.2f} s for "
            f"{s['console_only_bytes'] / MIB:.1f} MiB (the reader's pace alone: "
            f"{s['console_only_expected_s']:.2f} s): workers wait, nothing is lost")
        say()
    if "latency" not in skip:
        say(f"## 3 latency to drun's stdout ({args.latency_count} each)")
        logs = b.fresh("latency_logs")
        for label, opts in (("console only", ()), ("--tee 3 --log-dir", ("--tee", "3", "--log-dir", logs))):
            lat = b.latency(args.latency_count, opts)
            for k, name in (("p", "partial line"), ("f", "full line")):
                xs = lat[k]
                say(f"- {label}, {name}: median {statistics.median(xs):.2f} ms, "
                    f"p99 {pct(xs, 0.99):.2f} ms, max {max(xs):.2f} ms")
        say()
    if "memory" not in skip:
        mem = b.memory(args.rounds)
        say("## 4 memory over restart rounds (/bin/false, --max-restarts N)")
        for n, m in mem.items():
            say(f"- {n} rounds: peak RSS {m['hwm_kb']} kB, open fds {m['fds']}, {m['wall']:.1f} s")
        a, c = mem[2000]["hwm_kb"], mem[args.rounds]["hwm_kb"]
        say(f"- growth from 2000 to {args.rounds} rounds: {c - a} kB")
        say()
    say(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")
    shutil.rmtree(b.work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
