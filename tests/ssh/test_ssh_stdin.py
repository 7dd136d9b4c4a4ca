"""Worker I/O over the ssh launcher: drun's stdin reaches global rank 0 on a remote host
(--stdin RANK|all|none; the others read end-of-file at once), relayed on each agent's
lifeline; a remote rank's partial line (a prompt, a `\\r` progress bar) shows on drun's
stdout before its newline, with its prefix, and lines of two hosts never mix; pdb in a remote
rank 0 works from a terminal (a tmux pane)."""
import os
import re
import shlex
import shutil
import statistics
import subprocess
import unittest

import ssh_testlib as t
from tmux_pane import Tmux, pdb_dialogue  # tests/e2e, on the path through ssh_testlib

PROGRAM = os.path.join(t.PROGRAMS, "stdin_echo.py")
PREFIXED = re.compile(r"^\[[\w.-]+:rank\d+\][:+] ")


class StdinTest(t.SshTestCase):
    HOSTS = ["red01", "orange07", "purple11"]

    def start(self, extra, mode, stdin=subprocess.PIPE):
        p = self.drun(["-H", ",".join(self.HOSTS)] + extra + [PROGRAM] + mode, stdin=stdin)
        if p[0].stdin:
            self.addCleanup(p[0].stdin.close)
        return p

    def send(self, p, text):
        p[0].stdin.write(text.encode())
        p[0].stdin.flush()

    def test_rank0_reads_the_launchers_stdin_the_others_read_eof(self):
        p = self.start([], ["echo"])
        lines = p[1]
        # Ranks 1 and 2 read end-of-file at once, while rank 0 still waits for input.
        lines.wait_for(r"eof rank=1 lines=0$")
        lines.wait_for(r"eof rank=2 lines=0$")
        self.send(p, "hello\n")
        lines.wait_for(r"\]: echo rank=0 line=hello$")
        self.send(p, "world\n")
        lines.wait_for(r"\]: echo rank=0 line=world$")
        p[0].stdin.close()  # end-of-file for rank 0: it ends, and the job with it
        self.assertEqual(self.finish(p), 0, lines.describe())
        self.assertEqual(len(lines.wait_for(r"eof rank=0 lines=2$")), 1)
        self.assertEqual([x for x in lines.lines() if "echo rank=1" in x or "echo rank=2" in x], [])
        self.assertHostsClean()

    def test_stdin_through_rsh_openssh(self):
        # --rsh: the notices go down OpenSSH's client's standard input instead.
        p = self.start(["--rsh", "ssh -o BatchMode=yes"], ["echo"])
        self.send(p, "over rsh\n")
        p[1].wait_for(r"\]: echo rank=0 line=over rsh$")
        p[0].stdin.close()
        self.assertEqual(self.finish(p), 0, p[1].describe())
        p[1].wait_for(r"eof rank=0 lines=1$")

    def test_stdin_all_reaches_every_rank(self):
        p = self.start(["--stdin", "all"], ["echo"])
        self.send(p, "a\nb\n")
        p[1].wait_for(r"echo rank=\d line=b$", count=3)
        p[0].stdin.close()
        self.assertEqual(self.finish(p), 0, p[1].describe())
        for r in range(3):
            self.assertEqual(len(p[1].wait_for(rf"eof rank={r} lines=2$")), 1, p[1].describe())

    def test_stdin_none_gives_every_rank_eof(self):
        # drun's stdin stays open and unread: the job ends on its own.
        p = self.start(["--stdin", "none"], ["echo"])
        self.assertEqual(self.finish(p), 0, p[1].describe())
        for r in range(3):
            p[1].wait_for(rf"eof rank={r} lines=0$")

    def test_stdin_at_dev_null_is_eof_for_rank_0(self):
        p = self.start([], ["echo"], stdin=subprocess.DEVNULL)
        self.assertEqual(self.finish(p), 0, p[1].describe())
        p[1].wait_for(r"eof rank=0 lines=0$")

    def test_partial_lines_show_live_with_their_prefix(self):
        ticks = 15
        p = self.start([], ["ticks", str(ticks)])
        lines = p[1]
        latencies = []
        for i in range(ticks):
            # "tick I" is on drun's stdout with no newline after it yet: rank 0 writes the
            # next one only once it has read our next line.
            m = lines.wait_raw(rb"\[[\w.-]+:rank0\]: tick %d t=(\d+\.\d+)" % i)
            latencies.append(lines.arrival(m.end()) - float(m.group(1)))
            self.send(p, "next\n")
        p[0].stdin.close()
        self.assertEqual(self.finish(p), 0, lines.describe())
        latencies.sort()
        print(f"partial line latency over ssh: median {statistics.median(latencies) * 1000:.1f} ms, "
              f"max {latencies[-1] * 1000:.1f} ms ({ticks} redraws)")
        self.assertLess(statistics.median(latencies), 0.1, latencies)
        # Every console line, and every redraw in one, starts with a rank's prefix; the other
        # hosts' 400 lines crossed rank 0's open line without mixing into it.
        raw = lines.raw().decode()
        for piece in re.split(r"[\r\n]", raw):
            if piece:
                self.assertRegex(piece, PREFIXED)
                self.assertFalse("tick" in piece and "noise" in piece, piece)
        self.assertEqual(len([x for x in lines.lines() if re.search(r"\]: noise rank=\d i=\d+$", x)]),
                         400)
        self.assertEqual(len(re.findall(r"\]: tick \d+ t=", raw)), ticks)


