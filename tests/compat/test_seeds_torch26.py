"""The seeds' programs (examples/) under drun with PyTorch 2.6 workers (Debian 13's
python3-torch in a chroot), as tests/e2e/test_seed_programs.py runs them with torch 1.13.

One class per way the workers reach their store; ctest runs one class per entry:
  AgentStoreTest     drun's agent store (the default): workers are TCPStore clients of drun
  NoAgentStoreTest   --no-agent-store: rank 0's torch 2.6 TCPStore hosts the store; needs
                     USE_LIBUV=0 even with the shim, because env:// passes use_libuv
                     explicitly (rendezvous.py reads USE_LIBUV, default "1")
  PackagedLibuvTest  without the chroot's sitecustomize shim (T26_NOLIBUV=0), i.e. Debian 13's
                     torch 2.6 as packaged: what fails, with the summary's one hint naming
                     USE_LIBUV=0, and that torch's advice works as given (USE_LIBUV=0 alone:
                     drun lets rank 0 host the store) and with --no-agent-store
"""
import os
import re
import shutil

import torch26lib
from drun_testlib import DrunTestCase, example, main, texts_of

NPROC = 4
# As tests/e2e/test_seed_programs.py: --limit 5000 on 4 workers reached 75.13 % with torch
# 1.13 (seed 0); the threshold leaves room for torch 2.6's numerics.
DDP_LIMIT = 5000
DDP_MIN_ACCURACY = 65.0
DDP_TIMEOUT = 400
RUN_TIMEOUT = 180  # four torch 2.6 imports through chroot on a small machine
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
LIBUV_ERROR = "use_libuv was requested but PyTorch was build without libuv support"

# The barrier keeps a rank from exiting while its peers may still be connecting: torch 2.x
# dropped the store-based barrier at the end of init_process_group (TORCH_DIST_INIT_BARRIER).
PROBE = """\
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
print(f"torch {torch.__version__} rank {dist.get_rank()} of {dist.get_world_size()} "
      f"agent_store={os.environ.get('TORCHELASTIC_USE_AGENT_STORE')}", flush=True)
dist.destroy_process_group()
"""


class Torch26Case(DrunTestCase):
    """Runs examples with torch 2.6 workers; subclasses choose the store (drun flags) and
    the environment."""
    DRUN_FLAGS = ()
    ENV = {}
    AGENT_STORE = "True"

    def setUp(self):
        super().setUp()
        torch26lib.require_chroot()
        shared = torch26lib.shared_tempdir("drun-compat-")
        self.addCleanup(shared.cleanup)
        self.shared = shared.name
        self.env = torch26lib.drun_env(torch26lib.python26_wrapper(self.shared), **self.ENV)

    def run_example(self, name, *args, **kw):
        script, = torch26lib.stage(self.shared, example(name))
        return self.run_script(script, *args, **kw)

    def run_script(self, script, *args, nproc=NPROC, timeout=RUN_TIMEOUT, expect=0,
                   flags=None):
        flags = self.DRUN_FLAGS if flags is None else flags
        run = self.drun("--standalone", "--nproc-per-node", nproc, *flags,
                        script, *args, env=self.env, timeout=timeout)
        if expect is not None:
            self.assertExit(run, expect)
        return run


