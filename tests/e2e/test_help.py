"""--help and its topics, shell completion, --version without drun-net (issues 29 and 31).

`drun --help` shows the options people use first on one screen (at most 80 lines), `drun
--help all` every option by group, `drun --help TOPIC` one group; every option is in `all`
and in its group's topic. `drun --print-completion bash` is a completion script that bash
itself runs here: sourced, its function is called with COMP_WORDS/COMP_CWORD as bash's
programmable completion calls it, and COMPREPLY is read back.
"""
import os
import re
import shutil
import subprocess

from drun_testlib import DrunTestCase, base_env, drun_path, main

TOPICS = ["all", "job", "rendezvous", "output", "ssh", "slurm", "other"]


def options_in(text):
    """The options a help text lists: '-m', '--module', '-x', ... of its entry lines."""
    found = set()
    for line in text.splitlines():
        m = re.match(r"^  (-\w)?(?:, )?\s*(--[\w-]+)?", line)
        if m and (m.group(1) or m.group(2)):
            found.update(g for g in m.groups() if g)
    return found


class HelpTest(DrunTestCase):

    def help(self, *args):
        run = self.drun("--help", *args, timeout=30)
        self.assertExit(run, 0)
        self.assertEqual(run.stderr, "", run.describe())
        return run

    def test_help_fits_one_screen_and_names_every_topic(self):
        run = self.help()
        self.assertLessEqual(len(run.stdout_lines), 80, run.stdout)
        self.assertEqual([l for l in run.stdout_lines if len(l) > 80], [])
        for topic in TOPICS:
            self.assertIn(topic, run.stdout)
        for common in ("--nproc-per-node", "--nnodes", "--max-restarts", "--rdzv-endpoint",
                       "--log-dir", "--hostfile", "--launcher", "--help", "--version"):
            self.assertIn(common, options_in(run.stdout), common)

    def test_every_option_is_in_help_all_and_in_its_topic(self):
        everything = options_in(self.help("all").stdout)
        self.assertGreater(len(everything), 50)
        in_topics = set()
        for topic in TOPICS[1:]:
            run = self.help(topic)
            self.assertEqual([l for l in run.stdout_lines if len(l) > 80], [], topic)
            in_topics |= options_in(run.stdout)
        self.assertEqual(everything, in_topics)
        for name in ("--log-line-prefix-template", "--print-completion", "--restart-policy",
                     "--rdzv-tls", "-x"):
            self.assertIn(name, everything)

    def test_help_topic_spellings_and_a_misspelt_topic(self):
        self.assertEqual(self.drun("--help=slurm", timeout=30).stdout, self.help("slurm").stdout)
        self.assertEqual(self.drun("help", "slurm", timeout=30, cwd=self.tmp).stdout,
                         self.help("slurm").stdout)
        run = self.drun("--help", "slrum", timeout=30)
        self.assertExit(run, 2)
        self.assertEqual(run.stderr_lines, ["drun: --help has no topic 'slrum'; did you mean slurm? "
                                            "topics: all, job, rendezvous, output, ssh, slurm, other"])

    def test_max_restarts_help_says_the_restart_policy(self):
        run = self.help()
        text = " ".join(run.stdout.split())
        self.assertIn("a rank that fails the same way twice in a row ends the job early "
                      "(--restart-policy always restarts every failure) (default 0)", text)


class CompletionTest(DrunTestCase):

    def complete(self, script, *words):
        """COMPREPLY of drun's bash completion for the command line `words` (the last
        one being completed)."""
        words = ["drun", *words]
        quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
        program = (f"source {script}\n"
                   f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
                   f"COMP_LINE=\"${{COMP_WORDS[*]}}\"; COMP_POINT=${{#COMP_LINE}}\n"
                   "_drun drun \"${COMP_WORDS[COMP_CWORD]}\" \"${COMP_WORDS[COMP_CWORD-1]}\"\n"
                   "printf '%s\\n' \"${COMPREPLY[@]}\"\n"
                   "complete -p drun >&2\n")
        env = base_env(MY_TEST_VARIABLE="1")
        run = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], cwd=self.tmp, env=env,
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("complete -o filenames -F _drun drun", run.stderr)
        return [l for l in run.stdout.splitlines() if l]

    def test_bash_completes_options_values_and_files(self):
        run = self.drun("--print-completion", "bash", timeout=30)
        self.assertExit(run, 0)
        script = os.path.join(self.tmp, "drun.bash")
        with open(script, "w") as f:
            f.write(run.stdout)
        for name in ("train.py", "other.txt"):
            open(os.path.join(self.tmp, name), "w").close()
        self.assertEqual(self.complete(script, "--nproc-per"), ["--nproc-per-node"])
        self.assertIn("--log-line-prefix-template", self.complete(script, "--log-"))
        self.assertEqual(sorted(self.complete(script, "--launcher", "")), ["local", "slurm", "ssh"])
        self.assertEqual(self.complete(script, "--standalone", "--rdzv-backend", "s"), ["static"])
        self.assertEqual(self.complete(script, "--help", "sl"), ["slurm"])
        self.assertEqual(self.complete(script, "--print-completion", "z"), ["zsh"])
        self.assertEqual(self.complete(script, "-x", "MY_TEST_VAR"), ["MY_TEST_VARIABLE"])
        self.assertEqual(self.complete(script, "--nproc-per-node", "2", "tr"), ["train.py"])
        # After the script, its own arguments: files, never drun's options.
        self.assertEqual(self.complete(script, "train.py", "--nnod"), [])
        self.assertEqual(self.complete(script, "train.py", "oth"), ["other.txt"])

    def test_zsh_and_tcsh_scripts(self):
        for shell, first in (("zsh", "#compdef drun"), ("tcsh", "# tcsh completion for drun")):
            run = self.drun("--print-completion", shell, timeout=30)
            self.assertExit(run, 0)
            self.assertTrue(run.stdout_lines[0].startswith(first), run.stdout_lines[0])
            self.assertIn("log-line-prefix-template", run.stdout)
        run = self.drun("--print-completion", "fish", timeout=30)
        self.assertExit(run, 2)
        if shutil.which("zsh"):
            z = subprocess.run(["zsh", "-n", "-c", self.drun("--print-completion", "zsh").stdout],
                               capture_output=True, text=True)
            self.assertEqual(z.returncode, 0, z.stderr)


