"""Shared harness of drun's Slurm tests: jobs on the real 3-node cluster of cluster.sh.

The cluster (tests/slurm/cluster.sh up, ctest's fixture `slurm.cluster`) runs slurmctld and
three slurmd in network namespaces drs-ctl, drs-n1..3; this process is a client in the root
namespace (SLURM_CONF points at the cluster's slurm.conf). The tests submit sbatch scripts
and observe what a user would: the job's state and exit code (`scontrol show job`, polled
with a bound: `sbatch --wait` polls every 10 s), its output file, and the processes left on
the nodes (`ip netns pids`, i.e. by namespace, never by name).

A test class with STOCK = True runs on stock nodes (`cluster.sh stock on`: each node's own name
on 127.0.1.1 in its /etc/hosts, a decoy docker0 in 10.213.62.0/24) and switches them back when
it ends; every other test switches them back first if a stock test was cut short.

Workers that must stay up until the test has acted connect to a Gate: a TCP listener of this
process on the root namespace's test address. They report their facts there and block until
the gate releases them, so nothing waits on a timer to make something happen.
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "programs", "train_ddp.py")
STATE = os.environ.get("DRUN_SLURM_STATE", "/tmp/drun-slurm-test")
CONF = os.path.join(STATE, "slurm.conf")
PYTHON = os.environ.get("PYTHON_EXEC", "/usr/bin/python3")
ROOT_ADDR = "10.213.61.1"  # the root namespace's address on the test bridge (cluster.sh)
NODES = ["node1", "node2", "node3"]
NODE_NS = {"node1": "drs-n1", "node2": "drs-n2", "node3": "drs-n3"}
NODE_ADDR = {"node1": "10.213.61.11", "node2": "10.213.61.12", "node3": "10.213.61.13"}  # eth0
CLUSTER_SH = os.path.join(HERE, "cluster.sh")
STOCK_MARK = os.path.join(STATE, "stock")  # cluster.sh's mark of stock mode
DECOY_SUBNET = "10.213.62.0/24"  # stock mode's decoy docker0 interfaces (cluster.sh)

JOB_TIMEOUT = float(os.environ.get("DRUN_SLURM_JOB_TIMEOUT", "90"))  # a bound, not a delay
POLL = 0.2  # interval of the bounded polls of scontrol (Slurm has no completion event)

WORKER_RE = re.compile(r"^\[(?P<host>[^\]:]+):rank(?P<prefix_rank>\d+)\]: WORKER (?P<kv>.*)$")
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


def drun_path():
    path = os.environ.get("DRUN")
    if not path:
        raise unittest.SkipTest("DRUN is not set (ctest sets it to the built drun binary)")
    return path


def slurm_env(**extra):
    env = dict(os.environ)
    env["SLURM_CONF"] = CONF
    env["PYTHON_EXEC"] = PYTHON
    for k in [k for k in env if k.startswith(("SLURM_", "PET_", "DRUN_RDZV"))]:
        if k != "SLURM_CONF":
            del env[k]
    env.update(extra)
    return env


def run(args, check=True, timeout=30):
    proc = subprocess.run(args, env=slurm_env(), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def cluster_unavailable_reason():
    if os.geteuid() != 0:
        return "the Slurm tests need root (network namespaces, slurmd, munged)"
    if not os.path.exists(CONF):
        return f"no test cluster ({CONF} is missing): run tests/slurm/cluster.sh up"
    try:
        ping = run(["scontrol", "ping"], check=False, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"scontrol ping: {e}"
    if ping.returncode != 0 or "UP" not in ping.stdout:
        return f"the test cluster's slurmctld does not answer: {ping.stdout.strip()} {ping.stderr.strip()}"
    return None


def daemon_pids():
    pids = set()
    try:
        with open(os.path.join(STATE, "pids")) as f:
            for line in f:
                pids.add(int(line.split()[0]))
    except OSError:
        pass
    return pids


def node_processes():
    """{node: [(pid, command line)]} of the processes in each node's namespace other than the
    cluster's own daemons."""
    daemons = daemon_pids()
    out = {}
    for node, ns in NODE_NS.items():
        proc = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        procs = []
        for tok in proc.stdout.split():
            pid = int(tok)
            if pid in daemons:
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue  # gone meanwhile
            procs.append((pid, cmd))
        out[node] = procs
    return out


