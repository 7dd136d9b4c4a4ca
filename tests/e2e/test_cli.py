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
        run = self.drun("--help", "all", timeout=30)
        self.assertExit(run, 0)
        self.assertEqual([line for line in run.stdout_lines if len(line) > 80], [])
        self.assertIn("--stdin RANK|all|none", run.stdout)

    def test_no_arguments_prints_the_usage(self):
        run = self.drun(timeout=30)
        self.assertExit(run, 2)
        self.assertEqual(run.stdout, "")
        self.assertEqual(run.stderr_lines[0],
                         "usage: drun [options] training_script [script args...]")
        self.assertIn("drun --help shows the common options, drun --help all every option; man drun is "
                      "the manual.", run.stderr_lines)

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
                self.assertIn("the job has ranks 0 to 1 (1 node x 2); write one of them, all or none",
                              run.stderr_lines[0])
                self.assertEqual(rank_lines(run.stdout_lines), [], "a worker ran")
        # Over ssh the host list fixes the world size: refused before any host is reached.
        run = self.drun("-H", "nohost-a,nohost-b", "-np", 3, "--stdin", 3, *ECHO, timeout=30)
        self.assertExit(run, 2)
        self.assertEqual(run.stderr_lines, ["drun: --stdin 3: the job has ranks 0 to 2 (over 2 hosts); "
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


class TorchrunFlagsTest(DrunTestCase):
    """torchrun 2.14's flags drun did not know (issue 29, section 3)."""

    TEMPLATE = "<${role_name}/${local_rank}/${rank}/${hostname}> "
    SAY = ["--no-python", "/bin/sh", "-c", 'echo "hello from $RANK"']

    def test_log_line_prefix_template_on_one_node(self):
        host = socket.gethostname()
        want = sorted(f"<trainer/{r}/{r}/{host}> hello from {r}" for r in range(2))
        run = self.drun("--standalone", "--nproc-per-node", 2, "--role", "trainer",
                        "--log-line-prefix-template", self.TEMPLATE, *self.SAY)
        self.assertExit(run, 0)
        self.assertEqual(sorted(l for l in run.stdout_lines if "hello" in l), want, run.describe())
        # torchrun's variable, and its default template written as torchrun writes it.
        run = self.drun("--standalone", "--nproc-per-node", 2, *self.SAY,
                        env=base_env(TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[${role_name}${local_rank}]:"))
        self.assertExit(run, 0)
        self.assertEqual(sorted(l for l in run.stdout_lines if "hello" in l),
                         ["[default0]:hello from 0", "[default1]:hello from 1"], run.describe())

    def test_log_line_prefix_template_on_two_nodes(self):
        host = socket.gethostname()
        common = ["--nnodes", 2, "--nproc-per-node", 2, "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                  "--log-line-prefix-template", "${hostname}:${rank}: ", *self.SAY]
        first = self.start("--rdzv-conf", "is_host=true", *common)
        first.wait_for_line(r"waiting: 1 of 2", stream="stderr")
        nodes = [first, self.start(*common)]
        codes = [node.wait() for node in nodes]
        self.assertEqual(codes, [0, 0], "\n".join(node.describe() for node in nodes))
        lines = sorted(l for node in nodes for l in node.stdout_lines if "hello" in l)
        self.assertEqual(lines, [f"{host}:{r}: hello from {r}" for r in range(4)],
                         "\n".join(node.describe() for node in nodes))

    def test_nproc_per_node_xpu_is_refused_with_its_reason(self):
        run = self.drun("--nproc-per-node", "xpu", *self.SAY, timeout=30)
        self.assertExit(run, 2)
        self.assertEqual(len(run.stderr_lines), 1, run.describe())
        self.assertIn("--nproc-per-node xpu (torchrun 2.x: one worker per Intel XPU) is not supported",
                      run.stderr_lines[0])

    def test_misspelt_script_gets_a_did_you_mean(self):
        with open(os.path.join(self.tmp, "ex2_reduce.py"), "w") as f:
            f.write("print('reduced')\n")
        run = self.drun("ex2_reduse.py", cwd=self.tmp, timeout=30)
        self.assertExit(run, 2)
        self.assertEqual(run.stderr_lines, [f"drun: ex2_reduse.py: no such file in {self.tmp}; did you mean "
                                            "ex2_reduce.py?"], run.describe())
        os.makedirs(os.path.join(self.tmp, "sub"))
        os.rename(os.path.join(self.tmp, "ex2_reduce.py"), os.path.join(self.tmp, "sub", "ex2_reduce.py"))
        run = self.drun("sub/ex2_reduse.py", cwd=self.tmp, timeout=30)
        self.assertExit(run, 2)
        self.assertIn("did you mean sub/ex2_reduce.py?", run.stderr)


class GrammarTest(DrunTestCase):
    """Counts agree with their nouns (issue 31, item 11): one helper says every count."""

    def test_one_line_of_stderr_is_a_line(self):
        run = self.drun("--standalone", "--no-python", "/bin/sh", "-c", "echo oops >&2; exit 3", timeout=60)
        self.assertExit(run, 3)
        self.assertIn("drun:   stderr (last 1 line):", run.stderr_lines, run.describe())
        self.assertFalse([l for l in run.stderr_lines if "(s)" in l or " 1 lines" in l], run.describe())


if __name__ == "__main__":
    main()
