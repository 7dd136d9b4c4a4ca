"""`drun --launcher slurm ...` typed once in an sbatch script: drun hosts the rendezvous on the
batch node and starts one agent per node with a single srun step."""
import json
import os
import re
import signal

from slurm_testlib import STATE, Gate, SlurmTestCase, TRAIN, main


class LauncherSlurm(SlurmTestCase):
    def test_trains_on_every_node_of_the_allocation(self):
        job = self.submit(f"""
#SBATCH --nodes=3
{self.drun} --launcher slurm --nproc-per-node 2 {TRAIN} --steps 30
""", name="launcher")
        info = job.wait()
        out = job.output()
        self.assert_completed(job, info)
        self.assertRegex(out, r"TRAINING OK world=6 steps=30 ")
        workers = self.workers(out)
        self.assertEqual(sorted(int(w["rank"]) for w in workers), list(range(6)), out)
        # One agent per node of the allocation (the default --nnodes), two workers each.
        per_host = {}
        for w in workers:
            per_host.setdefault(w["host"], set()).add(int(w["local_rank"]))
            self.assertEqual(w["group_world"], "3")
        self.assertEqual(per_host, {"node1": {0, 1}, "node2": {0, 1}, "node3": {0, 1}}, out)
        said = [l for l in self.drun_lines(out) if "starting 3 agents" in l]
        self.assertEqual(len(said), 1, out)
        # srun gets the job on its standard input, not as shell words.
        self.assertRegex(said[0], rf"Slurm job {job.id}: rendezvous on 10\.213\.61\.11:\d+, run id "
                                  rf"slurm-{job.id}; starting 3 agents, --nproc-per-node 2: "
                                  r"\S*srun --nodes=3 --ntasks=3 "
                                  r"--ntasks-per-node=1 --kill-on-bad-exit=1 --input=all .* agent$")

    def test_ntasks_per_node_of_the_allocation_is_the_per_node_count(self):
        # mpirun's and srun's habit: the allocation says how many processes per node.
        job = self.submit(f"""
#SBATCH --nodes=3 --ntasks-per-node=2
{self.drun} --launcher slurm {TRAIN} --steps 5
""", name="launcher-ntasks")
        info = job.wait()
        out = job.output()
        self.assert_completed(job, info)
        self.assertRegex(out, r"TRAINING OK world=6 steps=5 ")
        self.assertRegex(out, r"starting 3 agents, --nproc-per-node 2: ")

    def test_summary_and_report_gather_every_node(self):
        report = os.path.join(self.dir, "report.json")
        job = self.submit(f"""
#SBATCH --nodes=3
{self.drun} --launcher slurm --nproc-per-node 2 --summary --report {report} {TRAIN} --steps 5
""", name="launcher-report")
        info = job.wait()
        out = job.output()
        self.assert_completed(job, info)
        rows = [l for l in self.drun_lines(out) if re.match(r"drun: node\d\s+\d+\s+\d+ 0 ", l)]
        self.assertEqual(len(rows), 6, out)
        with open(report) as f:
            r = json.load(f)
        self.assertEqual(r["exit_code"], 0)
        self.assertEqual(sorted(w["rank"] for w in r["workers"]), list(range(6)))
        self.assertEqual(sorted(n["host"] for n in r["nodes"]), ["node1", "node2", "node3"])

    def test_logs_that_stay_on_their_node_are_named(self):
        # cluster.sh gives every node a tmpfs of its own at STATE/node-private: the batch
        # script (on node1) sees node1's log directory, not node2's or node3's, so the
        # launcher names those two (NODE:DIR) in a line each and in the report.
        logs = os.path.join(STATE, "node-private", os.path.basename(self.dir))
        report = os.path.join(self.dir, "report.json")
        job = self.submit(f"""
#SBATCH --nodes=3
{self.drun} --launcher slurm --nproc-per-node 1 --log-dir {logs} --report {report} {TRAIN} --steps 2
""", name="launcher-logs")
        info = job.wait()
        out = job.output()
        self.assert_completed(job, info)
        # The run's directory is named once, when the launcher names it: no one has to ls
        # for its suffix.
        named = [l for l in self.drun_lines(out) if l.startswith("drun: logs in ")]
        self.assertEqual(len(named), 1, out)
        m = re.match(rf"^drun: logs in {re.escape(logs)}/(slurm-{job.id}_\w{{6}})/ "
                     r"\(a directory per node, made by the node\)$", named[0])
        self.assertTrue(m, named[0])
        stay = [l for l in self.drun_lines(out) if "its logs stay on that node" in l]
        self.assertEqual(len(stay), 2, out)
        for node, line in zip(("node2", "node3"), sorted(stay)):
            self.assertRegex(line, rf"^drun: {node}: its logs stay on that node, not visible here: "
                                   rf"{node}:{re.escape(logs)}/{m.group(1)}/{node}$")
        with open(report) as f:
            r = json.load(f)
        self.assertEqual(sorted(e.split(":")[0] for e in r["logs_not_collected"]), ["node2", "node3"])
        by_host = {n["host"]: n for n in r["nodes"]}
        self.assertTrue(by_host["node1"]["logs_collected_to"].startswith(logs + "/"), by_host["node1"])
        self.assertIn("not visible", by_host["node2"]["logs_not_collected"])

    def test_a_failing_worker_ends_the_job_with_the_root_cause(self):
        job = self.submit(f"""
#SBATCH --nodes=3
{self.drun} --launcher slurm --nproc-per-node 2 {TRAIN} --steps 5 --fail-rank 4
echo "drun exit code: $?"
""", name="launcher-fail")
        info = job.wait()
        out = job.output()
        self.assertIn("drun exit code: 3", out)
        # The launcher's own summary (the agents print theirs too, when srun lets them).
        self.assertRegex(out, r"drun: job failed: rank 4 on host node\d failed \(exit code 3\)")
        summary = out[out.index("drun: ===== root cause: first failure ====="):]
        self.assertRegex(summary, r"drun:   rank:\s+4 \(local rank 0, group rank 2\)")
        self.assertRegex(summary, r"drun:   exit:\s+code 3")
        self.assertIn("rank 4: failing on purpose", summary)
        self.assertEqual(info.get("JobState"), "COMPLETED")  # the script's echo ran last

    def test_sigusr1_to_drun_reaches_every_worker(self):
        # What `#SBATCH --signal=B:USR1@120` does before the time limit: signal the batch
        # shell, which `exec` made drun.
        gate = Gate()
        self.addCleanup(gate.close)
        pidfile = os.path.join(self.dir, "drun.pid")
        job = self.submit(f"""
#SBATCH --nodes=3
echo $$ > {pidfile}
exec {self.drun} --launcher slurm --nproc-per-node 2 {TRAIN} --steps 5 --gate {gate.address}
""", name="launcher-usr1")
        gate.wait_for(6, job)
        with open(pidfile) as f:
            os.kill(int(f.read()), signal.SIGUSR1)
        # Every worker gets it (some twice: slurmstepd signals the whole step, and the agent
        # forwards it too; docs/slurm.md).
        self.assertEqual(sorted(gate.lines_from_all()), [f"SIGUSR1 {r}" for r in range(6)])
        gate.release()
        self.assert_completed(job, job.wait())
        self.assertRegex(job.output(), r"TRAINING OK world=6 ")

    def test_nnodes_above_the_allocation_is_refused(self):
        job = self.submit(f"""
#SBATCH --nodes=2
{self.drun} --launcher slurm --nnodes 3 {TRAIN}
""", name="launcher-too-many")
        info = job.wait()
        self.assertEqual(info.get("ExitCode"), "2:0", job.output())
        self.assertIn("drun: --nnodes 3 is more than the 2 nodes of this allocation (SLURM_JOB_NUM_NODES)",
                      job.output())


if __name__ == "__main__":
    main()