def set_stock(on):
    """Stock nodes on or off (cluster.sh stock on|off; both are idempotent). On is always
    asked for, so that a switch cut short is completed; off only when the mark says stock."""
    if not on and not os.path.exists(STOCK_MARK):
        return
    proc = subprocess.run(["bash", CLUSTER_SH, "stock", "on" if on else "off"], env=slurm_env(),
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise AssertionError(f"cluster.sh stock {'on' if on else 'off'} failed ({proc.returncode}): "
                             f"{proc.stdout.strip()} {proc.stderr.strip()}")


class Job:
    def __init__(self, jid, out_path):
        self.id = jid
        self.out_path = out_path

    def info(self):
        proc = run(["scontrol", "-o", "show", "job", str(self.id)], check=False)
        fields = {}
        for tok in proc.stdout.split():
            if "=" in tok:
                k, v = tok.split("=", 1)
                fields[k] = v
        return fields

    def state(self):
        return self.info().get("JobState", "UNKNOWN")

    def wait(self, timeout=JOB_TIMEOUT):
        """Polls scontrol until the job ends; returns its fields (JobState, ExitCode, ...)."""
        end = time.monotonic() + timeout
        while True:
            info = self.info()
            if info.get("JobState") in TERMINAL:
                return info
            if time.monotonic() > end:
                raise AssertionError(f"job {self.id} still {info.get('JobState')} after {timeout} s; "
                                     f"output so far:\n{self.output()}")
            time.sleep(POLL)

    def wait_running(self, timeout=JOB_TIMEOUT):
        end = time.monotonic() + timeout
        while True:
            st = self.state()
            if st == "RUNNING":
                return
            if st in TERMINAL or time.monotonic() > end:
                raise AssertionError(f"job {self.id} is {st}, not running; output:\n{self.output()}")
            time.sleep(POLL)

    def output(self):
        try:
            with open(self.out_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def cancel(self):
        run(["scancel", str(self.id)])


class SlurmTestCase(unittest.TestCase):
    """Skips without the cluster; gives each test a directory on the (shared) file system and
    checks after each test that no process of it is left on any node. STOCK: the nodes as
    stock lab PCs for this class's tests (set_stock), as they were after it."""

    STOCK = False

    @classmethod
    def setUpClass(cls):
        if cls.STOCK:
            cls.addClassCleanup(set_stock, False)

    def setUp(self):
        reason = cluster_unavailable_reason()
        if reason:
            self.skipTest(reason)
        set_stock(self.STOCK)
        self.drun = drun_path()
        os.makedirs(os.path.join(STATE, "out"), exist_ok=True)
        self.dir = tempfile.mkdtemp(prefix=f"{self.id().split('.')[-1]}-", dir=os.path.join(STATE, "out"))
        self.jobs = []

    def tearDown(self):
        for job in self.jobs:
            if job.state() not in TERMINAL:
                job.cancel()
        for job in self.jobs:
            job.wait()
        self.assert_nodes_clean()

    def submit(self, body, name="job", sbatch_args=()):
        """Writes an sbatch script (#!/bin/bash + body) and submits it; returns the Job."""
        script = os.path.join(self.dir, f"{name}.sbatch")
        with open(script, "w") as f:
            f.write("#!/bin/bash\n" + body.lstrip("\n"))
        return self.submit_file(script, name, [f"--chdir={self.dir}", f"--job-name={name}",
                                               *sbatch_args])

    def submit_file(self, script, name, sbatch_args=(), script_args=(), env=None):
        """sbatch [sbatch_args] script [script_args], output in the test's directory."""
        out = os.path.join(self.dir, f"{name}-%j.out")
        proc = subprocess.run(["sbatch", "--parsable", f"--output={out}", *sbatch_args, script,
                               *script_args],
                              env=slurm_env(**(env or {})), capture_output=True, text=True,
                              timeout=30)
        if proc.returncode != 0:
            raise AssertionError(f"sbatch {script} failed: {proc.stderr.strip()}")
        jid = int(proc.stdout.strip().split(";")[0])
        job = Job(jid, out.replace("%j", str(jid)))
        self.jobs.append(job)
        return job

    def assert_nodes_clean(self, timeout=30):
        """Every process of the tests' jobs is gone from every node (bounded poll: Slurm's
        slurmstepd lingers briefly after a job's state changes)."""
        end = time.monotonic() + timeout
        while True:
            left = {n: p for n, p in node_processes().items() if p}
            if not left:
                return
            if time.monotonic() > end:
                self.fail(f"processes left on the nodes {timeout} s after the job: {left}")
            time.sleep(POLL)

    def assert_completed(self, job, info):
        self.assertEqual(info.get("JobState"), "COMPLETED",
                         f"job {job.id}: {info.get('JobState')} exit {info.get('ExitCode')}\n{job.output()}")

    def workers(self, output):
        """The WORKER lines of an output, as dicts (with the prefix's host and rank)."""
        rows = []
        for line in output.splitlines():
            m = WORKER_RE.match(line)
            if not m:
                continue
            row = dict(kv.split("=", 1) for kv in m.group("kv").split())
            row["prefix_host"] = m.group("host")
            row["prefix_rank"] = m.group("prefix_rank")
            rows.append(row)
        return rows

    def drun_lines(self, output):
        return [l for l in output.splitlines() if l.startswith("drun: ")]


class Gate:
    """Workers started with --gate HOST:PORT connect here after training, send their facts
    and block until released."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((ROOT_ADDR, 0))
        self.sock.listen(64)
        self.address = f"{ROOT_ADDR}:{self.sock.getsockname()[1]}"
        self.conns = []
        self.facts = []

    def wait_for(self, n, job=None, timeout=JOB_TIMEOUT):
        """Accepts until n workers have reported; returns their facts (sorted by rank)."""
        end = time.monotonic() + timeout
        while len(self.facts) < n:
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"only {len(self.facts)} of {n} workers reached the gate in "
                                     f"{timeout} s" + (f"; job output:\n{job.output()}" if job else ""))
            self.sock.settimeout(left)
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            conn.settimeout(left)
            line = b""
            while not line.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                line += chunk
            self.conns.append(conn)
            self.facts.append(json.loads(line))
        return sorted(self.facts, key=lambda f: f["rank"])

    def lines_from_all(self, timeout=JOB_TIMEOUT):
        """One more line from every worker at the gate (e.g. what a signal made it say)."""
        lines = []
        end = time.monotonic() + timeout
        for c in self.conns:
            buf = b""
            while not buf.endswith(b"\n"):
                c.settimeout(max(0.001, end - time.monotonic()))
                chunk = c.recv(1)
                if not chunk:
                    break
                buf += chunk
            lines.append(buf.decode().strip())
        return lines

    def release(self):
        for c in self.conns:
            try:
                c.sendall(b"g")
            except OSError:
                pass

    def close(self):
        for c in self.conns:
            c.close()
        self.sock.close()


def main():
    """unittest's main, with exit code 77 (ctest's SKIP_RETURN_CODE) when everything skipped."""
    prog = unittest.main(exit=False, verbosity=2)
    result = prog.result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.testsRun and len(result.skipped) == result.testsRun:
        sys.exit(77)
    sys.exit(0)
