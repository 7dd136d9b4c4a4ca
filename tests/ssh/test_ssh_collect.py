"""Every host's logs end up under the launcher's --log-dir (docs/ssh.md, "Logs").

- Hosts that do not share the launcher's file system (each sees its own empty tmpfs at the
  log directory's path): the launcher copies each host's tree into <log_dir>/<run>/<host>/,
  byte for byte (checked against the workers' own copies), over libssh and over --rsh; the
  --report JSON says where each host's logs are.
- Hosts that share it (the testbed's default): one run directory holds every host, nothing
  is copied, nothing overwritten; two reruns keep both runs, each in a run directory of its
  own (<run_id>_XXXXXX, a given --run-id too), also with drun typed on every host by hand."""
import hashlib
import json
import os
import re
import signal
import subprocess

import ssh_testlib as t

HOSTS = ["red01", "orange07", "purple11"]
PROGRAM = os.path.join(t.PROGRAMS, "log_bytes.py")
LOGS_LINE = re.compile(r"^drun: logs of every host: (?P<dir>\S+)/ \((?P<what>[^;)]*)")
NAMED_LINE = re.compile(r"^drun: logs in (?P<dir>\S+)/ \(every host's, collected here when the job ends\)$")
COPIED = re.compile(r"(?P<mib>[\d.]+) MiB copied from (?P<hosts>\d+) hosts? in (?P<s>[\d.]+) s")


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_rank_files(test, d, copies, label):
    """d (<node>/attempt_N/<local_rank>) holds the rank's stdout exactly as the worker wrote
    it (its own copy in `copies`); returns the rank, read from its stderr.log."""
    with open(os.path.join(d, "stderr.log"), "rb") as f:
        err = f.read()
    m = re.match(rb"rank (\d+) on ", err)
    test.assertIsNotNone(m, (label, err))
    rank = int(m.group(1))
    test.assertEqual(digest(os.path.join(d, "stdout.log")),
                     digest(os.path.join(copies, f"{rank}.out")), label)
    return rank


class Collect:
    """Shared steps: run a job, find its run directory, check every host's files there."""

    def run_job(self, logs, size, extra=(), nproc=2):
        copies = os.path.join(self.bed.tmp, f"copies-{len(os.listdir(self.bed.tmp))}")
        os.makedirs(copies)
        report = os.path.join(self.bed.tmp, f"report-{len(os.listdir(self.bed.tmp))}.json")
        hf = self.bed.write_hostfile("\n".join(HOSTS) + "\n")
        p = self.drun(["--hostfile", hf, "--nproc-per-node", str(nproc), "--tee", "3",
                       "--log-dir", logs, "--report", report, *extra, PROGRAM, str(size), copies])
        code = self.finish(p)
        self.assertEqual(code, 0, p[1].describe())
        line = [m for m in map(LOGS_LINE.match, p[1].lines("stderr")) if m]
        self.assertEqual(len(line), 1, p[1].describe())
        # The run's directory is named when it is claimed, before the job runs, too.
        named = [m for m in map(NAMED_LINE.match, p[1].lines("stderr")) if m]
        self.assertEqual(len(named), 1, p[1].describe())
        self.assertEqual(named[0].group("dir"), line[0].group("dir"))
        with open(report) as f:
            self.last_report = json.load(f)
        return p, line[0], copies, self.last_report["nodes"]

    def check_run_dir(self, run_dir, copies, nproc=2):
        """run_dir holds exactly one directory per host, each with every rank's files as the
        worker wrote them."""
        self.assertEqual(sorted(os.listdir(run_dir)), sorted(HOSTS), run_dir)
        ranks = set()
        for host in HOSTS:
            hdir = os.path.join(run_dir, host, "attempt_0")
            self.assertEqual(sorted(os.listdir(hdir)), [str(i) for i in range(nproc)])
            for lr in range(nproc):
                d = os.path.join(hdir, str(lr))
                with open(os.path.join(d, "stderr.log"), "rb") as f:
                    err = f.read()
                m = re.fullmatch(rb"rank (\d+) on (\S+)\n", err)
                self.assertIsNotNone(m, err)
                rank = int(m.group(1))
                self.assertEqual(m.group(2).decode(), host)
                self.assertEqual(digest(os.path.join(d, "stdout.log")),
                                 digest(os.path.join(copies, f"{rank}.out")), (host, lr))
                self.assertEqual(oct(os.stat(os.path.join(d, "stdout.log")).st_mode & 0o777), "0o600")
                ranks.add(rank)
        self.assertEqual(sorted(ranks), list(range(nproc * len(HOSTS))))


