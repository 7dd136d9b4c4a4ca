"""drun with PyTorch 2.14 workers: Debian sid's python3-torch 2.14.1 and accelerate 1.14 on
CPython 3.14, in a chroot (sidlib.py), unmodified. Its torch is built without libuv, while
TCPStore asks for libuv unless told not to.

One class per ctest entry:
  UseLibuv0Test   torch's own advice, `USE_LIBUV=0 drun ...`: drun says in one line that rank 0
                  hosts the store, and the seeds' programs and DDP Fashion-MNIST run
  PackagedTest    without USE_LIBUV: every rank fails and the summary's one hint names
                  USE_LIBUV=0; `-x USE_LIBUV=0`, `--rdzv-conf use_libuv=0` and
                  `--no-agent-store -x USE_LIBUV=0` work
  ElasticTest     two agents on 127.0.0.1 (--nnodes 2, c10d rendezvous): rank 1 fails in the
                  first round, drun restarts both nodes, the second round completes
  AccelerateTest  accelerate 1.14's Accelerator(backend="gloo") under drun
"""
import os
import re
import shutil

import sidlib
from drun_testlib import DrunTestCase, example, free_port, main, texts_of

NPROC = 4
DDP_LIMIT = 5000
DDP_MIN_ACCURACY = 65.0  # as the torch 2.6 suite; 1.13 reached 75.13 %
DDP_TIMEOUT = 400
RUN_TIMEOUT = 240  # four torch 2.14 imports through chroot on a small machine
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
LIBUV_ERROR = "use_libuv was requested but PyTorch was built without libuv support"
STORE_NOTICE = "rank 0's torch hosts the workers' store without libuv"

PROBE = """\
import os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
print(f"torch {torch.__version__} python {sys.version_info[0]}.{sys.version_info[1]} "
      f"rank {dist.get_rank()} of {dist.get_world_size()} "
      f"agent_store={os.environ.get('TORCHELASTIC_USE_AGENT_STORE')} "
      f"USE_LIBUV={os.environ.get('USE_LIBUV')} "
      f"TORCH_NCCL_ASYNC_ERROR_HANDLING={os.environ.get('TORCH_NCCL_ASYNC_ERROR_HANDLING')} "
      f"NCCL_ASYNC_ERROR_HANDLING={os.environ.get('NCCL_ASYNC_ERROR_HANDLING')}", flush=True)
dist.destroy_process_group()
"""

# Round 0: rank 1 fails after the group formed; round 1: every rank all_reduces its rank.
ELASTIC = """\
import os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
if restart == 0 and dist.get_rank() == 1:
    sys.exit(3)
t = torch.tensor([float(dist.get_rank())])
dist.all_reduce(t)
print(f"restart {restart} rank {dist.get_rank()} of {dist.get_world_size()} sum {t.item():.0f}", flush=True)
dist.destroy_process_group()
"""

ACCELERATE = """\
import accelerate, torch
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs
acc = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(backend="gloo")])
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model, opt = acc.prepare(model, opt)
x = torch.full((8, 4), float(acc.process_index + 1))
loss = model(x).pow(2).mean()
acc.backward(loss)
opt.step()
total = acc.reduce(torch.tensor([float(acc.process_index)]), reduction="sum")
print(f"accelerate {accelerate.__version__} process {acc.process_index} of {acc.num_processes} "
      f"backend {torch.distributed.get_backend()} sum {total.item():.0f}", flush=True)
acc.end_training()
"""


class Torch214Case(DrunTestCase):
    ENV = {}

    def setUp(self):
        super().setUp()
        sidlib.require_chroot()
        shared = sidlib.shared_tempdir("drun-compat214-")
        self.addCleanup(shared.cleanup)
        self.shared = shared.name
        # USE_LIBUV only as the class gives it (base_env drops the caller's).
        self.env = sidlib.drun_env(sidlib.python_wrapper(self.shared), **self.ENV)

    def script(self, name, text):
        return sidlib.write_executable(os.path.join(self.shared, name), text)

    def run_example(self, name, *args, **kw):
        script, = sidlib.stage(self.shared, example(name))
        return self.run_script(script, *args, **kw)

    def run_script(self, script, *args, nproc=NPROC, timeout=RUN_TIMEOUT, expect=0, flags=(),
                   standalone=True):
        run = self.drun(*(["--standalone"] if standalone else []), "--nproc-per-node", nproc,
                        *flags, script, *args, env=self.env, timeout=timeout)
        if expect is not None:
            self.assertExit(run, expect)
        return run

    def assertSeedsRun(self, run_example):
        run = run_example("p2p_all_reduce.py")
        for rank in range(NPROC):
            self.assertIn(f"Rank {rank}: Sum of all messages is 6", texts_of(run.stdout_lines, rank),
                          run.describe())
        return run


