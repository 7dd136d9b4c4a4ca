"""Shared harness of drun's multi-node end-to-end tests.

Several drun agents run on this machine, each as its own "node": either with its own
--local-addr in 127.0.0.0/8 (127.0.0.1 hosts the rendezvous), or inside network namespaces
the test creates (NetnsLab), so that a link can really be cut. The tests assert what users
observe: exit codes, console lines, the root-cause summary, which processes are alive.

Adapted from tests/e2e/drun_testlib.py (same rules): wait for events, never sleep. Lines
are read from every agent's pipes by threads and waited for with a condition variable;
a process's death is waited for with pidfd_open + poll; workers that must stay up until
the test has seen something wait on a Gate (a FIFO the test holds open). Timeouts are only
bounds that turn a hang into a failure.

Processes: the test process is a child subreaper, so whatever an agent leaves behind is
re-parented to it; each test's cleanup SIGKILLs (by pid) and reaps its remaining
descendants. Nothing else is ever signalled.
"""
import ctypes
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

# Process helpers shared with the single-node suite (tests/e2e/drun_testlib.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "e2e"))
from drun_testlib import _cmdline, parse_summary, become_subreaper, descendants, drun_path, wait_pids_dead  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "programs")
PYTHON = os.environ.get("PYTHON_EXEC", "/usr/bin/python3")

# Bounds, not delays.
RUN_TIMEOUT = float(os.environ.get("DRUN_MN_RUN_TIMEOUT", "90"))
DEATH_TIMEOUT = 5.0  # processes gone within this after their agent said it is done

HOSTNAME = socket.gethostname()
# Multi-node console prefix: "[<hostname>:rank<R>]: ".
PREFIX_RE = re.compile(r"^\[(?P<host>[^\]]*):rank(?P<rank>\d+)\]: ?(?P<text>.*)$")
SUMMARY_HEADER = "drun: ===== root cause: first failure ====="

WORKER_VARS = {
    "LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
    "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
}

_PR_SET_CHILD_SUBREAPER = 36


def base_env(**overrides):
    """The environment drun runs in: ours, minus PET_*, DRUN_RDZV_TOKEN and the worker
    variables, plus PYTHON_EXEC. overrides: NAME=value sets, NAME=None removes."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PET_") and k not in WORKER_VARS and k != "DRUN_RDZV_TOKEN"}
    env["PYTHON_EXEC"] = PYTHON
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def program(name):
    return os.path.join(PROGRAMS, name)


def free_port(addr="127.0.0.1"):
    """A TCP port free on addr right now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------
# Running drun