class PrivateLogDirTest(Collect, t.SshTestCase):
    """Each host sees its own empty file system at the log directory's path."""

    HOSTS = [t.HostSpec(h, private=["private-logs"]) for h in HOSTS]

    def collect(self, extra=(), size=1 << 20):
        logs = os.path.join(self.bed.tmp, "private-logs")
        before = set(os.listdir(logs))
        p, line, copies, nodes = self.run_job(logs, size, extra)
        runs = sorted(set(os.listdir(logs)) - before)
        self.assertEqual(len(runs), 1, runs)
        run_dir = os.path.join(logs, runs[0])
        self.assertEqual(line.group("dir"), run_dir)
        copied = COPIED.search(line.group("what"))
        self.assertIsNotNone(copied, line.group(0))
        self.assertEqual(int(copied.group("hosts")), 3)
        self.check_run_dir(run_dir, copies)
        # Each host keeps its own logs too: the copy is a copy.
        for host in HOSTS:
            there = self.bed.host_path(host, os.path.join(run_dir, host, "attempt_0", "0", "stdout.log"))
            self.assertEqual(digest(there), digest(os.path.join(run_dir, host, "attempt_0", "0", "stdout.log")))
        self.assertEqual(sorted(n["host"] for n in nodes), sorted(HOSTS))
        for n in nodes:
            self.assertEqual(n["logs_collected_to"], os.path.join(run_dir, n["host"]), n)
            self.assertEqual(n["log_dir"], os.path.join(run_dir, n["host"]), n)
        self.assertHostsClean()
        return copied

    def test_every_hosts_files_are_copied_byte_for_byte(self):
        copied = self.collect()
        print(f"collected {copied.group('mib')} MiB from 3 hosts in {copied.group('s')} s "
              f"(2 ranks x 1 MiB each, --tee 3)")

    def test_through_rsh_openssh(self):
        self.collect(extra=["--rsh", "ssh -o BatchMode=yes"], size=256 << 10)

    def test_large_logs_measured(self):
        # 3 hosts x 2 ranks x 16 MiB, files only (-r 3 keeps the console out of it).
        logs = os.path.join(self.bed.tmp, "private-logs")
        copies = os.path.join(self.bed.tmp, "copies-large")
        os.makedirs(copies)
        hf = self.bed.write_hostfile("\n".join(HOSTS) + "\n")
        p = self.drun(["--hostfile", hf, "--nproc-per-node", "2", "-r", "3", "--log-dir", logs,
                       PROGRAM, str(16 << 20), copies])
        self.assertEqual(self.finish(p), 0, p[1].describe())
        line = [m for m in map(LOGS_LINE.match, p[1].lines("stderr")) if m]
        self.assertEqual(len(line), 1, p[1].describe())
        # The run's directory is named when it is claimed, before the job runs, too.
        named = [m for m in map(NAMED_LINE.match, p[1].lines("stderr")) if m]
        self.assertEqual(len(named), 1, p[1].describe())
        self.assertEqual(named[0].group("dir"), line[0].group("dir"))
        copied = COPIED.search(line[0].group("what"))
        self.assertIsNotNone(copied, line[0].group(0))
        self.assertGreaterEqual(float(copied.group("mib")), 96.0)
        self.check_run_dir(line[0].group("dir"), copies)
        print(f"collected {copied.group('mib')} MiB from 3 hosts in {copied.group('s')} s "
              f"(2 ranks x 16 MiB each, -r 3)")
        self.assertHostsClean()


