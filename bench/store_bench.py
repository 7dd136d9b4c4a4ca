#!/usr/bin/python3
"""drun's c10d store server vs torch 1.13's own TCPStore server, side by side.

    /usr/bin/python3 bench/store_bench.py --build-dir build [--runs 5] [--seconds 3]

Needs the targets drun_store_server and drun_store_bench_load (built when
DRUN_BUILD_TESTS=ON) and Debian's python3-torch for the reference server, which runs as
`TCPStore(host, 0, is_master=True)` in its own process. Both servers are loaded by the same
C++ load generator (bench/store_bench_load.cc), which sends the bytes a torch 1.13 client
sends. Runs alternate between the servers so background load hits both alike.
Loopback only; every phase is bounded in count and time.

Measures:
  ops      64 concurrent clients in a closed loop of set / get (WAIT+GET) / add: API ops/s
  barrier  1024 clients: ADD a counter, the last one SETs a key, all WAIT on it: ms per round
  idle     10 000 connections opened, each served, held, served again: errors and the
           server's RSS growth per connection

With --barrier-scale N1,N2,... only the barrier runs, at each N (a process here may hold
20 000 descriptors: up to about 19 000 clients), both servers alternating, --runs runs of
--barrier-rounds rounds each: per N the median round, the server's CPU and RSS growth per
client, and a least-squares line through the medians (round = a + b N) evaluated at
98 304 ranks -- a model, not a measurement.
"""
import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys

HOST = "127.0.0.1"

TORCH_SERVER = r"""
import datetime, os, sys
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=3600),
                      wait_for_workers=False)
print(store.port, os.getpid(), flush=True)
sys.stdin.read()  # serve until the benchmark closes our stdin
"""


class Server:
    def __init__(self, name, argv, python_server=False):
        self.name = name
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        fields = self.proc.stdout.readline().split()
        if not fields:
            raise RuntimeError(f"{name} server did not start")
        self.port = int(fields[0])
        self.pid = int(fields[1]) if python_server else self.proc.pid

    def stop(self):
        self.proc.communicate(timeout=60)  # closes stdin: the stop signal


def load(build, mode, port, *args, timeout=900):
    argv = [os.path.join(build, "drun_store_bench_load"), mode, "--port", str(port)]
    argv += [str(a) for a in args]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    result = dict(line.split("=", 1) for line in out.stdout.split() if "=" in line)
    if out.returncode != 0:
        result["failed"] = out.stderr.strip() or f"exit {out.returncode}"
    return result


