"""One meaning of a signal in every Slurm mode (docs/semantics.md): scancel (or a signal to
drun) reaches every worker as that signal, followed by --shutdown-timeout's grace. Each of 6
workers handles only that signal by writing a checkpoint 3 s later
(tests/ssh/programs/checkpoint.py), so a SIGHUP in its place, or a SIGKILL before the grace
is over, leaves checkpoints missing. The test waits for all 6 workers at its gate (their
handlers are in place by then), acts, waits for the job's end and for every process to leave
the nodes, and counts the checkpoints. A deliberate stop never reports a node as lost."""
import os
import signal

from slurm_testlib import Gate, SlurmTestCase, main

CHECKPOINT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ssh",
                          "programs", "checkpoint.py")
WORKERS = 6


class CheckpointOnSignal(SlurmTestCase):
    def start(self, line, name, on="TERM", sbatch="--nodes=3 --ntasks-per-node=1", pidfile=False):
        """Submits `line` (with {drun} and {prog} filled in), waits for its 6 workers."""
        gate = Gate()
        self.addCleanup(gate.close)
        self.ckpt = os.path.join(self.dir, "ckpt")
        os.makedirs(self.ckpt)
        prog = f"{CHECKPOINT} --dir {self.ckpt} --on {on} --gate {gate.address}"
        self.pidfile = os.path.join(self.dir, "drun.pid")
        body = f"#SBATCH {sbatch}\n"
        if pidfile:
            body += f"echo $$ > {self.pidfile}\nexec "
        body += line.format(drun=self.drun, prog=prog) + "\n"
        job = self.submit(body, name=name)
        gate.wait_for(WORKERS, job)
        return job

    def checkpoints(self):
        out = {}
        for name in os.listdir(self.ckpt):
            if name.startswith("ckpt-") and not name.endswith(".tmp"):
                with open(os.path.join(self.ckpt, name)) as f:
                    out[int(name[5:])] = f.read().split()[0]
        return out

    def expect_all_checkpointed(self, job, signame, state):
        info = job.wait()
        self.assertEqual(info.get("JobState"), state, job.output())
        # The state flips at once; the workers finish their checkpoints within KillWait.
        self.assert_nodes_clean()
        out = job.output()
        self.assertEqual(self.checkpoints(), {r: signame for r in range(WORKERS)}, out)
        self.assertNotIn("was lost", out)
        self.assertNotIn("lost the agent", out)
        self.assertNotIn("again: ", out)  # "got SIGHUP again: killing the workers now"
        return out

    def test_scancel_launcher_slurm(self):
        job = self.start("{drun} --launcher slurm --nproc-per-node 2 --shutdown-timeout 8 {prog}",
                         "sig-launcher")
        job.cancel()
        out = self.expect_all_checkpointed(job, "SIGTERM", "CANCELLED")
        self.assertIn("drun: got SIGTERM: stopping the agents", out)

    def test_scancel_srun_node_mode(self):
        job = self.start("srun {drun} --nproc-per-node 2 --shutdown-timeout 8 {prog}", "sig-srun")
        job.cancel()
        self.expect_all_checkpointed(job, "SIGTERM", "CANCELLED")

    def test_scancel_srun_node_mode_kill_on_bad_exit(self):
        # The first agent to end (143) has srun end the step, which signals the others again.
        job = self.start("srun --kill-on-bad-exit=1 {drun} --nproc-per-node 2 "
                         "--shutdown-timeout 8 {prog}", "sig-srun-kob")
        job.cancel()
        self.expect_all_checkpointed(job, "SIGTERM", "CANCELLED")

    def test_scancel_srun_task_mode(self):
        job = self.start("srun -n 6 {drun} --shutdown-timeout 8 {prog}", "sig-tasks",
                         sbatch="--nodes=3 --ntasks-per-node=2")
        job.cancel()
        out = self.expect_all_checkpointed(job, "SIGTERM", "CANCELLED")
        # Its members are tasks, and the progress lines say so.
        waiting = [l for l in out.splitlines() if ": waiting: " in l]
        self.assertTrue(waiting, out)
        for line in waiting:
            self.assertRegex(line, r"waiting: \d of 6 tasks joined \(", out)

    def test_sigterm_to_drun_launcher_slurm(self):
        job = self.start("{drun} --launcher slurm --nproc-per-node 2 --shutdown-timeout 8 {prog}",
                         "sig-term-launcher", pidfile=True)
        with open(self.pidfile) as f:
            os.kill(int(f.read()), signal.SIGTERM)
        self.expect_all_checkpointed(job, "SIGTERM", "FAILED")

    def test_ctrl_c_to_drun_launcher_slurm(self):
        # What Ctrl-C in an salloc shell does: SIGINT to drun alone (srun has its own group).
        job = self.start("{drun} --launcher slurm --nproc-per-node 2 --shutdown-timeout 8 {prog}",
                         "sig-int-launcher", on="INT", pidfile=True)
        with open(self.pidfile) as f:
            os.kill(int(f.read()), signal.SIGINT)
        out = self.expect_all_checkpointed(job, "SIGINT", "FAILED")
        self.assertIn("drun: got SIGINT: stopping the agents", out)


if __name__ == "__main__":
    main()
