"""`srun drun ...` configures itself from SLURM_*: node mode (one task per node, the issue's
two-line sbatch script) and task mode (`srun -n 6`: each task is one worker)."""
import os
import re

from slurm_testlib import HERE, Gate, SlurmTestCase, TRAIN, main

NEW_SESSION_CHILD = os.path.join(os.path.dirname(HERE), "e2e", "programs", "new_session_child.py")


class NodeMode(SlurmTestCase):
    def test_two_line_script_trains_on_3_nodes_x_2_workers(self):
        job = self.submit(f"""
#SBATCH --nodes=3 --ntasks-per-node=1
srun {self.drun} --nproc-per-node 2 {TRAIN} --steps 30
""", name="twoline")
        info = job.wait()
        out = job.output()
        self.assert_completed(job, info)
        self.assertRegex(out, r"\[node1:rank0\]: TRAINING OK world=6 steps=30 ")
        workers = self.workers(out)
        self.assertEqual(sorted(int(w["rank"]) for w in workers), list(range(6)), out)
        for w in workers:
            rank = int(w["rank"])
            # Node ranks follow Slurm's node order (SLURM_NODEID): node1 holds ranks 0-1.
            self.assertEqual(w["host"], f"node{rank // 2 + 1}", w)
            self.assertEqual(w["prefix_host"], w["host"])
            self.assertEqual((w["local_rank"], w["local_world"]), (str(rank % 2), "2"), w)
            self.assertEqual((w["group_rank"], w["group_world"]), (str(rank // 2), "3"), w)
            self.assertEqual(w["world"], "6")
            # The store is served beside the rendezvous, on the step's first node.
            self.assertEqual(w["agent_store"], "True")
            self.assertTrue(w["master"].startswith("node1:"), w)
        # The host says once what it chose; the port is the step's reserved port
        # (this cluster has MpiParams=ports=12000-12999).
        said = [l for l in self.drun_lines(out) if "Slurm step" in l]
        self.assertEqual(len(said), 1, out)
        m = re.search(rf"Slurm step {job.id}\.0: 3 nodes, one drun per node, --nproc-per-node 2; "
                      rf"rendezvous on node1:(\d+) \(port SLURM_STEP_RESV_PORTS\), "
                      rf"run id slurm-{job.id}\.0", said[0])
        self.assertTrue(m, said[0])
        self.assertTrue(12000 <= int(m.group(1)) <= 12999, said[0])


class NothingLeft(SlurmTestCase):
    """What a worker starts outside its process group (a child in a session of its own, a
    daemon) ends with the job: Slurm's proctrack/linuxproc loses orphans, drun's agent (their
    subreaper) does not."""

    def check(self, line):
        job = self.submit(f"""
#SBATCH --nodes=2 --ntasks-per-node=1
{line} --nproc-per-node 2 {NEW_SESSION_CHILD} {self.dir}
""", name="escapees")
        info = job.wait()
        self.assert_completed(job, info)
        self.assertEqual(len([n for n in os.listdir(self.dir) if n.startswith("escapee_")]), 12,
                         job.output())
        self.assert_nodes_clean()

    def test_srun_node_mode(self):
        self.check(f"srun {self.drun}")

    def test_launcher_slurm(self):
        self.check(f"{self.drun} --launcher slurm")


class OneSummary(SlurmTestCase):
    """A failed `srun drun` step is one job: the node that hosts the rendezvous (node1)
    prints one table of every rank (each other task sends its node's report there as it
    ends) and one root cause; no other task says the job's end, nor the round's stop."""

    def assertOneSummary(self, out, tasks):
        lines = self.drun_lines(out)
        self.assertEqual(sum(1 for l in lines if re.match(r"drun: host +rank +local rank +exit", l)), 1, out)
        rows = [l for l in lines if re.match(r"drun: node\d +\d+ +\d+ ", l)]
        self.assertEqual(sorted(int(l.split()[2]) for l in rows), list(range(6)), out)
        self.assertRegex(out, r"(?m)^drun: node\d +4 +\d+ +3 ")  # the failed rank's row
        self.assertEqual(out.count("drun: ===== root cause: first failure ====="), 1, out)
        ended = [l for l in lines if l.startswith("drun: job failed: ")]
        self.assertEqual(len(ended), 1, out)
        self.assertRegex(ended[0], r"^drun: job failed: rank 4 on host node\d failed \(exit code 3\)")
        self.assertNotIn("the summary is on", out)
        self.assertEqual(sum(1 for l in lines if "stopping round 0: " in l), 1, out)
        self.assertNotIn("waiting for the current round to stop", out)

    def test_node_mode(self):
        job = self.submit(f"""
#SBATCH --nodes=3 --ntasks-per-node=1
srun {self.drun} --nproc-per-node 2 {TRAIN} --steps 5 --fail-rank 4
""", name="onesummary")
        job.wait()
        self.assertOneSummary(job.output(), 3)

    def test_task_mode(self):
        job = self.submit(f"""
#SBATCH --nodes=3 --ntasks-per-node=2
srun -n 6 {self.drun} {TRAIN} --steps 5 --fail-rank 4
""", name="onesummary-tasks")
        job.wait()
        self.assertOneSummary(job.output(), 6)


class RunDirectoryNamed(SlurmTestCase):
    """`srun drun --log-dir DIR`: every node's agent names the run's one directory
    (DIR/<run>/<node>[.N]/) in a line, so no one has to ls for the run's suffix."""

    def assertNamed(self, job, logs, dirs):
        out = job.output()
        named = sorted(l for l in self.drun_lines(out) if l.startswith("drun: logs in "))
        self.assertEqual(len(named), len(dirs), out)
        runs, node_dirs = set(), []
        for line in named:
            m = re.match(rf"^drun: logs in {re.escape(logs)}/(slurm-{job.id}\.0_\w{{6}})/([\w.]+)/$", line)
            self.assertTrue(m, line)
            runs.add(m.group(1))
            node_dirs.append(m.group(2))
        self.assertEqual(sorted(node_dirs), sorted(dirs), named)
        self.assertEqual(len(runs), 1, named)  # one run directory for the whole job
        self.assertEqual(sorted(os.listdir(os.path.join(logs, runs.pop()))), sorted(dirs))

    def test_node_mode(self):
        logs = os.path.join(self.dir, "logs")
        job = self.submit(f"""
#SBATCH --nodes=3 --ntasks-per-node=1
srun {self.drun} --nproc-per-node 1 --log-dir {logs} {TRAIN} --steps 2
""", name="named-nodes")
        self.assert_completed(job, job.wait())
        self.assertNamed(job, logs, ["node1", "node2", "node3"])

    def test_task_mode(self):
        logs = os.path.join(self.dir, "logs")
        job = self.submit(f"""
#SBATCH --nodes=2 --ntasks-per-node=2
srun -n 4 {self.drun} --log-dir {logs} {TRAIN} --steps 2
""", name="named-tasks")
        self.assert_completed(job, job.wait())
        self.assertNamed(job, logs, ["node1", "node1.1", "node2", "node2.1"])


class TaskMode(SlurmTestCase):
    def test_srun_n6_each_task_is_one_worker(self):
        gate = Gate()
        self.addCleanup(gate.close)
        job = self.submit(f"""
#SBATCH --nodes=3 --ntasks-per-node=2
srun -n 6 {self.drun} {TRAIN} --steps 30 --gate {gate.address}
""", name="tasks")
        facts = gate.wait_for(6, job)
        for f in facts:
            s = f["slurm"]
            # The seeds' `srun python3 ddp.py` pattern, nothing computed by hand.
            self.assertEqual(f["rank"], int(s["SLURM_PROCID"]), f)
            self.assertEqual(f["local_rank"], int(s["SLURM_LOCALID"]), f)
            self.assertEqual(f["world"], int(s["SLURM_NTASKS"]), f)
            self.assertEqual(f["world"], 6)
            self.assertEqual(f["local_world"], 2, f)
            self.assertEqual(f["group_rank"], int(s["SLURM_NODEID"]), f)
            self.assertEqual(f["group_world"], 3, f)
            self.assertEqual(f["omp"], "1", f)  # two workers share each node
            self.assertEqual(f["restart_count"], "0")
            self.assertEqual(f["agent_store"], "True")
            self.assertEqual(f["run_id"], f"slurm-{job.id}.0")
            self.assertTrue(f["master"].startswith("node1:"), f)
            self.assertEqual(f["host"], f"node{int(s['SLURM_NODEID']) + 1}", f)
        self.assertEqual(len({(f["host"], f["local_rank"]) for f in facts}), 6)
        gate.release()
        info = job.wait()
        self.assert_completed(job, info)
        out = job.output()
        self.assertRegex(out, r"TRAINING OK world=6 steps=30 ")
        self.assertRegex(out, rf"drun: Slurm step {job.id}\.0: 6 tasks on 3 nodes, one worker per "
                              rf"task \(RANK=SLURM_PROCID\)")

    def test_several_workers_per_task_is_refused_with_the_remedy(self):
        job = self.submit(f"""
#SBATCH --nodes=3 --ntasks-per-node=2
srun -n 6 {self.drun} --nproc-per-node 2 {TRAIN}
""", name="tasks-nproc")
        info = job.wait()
        self.assertEqual(info.get("JobState"), "FAILED", job.output())
        self.assertEqual(info.get("ExitCode"), "2:0")
        self.assertIn("drun: this srun step runs 6 tasks on 3 nodes, so each task is one worker "
                      "(RANK=SLURM_PROCID) and --nproc-per-node 2 cannot apply", job.output())
        self.assertIn("srun --ntasks-per-node=1", job.output())


if __name__ == "__main__":
    main()
