"""Failing workers: exit codes, signals, the shutdown grace period, restarts, error files
and the root-cause summary."""
import json
import os
import re
import resource
import subprocess
import time

from drun_testlib import (DrunTestCase, base_env, drun_path, main, program, read_pid_files, run_dir,
                          short_hostname, texts_of, wait_pids_dead)


class FaultsTest(DrunTestCase):

    def test_worker_exit_code_is_drun_exit_code(self):
        run = self.drun("--standalone", "--nproc-per-node", 4, program("exit_code.py"), 2, 3)
        self.assertExit(run, 3)
        summary = self.assertSummary(run)
        self.assertEqual(summary.get("rank"), "2 (local rank 2, group rank 0)", summary)
        self.assertRegex(summary.get("exit", ""), r"^code 3\b")
        self.assertEqual(summary.get("attempt"), "0")
        self.assertTrue(summary.get("host", "").startswith(short_hostname()), summary)
        pid_lines = [t for t in texts_of(run.stdout_lines, 2) if t.startswith("rank 2 pid ")]
        self.assertEqual(len(pid_lines), 1, run.describe())
        self.assertEqual(summary.get("pid"), pid_lines[0].split()[-1])
        self.assertIn("rank 2 failing on purpose with exit code 3", summary["stderr_tail"],
                      run.describe())
        self.assertNotIn("error", summary, "no error file was written")
        # The failure is also on the console, from the rank itself.
        self.assertIn("rank 2 failing on purpose with exit code 3", texts_of(run.stderr_lines, 2))

    def test_worker_killed_by_sigsegv(self):
        run = self.drun("--standalone", "--nproc-per-node", 4, program("segfault.py"), 1)
        self.assertExit(run, 139)
        summary = self.assertSummary(run)
        self.assertEqual(summary.get("rank"), "1 (local rank 1, group rank 0)", summary)
        self.assertRegex(summary.get("exit", ""), r"^signal SIGSEGV \(exit 139\)")
        self.assertIn("rank 1 about to dereference NULL", summary["stderr_tail"])

    def test_worker_ignoring_sigterm_is_killed_after_shutdown_timeout(self):
        fifo = os.path.join(self.tmp, "order.fifo")
        os.mkfifo(fifo)
        started = time.monotonic()
        # Default --shutdown-timeout is 30 s: finishing well inside that shows the flag works.
        run = self.drun("--standalone", "--nproc-per-node", 2, "--shutdown-timeout", 1,
                        program("ignore_sigterm.py"), self.tmp, fifo, timeout=60)
        elapsed = time.monotonic() - started
        self.assertExit(run, 3)
        self.assertIn("rank 0 ignores SIGTERM", texts_of(run.stdout_lines, 0), run.describe())
        self.assertLess(elapsed, 20, "drun took too long to SIGKILL a worker ignoring SIGTERM")
        # The kill is said, with the rank still alive and the timeout.
        self.assertIn("drun: rank 0 still alive after --shutdown-timeout 1 s: killing it (SIGKILL)",
                      run.stderr_lines, run.describe())
        summary = self.assertSummary(run)
        self.assertEqual(summary.get("rank"), "1 (local rank 1, group rank 0)", summary)
        pids = read_pid_files(self.tmp, "worker_")
        self.assertEqual(wait_pids_dead(pids.values(), marker="ignore_sigterm.py"), [])

    def test_too_few_descriptors_name_the_limit_and_the_fix(self):
        # ulimit -n 64; drun --nproc-per-node 40: the limit and the fix, not which open() failed.
        def limit_fds():
            resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        proc = subprocess.run([drun_path(), "--standalone", "--nproc-per-node", "40", "--no-python", "true"],
                              env=base_env(), preexec_fn=limit_fds, capture_output=True, text=True,
                              timeout=120)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertRegex(proc.stderr, r"drun: cannot start workers: 40 workers need about \d+ descriptors; "
                                      r"ulimit -n is 64: raise it \(ulimit -n 4096\)")
        self.assertNotIn("--node-setup", proc.stderr)
        self.assertIn("drun:   pid:        none (not started)", proc.stderr)
        # No worker started (none ran and exited 0), and the root cause is the node's limit,
        # not a rank (issue 31, item 4).
        self.assertIn("(none started)", proc.stderr)
        self.assertIn("drun:   rank:       none (this node could not start its workers)", proc.stderr)
        self.assertIn("drun: job failed: host ", proc.stderr)
        self.assertNotRegex(proc.stderr, r"(?m)^drun: \S+ +\d+ +\d+ ", "no worker row in the table")

    def test_restart_after_failure(self):
        run = self.drun("--standalone", "--nproc-per-node", 4, "--max-restarts", 2,
                        program("restart_once.py"))
        self.assertExit(run, 0)
        # Attempt 0: rank 1 started and failed (the other ranks may be stopped before
        # they print anything); attempt 1: every rank succeeded; no attempt 2.
        self.assertIn("attempt 0 of max_restarts 2: rank 1 started",
                      texts_of(run.stdout_lines, 1), run.describe())
        self.assertIn("attempt 0: rank 1 failing", texts_of(run.stderr_lines, 1))
        for rank in range(4):
            out = texts_of(run.stdout_lines, rank)
            self.assertIn(f"attempt 1: rank {rank} succeeded", out, run.describe())
            self.assertNotIn(f"attempt 2 of max_restarts 2: rank {rank} started", out)

    def test_restarts_exhausted_reports_last_failure(self):
        # restart_once.py only fails in attempt 0: with no restarts that is the end.
        run = self.drun("--standalone", "--nproc-per-node", 2, program("restart_once.py"))
        self.assertExit(run, 1)
        self.assertEqual(self.assertSummary(run).get("attempt"), "0")

    def test_error_file_message_in_summary(self):
        token = "e2e-record-message-7d1f"
        run = self.drun("--standalone", "--nproc-per-node", 2,
                        program("raise_with_record.py"), 1, token)
        self.assertExit(run, 1)
        summary = self.assertSummary(run)
        self.assertEqual(summary.get("rank"), "1 (local rank 1, group rank 0)", summary)
        self.assertIn(token, summary.get("error", ""), run.describe())

    def test_error_file_in_log_dir(self):
        token = "e2e-record-in-log-dir-51c2"
        logs = os.path.join(self.tmp, "logs")
        run = self.drun("--standalone", "--nproc-per-node", 2, "--log-dir", logs,
                        "--run-id", "errjob", program("raise_with_record.py"), 0, token)
        self.assertExit(run, 1)
        path = os.path.join(run_dir(logs, "errjob"), "attempt_0", "0", "error.json")
        self.assertTrue(os.path.isfile(path), f"{path} missing\n{run.describe()}")
        with open(path) as f:
            self.assertIn(token, json.dumps(json.load(f)))
        self.assertIn(token, self.assertSummary(run).get("error", ""))


if __name__ == "__main__":
    main()