class UseLibuv0Test(Torch214Case):
    ENV = {"USE_LIBUV": "0"}

    def test_probe_shows_torch_2_14_and_rank0s_store_said_in_one_line(self):
        run = self.run_script(self.script("probe.py", PROBE))
        for rank in range(NPROC):
            lines = texts_of(run.stdout_lines, rank)
            self.assertEqual(len(lines), 1, run.describe())
            self.assertRegex(lines[0], rf"^torch 2\.14\S* python 3\.14 rank {rank} of {NPROC} "
                                       r"agent_store=False USE_LIBUV=0 "
                                       r"TORCH_NCCL_ASYNC_ERROR_HANDLING=1 NCCL_ASYNC_ERROR_HANDLING=None$")
        notices = [l for l in run.stderr_lines if STORE_NOTICE in l]
        self.assertEqual(len(notices), 1, run.describe())
        self.assertIn("USE_LIBUV=0 (drun's environment)", notices[0])

    def test_seed_programs(self):
        run = self.run_example("p2p_send.py")
        self.assertIn("Rank 1: Received 42.0 from rank 0", texts_of(run.stdout_lines, 1))
        run = self.run_example("reduce.py")
        self.assertIn("Rank 0: Sum of all messages is 6", texts_of(run.stdout_lines, 0))
        run = self.run_example("p2p_reduce.py")
        self.assertIn("Rank 0: Sum of all messages is 6", texts_of(run.stdout_lines, 0))
        self.assertSeedsRun(self.run_example)

    def test_ddp_fashion_mnist_short_run_learns(self):
        if not os.path.isdir(FASHION_MNIST):
            self.skipTest(f"{FASHION_MNIST} missing (Debian: dataset-fashion-mnist)")
        data = os.path.join(self.shared, "fashion-mnist")
        shutil.copytree(FASHION_MNIST, data)
        # As the user types it: `USE_LIBUV=0 drun --nproc-per-node N ddp.py`.
        run = self.run_example("mnist_ddp.py", "--epochs", 1, "--limit", DDP_LIMIT,
                               "--data-dir", data, timeout=DDP_TIMEOUT, standalone=False)
        rank0 = texts_of(run.stdout_lines, 0)
        accuracy = [m for m in (re.search(r"^Accuracy on testing data: Got \d+/10000 with "
                                          r"accuracy (\d+\.\d+)$", line) for line in rank0) if m]
        self.assertEqual(len(accuracy), 1, run.describe())
        print(f"\n  torch 2.14 DDP accuracy: {accuracy[0].group(1)} %", flush=True)
        self.assertGreaterEqual(float(accuracy[0].group(1)), DDP_MIN_ACCURACY, run.describe())


class PackagedTest(Torch214Case):

    def test_without_use_libuv_every_rank_fails_and_one_hint_names_the_fix(self):
        script, = sidlib.stage(self.shared, example("p2p_all_reduce.py"))
        run = self.run_script(script, nproc=2, expect=None)
        self.assertNotEqual(run.returncode, 0, run.describe())
        self.assertIn(LIBUV_ERROR, run.stderr, run.describe())
        hints = [l for l in run.stderr_lines if l.startswith("drun: hint: ")]
        self.assertEqual(len(hints), 1, run.describe())
        self.assertIn("run with USE_LIBUV=0", hints[0])

    def test_x_use_libuv_0_works(self):
        self.assertSeedsRun(lambda n: self.run_example(n, flags=("-x", "USE_LIBUV=0")))

    def test_no_agent_store_with_x_use_libuv_0_works(self):
        self.assertSeedsRun(lambda n: self.run_example(
            n, flags=("--no-agent-store", "-x", "USE_LIBUV=0")))

    def test_rdzv_conf_use_libuv_0_works(self):
        run = self.assertSeedsRun(lambda n: self.run_example(n, flags=("--rdzv-conf", "use_libuv=0")))
        self.assertEqual(len([l for l in run.stderr_lines if "--rdzv-conf use_libuv=0: " in l]), 1,
                         run.describe())


class ElasticTest(Torch214Case):
    ENV = {"USE_LIBUV": "0"}

    def test_two_nodes_restart_after_a_failure(self):
        script = self.script("elastic.py", ELASTIC)
        common = ["--nnodes", 2, "--nproc-per-node", 2, "--max-restarts", 1, "--run-id", "el214",
                  "--rdzv-endpoint", f"127.0.0.1:{free_port()}", script]
        host = self.start("--rdzv-conf", "is_host=true", *common, env=self.env)
        other = self.start("--rdzv-conf", "is_host=false", *common, env=self.env)
        for p in (host, other):
            p.wait(timeout=RUN_TIMEOUT)
            self.assertExit(p, 0)
        # A job that may span nodes prefixes "[HOST:rankN]: ".
        lines = [l.split("]: ", 1)[1] for l in host.stdout_lines + other.stdout_lines
                 if re.match(r"^\[[^]]*:rank\d+\]: restart ", l)]
        self.assertEqual(sorted(lines), [f"restart 1 rank {r} of 4 sum 6" for r in range(4)],
                         host.describe() + other.describe())


class AccelerateTest(Torch214Case):
    ENV = {"USE_LIBUV": "0"}

    def test_accelerate_gloo(self):
        run = self.run_script(self.script("acc.py", ACCELERATE), nproc=2)
        for rank in range(2):
            self.assertIn(f"accelerate 1.14.0 process {rank} of 2 backend gloo sum 1",
                          texts_of(run.stdout_lines, rank), run.describe())


if __name__ == "__main__":
    main()
