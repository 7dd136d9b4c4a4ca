"""Hangs (issue #15, docs/hangs.md): --hang-timeout notices a job where no rank makes
progress, says where every rank is and ends the job with exit 124 (or restarts it);
`drun stacks` shows every rank's stack on demand, finding the job by itself.

Real PyTorch 1.13 gloo workers. Tests that count running jobs give drun a private
XDG_RUNTIME_DIR, so jobs of tests running beside them are not seen."""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import time

from drun_testlib import (DrunTestCase, base_env, drun_path, free_port, main, program, rank_lines,
                          stack_sections, wait_pids_dead)


def line_of(path, marker):
    with open(path) as f:
        for number, text in enumerate(f, 1):
            if marker in text:
                return number
    raise AssertionError(f"{marker} not in {path}")


def read_text(path):
    with open(path, errors="replace") as f:
        return f.read()


class HangTimeoutTest(DrunTestCase):

    def assertHangTable(self, run, ranks, sleep_line, asleep=2):
        """The hang table on `run`'s stderr: one row per rank, rank `asleep` in stuck() and
        marked, every other one in all_reduce and not marked."""
        table = [l for l in run.stderr_lines if re.match(r"drun: \d+\s+\S+\s+\d+\s+[A-Z] ", l)]
        self.assertEqual(len(table), ranks, run.describe())
        for l in table:
            if l.startswith(f"drun: {asleep} "):
                self.assertIn(f"hang_allreduce.py:{sleep_line} in stuck", l)
                self.assertIn("not where the others are", l)
            else:
                self.assertIn("in all_reduce", l)
                self.assertNotIn("not where the others are", l)

    def hang_env(self, **extra):
        return base_env(HANG_MARK=os.path.join(self.tmp, "hang_mark"), **extra)

    def test_a_rank_asleep_is_found_within_seven_seconds_and_named(self):
        script = program("hang_allreduce.py")
        sleep_line = line_of(script, "HANG LINE")
        logs = os.path.join(self.tmp, "logs")
        report = os.path.join(self.tmp, "report.json")
        run = self.start("--nproc-per-node", 4, "--hang-timeout", 5, "--log-dir", logs,
                         "--run-id", "hang4", "--report", report, script, env=self.hang_env())
        run.wait_for_line(r"no rank made progress", stream="stderr", timeout=120)
        detected = time.time()
        with open(os.path.join(self.tmp, "hang_mark")) as f:
            hung_at = float(f.read())
        self.assertEqual(run.wait(), 124, run.describe())
        # Progress stops when rank 2 falls asleep; the verdict comes 5 s later, within 7 s.
        self.assertGreaterEqual(detected - hung_at, 4.5, run.describe())
        self.assertLessEqual(detected - hung_at, 7.0, run.describe())
        self.assertHangTable(run, 4, sleep_line)
        # The full dump is in the run's log directory and in the report.
        dump_path = [os.path.join(d, "hang_stacks.txt") for d, _, files in os.walk(logs)
                     if "hang_stacks.txt" in files]
        self.assertEqual(len(dump_path), 1, run.describe())
        with open(dump_path[0]) as f:
            sections = stack_sections(f.read())
        self.assertEqual(sorted(sections), [0, 1, 2, 3])
        self.assertIn(f'File "{script}", line {sleep_line}, in stuck', sections[2][2])
        for r in (0, 1, 3):
            self.assertRegex(sections[r][2], r'distributed_c10d\.py", line \d+, in all_reduce')
        with open(report) as f:
            dumps = json.load(f)["stack_dumps"]
        self.assertEqual([d["reason"] for d in dumps], ["hang-timeout"])
        self.assertEqual(dumps[0]["file"], dump_path[0])
        self.assertIn("hung (--hang-timeout)", run.stderr)
        # Nothing is left behind: every rank of the dump is gone.
        self.assertEqual(wait_pids_dead([pid for _, pid, _ in sections.values()]), [])

    def test_3_14_workers_the_rank_asleep_elsewhere_is_marked_and_named(self):
        """Debian sid's python3 (CPython 3.14, torch 2.14) as the workers: rank 1 asleep
        outside the all_reduce that ranks 0 and 2 wait in is the one marked and blamed."""
        python, why = sid_python("3", self.tmp)
        if python is None:
            self.skipTest(why)
        # The sid tree sees this machine's /tmp, not the repository.
        script = os.path.join(self.tmp, "hang_allreduce.py")
        shutil.copy(program("hang_allreduce.py"), script)
        sleep_line = line_of(script, "HANG LINE")
        # Debian's torch 2.14 lacks libuv: rank 0's own TCPStore, told so (docs/migrating.md).
        run = self.drun("--nproc-per-node", 3, "--hang-timeout", 5, "--no-agent-store",
                        "--run-id", "hang314", script,
                        env=self.hang_env(PYTHON_EXEC=python, HANG_RANK="1", USE_LIBUV="0"),
                        timeout=240)
        self.assertExit(run, 124)
        self.assertHangTable(run, 3, sleep_line, asleep=1)
        self.assertIn(f"rank 1 is at hang_allreduce.py:{sleep_line} in stuck", run.stderr)
        self.assertIn("via _Py_DebugOffsets", run.stderr)

    def test_with_restarts_left_a_hang_restarts_the_job(self):
        logs = os.path.join(self.tmp, "logs")
        run = self.drun("--nproc-per-node", 3, "--hang-timeout", 2, "--max-restarts", 1,
                        "--log-dir", logs, "--run-id", "again", program("hang_allreduce.py"),
                        env=self.hang_env(HANG_RANK="1", HANG_STEP="1"), timeout=180)
        self.assertExit(run, 124)
        found = sorted(os.path.relpath(d, logs) for d, _, files in os.walk(logs)
                       if "hang_stacks.txt" in files)
        self.assertEqual([os.path.basename(d) for d in found], ["attempt_0", "attempt_1"], found)
        self.assertEqual(len([l for l in run.stderr_lines if l.startswith("drun: no rank made progress")]), 2)

    def test_slow_but_alive_is_never_hung(self):
        run = self.drun("--nproc-per-node", 2, "--hang-timeout", 5, program("slow_printer.py"),
                        env=base_env(SECONDS="14"))
        self.assertExit(run, 0)
        self.assertEqual([l for l in run.stderr_lines if "progress" in l], [])
        self.assertEqual(len([t for _, t in rank_lines(run.stdout_lines, 0) if t == "still working"]), 7)

    def test_two_nodes_hang_is_found_job_wide_and_named_once(self):
        # Two drun processes on loopback play the nodes of a c10d job, 2 ranks each: the
        # verdict needs both nodes quiet; the node of the odd rank prints the one table.
        script = program("hang_allreduce.py")
        sleep_line = line_of(script, "HANG LINE")
        logs = os.path.join(self.tmp, "logs")
        common = ["--nnodes", 2, "--nproc-per-node", 2, "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                  "--run-id", "hang2x2", "--hang-timeout", 5, "--log-dir", logs]
        nodes = [self.start(*common, "--node-rank", n, script, env=self.hang_env()) for n in (0, 1)]
        for node in nodes:
            self.assertEqual(node.wait(), 124, node.describe())
        with open(os.path.join(self.tmp, "hang_mark")) as f:
            hung_at = float(f.read())
        told = [n for n in nodes if any(l.startswith("drun: no rank made progress") for l in n.stderr_lines)]
        self.assertEqual(len(told), 1, "\n".join(n.describe() for n in nodes))
        self.assertHangTable(told[0], 4, sleep_line)
        full = [l for l in told[0].stderr_lines if l.startswith("drun: every rank's full stack: ")]
        self.assertEqual(len(full), 1, told[0].describe())
        dumps = sorted(os.path.join(d, "hang_stacks.txt") for d, _, files in os.walk(logs)
                       if "hang_stacks.txt" in files)
        self.assertEqual(len(dumps), 2, dumps)  # one per node, each its own ranks
        for path in dumps:
            self.assertIn(path, full[0])
        ranks = {}
        for path in dumps:
            with open(path) as f:
                ranks.update(stack_sections(f.read()))
        self.assertEqual(sorted(ranks), [0, 1, 2, 3])
        self.assertIn(f'File "{script}", line {sleep_line}, in stuck', ranks[2][2])
        # Both nodes end with the hang's exit code, and say why.
        for node in nodes:
            self.assertIn("hung (--hang-timeout)", node.stderr, node.describe())
        # The verdict took both nodes' word: not before 5 s of quiet, and within 7 s.
        mtime = min(os.path.getmtime(p) for p in dumps)
        self.assertGreaterEqual(mtime - hung_at, 4.5)
        self.assertLessEqual(mtime - hung_at, 7.0)
        self.assertEqual(wait_pids_dead([pid for _, pid, _ in ranks.values()]), [])


class DrunStacksTest(DrunTestCase):

    def setUp(self):
        super().setUp()
        self.xdg = os.path.join(self.tmp, "xdg")
        os.mkdir(self.xdg, 0o700)
        self.env = base_env(XDG_RUNTIME_DIR=self.xdg)

    def stacks(self, *args, env=None, user=None):
        cmd = [drun_path(), "stacks", *args]
        if user:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
        return subprocess.run(cmd, env=env or self.env, capture_output=True, text=True, timeout=120)

    def test_deadlocked_threads_show_both_frames(self):
        script = program("deadlock_threads.py")
        logs = os.path.join(self.tmp, "logs")
        run = self.start("--nproc-per-node", 1, "--log-dir", logs, "--run-id", "locks", script,
                         env=self.env)
        run.wait_for_line(r"deadlocked$")
        out = self.stacks()
        self.assertEqual(out.returncode, 0, out.stderr)
        first, second = line_of(script, "FIRST WAITS"), line_of(script, "SECOND WAITS")
        self.assertIn(f'File "{script}", line {first}, in first', out.stdout)
        self.assertIn(f'File "{script}", line {second}, in second', out.stdout)
        self.assertIn(f'File "{script}", line {line_of(script, "MAIN JOINS")}, in <module>', out.stdout)
        # CPU measured while the dump is taken, over 250 ms at least.
        window = float(re.search(r"CPU 0% of a core over (\d+\.\d+)s", out.stdout).group(1))
        self.assertGreaterEqual(window, 0.2)
        self.assertRegex(out.stdout.splitlines()[0], r"^drun stacks: run 'locks', 1 rank on \S+, taken in \d+ ms, kept in ")
        kept = out.stdout.splitlines()[0].rsplit("kept in ", 1)[1]
        self.assertTrue(kept.startswith(logs) and os.path.isfile(kept), kept)
        # Asking took nothing from the job: it is still deadlocked, and ends on Ctrl-C.
        self.assertIsNone(run.proc.poll())
        run.send_signal(signal.SIGINT)
        self.assertEqual(run.wait(), 130, run.describe())

    def test_quiet_for_is_known_without_hang_timeout(self):
        # No --hang-timeout: rank 0's output is read by drun's loop (the console shows it),
        # rank 1's only by a log pump (filtered off the console, into --log-dir).
        logs = os.path.join(self.tmp, "logs")
        run = self.start("--nproc-per-node", 2, "--log-dir", logs, "--local-ranks-filter", 0,
                         "--run-id", "quiet", program("wait_printing.py"), env=self.env)
        run.wait_for_line(r"waiting$")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # rank 1's line reaches its log file
            logged = [p for p in glob.glob(os.path.join(logs, "**", "*"), recursive=True)
                      if os.path.isfile(p) and read_text(p) == "waiting\n"]
            if len(logged) == 2:
                break
            time.sleep(0.05)  # a poll's interval: files give no event
        self.assertEqual(len(logged), 2, glob.glob(os.path.join(logs, "**", "*"), recursive=True))
        printed = time.monotonic()
        out = self.stacks()
        took = time.monotonic() - printed
        self.assertEqual(out.returncode, 0, out.stderr)
        quiet = re.findall(r"^=== rank (\d+) .*, quiet for (\S+)$", out.stdout, re.M)
        self.assertEqual(sorted(r for r, _ in quiet), ["0", "1"], out.stdout)
        for rank, text in quiet:
            self.assertRegex(text, r"^\d+\.\ds$", f"rank {rank}: {out.stdout}")
            # Coarse: no more than since the line came out (the pump is sampled each second).
            self.assertLessEqual(float(text[:-1]), took + 1.5, out.stdout)
        run.send_signal(signal.SIGTERM)
        run.wait()

    def test_a_job_with_two_agents_here_is_named_once(self):
        # Two nodes typed by hand on this machine are one job: one entry, both agents' pids.
        common = ["--nnodes", 2, "--nproc-per-node", 1, "--run-id", "pair",
                  "--rdzv-endpoint", f"127.0.0.1:{free_port()}", program("wait_printing.py")]
        host = self.start("--rdzv-conf", "is_host=true", *common, env=self.env)
        host.wait_for_line(r"waiting: 1 of 2", stream="stderr")
        other = self.start(*common, env=self.env)
        solo = self.start("--nproc-per-node", 1, "--run-id", "solo", program("wait_printing.py"),
                          env=self.env)
        for run, count in ((host, 1), (other, 1), (solo, 1)):
            run.wait_for_line(r"waiting$", count=count)
        out = self.stacks()
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertRegex(out.stderr, r"^drun: 2 drun jobs of yours are running: run id 'pair' \(2 agents: "
                                     r"pids \d+, \d+\), run id 'solo' \(pid \d+\); name one: drun stacks "
                                     r"RUN_ID\n$")
        for run in (solo, other, host):
            run.send_signal(signal.SIGTERM)
            run.wait()

    def test_nothing_running_two_jobs_and_another_user(self):
        out = self.stacks()
        self.assertEqual(out.returncode, 1)
        self.assertRegex(out.stderr, rf"^drun: no drun job of yours \(uid {os.geteuid()}\) is running on this machine "
                                     r"\(run drun stacks where the job was started, or on one of its nodes\)\n$")
        jobs = [self.start("--nproc-per-node", 1, "--run-id", rid, program("wait_printing.py"),
                           env=self.env) for rid in ("alpha", "beta")]
        for j in jobs:
            j.wait_for_line(r"waiting$")
        out = self.stacks()
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertRegex(out.stderr, r"^drun: 2 drun jobs of yours are running: run id 'alpha' \(pid \d+\), "
                                     r"run id 'beta' \(pid \d+\); name one: drun stacks RUN_ID\n$")
        out = self.stacks("beta")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertRegex(out.stdout, r"^drun stacks: run 'beta', 1 rank ")
        self.assertEqual(len(stack_sections(out.stdout)), 1)
        out = self.stacks("gamma")
        self.assertEqual(out.returncode, 1)
        self.assertIn("no running drun job has run id 'gamma'", out.stderr)
        if os.geteuid() == 0:
            # Another user sees none of them, with or without our XDG_RUNTIME_DIR.
            for env in (self.env, base_env(XDG_RUNTIME_DIR=None)):
                out = self.stacks(env=env, user=65534)
                self.assertEqual(out.returncode, 1, out.stderr)
                self.assertRegex(out.stderr, r"^drun: no drun job of yours \(uid 65534\) is running on this machine")
        for j in jobs:
            j.send_signal(signal.SIGTERM)
            self.assertEqual(j.wait(), 128 + signal.SIGTERM, j.describe())
        # A job that ended leaves no socket behind.
        self.assertEqual(os.listdir(os.path.join(self.xdg, "drun")), [])

    def test_an_agent_started_by_rsh_listens_under_its_own_xdg_runtime_dir(self):
        # `drun agent` started by --rsh (here a stand-in that runs it on this machine) with
        # XDG_RUNTIME_DIR=D keeps its control socket in D/drun, where `drun stacks` typed with
        # that XDG_RUNTIME_DIR looks (it used to listen in /tmp/drun-UID, ignoring D). The
        # launcher has a runtime directory of its own, so only the agent can answer there.
        node_xdg = os.path.join(self.tmp, "node-xdg")
        os.mkdir(node_xdg, 0o700)
        rsh = os.path.join(self.tmp, "local-rsh")
        with open(rsh, "w") as f:
            f.write('#!/bin/sh\n# local-rsh HOST COMMAND...: COMMAND here, as HOST\'s sshd would run it\n'
                    f'shift\nexec env XDG_RUNTIME_DIR={node_xdg} "$@"\n')
        os.chmod(rsh, 0o755)
        run = self.start("-H", "localhost", "--rsh", rsh, "--nproc-per-node", 2, "--run-id", "overrsh",
                         program("wait_printing.py"), env=self.env)
        run.wait_for_line(r"\]: waiting$", count=2)
        # PID.sock, beside it PID.tmp (the agent's temporaries named for the next run's clean-up)
        sockets = [n for n in os.listdir(os.path.join(node_xdg, "drun")) if n.endswith(".sock")]
        self.assertEqual(len(sockets), 1, sockets)
        self.assertRegex(sockets[0], r"^\d+\.sock$")
        agent = int(sockets[0].split(".")[0])
        with open(f"/proc/{agent}/cmdline", "rb") as f:
            self.assertEqual(f.read().split(b"\0")[1], b"agent")
        out = self.stacks(env=base_env(XDG_RUNTIME_DIR=node_xdg))
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertRegex(out.stdout.splitlines()[0], r"^drun stacks: run 'overrsh', 2 ranks")
        got = stack_sections(out.stdout)
        self.assertEqual(sorted(got), [0, 1], out.stdout)
        for _, (_, _, text) in got.items():
            self.assertIn("wait_printing.py", text)
        run.send_signal(signal.SIGTERM)
        self.assertEqual(run.wait(), 128 + signal.SIGTERM, run.describe())
        # The agent took its socket with it.
        self.assertEqual(os.listdir(os.path.join(node_xdg, "drun")), [])

# A rank asleep in nap(): it says so from the very statement it sleeps on, so a dump taken
# after the line arrived finds it there. No torch: pyenv's interpreters have none.
NAP_SCRIPT = """import os, sys, time
def nap():
    print("asleep", sys.version_info[:2], flush=True) or time.sleep(10**6)  # NAP LINE
nap()
"""


def pyenv_python(minor):
    """pyenv's CPython `minor` ("3.13") on this machine, or None."""
    found = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{minor}.*/bin/python{minor}")))
    return found[-1] if found else None


def sid_python(minor, directory):
    """(wrapper, None): a script in `directory` that execs Debian sid's python`minor` in the
    sid tree at $DRUN_SID_ROOT (default /var/lib/drun-sid; its /tmp must be this machine's)
    with the caller's working directory and environment, keeping the pid; or (None, why not)."""
    root = os.environ.get("DRUN_SID_ROOT") or "/var/lib/drun-sid"
    python = f"/usr/bin/python{minor}"
    if not os.access(root + python, os.X_OK):
        return None, f"no CPython {minor} in a Debian sid tree at {root} (set DRUN_SID_ROOT)"
    if os.geteuid() != 0:
        return None, f"chroot into {root} needs root"
    if not os.path.exists(root + directory):
        return None, f"{root}/tmp is not this machine's /tmp (bind-mount it)"
    wrapper = os.path.join(directory, f"python{minor}")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\nexec /usr/sbin/chroot {root} /bin/sh -c "
                f"'cd \"$0\" 2>/dev/null || cd /; exec {python} \"$@\"' \"$PWD\" \"$@\"\n")
    os.chmod(wrapper, 0o755)
    return wrapper, None