class SeedProgramsMixin:
    """The assertions of tests/e2e/test_seed_programs.py, on torch 2.6 workers."""

    def test_workers_run_torch_2_6(self):
        script = torch26lib.write_executable(os.path.join(self.shared, "probe.py"), PROBE)
        run = self.run_script(script)
        for rank in range(NPROC):
            lines = texts_of(run.stdout_lines, rank)
            self.assertEqual(len(lines), 1, run.describe())
            self.assertRegex(lines[0], rf"^torch 2\.6\S* rank {rank} of {NPROC} "
                                       rf"agent_store={self.AGENT_STORE}$")

    def test_p2p_send_rank0_sends_42_to_rank1(self):
        run = self.run_example("p2p_send.py")
        self.assertIn("Rank 0: Sending 42 to rank 1", texts_of(run.stdout_lines, 0))
        self.assertIn("Rank 1: Received 42.0 from rank 0", texts_of(run.stdout_lines, 1))
        for rank in (2, 3):
            self.assertEqual(texts_of(run.stdout_lines, rank), [], run.describe())

    def test_library_reduce_sums_ranks_on_rank0(self):
        run = self.run_example("reduce.py")
        for rank in range(NPROC):
            self.assertIn(f"Rank {rank}: Sending {rank}", texts_of(run.stdout_lines, rank))
        self.assertIn("Rank 0: Sum of all messages is 6", texts_of(run.stdout_lines, 0))

    def test_p2p_reduce_sums_ranks_on_rank0(self):
        run = self.run_example("p2p_reduce.py")
        self.assertIn("Rank 0: Sum of all messages is 6", texts_of(run.stdout_lines, 0))
        for rank in range(1, NPROC):
            self.assertNotIn(f"Rank {rank}: Sum of all messages is 6",
                             texts_of(run.stdout_lines, rank))

    def test_p2p_all_reduce_gives_sum_on_every_rank(self):
        run = self.run_example("p2p_all_reduce.py")
        for rank in range(NPROC):
            self.assertIn(f"Rank {rank}: Sum of all messages is 6",
                          texts_of(run.stdout_lines, rank), run.describe())

    def test_ddp_fashion_mnist_short_run_learns(self):
        if not os.path.isdir(FASHION_MNIST):
            self.skipTest(f"{FASHION_MNIST} missing (Debian: dataset-fashion-mnist)")
        data = os.path.join(self.shared, "fashion-mnist")
        shutil.copytree(FASHION_MNIST, data)  # the chroot sees /tmp, not /usr/share
        run = self.run_example("mnist_ddp.py", "--epochs", 1, "--limit", DDP_LIMIT,
                               "--data-dir", data, timeout=DDP_TIMEOUT)
        rank0 = texts_of(run.stdout_lines, 0)
        self.assertTrue(any(line.startswith("Epoch: 0 loss") for line in rank0), run.describe())
        accuracy = [m for m in (re.search(r"^Accuracy on testing data: Got \d+/10000 with "
                                          r"accuracy (\d+\.\d+)$", line) for line in rank0) if m]
        self.assertEqual(len(accuracy), 1, run.describe())
        print(f"\n  torch 2.6 DDP accuracy: {accuracy[0].group(1)} %", flush=True)
        self.assertGreaterEqual(float(accuracy[0].group(1)), DDP_MIN_ACCURACY, run.describe())
        for rank in range(1, NPROC):
            self.assertFalse(any("Accuracy" in t for t in texts_of(run.stdout_lines, rank)))


class AgentStoreTest(SeedProgramsMixin, Torch26Case):
    pass


class NoAgentStoreTest(SeedProgramsMixin, Torch26Case):
    DRUN_FLAGS = ("--no-agent-store",)
    ENV = {"USE_LIBUV": "0"}
    AGENT_STORE = "False"


class PackagedLibuvTest(Torch26Case):
    """Debian 13's torch 2.6 without the shim: TCPStore() defaults to use_libuv=True in a
    build without libuv."""
    ENV = {"T26_NOLIBUV": "0"}

    def test_agent_store_client_fails_with_libuv_error(self):
        run = self.run_example("p2p_all_reduce.py", nproc=2, expect=None)
        self.assertNotEqual(run.returncode, 0, run.describe())
        self.assertIn(LIBUV_ERROR, run.stderr, run.describe())
        hints = [l for l in run.stderr_lines if l.startswith("drun: hint: ")]
        self.assertEqual(len(hints), 1, run.describe())
        self.assertIn("run with USE_LIBUV=0", hints[0])

    def test_use_libuv_0_alone_works(self):
        self.env["USE_LIBUV"] = "0"
        run = self.run_example("p2p_all_reduce.py", flags=())
        for rank in range(NPROC):
            self.assertIn(f"Rank {rank}: Sum of all messages is 6",
                          texts_of(run.stdout_lines, rank), run.describe())
        self.assertEqual(len([l for l in run.stderr_lines
                              if "rank 0's torch hosts the workers' store" in l]), 1, run.describe())

    def test_no_agent_store_with_use_libuv_0_works(self):
        self.env["USE_LIBUV"] = "0"
        run = self.run_example("p2p_all_reduce.py", flags=("--no-agent-store",))
        for rank in range(NPROC):
            self.assertIn(f"Rank {rank}: Sum of all messages is 6",
                          texts_of(run.stdout_lines, rank), run.describe())


if __name__ == "__main__":
    main()