class PrivateLogDirEndsTest(Collect, t.SshTestCase):
    """The job's ends that are not a success: Ctrl-C, and an agent killed mid-run."""
    HOSTS = [t.HostSpec(h, private=["private-logs"]) for h in HOSTS]

    def start_gated(self, tag):
        logs = os.path.join(self.bed.tmp, "private-logs")
        copies = os.path.join(self.bed.tmp, f"copies-{tag}")
        os.makedirs(copies)
        gate = t.Gate(self.bed.tmp, f"gate-{tag}")
        hf = self.bed.write_hostfile("\n".join(HOSTS) + "\n")
        p = self.drun(["--hostfile", hf, "--nproc-per-node", "2", "--tee", "3", "--log-dir", logs,
                       PROGRAM, str(64 << 10), copies, gate.path])
        return p, gate, copies, set(os.listdir(logs))

    def run_dir_of(self, p, before):
        logs = os.path.join(self.bed.tmp, "private-logs")
        line = [m for m in map(LOGS_LINE.match, p[1].lines("stderr")) if m]
        self.assertEqual(len(line), 1, p[1].describe())
        # The run's directory is named when it is claimed, before the job runs, too.
        named = [m for m in map(NAMED_LINE.match, p[1].lines("stderr")) if m]
        self.assertEqual(len(named), 1, p[1].describe())
        self.assertEqual(named[0].group("dir"), line[0].group("dir"))
        runs = sorted(set(os.listdir(logs)) - before)
        self.assertEqual([os.path.join(logs, r) for r in runs], [line[0].group("dir")])
        return line[0].group("dir")

    def test_ctrl_c_still_collects(self):
        p, gate, copies, before = self.start_gated("int")
        p[1].wait_for(r"rank \d+ on ", stream="stderr", count=6)
        p[0].send_signal(signal.SIGINT)
        self.assertEqual(self.finish(p), 130, p[1].describe())
        run_dir = self.run_dir_of(p, before)
        self.assertEqual(sorted(os.listdir(run_dir)), sorted(HOSTS))
        for host in HOSTS:
            for lr in range(2):
                check_rank_files(self, os.path.join(run_dir, host, "attempt_0", str(lr)), copies, (host, lr))
        self.assertHostsClean()

    def test_a_killed_agent_is_named_and_its_successor_collected(self):
        p, gate, copies, before = self.start_gated("kill")
        p[1].wait_for(r"rank \d+ on ", stream="stderr", count=6)
        agents = self.bed.agent_pids("red01")
        self.assertEqual(len(agents), 1, self.bed.describe_hosts())
        os.kill(agents[0], signal.SIGKILL)
        p[1].wait_for(r"rank \d+ on ", stream="stderr", count=12)  # the second round runs
        gate.open()
        self.assertEqual(self.finish(p), 0, p[1].describe())
        run_dir = self.run_dir_of(p, before)
        err = p[1].lines("stderr")
        self.assertIn(f"drun: red01: an agent ended without saying where its logs are (killed or "
                      f"lost); they stay on red01 under {run_dir}/", err, p[1].describe())
        self.assertRegex([l for l in err if l.startswith("drun: logs of every host")][0],
                         r"; 1 not collected, below\)$")
        # The first agent's directory stays on red01; its successor claimed red01.1 there.
        self.assertEqual(sorted(os.listdir(run_dir)), sorted(["red01.1", "orange07", "purple11"]))
        self.assertTrue(os.path.isdir(self.bed.host_path("red01", os.path.join(run_dir, "red01"))))
        for host in ("red01.1", "orange07", "purple11"):
            for lr in range(2):
                check_rank_files(self, os.path.join(run_dir, host, "attempt_1", str(lr)), copies, (host, lr))
        self.assertHostsClean()


    def test_a_copy_that_fails_names_where_the_logs_stay(self):
        # --rsh through a wrapper whose second command (the copy's `tar`) fails on red01 only.
        wrapper = os.path.join(self.bed.tmp, "rsh-no-tar.sh")
        with open(wrapper, "w") as f:
            f.write('#!/bin/sh\nif [ "$1" = red01 ] && [ "$2" = tar ]; then\n'
                    '  echo "tar: refused by the test" >&2; exit 3\nfi\n'
                    'exec ssh -o BatchMode=yes "$@"\n')
        os.chmod(wrapper, 0o755)
        logs = os.path.join(self.bed.tmp, "private-logs")
        before = set(os.listdir(logs))
        p, line, copies, nodes = self.run_job(logs, 4096, extra=["--rsh", wrapper])
        run_dir = os.path.join(logs, sorted(set(os.listdir(logs)) - before)[0])
        err = p[1].lines("stderr")
        self.assertIn(f"drun: red01: its logs were not collected (tar there exited with status 3: "
                      f"tar: refused by the test); they stay at red01:{run_dir}/red01", err, p[1].describe())
        self.assertRegex(line.string, r"(KiB|MiB) copied from 2 of 3 hosts in [\d.]+ s; 1 not collected, below\)$")
        self.assertEqual(sorted(os.listdir(run_dir)), ["orange07", "purple11"])  # no empty red01
        by_host = {n["host"]: n for n in nodes}
        self.assertEqual(by_host["red01"]["logs_not_collected"],
                         "tar there exited with status 3: tar: refused by the test")
        self.assertEqual(by_host["red01"]["logs_collected_to"], "")
        self.assertEqual(by_host["orange07"]["logs_collected_to"], os.path.join(run_dir, "orange07"))
        self.assertEqual(self.last_report["logs_not_collected"], [f"red01:{run_dir}/red01"])
        self.assertHostsClean()