class DrunProcess:
    """A running drun (one agent) whose stdout and stderr are read by two threads into line
    lists, each line with its arrival time (time.monotonic()).

    `wrapper` is put before the binary (e.g. ["ip", "netns", "exec", NS]); `peers` is the
    list of all agents of the test, so that a failure message shows all of them.
    """

    def __init__(self, args, env=None, cwd=None, wrapper=(), name="drun", peers=None):
        self.name = name
        self.args = list(wrapper) + [drun_path()] + [str(a) for a in args]
        self.peers = peers if peers is not None else [self]
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.args, env=env if env is not None else base_env(),
                                     cwd=cwd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.pid = self.proc.pid
        self._lines = {"stdout": [], "stderr": []}
        self._times = {"stdout": [], "stderr": []}
        self._partial = {"stdout": b"", "stderr": b""}
        self._eof = {"stdout": False, "stderr": False}
        self._cond = threading.Condition()
        self._threads = [
            threading.Thread(target=self._pump, args=("stdout", self.proc.stdout), daemon=True),
            threading.Thread(target=self._pump, args=("stderr", self.proc.stderr), daemon=True),
        ]
        for t in self._threads:
            t.start()
        self.returncode = None
        self.exited_at = None

    def _pump(self, name, pipe):
        fd = pipe.fileno()
        while True:
            chunk = os.read(fd, 1 << 16)
            now = time.monotonic()
            with self._cond:
                data = self._partial[name] + chunk
                if chunk:
                    *complete, rest = data.split(b"\n")
                else:
                    complete, rest = ([data] if data else []), b""
                for line in complete:
                    self._lines[name].append(line.decode("utf-8", "replace"))
                    self._times[name].append(now)
                self._partial[name] = rest
                if not chunk:
                    self._eof[name] = True
                self._cond.notify_all()
            if not chunk:
                break
        pipe.close()

    def wait_for_line(self, pattern, stream="stdout", count=1, timeout=RUN_TIMEOUT):
        """Waits until `count` lines of `stream` match `pattern` (re.search); returns
        [(arrival time, line)]. Raises AssertionError on timeout, or on EOF first."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [(t, line) for t, line in zip(self._times[stream], self._lines[stream])
                         if regex.search(line)]
                if len(found) >= count:
                    return found
                if self._eof[stream]:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
        raise AssertionError(
            f"{self.name}: waited {timeout:.0f}s for {count} line(s) matching {pattern!r} on "
            f"{stream}, got {len(found)}\n{self.describe_all()}")

    def wait(self, timeout=RUN_TIMEOUT):
        """Waits for drun to exit and its pipes to close; returns the exit code
        (negative: killed by that signal). On timeout SIGKILLs drun and fails."""
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._join_pipes(5)
            raise AssertionError(f"{self.name} did not exit within {timeout:.0f}s\n"
                                 f"{self.describe_all()}")
        self.exited_at = time.monotonic()
        self._join_pipes(10)
        return self.returncode

    def _join_pipes(self, timeout):
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def kill(self, sig=signal.SIGKILL):
        """Signals this agent (by pid) and returns the time it was sent."""
        sent = time.monotonic()
        self.proc.send_signal(sig)
        return sent

    def lines(self, stream="stdout"):
        with self._cond:
            return list(self._lines[stream])

    @property
    def stdout_lines(self):
        return self.lines("stdout")

    @property
    def stderr_lines(self):
        return self.lines("stderr")

    @property
    def stderr(self):
        return "\n".join(self.stderr_lines)

    def describe(self, limit=40):
        with self._cond:
            out = self._lines["stdout"][-limit:]
            err = self._lines["stderr"][-limit:]
        code = self.returncode if self.returncode is not None else self.proc.poll()
        return (f"=== {self.name}: " + " ".join(self.args) + f"\n    exit: {code}"
                + "\n--- stdout (tail) ---\n" + "\n".join(out)
                + "\n--- stderr (tail) ---\n" + "\n".join(err))

    def describe_all(self):
        return "\n".join(p.describe() for p in self.peers)


# ---------------------------------------------------------------------------------------
# Parsing drun's output


def prefixed(lines):
    """[(host, rank, text)] of the lines with a multi-node prefix."""
    result = []
    for line in lines:
        m = PREFIX_RE.match(line)
        if m:
            result.append((m.group("host"), int(m.group("rank")), m.group("text")))
    return result


WORKER_RE = r"worker rank=\d+ "


def worker_records(lines):
    """The mn_worker.py lines among `lines` (prefixed), as dicts; numeric values as ints,
    plus "prefix_rank" and "prefix_host" from the console prefix."""
    records = []
    for host, rank, text in prefixed(lines):
        if not text.startswith("worker rank="):
            continue
        rec = {"prefix_host": host, "prefix_rank": rank}
        for field in text.split()[1:]:
            key, _, value = field.partition("=")
            rec[key] = int(value) if value.lstrip("-").isdigit() else value
        records.append(rec)
    return records


def summary_lines(stderr_lines):
    """The summary block's own lines (from the header on, "drun: " lines only)."""
    try:
        start = stderr_lines.index(SUMMARY_HEADER)
    except ValueError:
        return []
    block = []
    for line in stderr_lines[start:]:
        if not line.startswith("drun: "):
            continue
        if block and not line.startswith("drun:   "):
            break
        block.append(line)
    return block


# ---------------------------------------------------------------------------------------
# Processes


def kill_and_reap_descendants():
    """SIGKILLs every descendant of the test process (by pid) and reaps its children."""
    leftover = descendants()
    for pid in leftover:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_pids_dead(leftover, timeout=5)
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    return leftover


class Gate:
    """A FIFO the test holds open for writing: mn_worker.py --then gate waits while it is
    held and exits 0 once open() is called (the last writer closes, readers get EOF)."""

    def __init__(self, directory, name="gate"):
        self.path = os.path.join(directory, name + ".fifo")
        os.mkfifo(self.path)
        # O_RDWR never blocks on a FIFO (Linux) and makes us a writer.
        self._fd = os.open(self.path, os.O_RDWR)

    def open(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    close = open


# ---------------------------------------------------------------------------------------
# Network namespaces (the link-cut tests)


def run_ip(*args, check=True):
    """Runs `ip ARGS`; returns the CompletedProcess; raises with ip's stderr on failure."""
    proc = subprocess.run(["ip"] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(map(str, args))}: exit {proc.returncode}: "
                           f"{proc.stderr.strip()}")
    return proc