@unittest.skipIf(shutil.which("tmux") is None, "tmux is not installed (tests/install_deps.sh)")
class TerminalTest(t.SshTestCase):
    HOSTS = ["red01", "orange07"]

    def test_pdb_in_remote_rank0_works_interactively(self):
        script = os.path.join(self.bed.tmp, "debug_me.py")
        with open(script, "w") as f:
            f.write("import os\nx = 6 * 7\nif int(os.environ['RANK']) == 0:\n    breakpoint()\n"
                    "print('finished', os.environ['RANK'], x)\n")
        env = self.bed.env()
        drun = self.bed.client_cmd([self.bed.drun, "-H", ",".join(self.HOSTS), script])
        # The exit code is printed for the test to read, then the pane stays.
        command = (f"trap true INT; {shlex.join(['env'] + [f'{k}={v}' for k, v in env.items()] + drun)}"
                   "; echo DRUN_EXIT=$?; exec sleep 600")
        tmux = Tmux(self.bed.tmp, command)
        self.addCleanup(tmux.close)
        rank0 = r"\[[\w.-]+:rank0\]"
        # The answer on a line of its own, under the prefix: the agent heard of the echo.
        pdb_dialogue(tmux, rank0, r"\[[\w.-]+:rank1\]")
        self.assertHostsClean()

    def test_breakpoint_on_every_remote_rank_from_a_terminal(self):
        # From a terminal the default is --stdin all: the launcher relays what is typed to
        # every agent, and one `c` continues both ranks' pdb on two hosts.
        script = os.path.join(self.bed.tmp, "debug_all.py")
        with open(script, "w") as f:
            f.write("import os\nx = 6 * 7\nbreakpoint()\n"
                    "print('finished', os.environ['RANK'], x, flush=True)\n")
        env = self.bed.env()
        drun = self.bed.client_cmd([self.bed.drun, "-H", ",".join(self.HOSTS), script])
        command = (f"trap true INT; {shlex.join(['env'] + [f'{k}={v}' for k, v in env.items()] + drun)}"
                   "; echo DRUN_EXIT=$?; exec sleep 600")
        own = os.path.join(self.bed.tmp, "tmux_all")  # its own tmux server, not the other test's
        os.makedirs(own, exist_ok=True)
        tmux = Tmux(own, command)
        self.addCleanup(tmux.close)
        for r in (0, 1):
            tmux.wait_for(rf"^\[[\w.-]+:rank{r}\][:+] \(Pdb\) ?$")
        tmux.keys("c", "Enter")
        screen = tmux.wait_for(r"^DRUN_EXIT=\d+")
        self.assertIn("DRUN_EXIT=0", screen)
        for r in (0, 1):
            # (rank 1's line may follow an empty continuation of its "(Pdb) " prompt)
            self.assertRegex(screen, rf"(?m)\[[\w.-]+:rank{r}\][:+] (\(Pdb\) )?finished {r} 42$")
        self.assertNotIn("BdbQuit", screen)
        self.assertHostsClean()


if __name__ == "__main__":
    t.main()
