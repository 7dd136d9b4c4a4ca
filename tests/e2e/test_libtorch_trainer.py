"""The LibTorch C++ trainer (examples/libtorch/train.cpp), run unmodified under drun: a
client of drun's agent store, a store hosted by rank 0 (--no-agent-store), and a job of
2 agents x 2 workers on this machine. Every rank must exit 0 and end with the same weights.

The trainer's path comes from $DRUN_LIBTORCH_TRAINER (ctest sets it to the built target)."""
import os
import re
import subprocess
import unittest

from drun_testlib import DrunTestCase, RUN_TIMEOUT, base_env, free_port, main

# "[rank3]: " on one node, "[host:rank3]: " on several.
PREFIX_RE = re.compile(r"^\[(?:[^\]]*:)?rank(\d+)\]: ?(.*)$")
FINAL_RE = re.compile(r"^rank (\d+) final weights (\S+) (\S+)$")
STEP_RE = re.compile(r"^rank (\d+)/(\d+) step (\d+) loss (\S+)$")
READY_RE = re.compile(r"^rank (\d+)/(\d+) local_rank (\d+): process group ready \(store \S+, (.*)\)$")
STEPS = 40  # the trainer's default TRAIN_STEPS


def trainer_path():
    path = os.environ.get("DRUN_LIBTORCH_TRAINER")
    if not path:
        raise unittest.SkipTest(
            "DRUN_LIBTORCH_TRAINER is not set (ctest sets it to the built drun_libtorch_train)")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"DRUN_LIBTORCH_TRAINER={path} is not an executable file")
    return path