def netns_unavailable_reason():
    """Why the namespace tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces (run the suite as root)"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    probe = run_ip("netns", "list", check=False)
    if probe.returncode != 0:
        return f"`ip netns` is unavailable: {probe.stderr.strip()}"
    return None


class NetnsLab:
    """A private test network: a bridge namespace with a bridge, and one namespace per node
    with a veth pair whose other end is a port of that bridge. Every address lives inside
    namespaces created here; the root namespace only gets an `unreachable` route for the
    subnet (added before any namespace exists), so nothing the test does can leak onto a
    real network. teardown() deletes the namespaces and the route.

    Node i gets address <prefix>.<i + 1> on its "eth0"; its bridge port is "vh<i>".
    """

    def __init__(self, subnet_prefix, nodes):
        self.prefix = subnet_prefix  # e.g. "10.213.31"
        self.subnet = f"{subnet_prefix}.0/24"
        tag = f"drun-mn{subnet_prefix.split('.')[-1]}-{os.getpid()}"
        self.bridge_ns = f"{tag}-br"
        self.node_ns = [f"{tag}-n{i}" for i in range(nodes)]
        self._created = []
        self._route_added = False

    def addr(self, i):
        return f"{self.prefix}.{i + 1}"

    def setup(self):
        # Safety first: the subnet is unreachable from the root namespace before any
        # namespace or address exists.
        exact = run_ip("-4", "route", "show", "exact", self.subnet).stdout.strip()
        local = run_ip("-4", "-o", "addr", "show", "to", self.subnet).stdout.strip()
        if local:
            raise unittest.SkipTest(f"the root namespace has an address in {self.subnet}: "
                                    f"{local}; pick another test subnet")
        if exact and not exact.startswith("unreachable"):
            raise unittest.SkipTest(f"the root namespace already routes {self.subnet} "
                                    f"({exact}); pick another test subnet")
        if not exact:
            run_ip("route", "add", "unreachable", self.subnet)
        # else: left by an earlier run of this test that was killed; take it over.
        self._route_added = True
        self._remove_stale_namespaces()
        for ns in [self.bridge_ns] + self.node_ns:
            run_ip("netns", "add", ns)
            self._created.append(ns)
        br = self.bridge_ns
        run_ip("-n", br, "link", "set", "lo", "up")
        run_ip("-n", br, "link", "add", "br0", "type", "bridge")
        run_ip("-n", br, "link", "set", "br0", "up")
        for i, ns in enumerate(self.node_ns):
            run_ip("-n", br, "link", "add", f"vh{i}", "type", "veth",
                   "peer", "name", "eth0", "netns", ns)
            run_ip("-n", br, "link", "set", f"vh{i}", "master", "br0")
            run_ip("-n", br, "link", "set", f"vh{i}", "up")
            run_ip("-n", ns, "link", "set", "lo", "up")
            run_ip("-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", "eth0")
            run_ip("-n", ns, "link", "set", "eth0", "up")

    def _remove_stale_namespaces(self):
        """Namespaces of this very test left by a run that was killed before its cleanup
        (named drun-mn<X>-<pid>-..., with that pid gone)."""
        mine = re.compile(rf"^drun-mn{re.escape(self.prefix.split('.')[-1])}-(\d+)-(br|n\d+)$")
        for line in run_ip("netns", "list", check=False).stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            m = mine.match(name)
            if m and not os.path.exists(f"/proc/{m.group(1)}"):
                run_ip("netns", "del", name, check=False)

    def wrapper(self, i):
        return ["ip", "netns", "exec", self.node_ns[i]]

    def cut(self, i):
        """Takes node i's side of its link down; returns the time it was done."""
        run_ip("-n", self.node_ns[i], "link", "set", "eth0", "down")
        return time.monotonic()

    def teardown(self):
        errors = []
        for ns in reversed(self._created):
            proc = run_ip("netns", "del", ns, check=False)
            if proc.returncode != 0:
                errors.append(f"netns del {ns}: {proc.stderr.strip()}")
        self._created = []
        if self._route_added:
            proc = run_ip("route", "del", "unreachable", self.subnet, check=False)
            if proc.returncode != 0:
                errors.append(f"route del unreachable {self.subnet}: {proc.stderr.strip()}")
            self._route_added = False
        if errors:
            raise RuntimeError("; ".join(errors))


# ---------------------------------------------------------------------------------------


