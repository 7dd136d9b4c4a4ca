"""The restart policy (docs/semantics.md, "Restarts"): a failure that repeats exactly in two
rounds in a row ends the job with a line that names the way to keep restarting; failures
that differ and deaths by signal restart while --max-restarts lasts."""
import os

from drun_testlib import DrunTestCase, main, program


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


if __name__ == "__main__":
    main()
