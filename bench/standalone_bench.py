#!/usr/bin/python3
"""drun vs torchrun on one node (--standalone), side by side in the same run.

    /usr/bin/python3 bench/standalone_bench.py --drun build/launcher/drun [--markdown out.md]
    /usr/bin/python3 bench/standalone_bench.py --drun NEW --drun-ref OLD --only 1,3

--drun-ref OLD runs a second drun build in the same loop as --drun for measures 1 and 3
(the two alternate within each repetition, the order swapped every other repetition), so
both see the same background load; the table gains the reference's rows, the ratio of the
medians and the median of the per-repetition ratios with its 95% interval (wall and CPU).

A benchmark, not a test: it prints a table of medians (with min-max and the number of
repetitions) and ratios, the machine, the versions and how busy the machine was (load,
other processes' share of the cores, and how long an rmdir in $TMPDIR takes). Runs of
the different launchers are interleaved, so background load hits them alike. Defaults take
about 6-8 minutes on a quiet 2-core machine; --quick is a smoke run of ~1-2 minutes.

Measures (every launcher gets 4 workers, --standalone):
  1 launch    launch + teardown of 4 x /bin/true: wall time from starting the launcher to
              its exit. drun --no-python, torchrun --no_python with its default monitor
              interval (5 s) and with --monitor_interval 0.1. Floor: the 4 /bin/true
              started by this script with subprocess.Popen and waited for. Also drun's CPU
              time and `drun --help` (exec, dynamic loading, CLI parsing, exit: the part of
              drun's time that is its own process start).
  2 reduce    examples/reduce.py (gloo reduce of the ranks to rank 0), wall time to exit.
              Floor A: 4 `python3 -u reduce.py` started by this script with the environment
              a launcher gives (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1,
              MASTER_PORT=a free port, TORCHELASTIC_*, OMP_NUM_THREADS=1), rank 0 hosting the
              TCPStore (torch 1.13's env:// way). Floor B: the same with
              TORCHELASTIC_USE_AGENT_STORE=True and a fresh torch TCPStore server already
              running in another process (started before the clock), which is what drun's
              default gives its workers. drun runs both ways (default, --no-agent-store).
              torch 1.13's client retries a refused connect only once a second, so where
              rank 0 hosts the store, ranks that come up before it lose up to 1 s: compare
              like with like (the paired rows). CPU times are reported too: they barely
              depend on other load.
  3 restart   a worker crash until every worker of the next attempt runs. Workers are
              bench/programs/restart_probe.c (static C, --no-python): on attempt 0 rank 1
              waits until ranks 0, 2, 3 run, writes its CLOCK_REALTIME and exits 1; on
              attempt 1 every rank writes its CLOCK_REALTIME as the first thing in main().
              Reported: last start of attempt 1 - crash. `--max-restarts 1` for both.
              The program's own start (posix_spawn -> main) is measured separately.
  4 rss       peak RSS of the launcher process alone: bench/programs/rss_probe.c, an
              LD_PRELOAD library whose destructor appends /proc/self/status VmHWM (the
              process's peak resident set, kernel-maintained) when the launcher exits.
              Children have their own counters, so workers are not included. Cross-check
              for drun: `/usr/bin/time -f %M`, i.e. wait4()'s ru_maxrss, which is the max
              over drun and each of its reaped children individually (not their sum), and
              also covers what the forked child held before exec'ing drun.
"""
import argparse
import datetime
import os
import platform
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(REPO, "bench", "programs")
NPROC = 4

# A fresh torch TCPStore server in its own process: prints its port, serves until stdin closes.
TORCH_STORE_SERVER = r"""
import datetime, sys
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=3600),
                      wait_for_workers=False)
print(store.port, flush=True)
sys.stdin.read()
"""


# ---------------------------------------------------------------- helpers


def fmt_time(s):
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def fmt_mib(kb):
    return "-" if kb is None else f"{kb / 1024:.1f} MiB"


