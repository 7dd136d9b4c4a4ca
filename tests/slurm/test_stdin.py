"""`drun --launcher slurm` relays its own stdin to the agents on srun's standard input (the
agents' lifeline, srun --input=all): global rank 0 reads it by default, `--stdin all` gives it
to every rank, `--stdin none` to none (every rank reads end-of-file at once, even while
drun's stdin never ends)."""
import os
import re

from slurm_testlib import SlurmTestCase, main

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ssh", "programs",
                       "stdin_echo.py")


class StdinSlurm(SlurmTestCase):
    def test_stdin_reaches_the_ranks_stdin_names(self):
        job = self.submit(f"""
#SBATCH --nodes=3
printf 'hello\\nworld\\n' | {self.drun} --launcher slurm {PROGRAM} echo; echo "exit-rank0=$?"
printf 'a\\nb\\n' | {self.drun} --launcher slurm --stdin all {PROGRAM} echo; echo "exit-all=$?"
{self.drun} --launcher slurm --stdin none {PROGRAM} echo < /dev/zero; echo "exit-none=$?"
""", name="stdin")
        info = job.wait()
        out = job.output()
        self.assert_completed(job, info)
        runs = re.split(r"^exit-\w+=\d+$", out, flags=re.M)
        self.assertEqual(re.findall(r"^exit-(\w+)=(\d+)$", out, flags=re.M),
                         [("rank0", "0"), ("all", "0"), ("none", "0")], out)
        # Default: rank 0 echoes both lines, the others read end-of-file at once.
        rank0 = runs[0]
        self.assertEqual(re.findall(r"\]: echo rank=(\d) line=(\w+)$", rank0, flags=re.M),
                         [("0", "hello"), ("0", "world")], out)
        self.assertEqual(sorted(re.findall(r"\]: eof rank=(\d) lines=(\d)$", rank0, flags=re.M)),
                         [("0", "2"), ("1", "0"), ("2", "0")], out)
        # --stdin all: every rank reads the same two lines.
        self.assertEqual(sorted(re.findall(r"\]: eof rank=(\d) lines=(\d)$", runs[1], flags=re.M)),
                         [("0", "2"), ("1", "2"), ("2", "2")], out)
        # --stdin none: /dev/zero is never relayed (it has no newline: a reader would wait).
        self.assertEqual(sorted(re.findall(r"\]: eof rank=(\d) lines=(\d)$", runs[2], flags=re.M)),
                         [("0", "0"), ("1", "0"), ("2", "0")], out)


if __name__ == "__main__":
    main()