def raise_fd_limit(needed):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, needed)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    distro = "?"
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    distro = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return (f"{os.cpu_count()} cores ({model}), {distro}, Linux {platform.release()}, "
            f"load average at start {os.getloadavg()[0]:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default="build",
                    help="CMake build directory (binaries are in its rendezvous/)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0, help="length of one ops run")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--barrier-clients", type=int, default=1024)
    ap.add_argument("--barrier-rounds", type=int, default=5, help="rounds per run")
    ap.add_argument("--idle-clients", type=int, default=10000)
    ap.add_argument("--barrier-scale", default="",
                    help="comma-separated client counts: run only the barrier at each")
    ap.add_argument("--model-ranks", type=int, default=98304,
                    help="--barrier-scale: where the fitted line is evaluated")
    ap.add_argument("--nice", type=int, default=0,
                    help="niceness increment for the benchmark and both servers (negative "
                         "needs root; reduces noise from other work on a shared machine)")
    args = ap.parse_args()
    if args.nice:
        os.nice(args.nice)  # inherited by both servers and the load generator

    build = os.path.join(args.build_dir, "rendezvous")
    for tool in ("drun_store_server", "drun_store_bench_load"):
        if not os.access(os.path.join(build, tool), os.X_OK):
            sys.exit(f"missing {build}/{tool}: build it first (cmake --build ... --target {tool})")
    limit = raise_fd_limit(args.idle_clients + 1024)
    if limit < args.idle_clients + 64:
        args.idle_clients = limit - 64
        print(f"note: RLIMIT_NOFILE is {limit}; holding {args.idle_clients} idle connections",
              file=sys.stderr)

    print(f"machine: {machine()}")
    print(f"niceness: {os.nice(0)}")
    if args.barrier_scale:
        return barrier_scale(args, build)
    servers = [
        Server("drun", [os.path.join(build, "drun_store_server"), "--host", HOST]),
        Server("torch 1.13", ["/usr/bin/python3", "-c", TORCH_SERVER], python_server=True),
    ]
    ops = {s.name: [] for s in servers}
    ops_per_cpu = {s.name: [] for s in servers}
    barrier = {s.name: [] for s in servers}
    barrier_cpu = {s.name: [] for s in servers}
    idle = {}
    try:
        for run in range(args.runs):
            order = servers if run % 2 == 0 else servers[::-1]
            for s in order:
                r = load(build, "ops", s.port, "--clients", args.clients,
                         "--seconds", args.seconds, "--pid", s.pid)
                if "failed" in r:
                    sys.exit(f"ops on {s.name} failed: {r['failed']}")
                ops[s.name].append(float(r["ops_per_sec"]))
                ops_per_cpu[s.name].append(float(r.get("ops_per_server_cpu_second", "nan")))
                print(f"run {run} ops     {s.name:10s} {float(r['ops_per_sec']):10.0f} ops/s, "
                      f"server CPU {float(r.get('server_cpu_seconds', 'nan')):.2f} s, "
                      f"{ops_per_cpu[s.name][-1]:.0f} ops per server CPU second", flush=True)
            for s in order:
                r = load(build, "barrier", s.port, "--clients", args.barrier_clients,
                         "--rounds", args.barrier_rounds, "--pid", s.pid)
                if "failed" in r:
                    sys.exit(f"barrier on {s.name} failed: {r['failed']}")
                rounds = [float(x) for x in r["round_ms"].split(",")]
                barrier[s.name].extend(rounds)
                barrier_cpu[s.name].append(float(r.get("server_cpu_ms_per_round", "nan")))
                print(f"run {run} barrier {s.name:10s} "
                      + " ".join(f"{x:.1f}" for x in rounds) + " ms, server CPU "
                      f"{barrier_cpu[s.name][-1]:.1f} ms per round", flush=True)
        for s in servers:
            r = load(build, "idle", s.port, "--clients", args.idle_clients, "--pid", s.pid,
                     timeout=1800)
            idle[s.name] = r
            print(f"idle    {s.name:10s} {r}", flush=True)
    finally:
        for s in servers:
            s.stop()

    d, t = "drun", "torch 1.13"
    med = statistics.median
    rows = []
    ops_d, ops_t = med(ops[d]), med(ops[t])
    rows.append((f"ops/s, {args.clients} clients set/get/add (median of {args.runs} x "
                 f"{args.seconds:g} s)", f"{ops_d:,.0f}", f"{ops_t:,.0f}",
                 f"{ops_d / ops_t:.2f}x faster"))
    cpu_d, cpu_t = med(ops_per_cpu[d]), med(ops_per_cpu[t])
    rows.append(("ops per server CPU second (same runs)", f"{cpu_d:,.0f}", f"{cpu_t:,.0f}",
                 f"{cpu_d / cpu_t:.2f}x less CPU per op"))
    bar_d, bar_t = med(barrier[d]), med(barrier[t])
    n_rounds = len(barrier[d])
    rows.append((f"barrier, {args.barrier_clients} clients, ms (median of {n_rounds} rounds)",
                 f"{bar_d:.1f}", f"{bar_t:.1f}", f"{bar_t / bar_d:.2f}x faster"))
    rows.append((f"barrier, worst round, ms", f"{max(barrier[d]):.1f}",
                 f"{max(barrier[t]):.1f}", ""))
    bcpu_d, bcpu_t = med(barrier_cpu[d]), med(barrier_cpu[t])
    rows.append(("barrier, server CPU ms per round (median of runs)", f"{bcpu_d:.1f}",
                 f"{bcpu_t:.1f}", f"{bcpu_t / bcpu_d:.2f}x less CPU"))

    def idle_cell(r, key, fmt="{}"):
        if key not in r:
            return r.get("failed", "?")
        return fmt.format(float(r[key]) if "." in fmt else r[key])

    rows.append((f"{args.idle_clients} idle connections: open / errors",
                 f"{idle[d].get('open', '?')} / "
                 f"{int(idle[d].get('errors', 0)) + int(idle[d].get('recheck_errors', 0))}",
                 f"{idle[t].get('open', '?')} / "
                 f"{int(idle[t].get('errors', 0)) + int(idle[t].get('recheck_errors', 0))}", ""))
    rows.append((f"time to open and serve {args.idle_clients} connections, s",
                 idle_cell(idle[d], "connect_seconds", "{:.2f}"),
                 idle_cell(idle[t], "connect_seconds", "{:.2f}"), ""))
    rows.append(("server RSS growth per idle connection, bytes",
                 idle_cell(idle[d], "bytes_per_conn"), idle_cell(idle[t], "bytes_per_conn"),
                 ""))

    print()
    print(f"| metric | drun | torch 1.13 | drun vs torch |")
    print(f"|---|---:|---:|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    print("raw ops/s: " + "; ".join(f"{k}: " + ", ".join(f"{x:.0f}" for x in v)
                                    for k, v in ops.items()))
    print("raw barrier ms: " + "; ".join(f"{k}: " + ", ".join(f"{x:.1f}" for x in v)
                                         for k, v in barrier.items()))
    return 0


