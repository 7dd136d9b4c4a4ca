"""Chaos on the real Slurm cluster (the ssh testbed's suite is tests/chaos): scancel while a
round re-forms, a node's slurmd killed mid-run, an agent frozen (SIGSTOP) while its workers
finish. Each test asserts the job's end that docs/slurm.md gives and, in tearDown, that no
process is left on any node. Workers hold at the test's Gate (train_ddp.py --gate), so the
faults come at known points, without timers."""
import os
import re
import signal
import subprocess
import time

import slurm_testlib as sl
from slurm_testlib import Gate, SlurmTestCase, TRAIN, main

BOUND = 60  # seconds from the fault to the job's end: a bound only


def drun_exit(out):
    m = re.search(r"drun exit code: (\d+)", out)
    return int(m.group(1)) if m else None


class SlurmChaos(SlurmTestCase):
    def start(self, gate, extra=""):
        body = f"""
#SBATCH --nodes=3
{self.drun} --launcher slurm --nproc-per-node 2 --max-restarts 3 --shutdown-timeout 5 {extra} \
  {TRAIN} --steps 3 --gate {gate.address}
echo "drun exit code: $?"
"""
        job = self.submit(body, name=self.id().rsplit(".", 1)[-1])
        return job, gate.wait_for(6, job)

    def gate(self):
        gate = Gate()
        self.addCleanup(gate.close)
        return gate

    def test_scancel_while_a_round_reforms(self):
        """A worker is killed (the round stops and a new one forms), and the job is cancelled
        at once: docs/slurm.md's scancel ending (SIGTERM to drun, every agent stopped, exit
        143), not a restart that outlives the job."""
        gate = self.gate()
        job, facts = self.start(gate)
        os.kill(facts[3]["pid"], signal.SIGKILL)
        job.cancel()
        info = job.wait(timeout=BOUND)
        self.assertEqual(info.get("JobState"), "CANCELLED", job.output())
        self.assert_nodes_clean()
        out = job.output()
        self.assertIn("drun: got SIGTERM: stopping the agents", out)
        self.assertRegex(out, r"drun: job stopped by SIGTERM \(scancel, the job's time limit, or a "
                              r"signal to drun\); srun .*; exit code 143")

    def test_slurmd_killed_mid_run(self):
        """node2's slurmd is killed while the job runs: the job's steps (slurmstepd, the
        agents, the workers) do not depend on it, so the job ends as any job does when every
        worker exits 0 (docs/slurm.md): drun exits 0. slurmd is started again afterwards."""
        gate = self.gate()
        job, facts = self.start(gate)
        slurmd = self.slurmd_pid("node2")
        os.kill(slurmd, signal.SIGKILL)
        self.addCleanup(self.restart_slurmd, "node2")
        gate.release()
        out = self.wait_output(job, r"drun exit code: \d+")
        self.assertEqual(drun_exit(out), 0, out)
        self.assertIn("TRAINING OK world=6", out)
        self.restart_slurmd("node2")
        info = job.wait(timeout=BOUND)
        self.assertEqual(info.get("JobState"), "COMPLETED", out)

    def test_agent_frozen_while_its_workers_finish(self):
        """node3's agent is stopped (SIGSTOP) and its workers are released meanwhile, so they
        exit unobserved; after SIGCONT it reaps and reports them, and the job ends as when
        every worker exits 0 (exit 0). A frozen agent's TCP connection still answers the
        kernel's keep-alive probes, so nobody reports it lost."""
        gate = self.gate()
        job, facts = self.start(gate)
        agents = {f["ppid"] for f in facts if f["host"] == "node3"}
        self.assertEqual(len(agents), 1, facts)
        agent = agents.pop()
        os.kill(agent, signal.SIGSTOP)
        try:
            gate.release()
            workers = [f["pid"] for f in facts if f["host"] == "node3"]
            self.wait_zombies(workers)
        finally:
            os.kill(agent, signal.SIGCONT)
        info = job.wait(timeout=BOUND)
        out = job.output()
        self.assert_completed(job, info)
        self.assertEqual(drun_exit(out), 0, out)
        self.assertNotIn("was lost", out)

    # -- helpers ---------------------------------------------------------------------------

    def wait_output(self, job, pattern, timeout=BOUND):
        """Bounded poll of the job's output file (Slurm writes it; no event to wait on)."""
        end = time.monotonic() + timeout
        while not re.search(pattern, job.output()):
            if time.monotonic() > end:
                self.fail(f"no {pattern!r} in job {job.id}'s output within {timeout}s:\n"
                          f"{job.output()}")
            time.sleep(sl.POLL)
        return job.output()

    def wait_zombies(self, pids, timeout=BOUND):
        """Until each pid has exited (a zombie: its frozen agent cannot reap it)."""
        end = time.monotonic() + timeout
        while any(self.state_of(p) not in ("Z", None) for p in pids):
            if time.monotonic() > end:
                self.fail(f"workers {pids} did not exit within {timeout}s")
            time.sleep(sl.POLL)

    @staticmethod
    def state_of(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return None

    @staticmethod
    def slurmd_pid(node):
        pid = None
        with open(os.path.join(sl.STATE, "pids")) as f:
            for line in f:
                p, name = line.split()[:2]
                if name == node:
                    pid = int(p)
        return pid

    def restart_slurmd(self, node):
        """Starts `node`'s slurmd again as cluster.sh's start_in_ns does, records its pid in
        the cluster's list (so `cluster.sh down` stops it), and waits until the node is idle."""
        if self.state_of(self.slurmd_pid(node)) not in (None, "Z"):
            return
        ns = sl.NODE_NS[node]
        log = open(os.path.join(sl.STATE, "log", f"{node}.console"), "ab")
        proc = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{ns}", "unshare", "--uts", "--mount", "--propagation",
             "slave", "sh", "-c",
             'mount --bind "$0" /etc/hosts && mount -t tmpfs -o mode=0755 drun-node-private "$1" '
             '&& hostname "$2" && shift 2 && exec "$@"',
             os.path.join(sl.STATE, "hosts"), os.path.join(sl.STATE, "node-private"), node,
             "slurmd", "-D", "-N", node, "-f", sl.CONF],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            env=sl.slurm_env())
        log.close()
        with open(os.path.join(sl.STATE, "pids"), "a") as f:
            f.write(f"{proc.pid} {node}\n")
        end = time.monotonic() + BOUND
        while sl.run(["sinfo", "-h", "-n", node, "-o", "%t"], check=False).stdout.strip() \
                not in ("idle", "mix", "alloc"):
            if time.monotonic() > end:
                self.fail(f"{node}'s slurmd did not come back within {BOUND}s")
            time.sleep(sl.POLL)


if __name__ == "__main__":
    main()
