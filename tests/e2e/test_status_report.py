"""What a user sees around the workers' output: the live status line on a terminal (a real
pseudo-terminal) and plain lines in a pipe while the rendezvous waits, --quiet, the
per-rank summary table, and the --report JSON checked against docs/report.md."""
import json
import os
import pty
import re
import select
import signal
import subprocess
import time

from drun_testlib import DrunTestCase, base_env, documented_fields, drun_path, free_port, main, program


class StatusLineTest(DrunTestCase):
    # One node of an elastic 1:2 job waits for the last call: long enough to see the status.
    def waiting_args(self):
        return ["--nnodes", "1:2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                "--rdzv-conf", "last_call_timeout=2", "--no-python", "true"]

    def test_terminal_gets_a_live_status_line(self):
        master, slave = pty.openpty()
        proc = subprocess.Popen([drun_path()] + self.waiting_args(), env=base_env(),
                                stdin=slave, stdout=slave, stderr=slave)
        os.close(slave)
        out = b""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], deadline - time.monotonic())
            if not ready:
                break
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's last writer closed it
                break
            if not chunk:
                break
            out += chunk
        os.close(master)
        self.assertEqual(proc.wait(timeout=30), 0, out)
        text = out.decode(errors="replace")
        self.assertIn("drun: waiting for nodes: 1 of 1..2 joined", text)
        self.assertIn("last call closes the round in", text)
        self.assertIn("\r\x1b[K", text, "the status line is redrawn in place")
        self.assertNotIn("drun: waiting: ", text, "plain log lines are for pipes")

    def test_pipe_gets_plain_lines(self):
        run = self.drun(*self.waiting_args())
        self.assertExit(run, 0)
        waiting = [l for l in run.stderr_lines if l.startswith("drun: waiting: 1 of 1..2 nodes joined")]
        self.assertTrue(waiting, run.describe())
        self.assertFalse(any("\x1b" in l or "\r" in l for l in run.stderr_lines))

    def read_terminal_until(self, master, pattern, deadline):
        """What drun wrote on the terminal up to `pattern` (a regex; None: all of it, to its end)."""
        out = b""
        while time.monotonic() < deadline and not (pattern and re.search(pattern, out.decode(errors="replace"))):
            ready, _, _ = select.select([master], [], [], deadline - time.monotonic())
            if not ready:
                break
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's last writer closed it
                break
            if not chunk:
                break
            out += chunk
        return out.decode(errors="replace")

    def test_fixed_size_says_one_count_and_ctrl_c_while_waiting_says_what_stops(self):
        # --nnodes 2 (not 2:2) and only this node: it waits; Ctrl-C ends the wait.
        master, slave = pty.openpty()
        proc = subprocess.Popen([drun_path(), "--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                                 "--rdzv-conf", "is_host=true", "--no-python", "true"],
                                env=base_env(), stdin=slave, stdout=slave, stderr=slave)
        os.close(slave)
        deadline = time.monotonic() + 60
        text = self.read_terminal_until(master, r"1 of 2 joined", deadline)
        self.assertIn("drun: waiting for nodes: 1 of 2 joined", text)
        self.assertNotIn("2..2", text)
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends drun
        text += self.read_terminal_until(master, None, deadline)
        os.close(master)
        self.assertEqual(proc.wait(timeout=30), 128 + signal.SIGINT, text)
        self.assertIn("drun: got SIGINT while waiting in the rendezvous (no workers were running): "
                      "leaving the job", text)

    def test_fixed_size_in_a_pipe(self):
        run = self.start("--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                         "--rdzv-conf", "is_host=true", "--no-python", "true")
        run.wait_for_line(r"^drun: waiting: 1 of 2 nodes joined", stream="stderr")
        run.send_signal(signal.SIGTERM)
        self.assertEqual(run.wait(), 128 + signal.SIGTERM, run.describe())
        self.assertIn("drun: got SIGTERM while waiting in the rendezvous (no workers were running): "
                      "leaving the job", run.stderr_lines)

    def test_quiet_prints_only_workers_output(self):
        run = self.drun("--quiet", *self.waiting_args()[:-2], "--no-python", "echo", "hello")
        self.assertExit(run, 0)
        self.assertEqual(run.stderr_lines, [])
        self.assertTrue(any(l.endswith("hello") for l in run.stdout_lines), run.describe())


class SummaryAndReportTest(DrunTestCase):
    def test_summary_table_and_report_on_success(self):
        report = os.path.join(self.tmp, "run.json")
        run = self.drun("--standalone", "--nproc-per-node", "2", "--summary", "--report", report,
                        "--no-python", "true")
        self.assertExit(run, 0)
        header = [l for l in run.stderr_lines if re.match(r"drun: host +rank +local rank +exit", l)]
        self.assertEqual(len(header), 1, run.describe())
        rows = [l for l in run.stderr_lines if re.match(r"drun: \S+ +\d+ +\d+ +0 +1 ", l)]
        self.assertEqual(len(rows), 2, run.describe())
        with open(report) as f:
            doc = json.load(f)
        top, nested = documented_fields()
        self.assertEqual(set(doc), top)
        self.assertIsNone(doc["failure"])
        self.assertEqual(doc["exit_code"], 0)
        self.assertEqual(len(doc["workers"]), 2)
        for w in doc["workers"]:
            self.assertEqual(set(w), nested["workers"])
            self.assertGreater(w["peak_rss_kb"], 0)
        self.assertEqual(len(doc["rounds"]), 1)
        self.assertEqual(set(doc["rounds"][0]), nested["rounds"])
        self.assertEqual(doc["nodes"], [])  # one node: no launcher gathered hosts

    def test_failure_prints_table_and_report_names_root_cause(self):
        report = os.path.join(self.tmp, "run.json")
        run = self.drun("--nproc-per-node", "2", "--report", report, "--no-python",
                        "sh", "-c", 'echo "dying $RANK" >&2; [ "$RANK" = 1 ] && exit 3; exec sleep 30')
        self.assertExit(run, 3)
        self.assertTrue(any(re.match(r"drun: \S+ +1 +1 +3 +1 ", l) for l in run.stderr_lines),
                        run.describe())
        with open(report) as f:
            doc = json.load(f)
        top, nested = documented_fields()
        self.assertEqual(doc["exit_code"], 3)
        self.assertTrue(nested["failure"] <= set(doc["failure"]), doc["failure"])
        self.assertEqual(doc["failure"]["rank"], 1)
        self.assertIn("dying 1", doc["failure"]["stderr_tail"])

    def test_ranks_drun_stopped_say_stopped_and_an_outside_signal_keeps_its_name(self):
        # Rank 1 is SIGKILLed (as by the OOM killer: a signal from outside); drun stops
        # ranks 0 and 2 with SIGTERM.
        report = os.path.join(self.tmp, "run.json")
        run = self.drun("--standalone", "--nproc-per-node", "3", "--summary", "--report", report,
                        program("fail_as_told.py"), "sigkill", os.path.join(self.tmp, "starts"))
        self.assertExit(run, 137)
        rows = {int(m.group(1)): m.group(2) for m in
                (re.match(r"drun: \S+ +(\d+) +\d+ +(\S+) +1 ", l) for l in run.stderr_lines) if m}
        self.assertEqual(rows, {0: "stopped", 1: "SIGKILL", 2: "stopped"}, run.describe())
        with open(report) as f:
            doc = json.load(f)
        workers = {w["rank"]: w for w in doc["workers"]}
        self.assertEqual({r: (w["signal"], w["stopped_by_drun"]) for r, w in workers.items()},
                         {0: (signal.SIGTERM, True), 1: (signal.SIGKILL, False), 2: (signal.SIGTERM, True)})


if __name__ == "__main__":
    main()
