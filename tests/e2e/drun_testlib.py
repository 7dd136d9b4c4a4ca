"""Shared harness of drun's end-to-end tests.

The tests run the real drun (path in $DRUN, set by ctest) on real programs and assert what
a user can observe: exit codes, console lines, files, which processes are left alive.
They wait for events, never sleep: a pipe delivering a marker line, a process exiting
(pidfd + poll), a timeout only as a bound that turns a hang into a failure.

Processes: the test process makes itself a child subreaper, so anything drun leaves behind
is re-parented to it rather than to init; DrunTestCase.tearDown SIGKILLs (by pid) and reaps
whatever is still a descendant of the test. Nothing else is ever signalled.
"""
import ctypes
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "programs")
REPO = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(REPO, "examples")
PYTHON = os.environ.get("PYTHON_EXEC", "/usr/bin/python3")

# Bounds, not delays: how long a drun run may take before the test calls it a hang.
RUN_TIMEOUT = float(os.environ.get("DRUN_E2E_RUN_TIMEOUT", "90"))
DEATH_TIMEOUT = 2.0  # "nothing left behind": processes gone within 2 s

PREFIX_RE = re.compile(r"^\[rank(\d+)\]: ?(.*)$")
SUMMARY_HEADER = "drun: ===== root cause: first failure ====="

# Variables a launcher sets for its workers; stripped from the environment drun is given so
# that an outer torchrun/drun (or a developer's shell) cannot leak into what the tests see.
WORKER_VARS = {
    "LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
    "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
    "USE_LIBUV",  # not a launcher's, but it moves drun's store (launcher/job/worker_store.h)
}

_PR_SET_CHILD_SUBREAPER = 36


def drun_path():
    path = os.environ.get("DRUN")
    if not path:
        raise unittest.SkipTest("DRUN is not set (ctest sets it to the built drun binary)")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"DRUN={path} is not an executable file")
    return path