class SharedLogDirTest(Collect, t.SshTestCase):
    """The testbed's hosts share the launcher's file system."""

    def test_one_run_directory_holds_every_host_and_reruns_keep_both(self):
        logs = os.path.join(self.bed.tmp, "shared-logs")
        run_dirs = []
        for _ in range(2):
            p, line, copies, nodes = self.run_job(logs, 256 << 10)
            self.assertIn("nothing copied", line.group("what"))
            run_dir = line.group("dir")
            self.check_run_dir(run_dir, copies)  # no host.1: nothing was copied twice
            for n in nodes:
                self.assertEqual(n["logs_collected_to"], n["log_dir"], n)
            self.assertEqual(self.last_report["logs_not_collected"], [])
            run_dirs.append((run_dir, copies))
        self.assertNotEqual(run_dirs[0][0], run_dirs[1][0])
        self.assertEqual(sorted(os.listdir(logs)), sorted(os.path.basename(d) for d, _ in run_dirs))
        for d in os.listdir(logs):
            self.assertRegex(d, r"^none_\w{6}$")
        for run_dir, copies in run_dirs:  # the second run overwrote nothing of the first
            self.check_run_dir(run_dir, copies)
        self.assertHostsClean()

    def test_a_log_dir_the_launcher_cannot_write_is_refused_before_any_host_is_contacted(self):
        a_file = os.path.join(self.bed.tmp, "a-file")
        open(a_file, "w").close()
        hf = self.bed.write_hostfile("\n".join(HOSTS) + "\n")
        logins = {h: len(self.bed.sshd_log[h].lines("stderr")) for h in HOSTS}
        p = self.drun(["--hostfile", hf, "--log-dir", os.path.join(a_file, "logs"), PROGRAM, "1", "/"])
        self.assertEqual(self.finish(p), 2, p[1].describe())
        err = p[1].lines("stderr")
        self.assertEqual(len(err), 1, p[1].describe())
        self.assertRegex(err[0], r"^drun: cannot keep logs in --log-dir .*/a-file/logs on this machine, where "
                                 r"drun collects every host's logs: .*Not a directory; give a directory you can "
                                 r"write here$")
        for host in HOSTS:  # no host was contacted: its sshd logged nothing more
            self.assertEqual(len(self.bed.sshd_log[host].lines("stderr")), logins[host],
                             self.bed.sshd_log[host].describe())

    def test_a_given_run_id_gets_a_fresh_run_directory_every_run(self):
        # torchrun's <id>_<random>: a rerun with the same --run-id and --log-dir claims a
        # run directory of its own, and each holds exactly its run's hosts.
        logs = os.path.join(self.bed.tmp, "named-logs")
        run_dirs = []
        for _ in range(2):
            p, line, copies, nodes = self.run_job(logs, 4096, extra=["--run-id", "exp1"])
            run_dir = line.group("dir")
            self.assertEqual(os.path.dirname(run_dir), logs)
            self.assertRegex(os.path.basename(run_dir), r"^exp1_\w{6}$")
            self.assertEqual({n["host"]: n["log_dir"] for n in nodes},
                             {h: os.path.join(run_dir, h) for h in HOSTS})
            run_dirs.append((run_dir, copies))
        self.assertEqual(sorted(os.listdir(logs)), sorted(os.path.basename(d) for d, _ in run_dirs))
        for run_dir, copies in run_dirs:
            self.check_run_dir(run_dir, copies)
        self.assertHostsClean()