class LibTorchTrainerTest(DrunTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.trainer = trainer_path()

    def check_job(self, runs, world, store_mode, local_ranks):
        """Asserts what every rank printed across the drun processes `runs`: a ready line in
        `store_mode` with the expected local rank, STEPS step lines, one final weights line
        (the same on every rank, close to the true y = 3x + 2) and the agreement line.
        Returns the weights."""
        texts = {}  # rank -> its lines, prefix stripped
        for run in runs:
            for line in run.stdout_lines:
                m = PREFIX_RE.match(line)
                if m:
                    texts.setdefault(int(m.group(1)), []).append(m.group(2))
        described = "\n\n".join(run.describe() for run in runs)
        self.assertEqual(sorted(texts), list(range(world)), described)

        finals = {}
        for rank, lines in texts.items():
            with self.subTest(rank=rank):
                ready = [READY_RE.match(t) for t in lines if READY_RE.match(t)]
                self.assertEqual(len(ready), 1, described)
                self.assertEqual(ready[0].group(1, 2, 4),
                                 (str(rank), str(world), store_mode), described)
                self.assertEqual(int(ready[0].group(3)), local_ranks[rank], described)

                steps = [STEP_RE.match(t) for t in lines if STEP_RE.match(t)]
                self.assertEqual([int(m.group(3)) for m in steps], list(range(1, STEPS + 1)),
                                 described)
                self.assertTrue(all(m.group(1, 2) == (str(rank), str(world)) for m in steps))

                final = [FINAL_RE.match(t) for t in lines if FINAL_RE.match(t)]
                self.assertEqual(len(final), 1, described)
                self.assertEqual(int(final[0].group(1)), rank, described)
                finals[rank] = final[0].group(2, 3)
                self.assertIn(f"rank {rank}: all {world} ranks hold identical weights", lines,
                              described)

        # The printed weights (9 significant digits) are the same text on every rank.
        self.assertEqual(len(set(finals.values())), 1, f"weights differ: {finals}\n{described}")
        w, b = (float(v) for v in finals[0])
        self.assertAlmostEqual(w, 3.0, delta=0.1, msg=described)
        self.assertAlmostEqual(b, 2.0, delta=0.1, msg=described)
        return finals[0]

    def test_agent_store_single_node(self):
        run = self.drun("--standalone", "--nproc-per-node", 2, "--no-python", self.trainer)
        self.assertExit(run, 0)
        self.check_job([run], 2, "agent store", {0: 0, 1: 1})

    def test_rank0_hosts_store_single_node(self):
        run = self.drun("--standalone", "--nproc-per-node", 2, "--no-agent-store",
                        "--no-python", self.trainer)
        self.assertExit(run, 0)
        self.check_job([run], 2, "rank 0 hosts the store", {0: 0, 1: 1})

    def test_two_agents_two_workers(self):
        # Two agents on one machine, told apart by their local addresses; the one on
        # 127.0.0.1 (the endpoint's host) serves the rendezvous and the store.
        port = free_port()
        common = ["--nnodes", 2, "--nproc-per-node", 2,
                  "--rdzv-endpoint", f"127.0.0.1:{port}",
                  "--rdzv-id", f"libtorch-{os.getpid()}"]
        first = self.start(*common, "--local-addr", "127.0.0.1", "--no-python", self.trainer)
        second = self.start(*common, "--local-addr", "127.0.0.2", "--no-python", self.trainer)
        for run in (first, second):
            run.wait(RUN_TIMEOUT)
        self.assertExit(first, 0)
        self.assertExit(second, 0)
        self.check_job([first, second], 4, "agent store", {0: 0, 1: 1, 2: 0, 3: 1})
        # Each agent printed its own node's ranks only: one node holds ranks 0-1, the
        # other 2-3 (which is which depends on the order they joined).
        printed = [{int(m.group(1)) for m in map(PREFIX_RE.match, run.stdout_lines) if m}
                   for run in (first, second)]
        self.assertCountEqual(printed, [{0, 1}, {2, 3}],
                              first.describe() + "\n\n" + second.describe())

    def test_stuck_in_a_collective_shows_native_frames(self):
        # Rank 0 is the trainer, rank 1 a Python rank that joins the gloo group and never
        # takes part: the trainer blocks in its first broadcast, rank 1 polls torch's
        # store-based barrier in init_process_group (3 % of a core: not progress).
        # --hang-timeout's dump shows the trainer's native frames by function name,
        # rank 1's Python line.
        wrapper = os.path.join(self.tmp, "rank.sh")
        sleeper = os.path.join(self.tmp, "never_joins.py")
        with open(sleeper, "w") as f:
            f.write("import time, torch.distributed as dist\n"
                    "dist.init_process_group('gloo')\n"
                    "time.sleep(10**6)\n")
        with open(wrapper, "w") as f:
            f.write(f'#!/bin/sh\nif [ "$RANK" = 0 ]; then exec {self.trainer}; fi\n'
                    f'exec /usr/bin/python3 {sleeper}\n')
        os.chmod(wrapper, 0o755)
        logs = os.path.join(self.tmp, "logs")
        run = self.drun("--nproc-per-node", 2, "--hang-timeout", 3, "--log-dir", logs,
                        "--no-python", wrapper)
        self.assertExit(run, 124)
        dumps = [os.path.join(d, "hang_stacks.txt") for d, _, files in os.walk(logs)
                 if "hang_stacks.txt" in files]
        self.assertEqual(len(dumps), 1, run.describe())
        with open(dumps[0]) as f:
            text = f.read()
        rank0, rank1 = text.split("=== rank 1 ", 1)
        self.assertIn("c10d::Work::wait", rank0, text)
        self.assertIn("Train", rank0, text)
        self.assertIn(f'File "{sleeper}", line 2, in <module>', rank1, text)
        self.assertIn("in init_process_group", rank1, text)

    def test_without_a_launcher_says_so(self):
        # Started by hand, the trainer names the missing variable instead of hanging.
        proc = subprocess.run([self.trainer], env=base_env(), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=RUN_TIMEOUT)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("MASTER_ADDR is not set", proc.stderr)


if __name__ == "__main__":
    main()
