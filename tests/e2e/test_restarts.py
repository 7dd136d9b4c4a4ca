"""The restart policy (docs/semantics.md, "Restarts"): a failure that repeats exactly in two
rounds in a row ends the job with a line that names the way to keep restarting; failures
that differ and deaths by signal restart while --max-restarts lasts."""
import os
import signal
import subprocess
import time

from drun_testlib import DrunTestCase, base_env, drun_path, free_port, main, program


class RestartPolicyTest(DrunTestCase):

    def run_mode(self, mode, *flags, restarts=6):
        starts = os.path.join(self.tmp, "starts")
        run = self.drun("--standalone", "--nproc-per-node", 2, "--max-restarts", restarts, *flags,
                        program("fail_as_told.py"), mode, starts)
        with open(starts) as f:
            rounds = sorted({int(line.split()[2]) for line in f if line.startswith("start 1 ")})
        return run, rounds

    def test_a_repeated_identical_failure_stops_after_two_rounds(self):
        run, rounds = self.run_mode("same")
        self.assertExit(run, 1)
        self.assertEqual(rounds, [0, 1], run.describe())
        lines = [l for l in run.stderr_lines if "failed the same way in 2 rounds in a row" in l]
        self.assertTrue(lines, run.describe())
        self.assertIn("ValueError: bad config", lines[0])
        self.assertIn("--restart-policy always", lines[0])

    def test_restart_policy_always_restarts_it_up_to_the_budget(self):
        run, rounds = self.run_mode("same", "--restart-policy", "always", restarts=3)
        self.assertExit(run, 1)
        self.assertEqual(rounds, [0, 1, 2, 3], run.describe())
        self.assertFalse([l for l in run.stderr_lines if "the same way" in l], run.describe())

    def test_failures_that_differ_restart_up_to_the_budget(self):
        run, rounds = self.run_mode("differs", restarts=3)
        self.assertExit(run, 1)
        self.assertEqual(rounds, [0, 1, 2, 3], run.describe())

    def test_deaths_by_signal_restart_up_to_the_budget(self):
        run, rounds = self.run_mode("sigkill", restarts=3)
        self.assertExit(run, 137)
        self.assertEqual(rounds, [0, 1, 2, 3], run.describe())

    def test_the_same_exit_code_without_output_repeats(self):
        run, rounds = self.run_mode("exit3")
        self.assertExit(run, 3)
        self.assertEqual(rounds, [0, 1], run.describe())

    def test_a_bad_policy_is_refused_in_one_line(self):
        run = self.drun("--standalone", "--restart-policy", "sometimes", program("exit_code.py"), 0, 0)
        self.assertExit(run, 2)
        self.assertEqual(len(run.stderr_lines), 1, run.describe())
        self.assertIn("--restart-policy must be unless-repeated or always", run.stderr_lines[0])


class FinishedNodeLostTest(DrunTestCase):
    """A node whose workers all succeeded is killed while another node still runs: no one is
    restarted and the job ends 0 (issue 23: it used to re-run the whole round)."""

    def test_killing_a_node_after_its_workers_succeeded_restarts_no_one(self):
        xdg = os.path.join(self.tmp, "xdg")
        os.mkdir(xdg, 0o700)
        env = base_env(XDG_RUNTIME_DIR=xdg)
        starts, gate = os.path.join(self.tmp, "starts"), os.path.join(self.tmp, "gate")
        os.mkfifo(gate)
        # Two nodes typed by hand; the host's rank (0) waits at the gate, the other's exits 0.
        common = ["--nnodes", "1:2", "--nproc-per-node", 1, "--run-id", "donejob",
                  "--rdzv-endpoint", f"127.0.0.1:{free_port()}", program("done_or_gate.py"),
                  starts, gate, 0]
        host = self.start("--rdzv-conf", "is_host=true", *common, env=env)
        host.wait_for_line(r"waiting: 1 of", stream="stderr")
        other = self.start(*common, env=env)
        other.wait_for_line(r"rank 1 done")
        # The other node's success has reached the rendezvous once a job-wide `drun stacks`
        # (asked on the host, answered by each node on its stream, after its earlier
        # messages) shows that node without workers. A bounded poll: no event says it.
        deadline = time.monotonic() + 60
        while True:
            out = subprocess.run([drun_path(), "stacks", "donejob"], env=env, capture_output=True,
                                 text=True, timeout=60)
            if "no worker runs" in out.stdout + out.stderr:
                break
            self.assertLess(time.monotonic(), deadline, out.stdout + out.stderr)
            time.sleep(0.2)
        other.send_signal(signal.SIGKILL)
        other.wait()
        with open(gate, "w"):
            pass  # open and close: rank 0 passes the gate
        host.wait()
        self.assertExit(host, 0)
        with open(starts) as f:
            self.assertEqual(sorted(f.read().split("\n")[:-1]), ["start 0 0", "start 1 0"],
                             host.describe())


if __name__ == "__main__":
    main()
