"""`drun stacks` over ssh (issue #15, docs/stacks.md): from the shell that started a job with
--hostfile/-H, one command prints every rank of every host. The launcher answers on its own
control socket and gathers each host's dump through the rendezvous. Real PyTorch gloo: 3 hosts
x 2 ranks in an all_reduce loop where rank 2 stops in stuck() (tests/e2e/programs/
hang_allreduce.py). The launcher and `drun stacks` share a private XDG_RUNTIME_DIR that the
remote agents (started by sshd) do not have, so only the launcher can have answered."""
import os
import re
import signal
import subprocess
import tempfile
import time

import ssh_testlib as t
from drun_testlib import stack_sections

E2E_PROGRAMS = os.path.join(t.HERE, "..", "e2e", "programs")
class StacksTest(t.SshTestCase):
    def stacks(self, xdg, *args):
        env = self.bed.env(XDG_RUNTIME_DIR=xdg)
        return subprocess.run([self.bed.drun, "stacks", *args], env=env, capture_output=True,
                              text=True, timeout=90)

    def test_drun_stacks_from_the_launching_shell_gathers_every_host(self):
        xdg = tempfile.mkdtemp(dir=self.bed.tmp)
        os.chmod(xdg, 0o700)
        mark = os.path.join(self.bed.tmp, "hang_mark")
        p = self.drun(["-H", ",".join(self.HOSTS), "--nproc-per-node", "2", "--run-id", "gather",
                       "-x", f"HANG_MARK={mark}", "-x", "STEPS=1000",
                       os.path.join(E2E_PROGRAMS, "hang_allreduce.py")],
                      env=self.bed.env(XDG_RUNTIME_DIR=xdg))
        p[1].wait_for(r"\]: step 4$", count=6)
        p[1].wait_for(r"\]: stuck at step 5$")
        out = self.stacks(xdg)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertEqual(out.stderr, "")
        lines = out.stdout.splitlines()
        self.assertRegex(lines[0], r"^drun stacks: run 'gather', 6 ranks on 3 hosts, gathered by "
                                   r"pid \d+ on \S+$")
        # Each host's part, in node-rank order, then its ranks.
        parts = [l for l in lines if l.startswith("drun stacks: 2 ranks on ")]
        self.assertEqual(len(parts), 3, out.stdout)
        for i, part in enumerate(parts):
            self.assertRegex(part, rf"^drun stacks: 2 ranks on (\S+) \(node rank {i}\), taken in "
                                   r"\d+ ms$")
        self.assertEqual(sorted(re.match(r"drun stacks: 2 ranks on (\S+)", l).group(1)
                                for l in parts), sorted(self.HOSTS))
        got = stack_sections(out.stdout)
        self.assertEqual(sorted(got), list(range(6)), out.stdout)
        for rank, (host, _, text) in got.items():
            self.assertIn(host, self.HOSTS)
            self.assertIn("hang_allreduce.py", text, text)
            if rank == 2:
                self.assertRegex(text, r"hang_allreduce\.py\", line \d+, in stuck", text)
            else:
                self.assertIn("all_reduce", text, text)
        p[0].send_signal(signal.SIGTERM)
        self.assertEqual(self.finish(p), 128 + signal.SIGTERM, p[1].describe())
        self.assertHostsClean()
        # The job is over: its socket went with it.
        out = self.stacks(xdg)
        self.assertEqual(out.returncode, 1)
        self.assertIn("no drun job of yours", out.stderr)

    def test_hang_timeout_across_hosts_names_the_rank_asleep_once(self):
        # --hang-timeout 5 over 3 hosts: the verdict needs every host quiet; the table comes
        # once, from the host of the odd rank, within 7 s of rank 2 falling asleep.
        mark = os.path.join(self.bed.tmp, "hang_mark_timeout")
        logs = os.path.join(self.bed.tmp, "hang_logs")
        p = self.drun(["-H", ",".join(self.HOSTS), "--nproc-per-node", "2", "--run-id", "hung",
                       "--hang-timeout", "5", "--log-dir", logs, "-x", f"HANG_MARK={mark}",
                       "-x", "STEPS=1000", os.path.join(E2E_PROGRAMS, "hang_allreduce.py")])
        p[1].wait_for(r"^drun: \S+: no rank made progress", stream="stderr")
        detected = time.time()
        self.assertEqual(self.finish(p), 124, p[1].describe())
        with open(mark) as f:
            hung_at = float(f.read())
        self.assertGreaterEqual(detected - hung_at, 4.5, p[1].describe())
        self.assertLessEqual(detected - hung_at, 7.0, p[1].describe())
        # An agent's lines reach the launcher's stderr as "drun: HOST: ...": drop the host.
        err = [re.sub(r"^drun: [^\s:]+: ", "drun: ", l) for l in p[1].lines("stderr")]
        self.assertEqual(len([l for l in err if l.startswith("drun: no rank made progress")]), 1,
                         p[1].describe())
        table = [l for l in err if re.match(r"^drun: \d+\s+\S+\s+\d+\s+[A-Z] ", l)]
        self.assertEqual(len(table), 6, p[1].describe())
        self.assertEqual({l.split()[2] for l in table}, set(self.HOSTS))
        rank2 = [l for l in table if l.startswith("drun: 2 ")][0]
        self.assertRegex(rank2, r"hang_allreduce\.py:\d+ in stuck  <- not where the others are")
        for l in table:
            if not l.startswith("drun: 2 "):
                self.assertIn("in all_reduce", l)
        full = [l for l in err if l.startswith("drun: every rank's full stack: ")]
        self.assertEqual(len(full), 1, p[1].describe())
        for host in self.HOSTS:
            self.assertIn(f"{host}:{logs}/hung_", full[0])
        self.assertIn("hung (--hang-timeout)", "\n".join(err))
        self.assertHostsClean()


    def test_an_agent_started_by_rsh_listens_under_its_xdg_runtime_dir(self):
        # A host whose `drun agent` (started here by --rsh, through OpenSSH) has
        # XDG_RUNTIME_DIR=D keeps its control socket in D/drun, and `drun stacks` typed on that
        # host with that XDG_RUNTIME_DIR finds the job (it used to listen in /tmp/drun-UID).
        # The launcher has no XDG_RUNTIME_DIR: only red01's agent can answer there.
        xdg = tempfile.mkdtemp(dir=self.bed.tmp)
        os.chmod(xdg, 0o700)
        rsh = os.path.join(self.bed.tmp, "rsh-with-xdg")
        with open(rsh, "w") as f:
            f.write(f'#!/bin/sh\nhost=$1; shift\nexec ssh -o BatchMode=yes "$host" '
                    f'env XDG_RUNTIME_DIR={xdg} "$@"\n')
        os.chmod(rsh, 0o755)
        p = self.drun(["-H", "red01", "--rsh", rsh, "--nproc-per-node", "2", "--run-id", "xdg",
                       os.path.join(E2E_PROGRAMS, "wait_printing.py")],
                      env=self.bed.env(XDG_RUNTIME_DIR=None))
        p[1].wait_for(r"\]: waiting$", count=2)
        # PID.sock, beside it PID.tmp (the agent's temporaries named for the next run's clean-up)
        sockets = [n for n in os.listdir(os.path.join(xdg, "drun")) if n.endswith(".sock")]
        self.assertEqual(len(sockets), 1, sockets)
        self.assertIn(int(sockets[0].split(".")[0]), self.bed.agent_pids("red01"))
        out = subprocess.run(["ip", "netns", "exec", self.bed.host_ns["red01"], self.bed.drun, "stacks"],
                             env=self.bed.env(XDG_RUNTIME_DIR=xdg), capture_output=True, text=True,
                             timeout=90)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertRegex(out.stdout.splitlines()[0], r"^drun stacks: run 'xdg', 2 ranks")
        got = stack_sections(out.stdout)
        self.assertEqual(sorted(got), [0, 1], out.stdout)
        for rank, (host, _, text) in got.items():
            self.assertEqual(host, "red01")
            self.assertIn("wait_printing.py", text, text)
        p[0].send_signal(signal.SIGTERM)
        self.assertEqual(self.finish(p), 128 + signal.SIGTERM, p[1].describe())
        self.assertHostsClean()
        self.assertEqual(os.listdir(os.path.join(xdg, "drun")), [])

if __name__ == "__main__":
    t.main()