class OtherPythonVersionsTest(DrunTestCase):
    """`drun stacks` and --hang-timeout with workers of CPython other than Debian's 3.11
    (PYTHON_EXEC): pyenv's 3.8 (PyFrameObject chains) and 3.13 (_PyInterpreterFrame from
    the thread state), the frame layouts farthest from 3.11's."""

    def setUp(self):
        super().setUp()
        self.xdg = os.path.join(self.tmp, "xdg")
        os.mkdir(self.xdg, 0o700)
        self.script = os.path.join(self.tmp, "nap.py")
        with open(self.script, "w") as f:
            f.write(NAP_SCRIPT)
        self.nap_line = line_of(self.script, "NAP LINE")

    def python_or_skip(self, minor):
        if minor in ("3.14", "3.15"):
            python, why = sid_python(minor, self.tmp)
            if python is None:
                self.skipTest(why)
            return python
        python = pyenv_python(minor)
        if python is None:
            self.skipTest(f"no CPython {minor} on this machine (pyenv's ~/.pyenv/versions/{minor}.*)")
        return python

    def assertNapFrames(self, section, minor):
        self.assertIn(f"python: builtin (CPython {minor}", section)
        # From 3.13 the offsets come from the interpreter's own table, and nothing is missing.
        if tuple(map(int, minor.split("."))) >= (3, 13):
            self.assertIn("via _Py_DebugOffsets)", section)
        self.assertNotIn("frames unavailable", section)
        self.assertNotIn("frames:", section)
        self.assertIn(f'File "{self.script}", line {self.nap_line}, in nap\n'
                      '        print("asleep", sys.version_info[:2], flush=True) or time.sleep(10**6)'
                      "  # NAP LINE\n", section)
        self.assertIn(f'File "{self.script}", line 4, in <module>\n        nap()', section)

    def test_drun_stacks_shows_python_frames_of_3_8_to_3_15(self):
        for minor in ("3.8", "3.13", "3.14", "3.15"):
            with self.subTest(minor=minor):
                python = self.python_or_skip(minor)
                env = base_env(XDG_RUNTIME_DIR=self.xdg, PYTHON_EXEC=python)
                run = self.start("--nproc-per-node", 2, "--run-id", f"nap{minor}", self.script,
                                 env=env)
                version = tuple(int(x) for x in minor.split("."))
                run.wait_for_line(rf"asleep {re.escape(str(version))}$", count=2)
                out = subprocess.run([drun_path(), "stacks"], env=env, capture_output=True,
                                     text=True, timeout=120)
                self.assertEqual(out.returncode, 0, out.stderr)
                sections = stack_sections(out.stdout)
                self.assertEqual(sorted(sections), [0, 1], out.stdout)
                for rank in (0, 1):
                    self.assertNapFrames(sections[rank][2], minor)
                run.send_signal(signal.SIGTERM)
                self.assertEqual(run.wait(), 128 + signal.SIGTERM, run.describe())

    def test_frames_unreadable_the_wait_channel_marks_the_rank_elsewhere(self):
        """Workers whose frames drun cannot read (pyenv's CPython 3.7, no py-spy, no eu-stack
        or gdb on drun's PATH): the kernel's wait channel still tells rank 1, asleep, from
        ranks 0 and 2, blocked on a lock; each rank says once why its frames are missing."""
        python = self.python_or_skip("3.7")
        script = os.path.join(self.tmp, "wait.py")
        with open(script, "w") as f:
            f.write("import os, threading, time\n"
                    "print('waiting', flush=True)\n"
                    "if os.environ['RANK'] == '1':\n"
                    "    time.sleep(10**6)\n"
                    "lock = threading.Lock()\n"
                    "lock.acquire() and lock.acquire()\n")
        empty = os.path.join(self.tmp, "no_tools")
        os.mkdir(empty)
        run = self.drun("--nproc-per-node", 3, "--hang-timeout", 3, "--run-id", "wchan", script,
                        env=base_env(XDG_RUNTIME_DIR=self.xdg, PYTHON_EXEC=python, PATH=empty),
                        timeout=120)
        self.assertExit(run, 124)
        table = [l for l in run.stderr_lines if re.match(r"drun: \d+\s+\S+\s+\d+\s+[A-Z] ", l)]
        self.assertEqual(len(table), 3, run.describe())
        for l in table:
            self.assertEqual(l.startswith("drun: 1 "), "not where the others are" in l, l)
        # 3.7's time.sleep waits in select(): poll_schedule_timeout, not the lock's futex.
        self.assertRegex(run.stderr, r"rank 1 is at an unknown place \(state S (?!futex)\w")
        sections = stack_sections(run.stderr)
        self.assertEqual(sorted(sections), [0, 1, 2], run.describe())
        for _, _, text in sections.values():
            self.assertEqual(text.count("CPython 3.7 not readable by drun"), 1, text)

    def test_hang_timeout_names_where_3_13_to_3_15_ranks_sleep(self):
        for minor in ("3.13", "3.14", "3.15"):
            with self.subTest(minor=minor):
                self.hang_where_ranks_sleep(minor)

    def hang_where_ranks_sleep(self, minor):
        python = self.python_or_skip(minor)
        logs = os.path.join(self.tmp, f"logs{minor}")
        run = self.drun("--nproc-per-node", 2, "--hang-timeout", 3, "--log-dir", logs,
                        "--run-id", "nap", self.script,
                        env=base_env(XDG_RUNTIME_DIR=self.xdg, PYTHON_EXEC=python), timeout=120)
        self.assertExit(run, 124)
        table = [l for l in run.stderr_lines if re.match(r"drun: \d+\s+\S+\s+\d+\s+[A-Z] ", l)]
        self.assertEqual(len(table), 2, run.describe())
        for row in table:
            self.assertIn(f"nap.py:{self.nap_line} in nap", row)
        dumps = [os.path.join(d, "hang_stacks.txt") for d, _, files in os.walk(logs)
                 if "hang_stacks.txt" in files]
        self.assertEqual(len(dumps), 1, run.describe())
        with open(dumps[0]) as f:
            sections = stack_sections(f.read())
        self.assertEqual(sorted(sections), [0, 1])
        for rank in (0, 1):
            self.assertNapFrames(sections[rank][2], minor)
        # Both ranks sleep at the same place: none stands out, and the root cause says so.
        self.assertIn(f"no rank stands out: every one is at nap.py:{self.nap_line} in nap",
                      run.stderr)
        self.assertEqual(wait_pids_dead([pid for _, pid, _ in sections.values()]), [])


if __name__ == "__main__":
    main()
