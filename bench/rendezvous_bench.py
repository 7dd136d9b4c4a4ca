#!/usr/bin/python3
"""drun's multi-node rendezvous at scale, and torchrun 1.13's c10d rendezvous beside it.

    /usr/bin/python3 bench/rendezvous_bench.py --build-dir build [--runs 3] [--parts ...]

Needs the targets `drun` and `drun_rdzv_load` (bench/bench.cmake) in --build-dir, root (network
namespaces, rlimits), Debian's python3-torch for /usr/bin/torchrun. Only loopback and addresses
inside network namespaces this script creates (10.213.71.0/24, with an `unreachable` route for
that subnet in the root namespace first) are used. Every process it starts is recorded by pid
and ended by pid; nothing is killed by name. Every wait is bounded.

Parts (--parts, comma separated; default all):
  loss      node loss until the survivors' workers have exited. Three nodes, each in its own
            network namespace (a bridge in a fourth), `--nnodes 2:3 --nproc-per-node 2`, workers
            `/bin/sh -c '... echo PID NODE >> FILE; exec sleep 1000'` (each writes its pid, so the
            pids are known; they are waited on with pidfds). Node 3 (not the host) is lost by
            (a) kill -9 of its agent, (b) `ip link set down` of its link in the bridge.
            Clock: from just before the kill / the `ip` command to the last survivor worker's
            exit. torchrun 1.13 (c10d) runs the same way, with a bounded wait.
  agents    one round of N real drun agents on 127.0.0.1 (`--nnodes N --no-python /bin/true`,
            one host). `last`: N-1 agents are started in batches of --batch, each batch waiting
            until its agents have joined (each printed "waiting"); their memory is sampled from
            /proc and their idle CPU over 2 s; then the N-th is started. Figure: from starting it
            to the moment every agent has exited 0. `all`: the N agents are started back to
            back; figure: first start -> last exit. Agents' and host's CPU is taken exactly from
            cgroup-v1 cpuacct groups this script creates (rb71-PID-*). --agents-relaxed repeats
            an N with torchrun's keep-alive (5 s x 3) instead of drun's default (0.5 s x 4).
  load      the server alone under simulated agents: a real `drun --nnodes S+1` host (its own
            agent is one node) and drun_rdzv_load opening S streams on 8 connections (Hello,
            Join, heartbeats at the pace the server's Pace gives, as real agents do, Succeeded
            once assigned). Figure: last Join sent -> last Assignment received, as the load
            client sees it. --relaxed-streams repeats an S with keep-alive 5 s x 3.
            --lose-streams S: one of S streams is lost once all are assigned (kill: its stream
            cancelled; stuck: its heartbeats stop); figure: loss -> first Stop at another.
  torchrun  torchrun 1.13 `--rdzv_backend c10d` with N agents on 127.0.0.1 (default and
            last-call settings), started back to back, first start -> last exit; drun `all`
            mode at the same N for the ratio.

--tokens off,on runs `agents` and `load` without a job token, with one (DRUN_RDZV_TOKEN in every
agent's environment, --token for drun_rdzv_load: the challenge-response and the sealed spec of
rendezvous/join_auth.h), or both; the rows say which.

--tls off,on does the same for --rdzv-tls (the host with a server certificate, every agent with
one client certificate, all signed by one CA that tests/make_tls_certs.sh makes with the openssl
command at the start of the run; --tls for drun_rdzv_load). Token and TLS variants of one figure
are interleaved run by run, so a drift of the machine's load touches them alike.
"""
import argparse
import datetime
import json
import os
import platform
import re
import resource
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SUBNET = "10.213.71"
TORCHRUN = "/usr/bin/torchrun"
# Debian's torchrun 1.13 under Python 3.11 exits 1 without explicit -r/-t values.
TORCHRUN_FIX = ["-r", "9:1", "-t", "9:1"]
# The shell's pid without `$$` (torchrun passes worker arguments through string.Template, which
# turns `$$` into `$`): `read` is a builtin, so /proc/self is the shell, which then execs sleep.
# torchrun's keep-alive (5 s x 3) instead of drun's default (0.5 s x 4): a tenth of the heartbeats.
RELAXED_CONF = "keep_alive_interval=5,keep_alive_max_attempt=3"
WORKER_SH = ('read -r pid rest < /proc/self/stat; echo "$pid $BENCH_NODE" >> "$BENCH_PIDS"; '
             'exec sleep 1000')


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def load1():
    return os.getloadavg()[0]


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# ---------------------------------------------------------------- process accounting

class Procs:
    """Every process this script starts, by pid; ended by pid (SIGTERM, then SIGKILL)."""

    def __init__(self):
        self.live = {}  # pid -> description

    def spawn(self, argv, env=None, stdout=None, stderr=None, desc=""):
        actions = []
        if stdout is not None:
            actions.append((os.POSIX_SPAWN_DUP2, stdout, 1))
        if stderr is not None:
            actions.append((os.POSIX_SPAWN_DUP2, stderr, 2))
        pid = os.posix_spawn(argv[0], argv, env if env is not None else os.environ,
                             file_actions=actions)
        self.live[pid] = desc or argv[0]
        return pid

    def reaped(self, pid):
        self.live.pop(pid, None)

    def end(self, pids, grace=10.0):
        """SIGTERM, wait up to `grace`, SIGKILL, reap. Returns {pid: status}."""
        pids = [p for p in pids if p in self.live]
        for p in pids:
            _signal(p, signal.SIGTERM)
        got = wait_exits(pids, grace, procs=self)
        rest = [p for p in pids if p not in got]
        for p in rest:
            log(f"  pid {p} ({self.live.get(p)}) ignored SIGTERM for {grace} s: SIGKILL")
            _signal(p, signal.SIGKILL)
        got.update(wait_exits(rest, 10, procs=self))
        return got

    def end_all(self):
        if self.live:
            self.end(list(self.live), grace=5)


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def wait_exits(pids, timeout, procs=None):
    """Waits (pidfd + poll) for the given pids to exit; returns {pid: (t_exit, status, rusage)}
    for those that did within `timeout`. Our own children are reaped (status, rusage);
    for others status and rusage are None."""
    out = {}
    fds = {}
    for p in pids:
        try:
            fds[os.pidfd_open(p)] = p
        except ProcessLookupError:
            out[p] = (time.monotonic(), None, None)  # already gone (and reaped)
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    deadline = time.monotonic() + timeout
    try:
        while fds:
            left = max(0.0, deadline - time.monotonic())
            ready = poller.poll(left * 1000)
            if not ready and left <= 0:
                break
            for fd, _ in ready:
                t = time.monotonic()
                p = fds.pop(fd)
                poller.unregister(fd)
                os.close(fd)
                status = ru = None
                try:
                    _, status, ru = os.wait4(p, 0)
                except ChildProcessError:
                    pass
                if procs:
                    procs.reaped(p)
                out[p] = (t, status, ru)
    finally:
        for fd in fds:
            os.close(fd)
    return out