class VersionTest(DrunTestCase):

    def test_version_with_only_drun_copied_says_what_is_missing_and_succeeds(self):
        alone = os.path.join(self.tmp, "bin")
        os.makedirs(alone)
        shutil.copy2(os.path.realpath(drun_path()), os.path.join(alone, "drun"))
        run = subprocess.run([os.path.join(alone, "drun"), "--version"], capture_output=True,
                             text=True, timeout=30, env=base_env())
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertRegex(run.stdout, r"^drun \d+\.\d+\.\d+\n$")
        lines = run.stderr.splitlines()
        self.assertEqual(len(lines), 1, run.stderr)
        self.assertRegex(lines[0], r"^drun: only single-node jobs can run: drun-net \(drun's "
                                   r"networked half.*docs/install\.md\)?$")
        self.assertNotIn("this job needs", run.stderr)


TORCHRUN_HELP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchrun214_help.txt")


def torchrun_flags(help_text):
    """The flags of an argparse --help ('-h, --help', '--nproc-per-node, --nproc_per_node',
    '-r, --redirects'), each as its first spelling with dashes."""
    flags = []
    for line in help_text.splitlines():
        m = re.match(r"^  ((?:-\w|--[\w-]+)(?:, (?:-\w|--[\w-]+))*)", line)
        if m:
            flags.append([f for f in m.group(1).split(", ")])
    return flags


class TorchrunFlagsDocTest(DrunTestCase):
    """docs/migrating.md lists every flag of torchrun 2.14's --help (kept, as printed by
    Debian sid's torch 2.14.1, in tests/e2e/torchrun214_help.txt), and drun accepts each
    (--help all lists it) or refuses it with a reason."""

    def setUp(self):
        super().setUp()
        with open(TORCHRUN_HELP) as f:
            self.flags = torchrun_flags(f.read())
        self.assertGreaterEqual(len(self.flags), 33)

    def test_migrating_lists_every_flag(self):
        with open(os.path.join(os.path.dirname(TORCHRUN_HELP), "..", "..", "docs", "migrating.md")) as f:
            doc = f.read()
        section = doc[doc.index("### Every torchrun 2.x option"):]
        section = section[:section.index("\n## ")]
        first_column = " ".join(row.split(" | ")[0] for row in section.splitlines() if row.startswith("| `"))
        listed = set(re.findall(r"--[\w-]+|(?<![\w-])-\w\b", first_column))
        missing = [names for names in self.flags if not set(names) & listed]
        self.assertEqual(missing, [], "torchrun 2.14 flags docs/migrating.md does not list")

    def test_drun_accepts_or_refuses_each_with_a_reason(self):
        known = options_in(self.drun("--help", "all", timeout=30).stdout)
        for names in self.flags:
            with self.subTest(flag=names[0]):
                dashed = [n for n in names if "_" not in n]
                if set(dashed) & known:
                    continue
                run = self.drun(dashed[0], "x", "t.py", timeout=30)
                self.assertExit(run, 2)
                self.assertRegex(run.stderr, rf"^drun: {re.escape(dashed[0])} is not supported: \S")

    def test_the_kept_help_is_torchrun_2_14s(self):
        command = os.environ.get("DRUN_TORCHRUN214")  # e.g. a chroot's `python3 -m torch.distributed.run`
        if not command:
            self.skipTest("set DRUN_TORCHRUN214 to a torchrun 2.14 command to compare its --help")
        live = subprocess.run(command + " --help", shell=True, capture_output=True, text=True, timeout=120)
        self.assertEqual(live.returncode, 0, live.stderr)
        self.assertEqual(torchrun_flags(live.stdout), self.flags)


if __name__ == "__main__":
    main()