def become_subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def base_env(**overrides):
    """The environment drun runs in: ours, minus PET_* and the worker variables, plus
    PYTHON_EXEC. overrides: NAME=value sets, NAME=None removes."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PET_") and k not in WORKER_VARS}
    env["PYTHON_EXEC"] = PYTHON
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def documented_fields():
    """The field names of the JSON tables in docs/report.md."""
    with open(os.path.join(REPO, "docs", "report.md")) as f:
        text = f.read()
    top = re.findall(r"^\| `(\w+)` \|", text, re.M)
    nested = {}
    for name in ("failure", "rounds", "workers", "nodes"):
        row = re.search(r"^\| `%s` \|[^\n]*" % name, text, re.M).group(0)
        nested[name] = set(re.findall(r"`(\w+)`", row)) - {name}
    return set(top), nested


STACKS_HEADER = re.compile(r"^=== rank (\d+) \(local \d+\) on (\S+), pid (\d+): state \S")


def stack_sections(text):
    """{rank: (host, pid, text of its section)} of a stack dump (agent/stack_dump.h FormatDump:
    hang_stacks.txt, stacks_*.txt) or of `drun stacks` output, whose "drun stacks:" lines end
    a section."""
    sections, rank = {}, None
    for line in text.splitlines():
        m = STACKS_HEADER.match(line)
        if m:
            rank = int(m.group(1))
            sections[rank] = [m.group(2), int(m.group(3)), line]
        elif rank is not None and not line.startswith("drun stacks:"):
            sections[rank][2] += "\n" + line
        else:
            rank = None
    return {r: tuple(v) for r, v in sections.items()}


def free_port(addr="127.0.0.1"):
    """A TCP port that is free now on `addr` (the test then hands it to drun)."""
    with socket.socket() as sock:
        sock.bind((addr, 0))
        return sock.getsockname()[1]


def run_dir(logs, run_id):
    """The one run directory a run with this run id made under --log-dir `logs`:
    <logs>/<run_id>_XXXXXX, fresh for every run (docs/semantics.md, "Logs in every mode")."""
    found = [d for d in os.listdir(logs) if re.fullmatch(re.escape(run_id) + r"_[A-Za-z0-9]{6}", d)]
    if len(found) != 1:
        raise AssertionError(f"{logs}: {len(found)} run directories of run id {run_id}: {sorted(os.listdir(logs))}")
    return os.path.join(logs, found[0])


def program(name):
    return os.path.join(PROGRAMS, name)


def example(name):
    return os.path.join(EXAMPLES, name)


# ---------------------------------------------------------------------------------------
# Running drun


class DrunProcess:
    """A running drun whose stdout and stderr are read by two threads into line lists.

    wait_for_line() blocks until a line matching a pattern arrives (or the bound passes);
    wait() until drun exits and both pipes reach EOF. With count_stdout=True stdout is only
    counted (bytes, lines, last line), for runs that print hundreds of megabytes.
    """

    def __init__(self, args, env=None, cwd=None, count_stdout=False):
        self.args = [drun_path()] + [str(a) for a in args]
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.args, env=env if env is not None else base_env(),
                                     cwd=cwd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.pid = self.proc.pid
        self.stdout_lines = []
        self.stderr_lines = []
        self.stdout_bytes = 0
        self.stdout_count = 0
        self.stdout_last = b""
        self._partial = {"stdout": b"", "stderr": b""}
        self._cond = threading.Condition()
        self._eof = {"stdout": False, "stderr": False}
        self._threads = [
            threading.Thread(target=self._pump, args=("stdout", self.proc.stdout, count_stdout),
                             daemon=True),
            threading.Thread(target=self._pump, args=("stderr", self.proc.stderr, False),
                             daemon=True),
        ]
        for t in self._threads:
            t.start()
        self.returncode = None
        self.elapsed = None

    def _pump(self, name, pipe, count_only):
        fd = pipe.fileno()
        lines = self.stdout_lines if name == "stdout" else self.stderr_lines
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            with self._cond:
                if count_only:
                    self.stdout_bytes += len(chunk)
                    self.stdout_count += chunk.count(b"\n")
                    self._partial[name] = (self._partial[name] + chunk)[-65536:]
                else:
                    data = self._partial[name] + chunk
                    *complete, rest = data.split(b"\n")
                    lines.extend(line.decode("utf-8", "replace") for line in complete)
                    self._partial[name] = rest
                self._cond.notify_all()
        with self._cond:
            rest = self._partial[name]
            if count_only:
                # The tail kept while counting: its last line, complete or not.
                self.stdout_last = rest[:-1] if rest.endswith(b"\n") else rest
                self.stdout_last = self.stdout_last.rsplit(b"\n", 1)[-1]
            elif rest:
                lines.append(rest.decode("utf-8", "replace"))
            self._partial[name] = b""
            self._eof[name] = True
            self._cond.notify_all()
        pipe.close()

    def wait_for_line(self, pattern, stream="stdout", count=1, timeout=RUN_TIMEOUT):
        """Waits until `count` lines of `stream` match `pattern` (re.search); returns them.
        Raises AssertionError on timeout or EOF first."""
        regex = re.compile(pattern)
        lines = self.stdout_lines if stream == "stdout" else self.stderr_lines
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [line for line in lines if regex.search(line)]
                if len(found) >= count:
                    return found
                if self._eof[stream]:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
        raise AssertionError(
            f"waited for {count} line(s) matching {pattern!r} on drun's {stream}, got "
            f"{len(found)}\n{self.describe()}")

    def wait(self, timeout=RUN_TIMEOUT):
        """Waits for drun to exit and its pipes to close; returns the exit code
        (negative: killed by that signal). On timeout SIGKILLs drun and fails."""
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._join_pipes(5)
            raise AssertionError(f"drun did not exit within {timeout:.0f}s\n{self.describe()}")
        self.elapsed = time.monotonic() - self.started
        # Workers (or grandchildren) could keep the pipes open after drun exits; that is a
        # leak the leak tests catch, here it must not hang the harness.
        self._join_pipes(10)
        return self.returncode

    def _join_pipes(self, timeout):
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    @property
    def stdout(self):
        with self._cond:
            return "\n".join(self.stdout_lines)

    @property
    def stderr(self):
        with self._cond:
            return "\n".join(self.stderr_lines)

    def describe(self, limit=60):
        with self._cond:
            out = self.stdout_lines[-limit:]
            err = self.stderr_lines[-limit:]
        return ("command: " + " ".join(self.args) + f"\nexit: {self.returncode}"
                + "\n--- stdout (tail) ---\n" + "\n".join(out)
                + "\n--- stderr (tail) ---\n" + "\n".join(err))


def run_drun(args, env=None, cwd=None, timeout=RUN_TIMEOUT):
    """Runs drun to completion; returns the DrunProcess (returncode, stdout/stderr lines)."""
    run = DrunProcess(args, env=env, cwd=cwd)
    run.wait(timeout)
    return run


# ---------------------------------------------------------------------------------------
# Parsing drun's output


def rank_lines(lines, rank=None):
    """[(rank, text)] of the prefixed lines (all ranks, or only `rank`)."""
    result = []
    for line in lines:
        m = PREFIX_RE.match(line)
        if m and (rank is None or int(m.group(1)) == rank):
            result.append((int(m.group(1)), m.group(2)))
    return result


def texts_of(lines, rank):
    return [text for _, text in rank_lines(lines, rank)]


def parse_summary(stderr_lines):
    """The root-cause summary as {field: value, ..., "stderr_tail": [lines]}, or None.

    Shape: "drun: ===== root cause: first failure =====", then "drun:   <field>: <value>"
    lines, then "drun:   stderr (last N lines):" followed by "drun:     <line>" lines."""
    try:
        start = stderr_lines.index(SUMMARY_HEADER)
    except ValueError:
        return None
    fields = {"stderr_tail": []}
    in_tail = False
    for line in stderr_lines[start + 1:]:
        if not line.startswith("drun: "):
            continue  # a worker's line interleaved with the summary
        body = line[len("drun: "):]
        if in_tail and body.startswith("    "):
            fields["stderr_tail"].append(body[4:])
            continue
        if not in_tail and body.startswith("  stderr"):
            in_tail = True
            continue
        m = re.match(r"^  (\w+):\s*(.*)$", body)
        if m and not in_tail:
            fields[m.group(1)] = m.group(2).strip()
            continue
        break
    return fields


def short_hostname():
    return socket.gethostname().split(".")[0]


# ---------------------------------------------------------------------------------------
# Processes


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return None


def wait_pids_dead(pids, timeout=DEATH_TIMEOUT, marker=None):
    """Waits (pidfd + poll) until every pid has exited, for at most `timeout` seconds.
    Returns the pids still alive. A pid whose command line lacks `marker` is taken to be
    gone already (reused by an unrelated process)."""
    fds = {}
    try:
        for pid in pids:
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            if marker is not None and marker not in (_cmdline(pid) or marker):
                os.close(fd)
                continue
            fds[fd] = pid
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        alive = dict(fds)
        deadline = time.monotonic() + timeout
        while alive:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for fd, _ in poller.poll(remaining * 1000):
                poller.unregister(fd)
                alive.pop(fd, None)
        return sorted(alive.values())
    finally:
        for fd in fds:
            os.close(fd)


def descendants(root=None):
    """Pids of all live descendants of `root` (default: this process)."""
    root = os.getpid() if root is None else root
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    result, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            result.append(child)
            todo.append(child)
    return result


def kill_and_reap_descendants():
    """SIGKILLs every descendant of the test process (by pid) and reaps its children.
    Returns the pids that were still alive (a leak, unless a test expected it)."""
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


def read_pid_files(directory, prefix):
    """{name: pid} of the files <directory>/<prefix>* holding a pid."""
    result = {}
    for name in sorted(os.listdir(directory)):
        if name.startswith(prefix):
            with open(os.path.join(directory, name)) as f:
                result[name] = int(f.read().strip())
    return result


def load_json_files(directory, prefix):
    result = {}
    for name in sorted(os.listdir(directory)):
        if name.startswith(prefix) and name.endswith(".json"):
            with open(os.path.join(directory, name)) as f:
                result[name] = json.load(f)
    return result


# ---------------------------------------------------------------------------------------


class DrunTestCase(unittest.TestCase):
    """Base class: a fresh temporary directory per test (self.tmp), and no process of the
    test left alive afterwards."""

    @classmethod
    def setUpClass(cls):
        drun_path()  # skip early when DRUN is unset
        become_subreaper()

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="drun-e2e-")
        self.tmp = self._tmp.name
        self.addCleanup(self._tmp.cleanup)
        self.addCleanup(kill_and_reap_descendants)

    def drun(self, *args, env=None, timeout=RUN_TIMEOUT, cwd=None):
        """Runs drun to completion and returns the DrunProcess."""
        return run_drun(list(args), env=env, cwd=cwd, timeout=timeout)

    def start(self, *args, env=None, cwd=None, count_stdout=False):
        """Starts drun and returns the DrunProcess without waiting."""
        return DrunProcess(list(args), env=env, cwd=cwd, count_stdout=count_stdout)

    def assertExit(self, run, code):
        self.assertEqual(run.returncode, code,
                         f"drun exited {run.returncode}, expected {code}\n{run.describe()}")

    def assertSummary(self, run):
        summary = parse_summary(run.stderr_lines)
        self.assertIsNotNone(summary, f"no root-cause summary on stderr\n{run.describe()}")
        return summary


def main():
    unittest.main(verbosity=2, buffer=False)


if __name__ == "__main__":
    sys.exit("drun_testlib.py is a library; run the test_*.py files")
