"""The command line: usage errors, both flag spellings, PET_* variables, --help/--version."""
import os
import socket

from drun_testlib import DrunTestCase, base_env, free_port, main, rank_lines

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

    def test_help_fits_80_columns(self):
        run = self.drun("--help", timeout=30)
        self.assertExit(run, 0)
        wide = [line for line in run.stdout_lines if len(line) > 80]
        self.assertEqual(wide, [], f"{len(wide)} of {len(run.stdout_lines)} lines are wider than 80")
        self.assertIn("--stdin RANK|all|none", run.stdout)

    def test_no_arguments_prints_the_usage(self):
        run = self.drun(timeout=30)
        self.assertExit(run, 2)
        self.assertEqual(run.stdout, "")
        self.assertEqual(run.stderr_lines[0],
                         "usage: drun [options] training_script [script args...]")
        self.assertIn("drun --help lists every option; man drun is the manual.", run.stderr_lines)

    def test_help_word_is_help_unless_a_script_is_named_help(self):
        full = self.drun("--help", timeout=30)
        run = self.drun("help", timeout=30, cwd=self.tmp)
        self.assertExit(run, 0)
        self.assertEqual(run.stdout, full.stdout)
        with open(os.path.join(self.tmp, "help"), "w") as f:
            f.write('print("the help script ran")\n')
        run = self.drun("help", timeout=30, cwd=self.tmp)
        self.assertExit(run, 0)
        self.assertEqual([t for _, t in rank_lines(run.stdout_lines)], ["the help script ran"],
                         run.describe())
        self.assertIn("drun: running ./help, the file named help in this directory (drun --help "
                      "shows the usage)", run.stderr_lines)

    def test_stdin_rank_the_job_does_not_have(self):
        for args, env in ((("--stdin", 5), {}), ((), {"DRUN_STDIN": "2"}),
                          (("--nnodes", 1, "--stdin", "2"), {})):
            with self.subTest(args=args, env=env):
                run = self.drun("--nproc-per-node", 2, *args, *ECHO, env=base_env(**env), timeout=30)
                self.assertExit(run, 2)
                self.assertEqual(len(run.stderr_lines), 1, run.describe())
                self.assertIn("the job has ranks 0 to 1 (1 node(s) x 2); write one of them, all or none",
                              run.stderr_lines[0])
                self.assertEqual(rank_lines(run.stdout_lines), [], "a worker ran")
        # Over ssh the host list fixes the world size: refused before any host is reached.
        run = self.drun("-H", "nohost-a,nohost-b", "-np", 3, "--stdin", 3, *ECHO, timeout=30)
        self.assertExit(run, 2)
        self.assertEqual(run.stderr_lines, ["drun: --stdin 3: the job has ranks 0 to 2 (over 2 host(s)); "
                                            "write one of them, all or none"], run.describe())
        run = self.drun("--nproc-per-node", 2, "--stdin", 1, *ECHO, timeout=30)
        self.assertEqual(self.workers(run), [(0, "world=2"), (1, "world=2")])

    def test_stdin_rank_outside_an_elastic_round_is_said(self):
        # 1:2 nodes: the command line cannot know the world size; the round of one node has
        # ranks 0 and 1, and the node of group rank 0 says so once. The job runs.
        run = self.drun("--nnodes", "1:2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                        "--rdzv-conf", "last_call_timeout=0.2", "--nproc-per-node", 2, "--stdin", 3,
                        *ECHO, timeout=60)
        self.assertExit(run, 0)
        said = [l for l in run.stderr_lines if "--stdin 3" in l]
        self.assertEqual(said, ["drun: --stdin 3: this round has ranks 0 to 1, so no rank reads drun's "
                                "stdin; write one of them, all or none"], run.describe())
        self.assertEqual(sorted(l for l in run.stdout_lines if l.endswith(": world=2")),
                         [f"[{socket.gethostname()}:rank{r}]: world=2" for r in range(2)])

    def test_version(self):
        run = self.drun("--version", timeout=30)
        self.assertExit(run, 0)
        self.assertRegex(run.stdout + run.stderr, r"\d+\.\d+")


if __name__ == "__main__":
    main()
