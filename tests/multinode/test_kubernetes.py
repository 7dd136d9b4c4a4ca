"""Kubeflow's PyTorchJob with `drun` in place of `torchrun`: pods configured only through
the environment.

Each "pod" is a network namespace with its own hostname (unshare --uts) and its own
/etc/hosts (ip netns exec mounts /etc/netns/<ns>/hosts), holding the names the training
operator's headless services give: job-master-0, job-worker-0, ... Every pod runs the same
command, `drun train_allreduce.py`, with exactly the environment the operator writes:

  non-elastic: PET_NPROC_PER_NODE, PET_NNODES=<pods>, PET_NODE_RANK=<index>, and the
               pod-level MASTER_ADDR=job-master-0, MASTER_PORT, WORLD_SIZE=<pods>,
               RANK=<index> (which must never reach the workers as theirs);
  elastic:     PET_N_PROC_PER_NODE (the spelling of some operator versions),
               PET_NNODES=MIN:MAX, PET_RDZV_BACKEND=c10d,
               PET_RDZV_ENDPOINT=job-master-0:29400, PET_RDZV_ID, PET_MAX_RESTARTS.

docs/kubernetes.md shows the pod spec.
"""
import os
import shutil
import unittest

from mn_testlib import (MultiNodeTestCase, NetnsLab, base_env, main, netns_unavailable_reason,
                        prefixed, program)

PODS = ["job-master-0", "job-worker-0", "job-worker-1"]
NPROC = 2


class KubernetesTest(MultiNodeTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        reason = netns_unavailable_reason()
        if reason:
            raise unittest.SkipTest(reason)
        cls.lab = NetnsLab("10.213.41", len(PODS))
        cls.lab.setup()
        cls.hosts_dirs = []
        for i, ns in enumerate(cls.lab.node_ns):
            d = f"/etc/netns/{ns}"
            os.makedirs(d, exist_ok=True)
            cls.hosts_dirs.append(d)
            with open(os.path.join(d, "hosts"), "w") as f:
                f.write("127.0.0.1 localhost\n")
                for j, pod in enumerate(PODS):
                    f.write(f"{cls.lab.addr(j)} {pod}\n")

    @classmethod
    def tearDownClass(cls):
        for d in cls.hosts_dirs:
            shutil.rmtree(d, ignore_errors=True)
        cls.lab.teardown()

    def pod(self, i, env):
        """Starts pod i's container command, `drun train_allreduce.py`, in its namespace
        with its hostname."""
        wrapper = self.lab.wrapper(i) + ["unshare", "--uts", "sh", "-c",
                                         'hostname "$0" && exec "$@"', PODS[i]]
        return self.start([program("train_allreduce.py")], name=PODS[i], env=env, wrapper=wrapper)

    def assertJob(self, pods, world):
        records = []
        for p in pods:
            self.assertExit(p, 0)
            for _, _, text in prefixed(p.stdout_lines):
                if text.startswith("allreduce "):
                    records.append(dict(f.split("=", 1) for f in text.split()[1:]))
        ranks = sorted(int(r["rank"]) for r in records)
        self.assertEqual(ranks, list(range(world)), self.describe_all())
        for r in records:
            self.assertEqual(r["world"], str(world))
            self.assertEqual(r["sum"], str(world * (world + 1) // 2))
        # The pod-level WORLD_SIZE/RANK (pods, pod index) never reach a worker as its own:
        # train_allreduce.py asserts RANK/WORLD_SIZE against the process group.

    def test_non_elastic(self):
        port = "23456"
        pods = []
        for i in range(len(PODS)):
            env = base_env(PET_NPROC_PER_NODE=str(NPROC), PET_NNODES=str(len(PODS)),
                           PET_NODE_RANK=str(i), MASTER_ADDR=PODS[0], MASTER_PORT=port,
                           WORLD_SIZE=str(len(PODS)), RANK=str(i), PYTHONUNBUFFERED="1")
            pods.append(self.pod(i, env))
        self.assertJob(pods, len(PODS) * NPROC)

    def test_elastic(self):
        pods = []
        for i in range(len(PODS)):
            env = base_env(PET_N_PROC_PER_NODE=str(NPROC), PET_NNODES=f"2:{len(PODS)}",
                           PET_RDZV_BACKEND="c10d", PET_RDZV_ENDPOINT=f"{PODS[0]}:29400",
                           PET_RDZV_ID="pytorchjob-elastic", PET_MAX_RESTARTS="3",
                           PET_RDZV_CONF="last_call_timeout=5,join_timeout=60")
            pods.append(self.pod(i, env))
        self.assertJob(pods, len(PODS) * NPROC)


if __name__ == "__main__":
    main()
