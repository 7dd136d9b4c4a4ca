"""examples/slurm: the seeds' sbatch scripts rewritten for drun. Each must be valid bash and
free of the hand-made rendezvous the seeds had; the lab one (no GPUs needed) also runs on the
test cluster, as submitted, with only the site's partition overridden."""
import glob
import os
import re
import subprocess
import unittest

from slurm_testlib import SlurmTestCase, main

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(TOP, "examples", "slurm")


class ExampleScripts(unittest.TestCase):
    def scripts(self):
        found = sorted(glob.glob(os.path.join(EXAMPLES, "*.sbatch")))
        self.assertEqual([os.path.basename(p) for p in found],
                         ["alps_container.sbatch", "gpu_ddp.sbatch", "lab_ddp.sbatch"])
        return found

    def test_bash_n(self):
        for path in self.scripts():
            proc = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
            self.assertEqual(proc.returncode, 0, f"{path}: {proc.stderr}")

    def test_no_hand_made_rendezvous(self):
        for path in self.scripts():
            with open(path) as f:
                text = f.read()
            code = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))
            self.assertRegex(code, r"\bsrun\b[^\n]*(\\\n[^\n]*)*\bdrun\b", path)
            for seed_glue in ("scontrol show hostnames", "MASTER_ADDR=", "MASTER_PORT=",
                              "WORLD_SIZE=", "--rdzv", "torchrun"):
                self.assertNotIn(seed_glue, code, path)
            # The #SBATCH block comes before any command, or sbatch ignores it.
            first_cmd = next(i for i, l in enumerate(text.splitlines())
                             if l.strip() and not l.startswith("#"))
            last_sbatch = max(i for i, l in enumerate(text.splitlines()) if l.startswith("#SBATCH"))
            self.assertLess(last_sbatch, first_cmd, path)

    def test_the_seeds_site_flags_are_kept(self):
        texts = {}
        for path in self.scripts():
            with open(path) as f:
                texts[os.path.basename(path)] = f.read()
        self.assertRegex(texts["lab_ddp.sbatch"], r"#SBATCH --partition=\S+")
        self.assertRegex(texts["lab_ddp.sbatch"], r"#SBATCH --qos=\S+")
        self.assertRegex(texts["gpu_ddp.sbatch"], r"#SBATCH --gres=gpu:\d")
        self.assertRegex(texts["alps_container.sbatch"], r"#SBATCH --ntasks-per-node=1")
        self.assertRegex(texts["alps_container.sbatch"], r"singularity exec")


class LabExampleRuns(SlurmTestCase):
    def test_lab_script_trains_as_written(self):
        # `drun` is on the PATH the job inherits, as on a cluster where it is installed.
        path = f"{os.path.dirname(self.drun)}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        job = self.submit_file(os.path.join(EXAMPLES, "lab_ddp.sbatch"), "lab",
                               sbatch_args=["--partition=debug", f"--chdir={TOP}"],
                               script_args=["--epochs", "1", "--limit", "512"],
                               env={"PATH": path})
        info = job.wait()
        self.assert_completed(job, info)
        text = job.output()
        self.assertRegex(text, rf"drun: Slurm step {job.id}\.0: 4 tasks on 2 nodes, one worker per task")
        self.assertRegex(text, r"\[node1:rank0\]: Accuracy on testing data: Got \d+/10000")


if __name__ == "__main__":
    main()
