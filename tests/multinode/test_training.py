"""Real PyTorch 1.13 across three drun agents on this machine (one per --local-addr in
127.0.0.0/8, 127.0.0.1 hosting the rendezvous): gloo all_reduce/all_gather and a few DDP
steps in a world of 6."""
import re

from mn_testlib import (HOSTNAME, MultiNodeTestCase, main, prefixed, program)

TRAIN_TIMEOUT = 240  # six `import torch` on two shared cores, then a few collectives


class TrainingTest(MultiNodeTestCase):

    def test_gloo_allreduce_and_ddp_across_three_agents(self):
        # Default: the rendezvous host serves the c10d store (TORCHELASTIC_USE_AGENT_STORE).
        self.train()

    def test_gloo_allreduce_and_ddp_with_rank_0_hosting_the_store(self):
        # torch 1.13's own way: rank 0 builds the TCPStore on MASTER_ADDR:MASTER_PORT.
        self.train("--no-agent-store")

    def train(self, *extra):
        command = [program("train_allreduce.py")]
        addrs = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
        agents = []
        # One at a time, so that the group ranks follow the join order: 0, 1, 2.
        for i, addr in enumerate(addrs):
            agents.append(self.agent(addr, command, nnodes="3", nproc=2, name=f"node{i}",
                                     extra=extra))
            if i < 2:
                self.wait_joined(agents[-1], i + 1)
        for agent in agents:
            self.assertExit(agent, 0, timeout=TRAIN_TIMEOUT)

        world = 6
        weights = {}
        for i, agent in enumerate(agents):
            lines = prefixed(agent.stdout_lines)
            for host, _, _ in lines:
                self.assertEqual(host, HOSTNAME, agent.describe())
            reduced = {rank: text for _, rank, text in lines if text.startswith("allreduce ")}
            trained = {rank: text for _, rank, text in lines if text.startswith("trained ")}
            expected_ranks = {2 * i, 2 * i + 1}
            self.assertEqual(set(reduced), expected_ranks, agent.describe_all())
            self.assertEqual(set(trained), expected_ranks, agent.describe_all())
            for rank in expected_ranks:
                self.assertEqual(
                    reduced[rank],
                    f"allreduce rank={rank} world={world} sum={sum(range(1, world + 1))} "
                    f"gathered={','.join(map(str, range(world)))}", agent.describe())
                m = re.fullmatch(rf"trained rank={rank} steps=5 weight=(\S+)", trained[rank])
                self.assertIsNotNone(m, trained[rank])
                weights[rank] = m.group(1)
        self.assertEqual(set(weights), set(range(world)))
        # DDP averaged the gradients: the same weights on every rank, bit for bit.
        self.assertEqual(len(set(weights.values())), 1, weights)


if __name__ == "__main__":
    main()