class CpuMeter:
    """How much CPU others used while we measured: /proc/stat busy time minus the CPU
    time of this script and its reaped descendants, as a share of all cores."""

    @staticmethod
    def _busy():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        # user nice system idle iowait irq softirq steal
        return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _ours():
        total = 0.0
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
            r = resource.getrusage(who)
            total += r.ru_utime + r.ru_stime
        return total

    @staticmethod
    def rmdir_cost(n=20):
        """Median seconds of rmdir of a fresh empty directory under TMPDIR. drun removes
        its error-file directory there on every run (at the end of the launch); on a file
        system that discards freed blocks synchronously (ext4 mounted with `discard` and
        no journal) that costs a disk round trip, 0.1 to several ms with others' I/O."""
        times = []
        for _ in range(n):
            d = tempfile.mkdtemp(prefix="drun-bench-rmdir-")
            t0 = time.perf_counter()
            os.rmdir(d)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    def __init__(self):
        self.rmdir0 = self.rmdir_cost()
        self.t0, self.busy0, self.ours0 = time.monotonic(), self._busy(), self._ours()
        self.load0 = os.getloadavg()[0]

    def stop(self):
        wall = time.monotonic() - self.t0
        foreign = (self._busy() - self.busy0) - (self._ours() - self.ours0)
        ncpu = os.cpu_count() or 1
        return {
            "wall": wall,
            "foreign_pct": max(0.0, 100.0 * foreign / (wall * ncpu)) if wall > 0 else 0.0,
            "load": (self.load0, os.getloadavg()[0]),
            "rmdir": (self.rmdir0, self.rmdir_cost()),
        }