def start_servers(build):
    return [
        Server("drun", [os.path.join(build, "drun_store_server"), "--host", HOST]),
        Server("torch 1.13", ["/usr/bin/python3", "-c", TORCH_SERVER], python_server=True),
    ]


def fit_line(xs, ys):
    """Least squares y = a + b x."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - b * mx, b


def barrier_scale(args, build):
    sizes = [int(x) for x in args.barrier_scale.split(",") if x]
    limit = raise_fd_limit(max(sizes) + 64)
    if max(sizes) + 32 > limit:
        sys.exit(f"--barrier-scale {max(sizes)} needs more descriptors than RLIMIT_NOFILE {limit}")
    med = statistics.median
    stats = {}  # (server, n) -> dict of lists
    for n in sizes:
        # Fresh servers per size: RSS growth and CPU are this size's alone.
        servers = start_servers(build)
        try:
            for run in range(args.runs):
                order = servers if run % 2 == 0 else servers[::-1]
                for s in order:
                    load1 = os.getloadavg()[0]
                    r = load(build, "barrier", s.port, "--clients", n, "--rounds",
                             args.barrier_rounds, "--pid", s.pid, timeout=1800)
                    if "failed" in r:
                        print(f"barrier {n} on {s.name} failed: {r['failed']}", flush=True)
                        continue
                    st = stats.setdefault((s.name, n), {"ms": [], "cpu": [], "rss": [], "load": []})
                    st["ms"].extend(float(x) for x in r["round_ms"].split(","))
                    st["cpu"].append(float(r.get("server_cpu_ms_per_round", "nan")))
                    if "server_rss_kib_after" in r:
                        st["rss"].append(int(r["server_rss_kib_after"]) - int(r["server_rss_kib_before"]))
                    st["load"].append(load1)
                    print(f"barrier {n:6d} {s.name:10s} run {run}: "
                          + " ".join(f"{float(x):.0f}" for x in r["round_ms"].split(","))
                          + f" ms; server CPU {st['cpu'][-1]:.1f} ms/round; load1 {load1:.1f}",
                          flush=True)
        finally:
            for s in servers:
                s.stop()
    print()
    print("| clients | server | round, ms (median) | server CPU per round per client, us | "
          "server RSS growth per client, bytes | load1 | rounds |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in sizes:
        for name in ("drun", "torch 1.13"):
            st = stats.get((name, n))
            if not st:
                print(f"| {n} | {name} | failed | | | | |")
                continue
            rss = f"{1024 * med(st['rss']) / n:.0f}" if st["rss"] else "-"
            print(f"| {n} | {name} | {med(st['ms']):.1f} | {1000 * med(st['cpu']) / n:.1f} | {rss} | "
                  f"{med(st['load']):.1f} | {len(st['ms'])} |")
    print()
    for name in ("drun", "torch 1.13"):
        pts = [(n, med(stats[(name, n)]["ms"])) for n in sizes if (name, n) in stats]
        if len(pts) < 2:
            continue
        a, b = fit_line([p[0] for p in pts], [p[1] for p in pts])
        print(f"model, {name}: round = {a:.1f} ms + {1000 * b:.2f} us x clients; at "
              f"{args.model_ranks} ranks: {(a + b * args.model_ranks) / 1000:.2f} s (a model, "
              f"fitted to {len(pts)} sizes up to {pts[-1][0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
