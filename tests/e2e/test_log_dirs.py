"""One run directory per run (docs/semantics.md, "Logs in every mode"): <log_dir>/<run_id>_XXXXXX,
torchrun's directory per run, for the default run id and a given one alike, so a rerun with
the same --rdzv-id and --log-dir never writes into an earlier run's files.

On several nodes typed by hand (two drun processes on this machine play the nodes of a c10d
job) the node that hosts the rendezvous names the run directory and the other one takes its
choice, so one run's logs are one tree: <run>/<host> and <host>.1 (the same host name twice,
claimed with an exclusive mkdir). A node that does not host still refuses an unwritable
--log-dir before it joins."""
import os
import re
import signal
import socket

from drun_testlib import DrunTestCase, free_port, main

PROGRAM = (
    "import os, sys\n"
    "print('rank', os.environ['RANK'], 'run', sys.argv[1])\n")


def read_stdout(run_dir, node, local_rank=0):
    """(rank, tag) the worker printed into <run_dir>/<node>/attempt_0/<local_rank>/stdout.log."""
    with open(os.path.join(run_dir, node, "attempt_0", str(local_rank), "stdout.log")) as f:
        m = re.fullmatch(r"rank (\d) run (\w+)\n", f.read())
    return m.group(1), m.group(2)