def run_timed(argv, env, cwd, stdout=subprocess.DEVNULL, timeout=300):
    """Wall time of one run, its exit code and wait4's rusage."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout,
                         stderr=subprocess.STDOUT if stdout != subprocess.DEVNULL else stdout)
    # Blocking wait4 (no polling loop competing for the 2 cores); a timer kills a hung run.
    timer = threading.Timer(timeout, p.kill)
    timer.start()
    try:
        _, status, ru = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, p.returncode, ru, p.pid


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Series:
    def __init__(self, label):
        self.label = label
        self.values = []
        self.failures = []
        self.by_rep = {}  # repetition -> value, for paired ratios

    def add(self, v, rep=None):
        self.values.append(v)
        if rep is not None:
            self.by_rep[rep] = v

    def fail(self, why):
        self.failures.append(why)
        print(f"    ! {self.label}: {why}", file=sys.stderr)

    @property
    def median(self):
        return statistics.median(self.values) if self.values else None

    def cells(self, fmt):
        if not self.values:
            return ["-", "-", f"0 ({len(self.failures)} failed)" if self.failures else "0"]
        n = str(len(self.values)) + (f" ({len(self.failures)} failed)" if self.failures else "")
        return [fmt(self.median), f"{fmt(min(self.values))} – {fmt(max(self.values))}", n]


def read_rss_probe(path, pid):
    try:
        with open(path) as f:
            for line in f:
                fields = [int(x) for x in line.split()]
                if fields[0] == pid:
                    return dict(zip(("pid", "hwm", "rss", "anon", "file", "pss"), fields))
    except (OSError, ValueError):
        pass
    return None


# ---------------------------------------------------------------- the bench


class Bench:
    def __init__(self, args):
        self.a = args
        self.work = tempfile.mkdtemp(prefix="drun-bench-")
        self.env = dict(os.environ)
        self.env["PYTHON_EXEC"] = args.python
        self.env.pop("LD_PRELOAD", None)
        self.rows = []  # (measure, runner, [median, range, n], ratio, goal)
        self.loads = []  # (section, meter result)
        self.notes = []
        self.compile_programs()

    def cleanup(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def compile_programs(self):
        cc = os.environ.get("CC", "cc")
        self.probe = os.path.join(self.work, "restart_probe")
        src = os.path.join(PROGRAMS, "restart_probe.c")
        r = subprocess.run([cc, "-O2", "-static", "-o", self.probe, src], capture_output=True)
        self.probe_static = r.returncode == 0
        if not self.probe_static:
            subprocess.run([cc, "-O2", "-o", self.probe, src], check=True)
        self.rss_lib = os.path.join(self.work, "rss_probe.so")
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", self.rss_lib,
                        os.path.join(PROGRAMS, "rss_probe.c")], check=True)

    def drun(self, *args, binary=None):
        return [binary or self.a.drun, "--standalone", "--nproc-per-node", str(NPROC), *args]

    def drun_builds(self, i):
        """The drun builds to run in repetition i, in order: [("new", path)] alone, or with
        ("ref", path) before or after it, alternating (ABBA), so neither always goes first."""
        builds = [("new", self.a.drun)]
        if self.a.drun_ref:
            builds.append(("ref", self.a.drun_ref))
            if i % 2:
                builds.reverse()
        return builds

    def ref_rows(self, measure, label, new, ref, fmt):
        """The reference build's row, and the per-repetition ratios new / ref."""
        if not self.a.drun_ref:
            return
        self.rows.append((measure, f"{label} (--drun-ref {self.a.drun_ref_name})",
                          ref.cells(fmt), ratio(new.median, ref.median), ""))
        q = paired_ratios(new, ref)
        self.rows.append((measure, "  drun ÷ drun-ref, paired per repetition",
                          [f"{statistics.median(q):.3f}", f"{min(q):.3f} – {max(q):.3f}",
                           str(len(q))] if q else ["-", "-", "0"], "", ""))
        ci = median_ci95(q)
        if ci:
            self.rows.append((measure, "  95% confidence interval of that median",
                              [f"{ci[0]:.3f} – {ci[1]:.3f}", "", str(len(q))], "", ""))

    def torchrun(self, monitor, *args):
        # -r 9:1 -t 9:1: Debian's torchrun 1.13 under Python 3.11 exits 1 in Std.from_str
        # for a plain call; a per-rank spec for a rank that does not exist avoids that.
        argv = [self.a.torchrun, "--standalone", "--nproc_per_node", str(NPROC),
                "-r", "9:1", "-t", "9:1"]
        if monitor is not None:
            argv += ["--monitor_interval", str(monitor)]
        return argv + list(args)

    def with_rss_probe(self, env, out):
        e = dict(env)
        e["LD_PRELOAD"] = self.rss_lib
        e["RSS_PROBE_OUT"] = out
        return e

    def rundir(self):
        return tempfile.mkdtemp(dir=self.work)

    # ------------------------------------------------------------ 1 launch

    def bench_launch(self):
        a = self.a
        print(f"[1] launch + teardown of {NPROC} x /bin/true", flush=True)
        meter = CpuMeter()
        drun = Series("drun")
        drun_cpu = Series("drun cpu")
        drun_help = Series("drun --help")
        floor = Series("floor")
        tr = {m: Series(f"torchrun monitor {m}") for m in (None, 0.1)}
        self.tr_rss_true = Series("torchrun rss")
        cwd = self.rundir()
        rss_out = os.path.join(self.work, "rss_launch.txt")
        ref, ref_cpu = Series("drun-ref"), Series("drun-ref cpu")
        runs = {"new": (drun, drun_cpu), "ref": (ref, ref_cpu)}
        # warm-up: page cache, ld.so cache
        for _, binary in self.drun_builds(0):
            run_timed(self.drun("--no-python", "/bin/true", binary=binary), self.env, cwd)
        for i in range(max(a.launch_reps, a.torchrun_reps)):
            if i < a.launch_reps:
                for which, binary in self.drun_builds(i):
                    wall, rc, ru, _ = run_timed(self.drun("--no-python", "/bin/true",
                                                          binary=binary), self.env, cwd)
                    walls, cpus = runs[which]
                    if rc == 0:
                        walls.add(wall, i)
                        cpus.add(ru.ru_utime + ru.ru_stime, i)
                    else:
                        walls.fail(f"exit {rc}")
                t0 = time.perf_counter()
                ps = [subprocess.Popen(["/bin/true"], env=self.env, cwd=cwd,
                                       stdin=subprocess.DEVNULL) for _ in range(NPROC)]
                for p in ps:
                    p.wait()
                floor.add(time.perf_counter() - t0)
                wall, rc, _, _ = run_timed([a.drun, "--help"], self.env, cwd)
                drun_help.add(wall)
            if i < a.torchrun_reps:
                for m, s in tr.items():
                    wall, rc, _, pid = run_timed(self.torchrun(m, "--no_python", "/bin/true"),
                                                 self.with_rss_probe(self.env, rss_out), cwd)
                    if rc == 0:
                        s.add(wall)
                    else:
                        s.fail(f"exit {rc}")
                    r = read_rss_probe(rss_out, pid)
                    if r:
                        self.tr_rss_true.add(r["hwm"])
                    print(f"    torchrun (monitor {m or 'default'}) run {i + 1}: {fmt_time(wall)}",
                          flush=True)
        self.loads.append(("1 launch", meter.stop()))
        m1 = f"1. launch + teardown, {NPROC} × /bin/true"
        goal = drun.median is not None and drun.median <= 0.025
        self.rows.append((m1, "drun --no-python", drun.cells(fmt_time), "",
                          f"≤ 25 ms: {'met' if goal else 'MISSED'}"))
        self.rows.append((m1, "  drun, CPU time (user+sys, incl. workers)", drun_cpu.cells(fmt_time),
                          "", ""))
        self.ref_rows(m1, "drun --no-python", drun, ref, fmt_time)
        if a.drun_ref:
            self.rows.append((m1, "  drun-ref, CPU time (user+sys, incl. workers)",
                              ref_cpu.cells(fmt_time), ratio(drun_cpu.median, ref_cpu.median), ""))
            q = paired_ratios(drun_cpu, ref_cpu)
            ci = median_ci95(q)
            if ci:
                self.rows.append((m1, "  CPU time, drun ÷ drun-ref paired: median, 95% interval",
                                  [f"{statistics.median(q):.3f}", f"{ci[0]:.3f} – {ci[1]:.3f}",
                                   str(len(q))], "", ""))
        self.rows.append((m1, "  drun --help: exec, dynamic loading, CLI, exit",
                          drun_help.cells(fmt_time), "", ""))
        for m, s in tr.items():
            if a.torchrun_reps == 0:
                break
            name = "torchrun --no_python, monitor " + ("5 s (default)" if m is None else f"{m} s")
            self.rows.append((m1, name, s.cells(fmt_time), ratio(drun.median, s.median), ""))
        self.rows.append((m1, f"floor: {NPROC} × Popen('/bin/true') + wait from Python",
                          floor.cells(fmt_time), ratio(drun.median, floor.median), ""))

    # ------------------------------------------------------------ 2 reduce

    def floor_reduce(self, cwd, out_path, port=None):
        """4 pythons by hand. port None: rank 0 hosts the TCPStore on a free port (torch
        1.13's env:// way); else the store already serves on port (agent-store mode)."""
        agent_store = port is not None
        if port is None:
            port = free_port()
        procs = []
        out = open(out_path, "w")
        t0 = time.perf_counter()
        for r in range(NPROC):
            e = dict(self.env)
            e.update({
                "RANK": str(r), "LOCAL_RANK": str(r), "GROUP_RANK": "0", "ROLE_RANK": str(r),
                "ROLE_NAME": "default", "WORLD_SIZE": str(NPROC),
                "LOCAL_WORLD_SIZE": str(NPROC), "GROUP_WORLD_SIZE": "1",
                "ROLE_WORLD_SIZE": str(NPROC), "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port), "TORCHELASTIC_RESTART_COUNT": "0",
                "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RUN_ID": "bench",
                "TORCHELASTIC_USE_AGENT_STORE": str(agent_store), "OMP_NUM_THREADS": "1",
                "NCCL_ASYNC_ERROR_HANDLING": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
            })
            procs.append(subprocess.Popen([self.a.python, "-u", self.a.reduce], env=e, cwd=cwd,
                                          stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT))
        rcs, cpu = [], 0.0
        for p in procs:
            _, status, ru = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            rcs.append(p.returncode)
            cpu += ru.ru_utime + ru.ru_stime
        wall = time.perf_counter() - t0
        out.close()
        return wall, next((rc for rc in rcs if rc != 0), 0), cpu

    def floor_reduce_ready_store(self, cwd, out_path):
        """The floor for drun's default: a fresh TCPStore server (torch's own, in another
        process) is up before the clock starts, like drun's store is when workers start."""
        server = subprocess.Popen([self.a.python, "-c", TORCH_STORE_SERVER], cwd=cwd,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            port = int(server.stdout.readline().split()[0])
            return self.floor_reduce(cwd, out_path, port)
        finally:
            server.communicate(timeout=60)  # closing its stdin stops it

    def bench_reduce(self):
        a = self.a
        print(f"[2] gloo reduce ({os.path.relpath(a.reduce, REPO)}), {NPROC} ranks", flush=True)
        meter = CpuMeter()
        rss_out = os.path.join(self.work, "rss_reduce.txt")
        cwd = self.rundir()
        out = os.path.join(self.work, "reduce.out")
        self.drun_rss_reduce, self.tr_rss_reduce = Series("drun rss"), Series("torchrun rss")

        def launcher(argv, rss_series):
            def run():
                with open(out, "w") as f:
                    wall, rc, ru, pid = run_timed(argv, self.with_rss_probe(self.env, rss_out),
                                                  cwd, f)
                r = read_rss_probe(rss_out, pid)
                if r:
                    rss_series.add(r["hwm"])
                return wall, rc, ru.ru_utime + ru.ru_stime
            return run

        # name -> (label, how to run one repetition); run in this order within a repetition
        variants = {
            "floor0": ("floor A: 4 × python3 -u reduce.py by hand, rank 0 hosts the store",
                       lambda: self.floor_reduce(cwd, out)),
            "drun_nas": ("drun --no-agent-store (rank 0 hosts the store, as floor A)",
                         launcher(self.drun("--no-agent-store", a.reduce), self.drun_rss_reduce)),
            "floorS": ("floor B: the same, store already served by another process",
                       lambda: self.floor_reduce_ready_store(cwd, out)),
            "drun": ("drun (default: drun serves the store, as floor B)",
                     launcher(self.drun(a.reduce), self.drun_rss_reduce)),
        }
        tr_variants = {
            None: ("torchrun, monitor 5 s (default)",
                   launcher(self.torchrun(None, a.reduce), self.tr_rss_reduce)),
            0.1: ("torchrun, monitor 0.1 s",
                  launcher(self.torchrun(0.1, a.reduce), self.tr_rss_reduce)),
        }
        wall = {k: {} for k in list(variants) + list(tr_variants)}  # name -> rep -> seconds
        cpu = {k: {} for k in wall}
        fails = {k: [] for k in wall}

        def record(name, rep, result):
            w, rc, c = result
            with open(out, errors="replace") as f:
                text = f.read()
            if rc != 0:
                why = f"exit {rc}: {text.strip()[-300:]}"
            elif f"Sum of all messages is {sum(range(NPROC))}" not in text:
                why = f"wrong output: {text.strip()[-300:]}"
            else:
                wall[name][rep], cpu[name][rep] = w, c
                return fmt_time(w)
            fails[name].append(why)
            print(f"    ! {name}: {why}", file=sys.stderr)
            return "failed"

        self.floor_reduce(cwd, out)  # warm-up: torch's files into the page cache
        for i in range(max(a.reduce_reps, a.torchrun_reps)):
            if i < a.reduce_reps:
                line = [f"{k} {record(k, i, run())}" for k, (_, run) in variants.items()]
                print(f"    run {i + 1}: " + ", ".join(line), flush=True)
            if i < a.torchrun_reps:
                for m, (_, run) in tr_variants.items():
                    print(f"    torchrun (monitor {m or 'default'}) run {i + 1}: "
                          f"{record(m, i, run())}", flush=True)
        self.loads.append(("2 reduce", meter.stop()))

        def series(name, d):
            s = Series(name)
            s.values = list(d[name].values())
            s.failures = fails[name]
            return s

        def paired(x, y):
            reps = sorted(set(wall[x]) & set(wall[y]))
            q = [wall[x][r] / wall[y][r] for r in reps]
            if not q:
                return ["-", "-", "0"]
            return [f"{statistics.median(q):.3f}", f"{min(q):.3f} – {max(q):.3f}", str(len(q))]

        m2 = f"2. gloo reduce, {NPROC} ranks (examples/reduce.py)"
        med = {k: series(k, wall).median for k in wall}

        def goal(x, y):
            if med[x] is None or med[y] is None:
                return "≤ 1.03 × floor: -"
            r = med[x] / med[y]
            return f"≤ 1.03 × floor {'A' if y == 'floor0' else 'B'}: " + (
                "met" if r <= 1.03 else f"MISSED ({r:.3f})")

        self.rows.append((m2, variants["drun"][0], series("drun", wall).cells(fmt_time), "",
                          goal("drun", "floor0")))
        self.rows.append((m2, variants["drun_nas"][0], series("drun_nas", wall).cells(fmt_time),
                          ratio(med["drun"], med["drun_nas"]), goal("drun_nas", "floor0")))
        for k in ("floor0", "floorS"):
            self.rows.append((m2, variants[k][0], series(k, wall).cells(fmt_time),
                              ratio(med["drun"], med[k]), ""))
        for m, (label, _) in tr_variants.items():
            self.rows.append((m2, label, series(m, wall).cells(fmt_time),
                              ratio(med["drun"], med[m]), ""))
        # Paired by repetition (the variants ran back to back): like for like.
        self.rows.append((m2, "  drun --no-agent-store ÷ floor A, paired per repetition",
                          paired("drun_nas", "floor0"), "", ""))
        self.rows.append((m2, "  drun ÷ floor B, paired per repetition", paired("drun", "floorS"),
                          "", ""))
        # CPU time is far less sensitive than wall time to other processes on the machine.
        for k, label in (("drun", "drun + its workers"),
                         ("drun_nas", "drun --no-agent-store + its workers"),
                         ("floor0", "floor A's 4 workers"), ("floorS", "floor B's 4 workers")):
            self.rows.append((m2, f"  CPU time (user+sys), {label}", series(k, cpu).cells(fmt_time),
                              "", ""))

    # ------------------------------------------------------------ 3 restart

    def restart_once(self, argv, env):
        d = self.rundir()
        e = dict(env)
        e["PROBE_DIR"] = d
        wall, rc, _, _ = run_timed(argv, e, d)
        try:
            with open(os.path.join(d, "crash")) as f:
                crash = int(f.read())
            starts = []
            for r in range(NPROC):
                with open(os.path.join(d, f"start_{r}_1")) as f:
                    starts.append(int(f.read()))
        except (OSError, ValueError) as ex:
            return None, f"exit {rc}, {ex}"
        if rc != 0:
            return None, f"exit {rc}"
        return ((max(starts) - crash) / 1e9, (min(starts) - crash) / 1e9, wall), None

    def bench_restart(self):
        a = self.a
        print(f"[3] crash of rank 1 -> all {NPROC} workers of attempt 1 running", flush=True)
        meter = CpuMeter()
        out = subprocess.run([self.probe, "--self-start", str(a.self_start_reps)],
                             capture_output=True, text=True, check=True).stdout.split()
        start_med, start_min, start_max = (int(x) / 1e9 for x in out)
        drun, drun_first = Series("drun"), Series("drun first")
        tr = {m: Series(f"torchrun monitor {m}") for m in (None, 0.1)}
        ref, ref_first = Series("drun-ref"), Series("drun-ref first")
        runs = {"new": (drun, drun_first), "ref": (ref, ref_first)}

        def drun_argv(binary):
            return self.drun("--max-restarts", "1", "--no-python", self.probe, binary=binary)

        for _, binary in self.drun_builds(0):
            self.restart_once(drun_argv(binary), self.env)  # warm-up
        for i in range(max(a.restart_reps, a.torchrun_reps)):
            if i < a.restart_reps:
                for which, binary in self.drun_builds(i):
                    last, first = runs[which]
                    res, err = self.restart_once(drun_argv(binary), self.env)
                    if err:
                        last.fail(err)
                    else:
                        last.add(res[0], i)
                        first.add(res[1], i)
            if i < a.torchrun_reps:
                for m, s in tr.items():
                    res, err = self.restart_once(
                        self.torchrun(m, "--max_restarts", "1", "--no_python", self.probe),
                        self.env)
                    if err:
                        s.fail(err)
                    else:
                        s.add(res[0])
                    print(f"    torchrun (monitor {m or 'default'}) run {i + 1}: "
                          f"{fmt_time(res[0]) if res else err}", flush=True)
        self.loads.append(("3 restart", meter.stop()))
        m3 = f"3. crash → all {NPROC} workers of attempt 1 started"
        goal = "-"
        if drun.median is not None:
            budget = 0.050 + start_med
            goal = (f"≤ 50 ms + start ({fmt_time(budget)}): "
                    + ("met" if drun.median <= budget else "MISSED"))
        self.rows.append((m3, "drun --max-restarts 1 --no-python", drun.cells(fmt_time), "", goal))
        self.rows.append((m3, "  drun: crash → first worker of attempt 1", drun_first.cells(fmt_time),
                          "", ""))
        self.ref_rows(m3, "drun --max-restarts 1 --no-python", drun, ref, fmt_time)
        if a.drun_ref:
            self.rows.append((m3, "  drun-ref: crash → first worker of attempt 1",
                              ref_first.cells(fmt_time), ratio(drun_first.median, ref_first.median),
                              ""))
        for m, s in tr.items():
            if a.torchrun_reps == 0:
                break
            name = "torchrun --max_restarts 1, monitor " + (
                "5 s (default)" if m is None else f"{m} s")
            self.rows.append((m3, name, s.cells(fmt_time), ratio(drun.median, s.median), ""))
        self.rows.append((m3, "program's own start (posix_spawn → main, "
                          + ("static" if self.probe_static else "dynamic") + " C)",
                          [fmt_time(start_med), f"{fmt_time(start_min)} – {fmt_time(start_max)}",
                           str(a.self_start_reps)], "", ""))

    # ------------------------------------------------------------ 4 rss

    def bench_rss(self):
        a = self.a
        print("[4] peak RSS of the launcher process", flush=True)
        meter = CpuMeter()
        rss_out = os.path.join(self.work, "rss_true.txt")
        hwm, anon, filek, pss, timerss = (Series(x) for x in ("hwm", "anon", "file", "pss", "time"))
        cwd = self.rundir()
        time_out = os.path.join(self.work, "time.txt")
        for _ in range(a.rss_reps):
            wall, rc, ru, pid = run_timed(self.drun("--no-python", "/bin/true"),
                                          self.with_rss_probe(self.env, rss_out), cwd)
            r = read_rss_probe(rss_out, pid)
            if rc != 0 or not r:
                hwm.fail(f"exit {rc}, probe {'ok' if r else 'missing'}")
                continue
            hwm.add(r["hwm"])
            anon.add(r["anon"])
            filek.add(r["file"])
            if r.get("pss", -1) >= 0:
                pss.add(r["pss"])
            if os.access("/usr/bin/time", os.X_OK):
                # time(1) is a small C process, so the memory its child had before exec'ing
                # drun (which the kernel folds into ru_maxrss) is small.
                _, rc, _, _ = run_timed(["/usr/bin/time", "-f", "%M", "-o", time_out,
                                         *self.drun("--no-python", "/bin/true")], self.env, cwd)
                try:
                    with open(time_out) as f:
                        timerss.add(int(f.read().split()[-1]))
                except (OSError, ValueError, IndexError):
                    timerss.fail("no output from /usr/bin/time")
        self.loads.append(("4 rss", meter.stop()))
        m4 = "4. peak RSS of the launcher itself (VmHWM at exit)"
        goal = "≤ 10 MiB: " + ("-" if hwm.median is None else
                                ("met" if hwm.median <= 10 * 1024 else "MISSED"))
        self.rows.append((m4, f"drun, {NPROC} × /bin/true", hwm.cells(fmt_mib), "", goal))
        if anon.values:
            self.rows.append((m4, "  at exit: RssAnon / RssFile / Pss",
                              [f"{fmt_mib(anon.median)} / {fmt_mib(filek.median)} / "
                               f"{fmt_mib(pss.median)}", "", str(len(anon.values))], "", ""))
        if timerss.values or timerss.failures:
            self.rows.append((m4, "  /usr/bin/time -f %M (max of drun and each child)",
                              timerss.cells(fmt_mib), "", ""))
        s = getattr(self, "drun_rss_reduce", None)
        if s and (s.values or s.failures):
            self.rows.append((m4, f"drun, {NPROC} × reduce.py (the runs of 2)", s.cells(fmt_mib),
                              "", ""))
        base = hwm.median
        for attr, name in (("tr_rss_true", f"torchrun agent, {NPROC} × /bin/true (runs of 1)"),
                           ("tr_rss_reduce", f"torchrun agent, {NPROC} × reduce.py (runs of 2)")):
            s = getattr(self, attr, None)
            if s and (s.values or s.failures):
                self.rows.append((m4, name, s.cells(fmt_mib), ratio(base, s.median), ""))

    # ------------------------------------------------------------ report

    def machine(self):
        def cmd(argv):
            try:
                return subprocess.run(argv, capture_output=True, text=True,
                                      timeout=60).stdout.strip().splitlines()[0]
            except (OSError, IndexError, subprocess.SubprocessError):
                return "?"

        model = "?"
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            mem_kb = int(f.readline().split()[1])
        torch_v = cmd([self.a.python, "-c", "import torch; print(torch.__version__)"])
        py_v = cmd([self.a.python, "-c", "import sys; print(sys.version.split()[0])"])
        git = cmd(["git", "-C", REPO, "rev-parse", "--short", "HEAD"])
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return [
            ("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
            ("machine", f"{os.cpu_count()} cores ({model}), "
                        f"{mem_kb / 1024 / 1024:.1f} GiB RAM, Linux {platform.release()}, "
                        f"{platform.freedesktop_os_release().get('PRETTY_NAME', '?')}"
                        if hasattr(platform, "freedesktop_os_release") else platform.platform()),
            ("drun", f"{cmd([self.a.drun, '--version'])} ({self.a.drun}; "
                     f"repo at {git}{' + local changes' if dirty else ''})"),
            *([("drun-ref", f"{cmd([self.a.drun_ref, '--version'])} ({self.a.drun_ref})")]
              if self.a.drun_ref else []),
            ("torchrun", f"{self.a.torchrun}, torch {torch_v}, Python {py_v} ({self.a.python})"),
            ("C library", os.confstr("CS_GNU_LIBC_VERSION")),
            ("priority", f"nice {os.getpriority(os.PRIO_PROCESS, 0)} (bench and all it starts)"),
            ("compiler", cmd([os.environ.get("CC", "cc"), "--version"])),
        ]

    def report(self):
        header = ["Measure", "Runner", "Median", "Min – max", "n", "drun ÷ this", "Goal (drun)"]
        lines = []
        last = None
        for measure, runner, cells, r, goal in self.rows:
            lines.append([measure if measure != last else "", runner, *cells, r, goal])
            last = measure
        machine = self.machine()
        loads = [(name, f"load avg (1 min) {m['load'][0]:.2f} → {m['load'][1]:.2f}, "
                        f"other processes used {m['foreign_pct']:.0f}% of the cores "
                        f"during {m['wall']:.0f} s; rmdir of an empty directory in "
                        f"{tempfile.gettempdir()} {fmt_time(m['rmdir'][0])} → "
                        f"{fmt_time(m['rmdir'][1])} (median of 20)")
                 for name, m in self.loads]

        # console
        widths = [max(len(str(row[i])) for row in [header] + lines) for i in range(len(header))]
        print()
        for k, v in machine:
            print(f"{k:10} {v}")
        print()
        sep = "  "
        print(sep.join(h.ljust(w) for h, w in zip(header, widths)))
        print(sep.join("-" * w for w in widths))
        for row in lines:
            print(sep.join(str(c).ljust(w) for c, w in zip(row, widths)))
        print()
        for name, text in loads:
            print(f"section {name}: {text}")

        if self.a.markdown:
            md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            for row in lines:
                md.append("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |")
            md.append("")
            md.append("Machine and versions:")
            md.append("")
            for k, v in machine:
                md.append(f"- {k}: {v}")
            md.append("")
            md.append("Background load while measuring:")
            md.append("")
            for name, text in loads:
                md.append(f"- section {name}: {text}")
            md.append("")
            a = self.a
            both = " (drun and drun-ref each)" if a.drun_ref else ""
            parts = {"1": f"drun launch {a.launch_reps}{both}",
                     "2": f"reduce {a.reduce_reps} (drun and floor each)",
                     "3": f"drun restart {a.restart_reps}{both}",
                     "4": f"drun RSS {a.rss_reps}"}
            reps = ("Repetitions: " + ", ".join(v for k, v in parts.items() if k in a.only)
                    + f", torchrun {a.torchrun_reps} per variant.")
            md.append(reps)
            with open(self.a.markdown, "w") as f:
                f.write("\n".join(md) + "\n")
            print(f"\nmarkdown table written to {self.a.markdown}")


def paired_ratios(x, y):
    """x / y for every repetition both series measured."""
    return [x.by_rep[r] / y.by_rep[r] for r in sorted(set(x.by_rep) & set(y.by_rep))
            if y.by_rep[r] > 0]


def median_ci95(values):
    """A distribution-free 95% confidence interval of the median: the order statistics
    n/2 ∓ 1.96·√n/2 (normal approximation of the binomial); None under 6 values."""
    n = len(values)
    if n < 6:
        return None
    v = sorted(values)
    half = 1.96 * n ** 0.5 / 2
    lo = max(0, int(n / 2 - half))
    hi = min(n - 1, int(-(-(n / 2 + half) // 1)))
    return v[lo], v[hi]


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "-"
    r = a / b
    return f"{r:.3f}" if r >= 0.01 else f"{r:.4f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--drun", default=os.path.join(REPO, "build", "launcher", "drun"),
                   help="drun binary (default: build/launcher/drun)")
    p.add_argument("--drun-ref", metavar="PATH",
                   help="a second drun build, run in the same interleaved loop as --drun in "
                        "measures 1 and 3 (rows for both, their ratio)")
    p.add_argument("--torchrun", default="/usr/bin/torchrun")
    p.add_argument("--python", default="/usr/bin/python3",
                   help="interpreter with torch, also drun's PYTHON_EXEC")
    p.add_argument("--reduce", default=os.path.join(REPO, "examples", "reduce.py"))
    p.add_argument("--launch-reps", type=int, default=50, help="drun and floor, measure 1")
    p.add_argument("--reduce-reps", type=int, default=16, help="drun and floor, measure 2")
    p.add_argument("--restart-reps", type=int, default=20, help="drun, measure 3")
    p.add_argument("--torchrun-reps", type=int, default=3, help="each torchrun variant")
    p.add_argument("--rss-reps", type=int, default=5, help="drun, measure 4")
    p.add_argument("--self-start-reps", type=int, default=200)
    p.add_argument("--only", default="1,2,3,4", help="comma-separated measures to run")
    p.add_argument("--quick", action="store_true", help="few repetitions: a smoke run")
    p.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    p.add_argument("--nice", type=int, default=0,
                   help="run the bench and everything it starts at this niceness (negative "
                        "needs root): shields the measurement from background load, at the "
                        "expense of others' jobs; reported with the results")
    a = p.parse_args()
    if a.quick:  # fewer repetitions, unless given explicitly
        quick = {"launch_reps": 10, "reduce_reps": 2, "restart_reps": 5, "torchrun_reps": 1,
                 "rss_reps": 2, "self_start_reps": 50}
        for k, v in quick.items():
            if getattr(a, k) == p.get_default(k):
                setattr(a, k, v)
    a.drun = os.path.abspath(a.drun)
    a.reduce = os.path.abspath(a.reduce)
    a.drun_ref_name = a.drun_ref
    if a.drun_ref:
        a.drun_ref = os.path.abspath(a.drun_ref)
    for path in (a.drun, a.torchrun, a.python) + ((a.drun_ref,) if a.drun_ref else ()):
        if not os.access(path, os.X_OK):
            sys.exit(f"standalone_bench: {path} is not an executable (see --help)")
    only = a.only = set(a.only.split(","))
    if a.nice:
        os.setpriority(os.PRIO_PROCESS, 0, a.nice)
    b = Bench(a)
    try:
        print(f"load average before: {os.getloadavg()[0]:.2f}; work dir {b.work}", flush=True)
        if "1" in only:
            b.bench_launch()
        if "2" in only:
            b.bench_reduce()
        if "3" in only:
            b.bench_restart()
        if "4" in only:
            b.bench_rss()
        b.report()
    finally:
        b.cleanup()


if __name__ == "__main__":
    main()