class ByHandLogDirTest(t.SshTestCase):
    """drun typed on every host (c10d, torchrun's way) with a shared --log-dir: the node that
    hosts the rendezvous names the run directory, and every node writes under it."""

    def by_hand(self, logs, port, extra=()):
        """drun typed on every host, HOSTS[0] hosting the rendezvous; returns the run
        directory made under `logs`, checked: one directory per host, each with its rank's
        files as the worker wrote them."""
        copies = os.path.join(self.bed.tmp, f"copies-byhand-{port}")
        os.makedirs(copies)
        before = set(os.listdir(logs)) if os.path.isdir(logs) else set()
        started = []
        for host in HOSTS:
            line = " ".join(["cd", t.HERE, "&&", "exec", "env", f"PYTHON_EXEC={t.PYTHON}", self.bed.drun,
                             "--nnodes", "3", "--nproc-per-node", "1", "--rdzv-endpoint",
                             f"{HOSTS[0]}:{port}", "--log-dir", logs, *extra, PROGRAM, "4096", copies])
            argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", host, line]
            proc = subprocess.Popen(self.bed.client_cmd(argv), env=self.bed.env(), cwd=t.HERE,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
            started.append((proc, t.Lines(proc, f"drun@{host}")))
            self.procs.append(started[-1])
        for p in started:
            self.assertEqual(self.finish(p), 0, p[1].describe())
        runs = sorted(set(os.listdir(logs)) - before)
        self.assertEqual(len(runs), 1, runs)
        run_dir = os.path.join(logs, runs[0])
        self.assertEqual(sorted(os.listdir(run_dir)), sorted(HOSTS))
        # Each node names the run's directory (its own part of it) in a line.
        for host, p in zip(HOSTS, started):
            named = [l for l in p[1].lines("stderr") if l.startswith("drun: logs in ")]
            self.assertEqual(named, [f"drun: logs in {run_dir}/{host}/"], p[1].describe())
        for host in HOSTS:
            d = os.path.join(run_dir, host, "attempt_0", "0")
            with open(os.path.join(d, "stderr.log"), "rb") as f:
                rank = int(re.fullmatch(rb"rank (\d+) on " + host.encode() + rb"\n", f.read()).group(1))
            self.assertEqual(digest(os.path.join(d, "stdout.log")), digest(os.path.join(copies, f"{rank}.out")))
        return runs[0]

    def test_one_run_directory_for_every_node(self):
        run = self.by_hand(os.path.join(self.bed.tmp, "byhand-logs"), 29410)
        self.assertRegex(run, r"^none_\w{6}$")
        self.assertHostsClean()

    def test_a_given_run_id_run_twice_gives_two_run_directories_with_every_host(self):
        logs = os.path.join(self.bed.tmp, "byhand-named-logs")
        runs = [self.by_hand(logs, port, extra=["--rdzv-id", "exp2"]) for port in (29411, 29412)]
        for run in runs:
            self.assertRegex(run, r"^exp2_\w{6}$")
        self.assertEqual(sorted(os.listdir(logs)), sorted(runs))
        self.assertHostsClean()


if __name__ == "__main__":
    t.main()
