"""Hangs under Slurm (issue #15, docs/hangs.md): `srun drun --hang-timeout 5` (and the same with
`drun --launcher slurm`) on 3 nodes x 2
real PyTorch gloo ranks in an all_reduce loop where rank 2 falls asleep
(tests/e2e/programs/hang_allreduce.py). While rank 2 sleeps, the batch script itself runs
`drun stacks`, which must print every node's ranks (gathered through the rendezvous by the
agent it asks). Then the job-wide verdict: within 7 s, one table that names rank 2, a hang
dump on every node, exit 124 from every agent, nothing left on the nodes.

The batch script reads srun's output through a FIFO and runs `drun stacks` once it has seen
all six "step 4" lines and rank 2's "stuck at step 5": it waits for those lines, not for time.
Its XDG_RUNTIME_DIR is deeper than a unix socket path may be (108 bytes): the control sockets
are bound and reached through their directory (agent/control_socket.cc)."""
import os
import re
import sys

from slurm_testlib import SlurmTestCase, main

# The stack-dump parser shared with the single-node suite (tests/e2e/drun_testlib.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "e2e"))
from drun_testlib import stack_sections  # noqa: E402

HANG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "e2e", "programs",
                    "hang_allreduce.py")
TABLE_ROW = re.compile(r"^drun: (?:\S+: )?(\d+)\s+(\S+)\s+\d+\s+[A-Z] .*")


class SlurmHangTest(SlurmTestCase):
    def test_srun_drun_hang_timeout_and_drun_stacks_from_the_batch_shell(self):
        self.hang_and_stacks("srun {drun}")

    def test_launcher_slurm_hang_timeout_and_drun_stacks_from_the_batch_shell(self):
        # The launcher answers drun stacks on a socket of its own (launcher/job_control.h).
        self.hang_and_stacks("{drun} --launcher slurm")

    def hang_and_stacks(self, start):
        xdg = os.path.join(self.dir, "xdg")
        os.mkdir(xdg, 0o700)
        d = self.dir
        body = f"""#SBATCH --nodes=3 --ntasks-per-node=1
export XDG_RUNTIME_DIR={xdg} HANG_MARK={d}/hang_mark STEPS=1000
mkfifo {d}/srun.out
{start.format(drun=self.drun)} --nproc-per-node 2 --run-id slurmhang --hang-timeout 5 \\
    --log-dir {d}/logs {HANG} > {d}/srun.out 2>&1 &
srun_pid=$!
exec 3< {d}/srun.out
steps=0
stuck=
while IFS= read -r line <&3; do
  printf '%s\\n' "$line"
  case "$line" in
    *": step 4") steps=$((steps + 1)) ;;
    *": stuck at step 5") stuck=1 ;;
  esac
  if [ "$steps" = 6 ] && [ -n "$stuck" ]; then break; fi
done
{self.drun} stacks > {d}/stacks.out 2> {d}/stacks.err
echo "stacks exit $?"
cat <&3
wait $srun_pid
echo "srun exit $?"
"""
        job = self.submit(body, name="hang")
        info = job.wait()
        out = job.output()
        self.assertIn("stacks exit 0", out)
        self.assertIn("srun exit 124", out)  # srun's, or the launcher's
        self.assertEqual(info.get("JobState"), "COMPLETED", out)  # the script itself ended well

        with open(os.path.join(d, "stacks.err")) as f:
            self.assertEqual(f.read(), "")
        with open(os.path.join(d, "stacks.out")) as f:
            stacks = f.read()
        lines = stacks.splitlines()
        self.assertRegex(lines[0], r"^drun stacks: run 'slurmhang', 6 ranks on 3 hosts, gathered by "
                                   r"pid \d+ on node\d$")
        parts = [l for l in lines if l.startswith("drun stacks: 2 ranks on ")]
        self.assertEqual(len(parts), 3, stacks)
        for i, part in enumerate(parts):
            self.assertRegex(part, rf"^drun stacks: 2 ranks on node\d \(node rank {i}\), taken in \d+ ms")
        got = stack_sections(stacks)
        self.assertEqual(sorted(got), list(range(6)), stacks)
        self.assertEqual({host for host, _, _ in got.values()}, {"node1", "node2", "node3"})
        self.assertRegex(got[2][2], r"hang_allreduce\.py\", line \d+, in stuck")
        for rank in (0, 1, 3, 4, 5):
            self.assertIn("all_reduce", got[rank][2])

        told = [l for l in out.splitlines() if re.match(r"^drun: (\S+: )?no rank made progress", l)]
        self.assertEqual(len(told), 1, out)
        table = [TABLE_ROW.match(l) for l in out.splitlines() if TABLE_ROW.match(l)]
        self.assertEqual(sorted(int(m.group(1)) for m in table), list(range(6)), out)
        rank2 = [m.group(0) for m in table if m.group(1) == "2"][0]
        self.assertRegex(rank2, r"hang_allreduce\.py:\d+ in stuck  <- not where the others are")
        dumps = [os.path.join(root, "hang_stacks.txt") for root, _, files in os.walk(os.path.join(d, "logs"))
                 if "hang_stacks.txt" in files]
        self.assertEqual(len(dumps), 3, dumps)
        with open(os.path.join(d, "hang_mark")) as f:
            hung_at = float(f.read())
        first_dump = min(os.path.getmtime(p) for p in dumps)
        self.assertGreaterEqual(first_dump - hung_at, 4.5, out)
        self.assertLessEqual(first_dump - hung_at, 7.0, out)


if __name__ == "__main__":
    main()