def exit_code(status):
    if status is None:
        return None
    return os.waitstatus_to_exitcode(status)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, timeout, host="127.0.0.1"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            time.sleep(0.02)
    return False


def proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "RssAnon", "Threads"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def proc_children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def proc_cpu_s(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class CpuGroup:
    """A cgroup-v1 cpuacct group: exact CPU time of every process started while this script
    sits in it (children inherit the group), exited ones included. /proc/PID/stat cannot do
    this: it rounds each process's utime and stime down to 10 ms, which over 1024 short-lived
    agents is an error of seconds. None when cpuacct is not writable here."""

    ROOT = "/sys/fs/cgroup/cpuacct"

    @classmethod
    def make(cls, name):
        try:
            return cls(name)
        except OSError:
            return None

    def __init__(self, name):
        self.path = os.path.join(self.ROOT, f"rb71-{os.getpid()}-{name}")
        os.mkdir(self.path)
        self.home = self.ROOT
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                if "cpuacct" in ctrls.split(","):
                    self.home = self.ROOT + path

    def usage_s(self):
        with open(os.path.join(self.path, "cpuacct.usage")) as f:
            return int(f.read()) / 1e9

    def enter(self):
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def leave(self):
        with open(os.path.join(self.home, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def remove(self):
        for _ in range(50):  # the last exits may still be leaving the group
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def spawn_in(group, procs, *a, **kw):
    """procs.spawn with the child (and its descendants) in `group`."""
    if group is None:
        return procs.spawn(*a, **kw)
    group.enter()
    try:
        return procs.spawn(*a, **kw)
    finally:
        group.leave()


def ru_cpu(ru):
    return ru.ru_utime + ru.ru_stime if ru else 0.0


def sh(*argv, check=True):
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
    return r


# ---------------------------------------------------------------- part 1: node loss

class Netns:
    """Three node namespaces on a bridge in a hub namespace. Addresses live only inside them;
    the root namespace gets just an `unreachable` route for the subnet (added first)."""

    def __init__(self, nodes=3):
        tag = f"rb71-{os.getpid()}"
        self.hub = f"{tag}-hub"
        self.nodes = [f"{tag}-n{i}" for i in range(1, nodes + 1)]
        self.created = []
        self.route_added = False

    def addr(self, i):
        return f"{SUBNET}.{i + 1}"

    def up(self):
        r = sh("ip", "route", "add", "unreachable", f"{SUBNET}.0/24", check=False)
        if r.returncode == 0:
            self.route_added = True
        elif "File exists" not in r.stderr:
            raise RuntimeError(f"ip route add unreachable {SUBNET}.0/24: {r.stderr.strip()}")
        for ns in [self.hub] + self.nodes:
            sh("ip", "netns", "add", ns)
            self.created.append(ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.hub, "link", "set", "br0", "up")
        for i, ns in enumerate(self.nodes):
            v = f"v{i + 1}"
            sh("ip", "-n", self.hub, "link", "add", v, "type", "veth", "peer", "name", "eth0",
               "netns", ns)
            sh("ip", "-n", self.hub, "link", "set", v, "master", "br0", "up")
            sh("ip", "-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")

    def cut_argv(self, i):
        return ["ip", "-n", self.hub, "link", "set", f"v{i + 1}", "down"]

    def down(self):
        for ns in reversed(self.created):
            sh("ip", "netns", "del", ns, check=False)
        self.created = []
        if self.route_added:
            sh("ip", "route", "del", "unreachable", f"{SUBNET}.0/24", check=False)
            self.route_added = False


def live_sleep(pid):
    """Is pid a running (not zombie) `sleep`, i.e. still one of our workers?"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    comm = stat[stat.index("(") + 1:stat.rindex(")")]
    state = stat[stat.rindex(")") + 2]
    return comm == "sleep" and state != "Z"


def read_workers(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[0].isdigit():
                    out.append((int(parts[0]), parts[1]))
    except OSError:
        pass
    return out


def node_loss_run(procs, args, launcher, mode, tmp, run_index, bound_s):
    """One run: 3 nodes up, lose node 3, time until the survivors' workers have exited."""
    ns = Netns(3)
    pids_file = os.path.join(tmp, f"loss-{launcher}-{mode}-{run_index}.pids")
    logf = os.open(os.path.join(tmp, f"loss-{launcher}-{mode}-{run_index}.log"),
                   os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull = os.open(os.devnull, os.O_WRONLY)
    agents = []
    result = {"launcher": launcher, "mode": mode, "load": load1()}
    try:
        ns.up()
        port = free_port()
        rid = f"loss{os.getpid()}{run_index}{mode}"
        endpoint = f"{ns.addr(0)}:{port}"
        for i, nsname in enumerate(ns.nodes):
            env = dict(os.environ, BENCH_NODE=f"n{i + 1}", BENCH_PIDS=pids_file)
            if launcher == "drun":
                argv = [args.drun, "--nnodes", "2:3", "--nproc-per-node", "2",
                        "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", rid]
            else:
                argv = [TORCHRUN, "--nnodes", "2:3", "--nproc_per_node", "2",
                        "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint, "--rdzv_id", rid,
                        "--rdzv_conf", f"is_host={1 if i == 0 else 0}"] + TORCHRUN_FIX
                argv += ["--no_python"]
            argv = ["/usr/sbin/ip", "netns", "exec", nsname] + argv  # ip execs: same pid
            if launcher == "drun":
                argv += ["--no-python"]
            argv += ["/bin/sh", "-c", WORKER_SH]
            agents.append(procs.spawn(argv, env=env, stdout=devnull, stderr=logf,
                                      desc=f"{launcher} agent n{i + 1}"))
            if i == 0:
                time.sleep(0.2)  # the host first, as a user would start it
        # All six workers up?
        deadline = time.monotonic() + (60 if launcher == "drun" else 240)
        workers = []
        while time.monotonic() < deadline:
            workers = read_workers(pids_file)
            if len(workers) >= 6:
                break
            dead = [p for p in agents if p not in procs.live or wait_exits([p], 0, procs)]
            if dead:
                break
            time.sleep(0.05)
        if len(workers) < 6:
            result["error"] = f"only {len(workers)} of 6 workers started"
            return result
        survivors = [p for p, node in workers if node in ("n1", "n2")]
        victims = [p for p, node in workers if node == "n3"]
        if not all(live_sleep(p) for p in survivors):
            result["error"] = "a survivor worker exited before the loss"
            return result
        time.sleep(0.5)  # let heartbeats settle
        result["load"] = load1()
        if mode == "kill":
            t0 = time.monotonic()
            os.kill(agents[2], signal.SIGKILL)
        else:
            t0 = time.monotonic()
            subprocess.run(ns.cut_argv(2), check=True, timeout=30)
        got = wait_exits(survivors + victims, bound_s)
        surv_t = [got[p][0] - t0 for p in survivors if p in got]
        vict_t = [got[p][0] - t0 for p in victims if p in got]
        result["survivors_stopped"] = len(surv_t)
        result["survivors"] = len(survivors)
        result["stop_s"] = max(surv_t) if len(surv_t) == len(survivors) else None
        result["first_stop_s"] = min(surv_t) if surv_t else None
        result["victim_workers_stop_s"] = max(vict_t) if len(vict_t) == len(victims) else None
        result["bound_s"] = bound_s
        if launcher == "drun" and result["stop_s"] is not None:
            # Did the survivors form a new round? (new workers appear)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and len(read_workers(pids_file)) < 10:
                time.sleep(0.05)
            result["restarted_workers"] = len(read_workers(pids_file)) - 6
        return result
    finally:
        try:
            loss_teardown(procs, agents, pids_file, result)
        finally:
            os.close(logf)
            os.close(devnull)
            ns.down()


def loss_teardown(procs, agents, pids_file, result):
    statuses = procs.end([p for p in agents if p in procs.live], grace=30)
    # Workers left behind (torchrun 1.13 orphans a killed agent's workers): by pid.
    time.sleep(0.2)  # let the workers' new parents reap them
    left = [p for p, _ in read_workers(pids_file) if live_sleep(p)]
    for p in left:
        _signal(p, signal.SIGKILL)
    if left:
        wait_exits(left, 10)
        result["orphans_killed"] = len(left)
    result["agent_exits"] = sorted(str(exit_code(s[1])) for s in statuses.values())


def part_loss(procs, args, tmp, results):
    if os.geteuid() != 0:
        log("loss: needs root (network namespaces); skipped")
        return
    out = results.setdefault("loss", [])
    plan = [] if args.only_torchrun else [("drun", "kill", args.runs, 10), ("drun", "cut", args.runs, 15)]
    if not args.skip_torchrun:
        plan += [("torchrun", "kill", args.torchrun_loss_runs, args.torchrun_wait),
                 ("torchrun", "cut", args.torchrun_loss_runs, args.torchrun_wait)]
    for launcher, mode, runs, bound in plan:
        for r in range(runs):
            res = node_loss_run(procs, args, launcher, mode, tmp, r, bound)
            out.append(res)
            log(f"loss {launcher} {mode} #{r}: {json.dumps(res)}")
            time.sleep(args.settle)


# ---------------------------------------------------------------- part 2: N real agents

def tls_argv(args, tls, who):
    """--rdzv-tls for the host ("server") or an agent ("client") when `tls` is on."""
    if tls != "on":
        return []
    c = args.certs
    return ["--rdzv-tls", f"{c}/{who}.pem,{c}/{who}.key,{c}/ca.pem"]


def drun_round_argv(args, n, port, rid, is_host, extra=(), conf="", tls="off"):
    conf = f"is_host={1 if is_host else 0}" + (f",{conf}" if conf else "")
    return [args.drun, "--nnodes", str(n), "--nproc-per-node", "1", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", rid, "--local-addr", "127.0.0.1",
            "--rdzv-conf", conf, *tls_argv(args, tls, "server" if is_host else "client"), *extra,
            "--no-python", "/bin/true"]


def count_waiting(path):
    try:
        with open(path, "rb") as f:
            return f.read().count(b"drun: waiting:")
    except OSError:
        return 0


def log_digest(path, top=4):
    """The most frequent non-progress lines of a shared agent log, digits folded."""
    counts = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if "drun: waiting:" in line:
                    continue
                key = re.sub(r"[0-9]+", "N", line.strip())[:160]
                counts[key] = counts.get(key, 0) + 1
    except OSError:
        return []
    return sorted(((c, k) for k, c in counts.items()), reverse=True)[:top]


BENCH_TOKEN = "rb71-bench-job-token-0123456789abcdef"


def drun_env(token):
    """The agents' environment: with a job token (--tokens on) or without."""
    env = {k: v for k, v in os.environ.items() if k != "DRUN_RDZV_TOKEN"}
    if token == "on":
        env["DRUN_RDZV_TOKEN"] = BENCH_TOKEN
    return env


def agents_run(procs, args, n, mode, tmp, run_index, relaxed=False, token="off", tls="off"):
    res = {"n": n, "mode": mode, "keepalive": "5s x 3" if relaxed else "0.5s x 4", "load": load1(),
           "token": token, "tls": tls}
    conf = RELAXED_CONF if relaxed else ""
    env = drun_env(token)
    tag = f"{n}-{mode}{'-relaxed' if relaxed else ''}-t{token}-tls{tls}-{run_index}"
    logpath = os.path.join(tmp, f"agents-{tag}.log")
    logf = os.open(logpath, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull = os.open(os.devnull, os.O_WRONLY)
    pids = []
    port = free_port()
    rid = f"agents{os.getpid()}-{tag}"
    report = os.path.join(tmp, f"agents-{tag}.last.json")
    g_host = CpuGroup.make(f"host-{tag}")
    g_agents = CpuGroup.make(f"agents-{tag}")
    try:
        t_first = time.monotonic()
        pids.append(spawn_in(g_host, procs, drun_round_argv(args, n, port, rid, True, conf=conf, tls=tls),
                             env=env, stdout=devnull, stderr=logf, desc="drun host agent"))
        if mode == "last":
            if not wait_listening(port, 30):
                res["error"] = "host did not listen"
                return res
        if mode == "last":
            # In batches, each waiting until its agents have joined: on a 2-core box a thousand
            # simultaneous gRPC start-ups starve the host past the 2-s silence rule (see `all`).
            deadline = time.monotonic() + args.agents_timeout
            i = 1
            while i < n - 1 and time.monotonic() < deadline:
                for _ in range(min(args.batch, n - 1 - i)):
                    pids.append(spawn_in(g_agents, procs,
                                         drun_round_argv(args, n, port, rid, False, conf=conf, tls=tls),
                                         env=env, stdout=devnull, stderr=logf, desc=f"drun agent {i}"))
                    i += 1
                batch_deadline = min(deadline, time.monotonic() + 60)
                while count_waiting(logpath) < i and time.monotonic() < batch_deadline:
                    if wait_exits([pids[0]], 0, procs):
                        break  # the host is gone
                    time.sleep(0.02)
                if count_waiting(logpath) < i:
                    break
            # N = 2: no batch ran, so nothing waited for the host's own agent to join yet.
            while (count_waiting(logpath) < n - 1 and time.monotonic() < deadline
                   and not wait_exits([pids[0]], 0, procs)):
                time.sleep(0.02)
            res["joined_s"] = time.monotonic() - t_first
            if count_waiting(logpath) < n - 1:
                res["error"] = (f"only {count_waiting(logpath)} of {n - 1} agents joined"
                                + ("; the host exited" if pids[0] not in procs.live else ""))
                res["log_digest"] = log_digest(logpath)
                return res
        else:
            if g_agents:
                g_agents.enter()
            try:
                for i in range(1, n):
                    pids.append(procs.spawn(drun_round_argv(args, n, port, rid, False, conf=conf, tls=tls),
                                            env=env, stdout=devnull, stderr=logf, desc=f"drun agent {i}"))
            finally:
                if g_agents:
                    g_agents.leave()
            res["spawn_s"] = time.monotonic() - t_first
        if mode == "last":
            # Memory while they wait: agents and their guardians.
            a_stat = [proc_status(p) for p in pids]
            g_stat = [proc_status(c) for p in pids for c in proc_children(p)]
            for key in ("VmRSS", "VmHWM", "RssAnon", "Threads"):
                res[f"agent_{key}"] = median([s.get(key) for s in a_stat])
                res[f"guardian_{key}"] = median([s.get(key) for s in g_stat])
            res["agents_sampled"] = len(a_stat)
            res["guardians_sampled"] = len(g_stat)
            res["total_RssAnon_MiB"] = sum(s.get("RssAnon", 0) for s in a_stat + g_stat) / 1024
            # What the waiting costs: CPU of the host and of all agents over 2 s of idling.
            if g_host and g_agents:
                c0 = (g_host.usage_s(), g_agents.usage_s())
                time.sleep(2)
                c1 = (g_host.usage_s(), g_agents.usage_s())
                res["idle_host_cpu_frac"] = (c1[0] - c0[0]) / 2
                res["idle_agents_cpu_frac"] = (c1[1] - c0[1]) / 2
            res["load"] = load1()
            t0 = time.monotonic()
            pids.append(spawn_in(g_agents, procs,
                                 drun_round_argv(args, n, port, rid, False, ("--report", report),
                                                 conf=conf, tls=tls),
                                 env=env, stdout=devnull, stderr=logf, desc="drun last agent"))
            t_start = t0
        else:
            t_start = t_first
        got = wait_exits(pids, args.agents_timeout, procs)
        codes = [exit_code(got[p][1]) if p in got else None for p in pids]
        res["exited"] = len(got)
        res["ok"] = sum(1 for c in codes if c == 0)
        res["last_exit_s"] = max(t for t, _, _ in got.values()) - t_start if got else None
        res["first_exit_s"] = min(t for t, _, _ in got.values()) - t_start if got else None
        res["host_exit_s"] = got[pids[0]][0] - t_start if pids[0] in got else None
        res["cpu_s_all_agents"] = sum(ru_cpu(r) for _, _, r in got.values())
        if mode == "last" and g_host and g_agents:
            # CPU spent by all agents (guardians and workers included) and by the host between
            # the last start and the last exit.
            res["window_cpu_s_agents"] = g_agents.usage_s() - c1[1]
            res["window_cpu_s_host"] = g_host.usage_s() - c1[0]
        res["host_cpu_s"] = ru_cpu(got[pids[0]][2]) if pids[0] in got else None
        res["host_maxrss_MiB"] = got[pids[0]][2].ru_maxrss / 1024 if pids[0] in got else None
        if res["ok"] != n:
            bad = [c for c in codes if c != 0]
            res["error"] = f"{n - res['ok']} agents failed or hung: exit codes {sorted(set(map(str, bad)))}"
            res["log_digest"] = log_digest(logpath)
        if mode == "last" and os.path.exists(report):
            with open(report) as f:
                rep = json.load(f)
            res["last_agent_wall_s"] = rep.get("wall_s")
            if rep.get("rounds"):
                res["last_agent_join_to_assignment_s"] = rep["rounds"][0].get("rendezvous_s")
        return res
    finally:
        procs.end([p for p in pids if p in procs.live], grace=10)
        os.close(logf)
        os.close(devnull)
        for g in (g_host, g_agents):
            if g:
                g.remove()


def part_agents(procs, args, tmp, results):
    out = results.setdefault("agents", [])
    plan = [(n, False) for n in args.agents] + [(n, True) for n in args.agents_relaxed]
    for n, relaxed in plan:
        for mode in args.agent_modes:
            # Unpaced starts of 1024 agents on 2 cores are a stress test, not a figure: once.
            # Token on and off interleaved, so a drift of the machine's load touches both alike.
            runs = [(r, t, x) for r in range(args.runs if (mode == "last" or n < 1024) else 1)
                    for t in args.tokens for x in args.tls]
            for r, token, tls in runs:
                res = agents_run(procs, args, n, mode, tmp, r, relaxed, token, tls)
                out.append(res)
                log(f"agents n={n} {mode} relaxed={relaxed} token={token} tls={tls} #{r}: {json.dumps(res)}")
                time.sleep(args.settle)
                if "error" in res:
                    break


# ---------------------------------------------------------------- part 3: simulated agents

def load_run(procs, args, streams, tmp, run_index, relaxed=False, token="off", tls="off", lose=""):
    res = {"streams": streams, "keepalive": "5s x 3" if relaxed else "0.5s x 4", "load": load1(),
           "token": token, "tls": tls}
    if lose:
        res["lose"] = lose
    tag = f"{streams}{'-relaxed' if relaxed else ''}-t{token}-tls{tls}{'-' + lose if lose else ''}-{run_index}"
    logf = os.open(os.path.join(tmp, f"load-{tag}.log"),
                   os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull = os.open(os.devnull, os.O_WRONLY)
    port = free_port()
    rid = f"load{os.getpid()}s{streams}r{run_index}"
    host = None
    try:
        host = procs.spawn(drun_round_argv(args, streams + 1, port, rid, True,
                                           conf=RELAXED_CONF if relaxed else "", tls=tls),
                           env=drun_env(token), stdout=devnull, stderr=logf, desc="drun host (load)")
        if not wait_listening(port, 30):
            res["error"] = "host did not listen"
            return res
        cpu0 = proc_cpu_s(host)
        argv = [args.load_client, "--target", f"127.0.0.1:{port}", "--streams", str(streams),
                "--channels", str(args.channels), "--run-id", rid,
                "--timeout-s", str(args.load_timeout)]
        if token == "on":
            argv += ["--token", BENCH_TOKEN]
        if tls == "on":
            argv += ["--tls", tls_argv(args, tls, "client")[1]]
        if lose:
            argv += ["--lose", lose]
        out_path = os.path.join(tmp, f"load-{tag}.out")
        with open(out_path, "w") as outf:
            t0 = time.monotonic()
            client = procs.spawn(argv, stdout=outf.fileno(), stderr=logf, desc="drun_rdzv_load")
            got = wait_exits([client], args.load_timeout + 60, procs)
        res["client_wall_s"] = time.monotonic() - t0
        if client not in got:
            procs.end([client])
            res["error"] = "load client hung"
            return res
        res["client_exit"] = exit_code(got[client][1])
        res["client_cpu_s"] = ru_cpu(got[client][2])
        with open(out_path) as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                if v:
                    res[k] = int(v) if v.lstrip("-").isdigit() else float(v)
        if lose:  # the job waits for its lost nodes: ended here
            procs.end([host], grace=5)
            return res
        hgot = wait_exits([host], 30, procs)
        if host in hgot:
            res["host_exit"] = exit_code(hgot[host][1])
            res["host_cpu_s"] = ru_cpu(hgot[host][2]) - (cpu0 or 0)
            res["host_maxrss_MiB"] = hgot[host][2].ru_maxrss / 1024
        res["load_end"] = load1()
        if res.get("client_exit") != 0 or res.get("host_exit") != 0:
            res["error"] = f"client exit {res.get('client_exit')}, host exit {res.get('host_exit')}"
            res["log_digest"] = log_digest(os.path.join(tmp, f"load-{tag}.log"))
        return res
    finally:
        if host is not None and host in procs.live:
            procs.end([host], grace=10)
        os.close(logf)
        os.close(devnull)


def part_load(procs, args, tmp, results):
    out = results.setdefault("load", [])
    plan = [(s, False) for s in args.streams] + [(s, True) for s in args.relaxed_streams]
    for s, relaxed in plan:
        for r, token, tls in [(r, t, x) for r in range(args.runs) for t in args.tokens for x in args.tls]:
            res = load_run(procs, args, s, tmp, r, relaxed, token, tls)
            out.append(res)
            log(f"load streams={s} relaxed={relaxed} token={token} tls={tls} #{r}: {json.dumps(res)}")
            time.sleep(args.settle)
            if "error" in res:
                break
    for s in args.lose_streams:
        for mode in args.lose_modes:
            for r in range(args.runs):
                res = load_run(procs, args, s, tmp, r, lose=mode)
                out.append(res)
                log(f"load streams={s} lose={mode} #{r}: {json.dumps(res)}")
                time.sleep(args.settle)


# ---------------------------------------------------------------- part 4: torchrun c10d

def torchrun_run(procs, args, n, tmp, run_index):
    res = {"n": n, "launcher": "torchrun", "load": load1()}
    logf = os.open(os.path.join(tmp, f"torchrun-{n}-{run_index}.log"),
                   os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull = os.open(os.devnull, os.O_WRONLY)
    port = free_port()
    pids = []
    try:
        argv = [TORCHRUN, "--nnodes", str(n), "--nproc_per_node", "1", "--rdzv_backend", "c10d",
                "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", f"tr{os.getpid()}n{n}r{run_index}",
                *TORCHRUN_FIX, "--no_python", "/bin/true"]
        t0 = time.monotonic()
        for i in range(n):
            pids.append(procs.spawn(argv, stdout=devnull, stderr=logf, desc=f"torchrun {i}"))
        got = wait_exits(pids, args.torchrun_timeout, procs)
        codes = [exit_code(got[p][1]) if p in got else None for p in pids]
        res["ok"] = sum(1 for c in codes if c == 0)
        res["last_exit_s"] = max(t for t, _, _ in got.values()) - t0 if got else None
        res["cpu_s_all_agents"] = sum(ru_cpu(r) for _, _, r in got.values())
        if res["ok"] != n:
            res["error"] = f"exit codes {codes}"
        return res
    finally:
        procs.end([p for p in pids if p in procs.live], grace=30)
        os.close(logf)
        os.close(devnull)


def part_torchrun(procs, args, tmp, results):
    out = results.setdefault("torchrun", [])
    for n in args.torchrun_n:
        for r in range(args.torchrun_runs):
            res = torchrun_run(procs, args, n, tmp, r)
            out.append(res)
            log(f"torchrun n={n} #{r}: {json.dumps(res)}")
            time.sleep(args.settle)
        # drun, same shape (all agents started back to back), for the ratio.
        for r in range(args.runs):
            res = agents_run(procs, args, n, "all", tmp, 100 + r)
            res["launcher"] = "drun"
            out.append(res)
            log(f"drun(all) n={n} #{r}: {json.dumps(res)}")
            time.sleep(args.settle)


# ---------------------------------------------------------------- table

def fmt(x, unit="s"):
    if x is None:
        return "-"
    return f"{x:.3f} {unit}" if unit else f"{x:.3f}"


def summarize(results):
    """One row per figure: (measure, drun, torchrun, ratio, goal, met, load1, runs, notes)."""
    rows = []

    def row(what, d, t=None, goal=None, load=None, n=None, note=""):
        ratio = f"{t / d:.0f}x" if (d and isinstance(t, float)) else "-"
        met = "-" if goal is None else ("NO" if d is None else ("yes" if d <= goal else "NO"))
        tt = fmt(t) if isinstance(t, float) else (t or "-")
        rows.append((what, fmt(d), tt, ratio, fmt(goal) if goal else "-", met,
                     f"{load:.1f}" if load is not None else "-", str(n or 0), note))

    def failures(rs):
        bad = [r for r in rs if "error" in r]
        return f"{len(bad)} run(s) failed: {bad[0]['error']}" if bad else ""

    loss = results.get("loss", [])
    for mode, goal, label in (("kill", 1.0, "node loss, kill -9 of an agent"),
                              ("cut", 3.0, "node loss, link down")):
        dall = [r for r in loss if r["launcher"] == "drun" and r["mode"] == mode]
        t = [r for r in loss if r["launcher"] == "torchrun" and r["mode"] == mode]
        if not dall and not t:
            continue
        d = [r for r in dall if "error" not in r]
        tm = None
        if t:
            stopped = [r["stop_s"] for r in t if r.get("stop_s") is not None]
            errs = [r for r in t if "error" in r]
            if errs:
                tm = f"error: {errs[0]['error']}"
            elif len(stopped) == len(t):
                tm = median(stopped)
            else:
                tm = (f"still running after {max(r['bound_s'] for r in t):.0f} s "
                      f"({len(t) - len(stopped)}/{len(t)} runs)")
        row(label + " -> survivors' workers exited", median([r.get("stop_s") for r in d]), tm,
            goal, median([r["load"] for r in dall + t]), len(d),
            failures(dall) or (f"max {max(r['stop_s'] for r in d):.3f} s" if d else ""))

    agents_all = results.get("agents", [])
    for n, ka, tk, tl in sorted({(r["n"], r["keepalive"], r.get("token", "off"), r.get("tls", "off"))
                                 for r in agents_all}):
        agents = [r for r in agents_all if r["keepalive"] == ka and r.get("token", "off") == tk
                  and r.get("tls", "off") == tl]
        ka = f"{ka}, token {tk}, TLS {tl}"
        for mode, label in (("last", "start of the last agent -> all exited 0"),
                            ("all", "start of all (back to back) -> all exited 0")):
            rall = [r for r in agents if r["n"] == n and r["mode"] == mode]
            if not rall:
                continue
            rs = [r for r in rall if "error" not in r]
            note = failures(rall)
            if rs and mode == "last":
                w = median([r.get("window_cpu_s_agents") for r in rs])
                wh = median([r.get("window_cpu_s_host") for r in rs])
                cpu = (f"CPU in the window: agents {w:.2f} s ({1000 * w / n:.1f} ms each), "
                       f"host {wh:.2f} s; " if w is not None and wh is not None else "")
                note = (f"last agent's Join->Assignment "
                        f"{median([r.get('last_agent_join_to_assignment_s') for r in rs]):.3f} s; "
                        f"first exit {median([r.get('first_exit_s') for r in rs]):.3f} s; "
                        + cpu + note)
            row(f"{n} drun agents, keep-alive {ka}: {label}", median([r["last_exit_s"] for r in rs]), None,
                3.0 if (n == 1024 and mode == "last") else None,
                median([r["load"] for r in rall]), len(rs), note)
        rs = [r for r in agents if r["n"] == n and r["mode"] == "last" and "error" not in r]
        if rs:
            mib = lambda k: median([r[k] for r in rs]) / 1024
            rows.append((f"{n} drun agents, keep-alive {ka}: memory per waiting agent (VmRSS / VmHWM / RssAnon)",
                         f"{mib('agent_VmRSS'):.1f} / {mib('agent_VmHWM'):.1f} / "
                         f"{mib('agent_RssAnon'):.1f} MiB", "-", "-", "-", "-",
                         f"{median([r['load'] for r in rs]):.1f}", str(len(rs)),
                         f"+ guardian {mib('guardian_VmRSS'):.1f} MiB RSS "
                         f"({mib('guardian_RssAnon'):.1f} anon); "
                         f"{median([r['agent_Threads'] for r in rs]):.0f} threads/agent; "
                         f"anon total {median([r['total_RssAnon_MiB'] for r in rs]):.0f} MiB; "
                         + (f"idle CPU: host {100 * median([r.get('idle_host_cpu_frac') for r in rs]):.0f}%, "
                            f"all agents {100 * median([r.get('idle_agents_cpu_frac') for r in rs]):.0f}% of a core"
                            if median([r.get('idle_host_cpu_frac') for r in rs]) is not None else "")))

    for r in [r for r in results.get("load", []) if r.get("lose")]:
        rows.append((f"server, {r['streams']} simulated agents: one lost ({r['lose']}) -> first Stop "
                     f"at another", fmt(r.get("loss_to_stop_s")), "-", "-", "-", "-",
                     f"{r['load']:.1f}", "1",
                     f"pace {r.get('pace_ms', 0) / 1000:g} s, silence {r.get('pace_silence_ms', 0) / 1000:g} s; "
                     f"stops {r.get('stops')}; " + r.get("error", "")))
    lrs = [r for r in results.get("load", []) if not r.get("lose")]
    for s, ka, tk, tl in sorted({(r["streams"], r["keepalive"], r.get("token", "off"), r.get("tls", "off"))
                                 for r in lrs}):
        rall = [r for r in lrs if r["streams"] == s and r["keepalive"] == ka
                and r.get("token", "off") == tk and r.get("tls", "off") == tl]
        ka = f"{ka}, token {tk}, TLS {tl}"
        rs = [r for r in rall if "error" not in r]
        note = failures(rall)
        if rs:
            note = (f"first stream->last Assignment {median([r['last_assignment_s'] for r in rs]):.3f} s; "
                    f"last Succeeded->last Finish {median([r['succeeded_to_finish_s'] for r in rs]):.3f} s; "
                    f"host CPU {median([r.get('host_cpu_s') for r in rs]):.2f} s, "
                    f"maxRSS {median([r.get('host_maxrss_MiB') for r in rs]):.0f} MiB; "
                    f"per agent {1e6 * median([r.get('host_cpu_s') for r in rs]) / s:.0f} us CPU, "
                    f"{1024 * median([r.get('host_maxrss_MiB') for r in rs]) / s:.1f} KiB; "
                    f"heartbeat RTT p99 {median([r.get('hb_rtt_p99_s') for r in rs]):.3f} s "
                    f"(pace {median([r.get('pace_ms') for r in rs]) / 1000:g} s, silence "
                    f"{median([r.get('pace_silence_ms') for r in rs]) / 1000:g} s); "
                    f"rejected {sum(r.get('rejected', 0) for r in rall)}, broken "
                    f"{sum(r.get('broken', 0) for r in rall)}; load1 after "
                    f"{median([r.get('load_end') for r in rall]):.1f} " + note)
        goal = {10000: 2.0, 30000: 5.0, 100000: 15.0}.get(s)
        row(f"server, {s} simulated agents, keep-alive {ka}: last Join sent -> last Assignment",
            median([r.get("join_to_assignment_s") for r in rs]), None,
            goal, median([r["load"] for r in rall]), len(rs), note)

    tr = results.get("torchrun", [])
    for n in sorted({r["n"] for r in tr}):
        dall = [r for r in tr if r["n"] == n and r.get("launcher") == "drun"]
        d = [r for r in dall if "error" not in r]
        t = [r for r in tr if r["n"] == n and r.get("launcher") == "torchrun"]
        tok = [r for r in t if "error" not in r]
        tm = median([r["last_exit_s"] for r in tok]) if tok else (
            f"failed: {t[0]['error']}" if t else None)
        row(f"{n} agents on 127.0.0.1, c10d: start of all -> all exited 0",
            median([r["last_exit_s"] for r in d]), tm, None,
            median([r["load"] for r in dall + t]), len(d),
            f"torchrun ok {len(tok)}/{len(t)} runs; CPU of all agents: drun "
            f"{median([r['cpu_s_all_agents'] for r in d]) or 0:.2f} s, torchrun "
            f"{median([r['cpu_s_all_agents'] for r in tok]) or 0:.2f} s " + failures(dall))
    return rows


def print_table(rows):
    head = ("measure", "drun (median)", "torchrun 1.13", "ratio", "goal", "met", "load1", "runs", "notes")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    line = " | ".join(h.ljust(w) for h, w in zip(head, widths))
    print(line)
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(str(c).ljust(w) for c, w in zip(r, widths)))


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--parts", default="loss,agents,load,torchrun")
    ap.add_argument("--runs", type=int, default=3, help="runs per drun measurement")
    ap.add_argument("--torchrun-runs", type=int, default=3, help="runs per N in `torchrun`")
    ap.add_argument("--torchrun-loss-runs", type=int, default=1,
                    help="torchrun runs per loss mode (each waits --torchrun-wait)")
    ap.add_argument("--settle", type=float, default=5,
                    help="pause after each run, so one run's teardown does not load the next (s)")
    ap.add_argument("--torchrun-wait", type=float, default=60,
                    help="bounded wait for torchrun's survivors to notice a lost node (s)")
    ap.add_argument("--torchrun-timeout", type=float, default=300)
    ap.add_argument("--torchrun-n", default="2,4,8")
    ap.add_argument("--agents", default="64,256,1024")
    ap.add_argument("--agents-relaxed", default="1024",
                    help="also run these N with torchrun's keep-alive (5 s x 3)")
    ap.add_argument("--agents-timeout", type=float, default=600)
    ap.add_argument("--agent-modes", default="last,all", help="`agents` modes to run")
    ap.add_argument("--tokens", default="on",
                    help="off, on or off,on: run `agents` and `load` without / with a job token")
    ap.add_argument("--tls", default="off",
                    help="off, on or off,on: run `agents` and `load` without / with --rdzv-tls")
    ap.add_argument("--batch", type=int, default=64,
                    help="`last` mode starts the first N-1 agents in batches of this size")
    ap.add_argument("--streams", default="1000,5000,10000")
    ap.add_argument("--relaxed-streams", default="10000",
                    help="also run these with torchrun's keep-alive (5 s x 3)")
    ap.add_argument("--channels", type=int, default=8)
    ap.add_argument("--lose-streams", default="",
                    help="`load`: also lose one of S streams once all are assigned (--lose-modes)")
    ap.add_argument("--lose-modes", default="kill,stuck",
                    help="kill: its stream is cancelled; stuck: its heartbeats stop")
    ap.add_argument("--load-timeout", type=float, default=180)
    ap.add_argument("--skip-torchrun", action="store_true")
    ap.add_argument("--only-torchrun", action="store_true", help="skip drun's runs in `loss`")
    ap.add_argument("--json", help="write all raw results here")
    args = ap.parse_args()
    args.drun = os.path.join(os.path.abspath(args.build_dir), "launcher", "drun")
    args.load_client = os.path.join(os.path.abspath(args.build_dir), "drun_rdzv_load")
    args.agents = [int(x) for x in args.agents.split(",") if x]
    args.agents_relaxed = [int(x) for x in args.agents_relaxed.split(",") if x]
    args.streams = [int(x) for x in args.streams.split(",") if x]
    args.relaxed_streams = [int(x) for x in args.relaxed_streams.split(",") if x]
    args.lose_streams = [int(x) for x in args.lose_streams.split(",") if x]
    args.lose_modes = [m for m in args.lose_modes.split(",") if m]
    args.torchrun_n = [int(x) for x in args.torchrun_n.split(",") if x]
    args.agent_modes = [m for m in args.agent_modes.split(",") if m]
    args.tokens = [t for t in args.tokens.split(",") if t]
    if any(t not in ("on", "off") for t in args.tokens):
        sys.exit("rendezvous_bench: --tokens takes on, off or off,on")
    args.tls = [t for t in args.tls.split(",") if t]
    if any(t not in ("on", "off") for t in args.tls):
        sys.exit("rendezvous_bench: --tls takes on, off or off,on")
    parts = set(args.parts.split(","))
    for path in [args.drun] + ([args.load_client] if "load" in parts else []):
        if not os.access(path, os.X_OK):
            sys.exit(f"rendezvous_bench: {path} is missing: build the drun and drun_rdzv_load targets")

    # 1024 agents: ~2k processes, ~10k threads, 1k+ sockets on the host.
    want = 65536
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), max(hard, want)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except (ValueError, OSError):
        pass

    results = {
        "machine": {"host": platform.node(), "kernel": platform.release(),
                    "cpus": os.cpu_count(), "date": datetime.datetime.now().isoformat(timespec="seconds"),
                    "load_start": os.getloadavg()},
        "drun": args.drun,
    }
    procs = Procs()
    tmp = tempfile.mkdtemp(prefix="drun-rdzv-bench-")
    if "on" in args.tls:
        # The job's CA and certificates, made now with the openssl command (never committed).
        args.certs = os.path.join(tmp, "certs")
        subprocess.run(["sh", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                           "make_tls_certs.sh"), args.certs], check=True)
    stop = {"sig": None}

    def on_signal(sig, _):
        stop["sig"] = sig
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        for name, fn in (("loss", part_loss), ("agents", part_agents), ("load", part_load),
                         ("torchrun", part_torchrun)):
            if name not in parts or (name == "torchrun" and args.skip_torchrun):
                continue
            try:
                fn(procs, args, tmp, results)
            except Exception as e:  # keep the other parts' figures
                import traceback
                traceback.print_exc()
                results.setdefault("errors", []).append(f"{name}: {e!r}")
            procs.end_all()
    except KeyboardInterrupt:
        log("interrupted: ending every process this run started")
    finally:
        procs.end_all()
        results["machine"]["load_end"] = os.getloadavg()
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
        log(f"logs in {tmp}")

    print(f"# {results['machine']['date']}  {results['machine']['host']}  "
          f"{results['machine']['cpus']} CPUs  load {results['machine']['load_start'][0]:.1f} -> "
          f"{results['machine']['load_end'][0]:.1f}")
    print_table(summarize(results))
    return 0 if stop["sig"] is None else 1


if __name__ == "__main__":
    sys.exit(main())
