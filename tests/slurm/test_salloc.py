"""`drun --launcher slurm` typed in an salloc shell that runs on the login host (Slurm's default
when salloc is given a command): here this process's root namespace, whose host name the nodes
cannot resolve and whose resolver knows none of the nodes' names. drun finds the address the
nodes reach it at from their NodeAddr (scontrol), or refuses in one line naming --local-addr.
On the salloc shell's terminal (a tmux pane): rank 0's prompt on another node shows before the
user types, two ranks per node answer one typed line each on a row with one prefix, and the
nodes' `\r` progress bars each keep a row of their own and finish on clean rows (the agents
write every rank's bytes as relay frames that srun passes on at once, and the launcher's one
console prefixes them: launcher/slurm/srun_relay.h)."""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

from slurm_testlib import CONF, HERE, JOB_TIMEOUT, PYTHON, ROOT_ADDR, SlurmTestCase, TRAIN, main, \
    slurm_env

sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from tmux_pane import Tmux  # noqa: E402

PROMPT = os.path.join(HERE, "programs", "prompt.py")
TWO_BARS = os.path.join(HERE, "programs", "two_bars.py")


class SallocOnTheLoginHost(SlurmTestCase):
    def setUp(self):
        super().setUp()
        # What makes this the login host's case: node names do not resolve here.
        if subprocess.run(["getent", "hosts", "node1"], capture_output=True).returncode == 0:
            self.skipTest("node1 resolves in this namespace: not the login host's case")

    def salloc(self, *command):
        return subprocess.run(["salloc", "--nodes=3", f"--chdir={self.dir}", *command],
                              env=slurm_env(), capture_output=True, text=True, timeout=JOB_TIMEOUT)

    def test_agents_dial_the_address_that_routes_to_the_nodes(self):
        proc = self.salloc(self.drun, "--launcher", "slurm", "--nproc-per-node", "2", TRAIN,
                           "--steps", "5")
        out = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 0, out)
        self.assertRegex(out, r"TRAINING OK world=6 steps=5 ")
        # Not this machine's name (which no node resolves): its address toward the nodes.
        self.assertRegex(out, rf"(?m)^drun: Slurm job \d+: rendezvous on {re.escape(ROOT_ADDR)}:\d+, ")

    def test_no_route_to_any_node_is_refused_naming_local_addr(self):
        # A network namespace of its own with nothing in it: no node's address routes from
        # there (and slurmctld is out of reach, so scontrol says nothing either).
        proc = self.salloc("unshare", "--net", self.drun, "--launcher", "slurm", TRAIN)
        out = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 1, out)
        said = [l for l in out.splitlines() if l.startswith("drun: ")]
        self.assertEqual(len(said), 1, out)
        self.assertRegex(said[0], r"^drun: cannot tell which address of \S+ the agents can reach: "
                                  r"no node of the allocation \(node\[1-3\]\) has an address .*; "
                                  r"give --local-addr ADDR, ")
        self.assertNotIn("starting", out)

    def salloc_in_tmux(self, nodes, *args):
        """salloc --nodes=N drun --launcher slurm ARGS in a tmux pane; then DRUN_EXIT=<code>."""
        # tmux's socket path must stay short (a unix socket's 108 bytes): not under self.dir.
        tmp = tempfile.mkdtemp(prefix="drs-tmux-")
        self.addCleanup(shutil.rmtree, tmp, True)
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in
                       {"SLURM_CONF": CONF, "PYTHON_EXEC": PYTHON}.items())
        command = " ".join(shlex.quote(a) for a in (self.drun, "--launcher", "slurm", *args))
        tmux = Tmux(tmp, f"cd {shlex.quote(self.dir)} && env {env} salloc --nodes={nodes} "
                         f"{command}; echo DRUN_EXIT=$?; sleep 600")
        self.addCleanup(tmux.close)
        return tmux

    @unittest.skipIf(shutil.which("tmux") is None, "tmux is not installed (tests/install_deps.sh)")
    def test_rank0_prompt_shows_before_the_user_types(self):
        tmux = self.salloc_in_tmux(3, "--nproc-per-node", "1", PROMPT)
        # The prompt has no newline: it is on screen only if it was passed on as it came.
        tmux.wait_for(r"^\[node\d:rank0\]: rank 0: your name\? ?$", bound=JOB_TIMEOUT)
        tmux.keys("carol", "Enter")
        screen = tmux.wait_for(r"^DRUN_EXIT=\d+", bound=JOB_TIMEOUT)
        self.assertIn("DRUN_EXIT=0", screen)
        self.assertRegex(screen, r"(?m)^\[node\d:rank0\]: rank 0: your name\? carol$")
        self.assertRegex(screen, r"(?m)^\[node\d:rank0\]: rank 0 got 'carol'$")
        self.assertEqual(sorted(re.findall(r"(?m)^\[node\d:rank\d\]: done (\d)$", screen)),
                         ["0", "1", "2"], screen)

    @unittest.skipIf(shutil.which("tmux") is None, "tmux is not installed (tests/install_deps.sh)")
    def test_two_ranks_per_node_answer_one_typed_line_each_on_a_clean_row(self):
        # Issue 31: 2 nodes x 2 ranks, each asking input(); one typed line reaches them all
        # (--stdin all from a terminal). Every answer is on a row of its own with one
        # prefix (the launcher's console prefixes every rank: no agent's prefix inside it),
        # and no row is a prefix alone.
        tmux = self.salloc_in_tmux(2, "--nproc-per-node", "2", PROMPT, "--every-rank")
        for rank in range(4):
            tmux.wait_for(rf"^\[node\d:rank{rank}\][:+] rank {rank}: your name\? ?$", bound=JOB_TIMEOUT)
        tmux.keys("dave", "Enter")
        screen = tmux.wait_for(r"^DRUN_EXIT=\d+", bound=JOB_TIMEOUT)
        self.assertIn("DRUN_EXIT=0", screen)
        for rank in range(4):
            self.assertRegex(screen, rf"(?m)^\[node\d:rank{rank}\][:+] (rank {rank}: your name\? )?"
                                     rf"rank {rank} got 'dave'$")
        self.assertNotRegex(screen, r"(?m)^\[node\d:rank\d\][:+] ?$")  # an empty row
        self.assertNotRegex(screen, r"(?m)^\[node\d:rank\d\][:+] \[node")  # two prefixes
        self.assertEqual(sorted(re.findall(r"(?m)^\[node\d:rank\d\]: done (\d)$", screen)),
                         ["0", "1", "2", "3"], screen)

    @unittest.skipIf(shutil.which("tmux") is None, "tmux is not installed (tests/install_deps.sh)")
    def test_three_nodes_two_bars_each_finish_on_clean_rows(self):
        # Issue 31: 3 nodes x 2 ranks drawing bars: every finished bar is one row with one
        # prefix, and no unfinished drawing stays on screen.
        fifo = os.path.join(self.dir, "go")
        os.mkfifo(fifo)
        tmux = self.salloc_in_tmux(3, "--nproc-per-node", "2", TWO_BARS, fifo)
        for rank in range(6):
            tmux.wait_for(rf"^\[node\d:rank{rank}\]: step 10/21$", bound=JOB_TIMEOUT)
        with open(fifo, "w"):
            pass  # rank 0 goes on
        screen = tmux.wait_for(r"^DRUN_EXIT=\d+", bound=JOB_TIMEOUT)
        self.assertIn("DRUN_EXIT=0", screen)
        rows = [r for r in screen.splitlines() if "step " in r]
        self.assertEqual(sorted(re.sub(r"node\d", "node", r) for r in rows),
                         [f"[node:rank{r}]: step 21/21 done" for r in range(6)], screen)

    @unittest.skipIf(shutil.which("tmux") is None, "tmux is not installed (tests/install_deps.sh)")
    def test_two_nodes_bars_each_keep_a_row_of_their_own(self):
        fifo = os.path.join(self.dir, "go")
        os.mkfifo(fifo)
        tmux = self.salloc_in_tmux(2, "--nproc-per-node", "1", TWO_BARS, fifo)
        # Mid-run: both bars at step 10, each on its own row (neither overwrote the other),
        # and no redraw became a row of its own.
        tmux.wait_for(r"^\[node\d:rank0\]: step 10/21$", bound=JOB_TIMEOUT)
        screen = tmux.wait_for(r"^\[node\d:rank1\]: step 10/21$", bound=JOB_TIMEOUT)
        rows = [r for r in screen.splitlines() if "]: step " in r]
        self.assertEqual(sorted(re.sub(r"node\d", "node", r) for r in rows),
                         ["[node:rank0]: step 10/21", "[node:rank1]: step 10/21"], screen)
        self.assertNotEqual(rows[0][:6], rows[1][:6], screen)  # two nodes
        with open(fifo, "w"):
            pass  # rank 0 goes on
        screen = tmux.wait_for(r"^DRUN_EXIT=\d+", bound=JOB_TIMEOUT)
        self.assertIn("DRUN_EXIT=0", screen)
        rows = [r for r in screen.splitlines() if "]: step " in r]
        self.assertEqual(sorted(re.sub(r"node\d", "node", r) for r in rows),
                         ["[node:rank0]: step 21/21 done", "[node:rank1]: step 21/21 done"], screen)


if __name__ == "__main__":
    main()
