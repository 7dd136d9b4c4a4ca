#!/usr/bin/python3
"""init_process_group of torch 2.6 workers through drun_store_server as their agent store:
tests/store/c10d_store_torch_test.py's TorchInitProcessGroupTest, with the key torch 2.6
writes. Runs inside the chroot beside a copy of that file (test_store_torch26.py stages both).

What differs from torch 1.13, so the 1.13 test cannot pass unchanged:
  - 2.x no longer puts the worker's keys under "/worker/attempt_N" (rendezvous.py: "We create
    a new TCPStore for every retry so no need to add prefix for each attempt");
  - its store-based barrier after init runs only with TORCH_DIST_INIT_BARRIER=1;
  - the default group is named "0" (1.13: "1"), so the barrier key is
    "default_pg/store_based_barrier_key:0".
"""
import argparse
import os
import subprocess
import sys
import unittest

import c10d_store_torch_test as base

BARRIER_KEY = "default_pg/store_based_barrier_key:0"


class Torch26InitProcessGroupTest(unittest.TestCase):
    WORLD_SIZE = 4

    def test_gloo_all_reduce_with_agent_store(self):
        server = base.StoreServer()
        try:
            procs = []
            for rank in range(self.WORLD_SIZE):
                env = dict(os.environ)
                env.update({
                    "RANK": str(rank), "LOCAL_RANK": str(rank),
                    "WORLD_SIZE": str(self.WORLD_SIZE),
                    "MASTER_ADDR": base.HOST, "MASTER_PORT": str(server.port),
                    "TORCHELASTIC_USE_AGENT_STORE": "True",
                    "TORCHELASTIC_RESTART_COUNT": "0",
                    "TORCH_DIST_INIT_BARRIER": "1",  # 1.13's barrier after init
                    "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo",
                })
                procs.append(subprocess.Popen(
                    [sys.executable, "-c", base.WORKER], env=env, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True))
            outputs = []
            for rank, p in enumerate(procs):
                try:
                    out, err = p.communicate(timeout=180)
                except subprocess.TimeoutExpired:
                    for q in procs:
                        q.kill()
                    raise
                self.assertEqual(p.returncode, 0, f"rank {rank} failed:\n{err}")
                outputs.append(out.strip())
            expected_sum = self.WORLD_SIZE * (self.WORLD_SIZE + 1) // 2
            self.assertEqual(outputs, [f"rank {r} of {self.WORLD_SIZE}: sum {expected_sum}"
                                       for r in range(self.WORLD_SIZE)])
            # The ranks used this store: each added 1 to the barrier key.
            store = base.client(server.port)
            self.assertEqual(store.add(BARRIER_KEY, 0), self.WORLD_SIZE)
            del store
        finally:
            err = server.stop()
        self.assertIn("(0 protocol errors)", err)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True, help="path of drun_store_server")
    args, rest = parser.parse_known_args()
    base.SERVER = os.path.abspath(args.server)  # base.StoreServer starts this
    prog = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
