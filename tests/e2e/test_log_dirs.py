"""One run directory per job when the nodes are typed by hand (docs/semantics.md, "Logs in
every mode"): two drun processes on this machine play the nodes of a c10d job with the
default run id. The node that hosts the rendezvous names the run directory and the other one
takes its choice, so one run's logs are one tree: <log_dir>/none_XXXXXX/<host> and
<host>.1 (the same host name twice, claimed with an exclusive mkdir). A rerun gets a
directory of its own. A node that does not host still refuses an unwritable --log-dir
before it joins."""
import os
import re
import signal
import socket

from drun_testlib import DrunTestCase, free_port, main

PROGRAM = (
    "import os, sys\n"
    "print('rank', os.environ['RANK'], 'run', sys.argv[1])\n")


class ByHandRunDirTest(DrunTestCase):
    def two_nodes(self, logs, tag):
        script = os.path.join(self.tmp, "hello.py")
        with open(script, "w") as f:
            f.write(PROGRAM)
        common = ["--nnodes", 2, "--nproc-per-node", 1, "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                  "--log-dir", logs, script, tag]
        # The host first (named, so no election can go either way), the other once it waits.
        host = self.start("--rdzv-conf", "is_host=true", *common)
        host.wait_for_line(r"waiting: 1 of 2", stream="stderr")
        nodes = [host, self.start(*common)]
        codes = [node.wait() for node in nodes]
        self.assertEqual(codes, [0, 0], "\n".join(node.describe() for node in nodes))

    def test_two_nodes_write_one_run_directory_and_a_rerun_another(self):
        logs = os.path.join(self.tmp, "logs")
        host = socket.gethostname()
        seen = set()
        for tag in ("first", "second"):
            self.two_nodes(logs, tag)
            runs = sorted(set(os.listdir(logs)) - seen)
            self.assertEqual(len(runs), 1, os.listdir(logs))
            self.assertRegex(runs[0], r"^none_\w{6}$")
            seen.update(runs)
            run_dir = os.path.join(logs, runs[0])
            self.assertEqual(sorted(os.listdir(run_dir)), sorted([host, host + ".1"]))
            ranks = set()
            for node in (host, host + ".1"):
                with open(os.path.join(run_dir, node, "attempt_0", "0", "stdout.log")) as f:
                    m = re.fullmatch(r"rank (\d) run (\w+)\n", f.read())
                self.assertEqual(m.group(2), tag)
                ranks.add(m.group(1))
            self.assertEqual(ranks, {"0", "1"})

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
