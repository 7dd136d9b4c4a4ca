"""The command line: usage errors, both flag spellings, PET_* variables, --help/--version."""
import socket

from drun_testlib import DrunTestCase, base_env, main, rank_lines

ECHO = ["--no-python", "/bin/sh", "-c", 'echo "world=$WORLD_SIZE"']


class CliTest(DrunTestCase):

    def assertUsageError(self, *args):
        run = self.drun(*args, timeout=30)
        self.assertExit(run, 2)
        self.assertEqual(len(run.stderr_lines), 1, f"want one line on stderr\n{run.describe()}")
        self.assertTrue(run.stderr_lines[0].startswith("drun: "), run.stderr_lines)
        self.assertEqual(rank_lines(run.stdout_lines), [], "a worker ran")

    def test_unknown_flag(self):
        self.assertUsageError("--standalone", "--no-such-flag", "--nproc-per-node", 1, *ECHO)

    def test_bad_values(self):
        for args in (("--nproc-per-node", "many"), ("--nproc-per-node", "gpu:1,x"),
                     ("--max-restarts", "twice"), ("--redirects", "7"),
                     ("--tee", "0:9"), ("--shutdown-timeout", "soon"),
                     ("--nproc-per-node",)):
            with self.subTest(args=args):
                self.assertUsageError("--standalone", *args, *ECHO)

    def test_missing_training_script(self):
        self.assertUsageError("--standalone", "--nproc-per-node", 2)

    def workers(self, run):
        self.assertExit(run, 0)
        return sorted(rank_lines(run.stdout_lines))

    def test_both_spellings_of_nproc_per_node(self):
        for args in (("--nproc-per-node", 3), ("--nproc_per_node", 3),
                     ("--nproc-per-node=3",), ("--nproc_per_node=3",)):
            with self.subTest(args=args):
                run = self.drun("--standalone", *args, *ECHO)
                self.assertEqual(self.workers(run), [(r, "world=3") for r in range(3)],
                                 run.describe())

    def test_both_spellings_of_max_restarts(self):
        for flag in ("--max-restarts", "--max_restarts"):
            with self.subTest(flag=flag):
                run = self.drun("--standalone", "--nproc-per-node", 1, flag, 2, "--no-python",
                                "/bin/sh", "-c", 'echo "max=$TORCHELASTIC_MAX_RESTARTS"')
                self.assertEqual(self.workers(run), [(0, "max=2")], run.describe())

    def test_pet_variable_and_command_line_wins(self):
        env = base_env(PET_NPROC_PER_NODE="2")
        run = self.drun("--standalone", *ECHO, env=env)
        self.assertEqual(self.workers(run), [(0, "world=2"), (1, "world=2")], run.describe())
        run = self.drun("--standalone", "--nproc-per-node", 3, *ECHO, env=env)
        self.assertEqual(self.workers(run), [(r, "world=3") for r in range(3)], run.describe())

    def test_script_arguments_are_not_drun_flags(self):
        # Everything after the script belongs to it, even what looks like drun's flags.
        run = self.drun("--standalone", "--nproc-per-node", 1, "--no-python", "/bin/echo",
                        "--nproc-per-node", "5", "--help")
        self.assertEqual(self.workers(run), [(0, "--nproc-per-node 5 --help")], run.describe())

    def test_torchrun_flags_accepted(self):
        # Accepted for torchrun compatibility: --nnodes 1, --monitor-interval (ignored),
        # --start-method, in both spellings.
        for args in (("--nnodes", 1, "--monitor-interval", 5, "--start-method", "spawn"),
                     ("--nnodes=1", "--monitor_interval", "0.1", "--start_method", "fork")):
            with self.subTest(args=args):
                run = self.drun("--standalone", "--nproc-per-node", 2, *args, *ECHO)
                self.assertEqual(self.workers(run), [(0, "world=2"), (1, "world=2")],
                                 run.describe())

    def test_master_addr_and_port(self):
        with socket.socket() as s:  # a port that was free a moment ago
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        run = self.drun("--standalone", "--nproc-per-node", 2, "--master-addr", "127.0.0.1",
                        "--master_port", port, "--no-python", "/bin/sh", "-c",
                        'echo "$MASTER_ADDR:$MASTER_PORT"')
        self.assertEqual(self.workers(run), [(0, f"127.0.0.1:{port}"), (1, f"127.0.0.1:{port}")],
                         run.describe())

    def test_help(self):
        run = self.drun("--help", timeout=30)
        self.assertExit(run, 0)
        self.assertIn("--nproc-per-node", run.stdout + run.stderr)

    def test_version(self):
        run = self.drun("--version", timeout=30)
        self.assertExit(run, 0)
        self.assertRegex(run.stdout + run.stderr, r"\d+\.\d+")


if __name__ == "__main__":
    main()
