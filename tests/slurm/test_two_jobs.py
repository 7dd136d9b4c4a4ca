"""Two jobs sharing the same three nodes at once, each `srun drun` with no flags: their
rendezvous ports (derived from the job id when the step has no reserved ports) and tokens
differ, and both train."""
import re

from slurm_testlib import Gate, SlurmTestCase, TRAIN, main

PORT_BASE, JOB_SLOTS = 20000, 2350  # launcher/slurm/slurm_env.h: kSlurmPortBase, kSlurmPortJobSlots


class TwoJobs(SlurmTestCase):
    def test_jobs_sharing_nodes_do_not_collide(self):
        gate = Gate()
        self.addCleanup(gate.close)
        # `env -u SLURM_STEP_RESV_PORTS`: this cluster reserves ports for every step
        # (MpiParams=ports=...); most clusters do not, so exercise the derived port.
        body = f"""
#SBATCH --nodes=3 --ntasks-per-node=1 --cpus-per-task=1
srun env -u SLURM_STEP_RESV_PORTS {self.drun} --nproc-per-node 2 {TRAIN} --steps 20 --gate {gate.address}
"""
        a = self.submit(body, name="shared-a")
        b = self.submit(body, name="shared-b")
        # All twelve workers are up at the same time, on the same three nodes.
        facts = gate.wait_for(12, a)
        by_run = {}
        for f in facts:
            by_run.setdefault(f["run_id"], []).append(f)
        self.assertEqual(set(by_run), {f"slurm-{a.id}.0", f"slurm-{b.id}.0"})
        for run, fs in by_run.items():
            self.assertEqual(sorted(f["rank"] for f in fs), list(range(6)), run)
            self.assertEqual({f["host"] for f in fs}, {"node1", "node2", "node3"}, run)
        # Each job's workers use their own job's store.
        stores = {run: {f["master"] for f in fs} for run, fs in by_run.items()}
        self.assertTrue(all(len(s) == 1 for s in stores.values()), stores)
        self.assertEqual(len(set.union(*stores.values())), 2, stores)
        gate.release()

        ports = {}
        for job in (a, b):
            info = job.wait()
            self.assert_completed(job, info)
            out = job.output()
            self.assertRegex(out, r"TRAINING OK world=6 ")
            m = re.search(rf"drun: Slurm step {job.id}\.0: .*; rendezvous on node1:(\d+) \(port derived "
                          r"from the job id\)", out)
            self.assertTrue(m, out)
            ports[job.id] = int(m.group(1))
            self.assertEqual(ports[job.id], PORT_BASE + (job.id % JOB_SLOTS) * 4, out)
            self.assertNotIn("rejected", out)
        self.assertNotEqual(ports[a.id], ports[b.id])


if __name__ == "__main__":
    main()