class ByHandRunDirTest(DrunTestCase):
    def two_nodes(self, logs, tag, *flags):
        script = os.path.join(self.tmp, "hello.py")
        with open(script, "w") as f:
            f.write(PROGRAM)
        common = ["--nnodes", 2, "--nproc-per-node", 1, "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                  "--log-dir", logs, *flags, script, tag]
        # The host first (named, so no election can go either way), the other once it waits.
        host = self.start("--rdzv-conf", "is_host=true", *common)
        host.wait_for_line(r"waiting: 1 of 2", stream="stderr")
        nodes = [host, self.start(*common)]
        codes = [node.wait() for node in nodes]
        self.assertEqual(codes, [0, 0], "\n".join(node.describe() for node in nodes))
        return nodes

    def test_two_nodes_write_one_run_directory_and_a_rerun_another(self):
        logs = os.path.join(self.tmp, "logs")
        host = socket.gethostname()
        seen = set()
        for tag in ("first", "second"):
            nodes = self.two_nodes(logs, tag)
            runs = sorted(set(os.listdir(logs)) - seen)
            self.assertEqual(len(runs), 1, os.listdir(logs))
            self.assertRegex(runs[0], r"^none_\w{6}$")
            seen.update(runs)
            run_dir = os.path.join(logs, runs[0])
            self.assertEqual(sorted(os.listdir(run_dir)), sorted([host, host + ".1"]))
            # Each node names the run's directory (its own part of it) in a line.
            named = sorted(l for node in nodes for l in node.stderr_lines if l.startswith("drun: logs in "))
            self.assertEqual(named, sorted([f"drun: logs in {run_dir}/{host}/",
                                            f"drun: logs in {run_dir}/{host}.1/"]))
            ranks = set()
            for node in (host, host + ".1"):
                with open(os.path.join(run_dir, node, "attempt_0", "0", "stdout.log")) as f:
                    m = re.fullmatch(r"rank (\d) run (\w+)\n", f.read())
                self.assertEqual(m.group(2), tag)
                ranks.add(m.group(1))
            self.assertEqual(ranks, {"0", "1"})

    def test_a_given_run_id_run_twice_keeps_both_runs_each_in_its_own_directory(self):
        # The same --rdzv-id and --log-dir twice: two run directories, each with both
        # nodes' subdirectories holding that run's output (nothing mixed, nothing replaced).
        logs = os.path.join(self.tmp, "logs")
        host = socket.gethostname()
        for tag in ("first", "second"):
            self.two_nodes(logs, tag, "--rdzv-id", "exp7")
        runs = sorted(os.listdir(logs))
        self.assertEqual(len(runs), 2, runs)
        tags = []
        for run in runs:
            self.assertRegex(run, r"^exp7_\w{6}$")
            run_dir = os.path.join(logs, run)
            self.assertEqual(sorted(os.listdir(run_dir)), sorted([host, host + ".1"]), run_dir)
            seen = {read_stdout(run_dir, node) for node in (host, host + ".1")}
            self.assertEqual({rank for rank, _ in seen}, {"0", "1"}, seen)
            self.assertEqual(len({t for _, t in seen}), 1, seen)
            tags.append(seen.pop()[1])
        self.assertEqual(sorted(tags), ["first", "second"])

    def test_a_node_that_does_not_host_refuses_an_unwritable_log_dir_before_it_joins(self):
        # Its run directory is named later (its first assignment), but --log-dir itself is
        # proved writable before it joins: one line, exit 2, and the job never starts.
        a_file = os.path.join(self.tmp, "a_file")
        open(a_file, "w").close()
        endpoint = f"127.0.0.1:{free_port()}"
        host = self.start("--nnodes", 2, "--nproc-per-node", 1, "--rdzv-endpoint", endpoint,
                          "--rdzv-conf", "is_host=true", "--log-dir", os.path.join(self.tmp, "logs"),
                          "--no-python", "true")
        host.wait_for_line(r"waiting: 1 of 2", stream="stderr")
        run = self.drun("--nnodes", 2, "--nproc-per-node", 1, "--rdzv-endpoint", endpoint,
                        "--log-dir", a_file, "--no-python", "true")
        self.assertExit(run, 2)
        self.assertEqual(len(run.stderr_lines), 1, run.describe())
        self.assertRegex(run.stderr_lines[0], r"^drun: cannot keep logs in --log-dir ")
        host.send_signal(signal.SIGTERM)
        self.assertEqual(host.wait(), 143, host.describe())


class OneNodeRerunTest(DrunTestCase):
    """On one node, a rerun with the same --rdzv-id and --log-dir gets a run directory of its
    own: the first run's stdout.log is still the first run's."""

    def test_a_rerun_with_the_same_run_id_keeps_the_first_runs_files(self):
        script = os.path.join(self.tmp, "hello.py")
        with open(script, "w") as f:
            f.write(PROGRAM)
        logs = os.path.join(self.tmp, "logs")
        said = []
        for tag in ("first", "second"):
            run = self.drun("--nproc-per-node", 2, "--rdzv-id", "exp7", "--log-dir", logs, script, tag)
            self.assertExit(run, 0)
            m = [re.fullmatch(r"drun: logs in (\S+)/", l) for l in run.stderr_lines]
            said.append([x.group(1) for x in m if x])
            self.assertEqual(len(said[-1]), 1, run.describe())
        runs = sorted(os.listdir(logs))
        self.assertEqual(len(runs), 2, runs)
        self.assertEqual(sorted(d for [d] in said), [os.path.join(logs, r) for r in runs])
        for tag, [run_dir] in zip(("first", "second"), said):
            self.assertRegex(os.path.basename(run_dir), r"^exp7_\w{6}$")
            self.assertEqual(sorted(os.listdir(run_dir)), ["attempt_0"])
            for lr in (0, 1):
                self.assertEqual(read_stdout(run_dir, ".", lr), (str(lr), tag))


class SaysWhereLogsAreTest(DrunTestCase):
    """A default run directory's name has a unique part, and what --redirects sends to the
    files is not on the console: drun says once where this node's logs are (not under -q)."""

    def run_job(self, logs, *flags):
        script = os.path.join(self.tmp, "hello.py")
        with open(script, "w") as f:
            f.write(PROGRAM)
        run = self.drun("--nproc-per-node", 2, "--log-dir", logs, *flags, script, "x")
        self.assertExit(run, 0)
        return run

    def test_redirects_name_the_run_directory_that_holds_the_output(self):
        logs = os.path.join(self.tmp, "logs")
        run = self.run_job(logs, "-r", 3)
        self.assertEqual(run.stdout_lines, [], run.describe())
        self.assertEqual(len(run.stderr_lines), 1, run.describe())
        m = re.fullmatch(r"drun: logs in (\S+)/ \(what --redirects sends there is not shown here\)",
                         run.stderr_lines[0])
        self.assertIsNotNone(m, run.describe())
        self.assertEqual(os.path.dirname(m.group(1)), logs)
        with open(os.path.join(m.group(1), "attempt_0", "1", "stdout.log")) as f:
            self.assertEqual(f.read(), "rank 1 run x\n")

    def test_tee_names_it_without_the_note_and_quiet_says_nothing(self):
        logs = os.path.join(self.tmp, "logs")
        run = self.run_job(logs, "-t", 3)
        self.assertEqual(len(run.stdout_lines), 2, run.describe())
        self.assertEqual(len(run.stderr_lines), 1, run.describe())
        self.assertRegex(run.stderr_lines[0], r"^drun: logs in " + re.escape(logs) + r"/none_\w{6}/$")
        quiet = self.run_job(logs, "-t", 3, "-q")
        self.assertEqual(quiet.stderr_lines, [], quiet.describe())


if __name__ == "__main__":
    main()