class MultiNodeTestCase(unittest.TestCase):
    """Base class: a fresh temporary directory per test (self.tmp), a fresh rendezvous
    port, and no process of the test left alive afterwards."""

    # Short rendezvous settings so that a test never waits 30 s for a last call.
    DEFAULT_CONF = {"join_timeout": "60", "last_call_timeout": "1", "read_timeout": "30"}

    @classmethod
    def setUpClass(cls):
        drun_path()  # skip early when DRUN is unset
        become_subreaper()

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="drun-mn-")
        self.tmp = self._tmp.name
        self.addCleanup(self._tmp.cleanup)
        self.addCleanup(kill_and_reap_descendants)
        self.agents = []
        self.port = free_port()
        self.endpoint = f"127.0.0.1:{self.port}"

    def start(self, args, name, env=None, wrapper=()):
        """Starts one drun with exactly `args`."""
        agent = DrunProcess(args, env=env, wrapper=wrapper, name=name, peers=self.agents)
        self.agents.append(agent)
        return agent

    def agent_args(self, local_addr, command, nnodes="2", nproc=2, endpoint=None,
                   rdzv_id="mnjob", conf=None, extra=()):
        """The command line of one c10d agent; `command` is the program and its args
        (run with PYTHON_EXEC unless extra has --no-python)."""
        settings = dict(self.DEFAULT_CONF)
        settings.update(conf or {})
        args = ["--nnodes", nnodes, "--nproc-per-node", nproc, "--rdzv-backend", "c10d",
                "--rdzv-endpoint", endpoint or self.endpoint, "--rdzv-id", rdzv_id]
        if local_addr:
            args += ["--local-addr", local_addr]
        if settings:
            args += ["--rdzv-conf", ",".join(f"{k}={v}" for k, v in settings.items())]
        return args + list(extra) + list(command)

    def agent(self, local_addr, command, name=None, env=None, wrapper=(), **kwargs):
        return self.start(self.agent_args(local_addr, command, **kwargs),
                          name=name or f"agent@{local_addr}", env=env, wrapper=wrapper)

    def wait_joined(self, agent, count, timeout=RUN_TIMEOUT):
        """Waits for the agent's "drun: waiting: <count> of ..." line (it joined and the
        server counted `count` nodes)."""
        return agent.wait_for_line(rf"^drun: waiting: {count} of ", "stderr", timeout=timeout)

    def wait_workers(self, agent, count, timeout=RUN_TIMEOUT, **match):
        """Waits until the agent printed `count` worker lines whose fields equal `match`
        (e.g. world=6); returns those records."""
        pattern = WORKER_RE + "".join(f"(?=.*\\b{k}={v}\\b)" for k, v in match.items())
        agent.wait_for_line(pattern, count=count, timeout=timeout)
        recs = [r for r in worker_records(agent.stdout_lines)
                if all(r.get(k) == v for k, v in match.items())]
        return recs

    def assertExit(self, agent, code, timeout=RUN_TIMEOUT):
        agent.wait(timeout)
        self.assertEqual(agent.returncode, code,
                         f"{agent.name} exited {agent.returncode}, expected {code}\n"
                         f"{agent.describe_all()}")

    def assertNoWorkersLeft(self, pids, timeout=DEATH_TIMEOUT):
        alive = wait_pids_dead(pids, timeout=timeout, marker="mn_worker.py")
        self.assertEqual(alive, [], f"worker processes still alive: {alive}\n"
                         + "\n".join(f"{p}: {_cmdline(p)}" for p in alive))

    def describe_all(self):
        return "\n".join(a.describe() for a in self.agents)


class NetnsTestCase(MultiNodeTestCase):
    """A MultiNodeTestCase on a private NetnsLab: NODES namespaces in SUBNET (each test
    file its own subnet), the rendezvous endpoint on node 0's address at PORT. Skipped with
    the reason where network namespaces are not available."""
    SUBNET = None  # e.g. "10.213.31"
    NODES = 3
    PORT = 29400   # a fresh namespace: nothing else listens there

    @classmethod
    def setUpClass(cls):
        reason = netns_unavailable_reason()
        if reason:
            raise unittest.SkipTest(reason)
        super().setUpClass()

    def setUp(self):
        super().setUp()
        self.lab = NetnsLab(self.SUBNET, self.NODES)
        # Cleanups run last-in first-out: processes die before their namespaces go.
        self.addCleanup(self.lab.teardown)
        self.addCleanup(kill_and_reap_descendants)
        self.lab.setup()
        self.endpoint = f"{self.lab.addr(0)}:{self.PORT}"


def report(text):
    """A measured figure, on stderr where ctest -V shows it."""
    sys.stderr.write(f"[measured] {text}\n")
    sys.stderr.flush()


def worker_command(*args):
    return [program("mn_worker.py")] + [str(a) for a in args]


def main():
    unittest.main(verbosity=2, buffer=False)


if __name__ == "__main__":
    sys.exit("mn_testlib.py is a library; run the test_*.py files")
