"""Faults mid-run on the real cluster: a node's agent killed (SIGKILL), and scancel. In every
case the job ends promptly, says why, and leaves no process on any node (checked by each
test's tearDown through the nodes' network namespaces)."""
import os
import re
import signal
import time

from slurm_testlib import Gate, SlurmTestCase, TRAIN, main

BOUND = 30  # seconds from the fault to the job's end; a bound, the expected time is ~1-2 s


class AgentKilled(SlurmTestCase):
    def start_held(self, launcher, kill_on_bad_exit=True):
        gate = Gate()
        self.addCleanup(gate.close)
        if launcher:
            body = f"""
#SBATCH --nodes=3
{self.drun} --launcher slurm --nproc-per-node 2 {TRAIN} --steps 5 --gate {gate.address}
echo "drun exit code: $?"
"""
        else:
            # With --kill-on-bad-exit srun ends the step at once; without it the rendezvous
            # ends the job, since no other task can join a step (docs/slurm.md).
            kob = "--kill-on-bad-exit=1 " if kill_on_bad_exit else ""
            body = f"""
#SBATCH --nodes=3 --ntasks-per-node=1
srun {kob}{self.drun} --nproc-per-node 2 {TRAIN} --steps 5 --gate {gate.address}
echo "srun exit code: $?"
"""
        job = self.submit(body, name="held-launcher" if launcher else "held-srun")
        facts = gate.wait_for(6, job)
        return job, facts

    def kill_agent_of(self, facts, host):
        agents = {f["ppid"] for f in facts if f["host"] == host}
        self.assertEqual(len(agents), 1, facts)  # both workers of a node share their agent
        agent = agents.pop()
        os.kill(agent, signal.SIGKILL)
        return time.monotonic()

    def test_launcher_names_the_lost_node_and_ends_the_job(self):
        job, facts = self.start_held(launcher=True)
        killed_at = self.kill_agent_of(facts, "node2")
        info = job.wait(timeout=BOUND)
        self.assertLess(time.monotonic() - killed_at, BOUND)
        out = job.output()
        self.assertIn("drun: lost the agent on node2", out)
        # The rendezvous' verdict names the node (it usually comes before srun's end,
        # which otherwise names it too).
        self.assertRegex(out, r"drun: job failed: host node2 was lost \(node rank \d, 10\.213\.61\.\d+\); "
                              r"2 of at least 3 are left and no other can join|"
                              r"lost agents: node2.* \(node2 first: its task ended, so srun "
                              r"--kill-on-bad-exit stopped the others\)")
        m = re.search(r"drun exit code: (\d+)", out)
        self.assertTrue(m and m.group(1) != "0", out)

    def test_srun_node_mode_with_kill_on_bad_exit_ends_the_step(self):
        job, facts = self.start_held(launcher=False)
        killed_at = self.kill_agent_of(facts, "node3")
        info = job.wait(timeout=BOUND)
        self.assertLess(time.monotonic() - killed_at, BOUND)
        out = job.output()
        # The rendezvous host noticed at once and stopped the others' workers; srun then
        # ended the step with SIGTERM, which each surviving agent obeys (exit 128+15).
        self.assertIn("drun: stopping round 0: host node3 was lost", out)
        # Named by node rank and address too: several agents may share a machine's name.
        self.assertRegex(out, r"drun: stopping round 0: host node3 was lost \(node rank 2, "
                              r"10\.213\.61\.\d+\)")
        self.assertIn("srun: error: node3: task 2: Killed", out)
        # Each survivor ends on srun's SIGTERM (143) or on the rendezvous' verdict (1),
        # whichever reaches it first.
        self.assertRegex(out, r"srun: error: node1: task 0: Exited with exit code (143|1)\n")
        self.assertRegex(out, r"srun: error: node2: task 1: Exited with exit code (143|1)\n")
        self.assertRegex(out, r"srun exit code: [1-9]")

    def test_srun_node_mode_without_kill_on_bad_exit_ends_within_seconds(self):
        # The README's two-line sbatch: no --kill-on-bad-exit. No task can join a step
        # later, so the rendezvous ends the job at once instead of waiting join_timeout.
        job, facts = self.start_held(launcher=False, kill_on_bad_exit=False)
        killed_at = self.kill_agent_of(facts, "node2")
        job.wait(timeout=BOUND)
        took = time.monotonic() - killed_at
        print(f"[measured] plain srun drun, node2's agent killed: job over after {took:.2f}s")
        self.assertLess(took, 5.0)  # bound: loss detection (<= 3 s) plus scontrol polling
        out = job.output()
        self.assertRegex(out, r"drun: stopping round 0: host node2 was lost \(node rank \d, "
                              r"10\.213\.61\.\d+\)")
        self.assertRegex(out, r"drun: job failed: host node2 was lost \(node rank \d, 10\.213\.61\.\d+\); "
                              r"2 of at least 3 are left and no other can join")
        self.assertIn("srun: error: node1: task 0: Exited with exit code 1", out)
        self.assertIn("srun: error: node3: task 2: Exited with exit code 1", out)
        self.assertIn("srun exit code: 1", out)


class Scancel(SlurmTestCase):
    def run_and_cancel(self, body, name):
        gate = Gate()
        self.addCleanup(gate.close)
        job = self.submit(body.format(drun=self.drun, train=TRAIN, gate=gate.address), name=name)
        gate.wait_for(6, job)
        job.cancel()
        info = job.wait(timeout=BOUND)
        self.assertEqual(info.get("JobState"), "CANCELLED", job.output())
        return job

    def test_launcher_prints_its_summary_and_leaves_nothing(self):
        job = self.run_and_cancel("""
#SBATCH --nodes=3
{drun} --launcher slurm --nproc-per-node 2 {train} --steps 5 --gate {gate}
""", "cancel-launcher")
        # The job's state flips at once; drun's last lines follow within Slurm's KillWait.
        self.assert_nodes_clean()
        out = job.output()
        self.assertIn("drun: got SIGTERM: stopping the agents", out)
        self.assertRegex(out, r"drun: job stopped by SIGTERM \(scancel, the job's time limit, or a "
                              r"signal to drun\); srun .*; exit code 143")

    def test_srun_node_mode_stops_every_agent(self):
        job = self.run_and_cancel("""
#SBATCH --nodes=3 --ntasks-per-node=1
srun {drun} --nproc-per-node 2 {train} --steps 5 --gate {gate}
""", "cancel-srun")
        self.assert_nodes_clean()
        out = job.output()
        self.assertIn("JOB", out)  # slurmstepd's "*** JOB n ON node1 CANCELLED AT ... ***"
        self.assertIn("drun: got SIGTERM: stopping the workers", out)


if __name__ == "__main__":
    main()
