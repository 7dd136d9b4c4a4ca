"""Elastic membership and the gang across agents on this machine: a node joining below the
maximum, a node lost (kill -9), a worker failing, the restart budget running out, a spare
above the maximum, and nodes with different --nproc-per-node.

Workers are mn_worker.py (no PyTorch): they print what drun gave them and then wait on a
Gate, so that a round stays up exactly until the test has seen what it needs."""
import signal
import time

from mn_testlib import (report, HOSTNAME, Gate, MultiNodeTestCase, main, parse_summary,
                        summary_lines, worker_command, worker_records)

ADDRS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
# Coarse safety bounds (seconds); the expected values are a fraction of them.
LOST_NOTICE_BOUND = 5.0  # a killed agent's stream ends at once
RESUME_BOUND = 30.0
EXIT_BOUND = 10.0  # all workers exited 0 -> every agent exits


class ElasticTest(MultiNodeTestCase):

    def start_in_order(self, count, command_for, **kwargs):
        """Starts `count` agents on ADDRS one after another, each once the previous one
        has joined (so that group ranks follow the order); the last one is not waited for,
        since it may close the round."""
        agents = []
        for i in range(count):
            agents.append(self.agent(ADDRS[i], command_for(i), name=f"node{i}", **kwargs))
            if i < count - 1:
                self.wait_joined(agents[-1], i + 1)
        return agents

    def pids(self, *agents):
        return [r["pid"] for a in agents for r in worker_records(a.stdout_lines)]

    def test_node_joining_below_max_restarts_everyone_at_world_6(self):
        gate = Gate(self.tmp)
        self.addCleanup(gate.open)
        cmd = worker_command("--then", "gate", "--gate", gate.path)
        a, b = self.start_in_order(2, lambda i: cmd, nnodes="2:3")
        # min reached, last call (1 s) over: the round runs at world 4.
        for agent in (a, b):
            self.wait_workers(agent, 2, world=4)
        first_pids = self.pids(a, b)

        c = self.agent(ADDRS[2], cmd, nnodes="2:3", name="node2")
        for agent in (a, b):
            agent.wait_for_line(r"^drun: stopping round \d+: host .* joined; restarting",
                                "stderr")
        recs = {}
        for i, agent in enumerate((a, b, c)):
            recs[i] = self.wait_workers(agent, 2, world=6)
            self.assertEqual(sorted(r["rank"] for r in recs[i]), [2 * i, 2 * i + 1],
                             self.describe_all())
            for r in recs[i]:
                self.assertEqual(r["group_rank"], i, r)
                self.assertEqual(r["group_world"], 3, r)
                # A free restart: it costs no budget (--max-restarts is 0 here).
                self.assertEqual(r["restart"], 0, r)
        # The world-4 workers were stopped for the new round.
        self.assertNoWorkersLeft(first_pids)

        # Every worker everywhere exits 0: every agent exits 0 at once (no exit barrier).
        opened_at = time.monotonic()
        gate.open()
        for agent in (a, b, c):
            self.assertExit(agent, 0)
        took = max(agent.exited_at for agent in (a, b, c)) - opened_at
        report(f"success everywhere: last agent exited {took:.3f}s after the gate opened")
        self.assertLess(took, EXIT_BOUND)
        self.assertNoWorkersLeft(self.pids(a, b, c))

    def test_kill_9_of_an_agent_survivors_continue_at_world_4(self):
        gate = Gate(self.tmp)
        self.addCleanup(gate.open)
        cmd = worker_command("--then", "gate", "--gate", gate.path)
        # A long last call: the first round closes at the maximum, 3 nodes.
        a, b, c = self.start_in_order(3, lambda i: cmd, nnodes="2:3",
                                      conf={"last_call_timeout": "30"})
        for agent in (a, b, c):
            self.wait_workers(agent, 2, world=6)
        lost_pids = self.pids(c)

        killed_at = c.kill(signal.SIGKILL)
        self.assertEqual(c.wait(10), -signal.SIGKILL)
        noticed = {}
        for agent in (a, b):
            (t, _), = agent.wait_for_line(r"^drun: stopping round \d+: host .* was lost",
                                          "stderr", timeout=RESUME_BOUND)
            noticed[agent.name] = t - killed_at
        resumed = {}
        for i, agent in enumerate((a, b)):
            found = agent.wait_for_line(r"worker rank=\d+ .*\bworld=4\b", count=2,
                                        timeout=RESUME_BOUND)
            resumed[agent.name] = max(t for t, _ in found[:2]) - killed_at
            recs = self.wait_workers(agent, 2, world=4)
            self.assertEqual(sorted(r["rank"] for r in recs), [2 * i, 2 * i + 1])
            for r in recs:
                self.assertEqual((r["group_rank"], r["group_world"]), (i, 2), r)
        report("kill -9 of an agent: survivors logged the loss after "
               + ", ".join(f"{k} {v:.3f}s" for k, v in noticed.items())
               + "; world-4 workers up after "
               + ", ".join(f"{k} {v:.3f}s" for k, v in resumed.items()))
        for name, latency in noticed.items():
            self.assertLess(latency, LOST_NOTICE_BOUND,
                            f"{name} noticed the lost node after {latency:.1f}s")
        # The killed agent's workers did not outlive it.
        self.assertNoWorkersLeft(lost_pids)

        gate.open()
        for agent in (a, b):
            self.assertExit(agent, 0)
        self.assertNoWorkersLeft(self.pids(a, b, c))

    def test_stopped_agent_is_dropped_after_the_silence_timeout_and_told(self):
        """A drun that is alive but stuck (SIGSTOP) on a healthy host keeps its kernel
        answering, so the link stays up; the application heartbeats catch it after the
        silence timeout (10 x keep-alive, at least 10 s), the survivor goes on alone, and
        the stopped agent, once continued, learns it was dropped and cleans up."""
        gate = Gate(self.tmp)
        self.addCleanup(gate.open)
        cmd = worker_command("--then", "gate", "--gate", gate.path)
        conf = {"keep_alive_interval": "0.5", "keep_alive_max_attempt": "2"}  # 1 s: silence 10 s
        a, b = self.start_in_order(2, lambda i: cmd, nnodes="1:2", conf=conf)
        for agent in (a, b):
            self.wait_workers(agent, 2, world=4)
        stopped_pids = self.pids(b)

        stopped_at = b.kill(signal.SIGSTOP)
        self.addCleanup(lambda: b.proc.poll() is None and b.kill(signal.SIGCONT))
        (t, _), = a.wait_for_line(r"^drun: stopping round \d+: host .* was lost", "stderr",
                                  timeout=RESUME_BOUND)
        dropped_after = t - stopped_at
        recs = self.wait_workers(a, 2, world=2)
        self.assertEqual(sorted(r["rank"] for r in recs), [0, 1])
        # The stopped agent's workers ran on (nothing stopped them): they are the ones a
        # frozen host would take down with it, here they must be cleaned up by their agent.
        b.kill(signal.SIGCONT)
        self.assertExit(b, 1)
        self.assertTrue(any("rejected this node" in l and "nothing came from this node" in l
                            for l in b.stderr_lines), b.describe())
        self.assertNoWorkersLeft(stopped_pids)
        report(f"stopped agent (SIGSTOP): dropped by the server after {dropped_after:.3f}s")
        self.assertGreater(dropped_after, 5, "a stopped process was judged before its silence timeout")
        self.assertLess(dropped_after, RESUME_BOUND)

        gate.open()
        self.assertExit(a, 0)
        self.assertNoWorkersLeft(self.pids(a))

    def test_worker_failure_restarts_all_nodes_with_the_same_restart_count(self):
        gate = Gate(self.tmp)
        self.addCleanup(gate.open)
        ok = worker_command("--then", "gate", "--gate", gate.path)
        failing = worker_command("--then", "gate", "--gate", gate.path,
                                 "--fail-local-rank", 1, "--code", 7, "--fail-restarts", 0)
        a, b = self.start_in_order(2, lambda i: failing if i == 1 else ok, nnodes="2",
                                   extra=["--max-restarts", 2])
        for agent in (a, b):
            agent.wait_for_line(r"^drun: stopping round 0: rank 3 on host .* failed "
                                r"\(exit code 7\); restart 1 of 2", "stderr")
        by_restart = {0: {}, 1: {}}
        for i, agent in enumerate((a, b)):
            self.wait_workers(agent, 2, restart=1)
            for r in worker_records(agent.stdout_lines):
                by_restart[r["restart"]][r["rank"]] = (i, r)
        # Attempt 1 runs until the gate opens: all four ranks print, with restart 1. In
        # attempt 0 the healthy ranks may be stopped before they print: those that did
        # saw restart 0.
        self.assertEqual(sorted(by_restart[1]), [0, 1, 2, 3], self.describe_all())
        self.assertIn(3, by_restart[0], self.describe_all())
        for restart in (0, 1):
            for rank, (i, r) in by_restart[restart].items():
                self.assertEqual((r["world"], r["group_rank"], r["max_restarts"]), (4, i, 2), r)
        # The healthy node's first-attempt workers were stopped too.
        self.assertNoWorkersLeft([r["pid"] for _, r in by_restart[0].values()])
        self.assertTrue(any("rank 3 failing on purpose with exit code 7 (restart 0)" in line
                            for line in b.stderr_lines), b.describe())

        gate.open()
        for agent in (a, b):
            self.assertExit(agent, 0)
            self.assertIsNone(parse_summary(agent.stderr_lines), agent.describe())

    def test_restart_budget_exhausted_every_agent_exits_with_the_worker_code(self):
        gate = Gate(self.tmp)
        self.addCleanup(gate.open)
        ok = worker_command("--then", "gate", "--gate", gate.path)
        failing = worker_command("--then", "gate", "--gate", gate.path,
                                 "--fail-local-rank", 1, "--code", 7)
        a, b = self.start_in_order(2, lambda i: failing if i == 1 else ok, nnodes="2",
                                   extra=["--max-restarts", 1])
        for agent in (a, b):
            self.assertExit(agent, 7)
        # The failing rank ran in both attempts; every worker that got to print (the
        # others may be stopped before they do) saw the restart count of its attempt.
        recs = worker_records(a.stdout_lines + b.stdout_lines)
        self.assertEqual(sorted(r["restart"] for r in recs if r["rank"] == 3), [0, 1],
                         self.describe_all())
        masters = {}
        for r in recs:
            self.assertIn(r["restart"], (0, 1), r)
            self.assertEqual(r["max_restarts"], 1, r)
            masters.setdefault(r["restart"], set()).add(r["master"])
        self.assertEqual([len(m) for m in masters.values()], [1, 1], masters)

        summaries = [parse_summary(agent.stderr_lines) for agent in (a, b)]
        for agent, summary in zip((a, b), summaries):
            self.assertIsNotNone(summary, f"no root-cause summary\n{agent.describe()}")
            self.assertEqual(summary.get("host"), HOSTNAME, summary)
            self.assertEqual(summary.get("rank"), "3 (local rank 1, group rank 1)", summary)
            self.assertEqual(summary.get("exit"), "code 7", summary)
            self.assertEqual(summary.get("attempt"), "1", summary)
            self.assertIn("rank 3 failing on purpose with exit code 7 (restart 1)",
                          summary["stderr_tail"], summary)
            failed = [l for l in agent.stderr_lines if l.startswith("drun: job failed: ")]
            self.assertEqual(len(failed), 1, agent.describe())
            self.assertRegex(failed[0], r"rank 3 on host .* failed \(exit code 7\)")
        # The same summary, line for line, on every node.
        self.assertEqual(summary_lines(a.stderr_lines), summary_lines(b.stderr_lines))
        self.assertEqual([l for l in a.stderr_lines if l.startswith("drun: job failed: ")],
                         [l for l in b.stderr_lines if l.startswith("drun: job failed: ")])
        self.assertNoWorkersLeft(self.pids(a, b))

    def test_spare_above_max_replaces_a_lost_node(self):
        gate = Gate(self.tmp)
        self.addCleanup(gate.open)
        cmd = worker_command("--then", "gate", "--gate", gate.path)
        a, b = self.start_in_order(2, lambda i: cmd, nnodes="2")
        for agent in (a, b):
            self.wait_workers(agent, 2, world=4)
        spare = self.agent(ADDRS[2], cmd, nnodes="2", name="spare")
        spare.wait_for_line(r"^drun: waiting: .*spare", "stderr")
        self.assertEqual(worker_records(spare.stdout_lines), [], "a spare runs no workers")
        lost_pids = self.pids(b)

        killed_at = b.kill(signal.SIGKILL)
        b.wait(10)
        a.wait_for_line(r"^drun: stopping round \d+: host .* was lost", "stderr",
                        timeout=RESUME_BOUND)
        recs_a = [r for r in self.wait_workers(a, 4, world=4)][2:]
        found = spare.wait_for_line(r"worker rank=\d+ .*\bworld=4\b", count=2,
                                    timeout=RESUME_BOUND)
        recs_s = self.wait_workers(spare, 2, world=4)
        report(f"spare took over the lost node: its workers up "
               f"{max(t for t, _ in found) - killed_at:.3f}s after the kill -9")
        self.assertEqual(sorted(r["rank"] for r in recs_a), [0, 1], self.describe_all())
        self.assertEqual(sorted(r["rank"] for r in recs_s), [2, 3], self.describe_all())
        for r in recs_s:
            self.assertEqual((r["group_rank"], r["group_world"]), (1, 2), r)
        self.assertNoWorkersLeft(lost_pids)

        gate.open()
        for agent in (a, spare):
            self.assertExit(agent, 0)
        self.assertNoWorkersLeft(self.pids(a, b, spare))

    def test_different_nproc_per_node_gives_contiguous_rank_offsets(self):
        # No Python at all here: a shell one-liner prints what drun gave it.
        script = ('echo "worker rank=$RANK local_rank=$LOCAL_RANK group_rank=$GROUP_RANK '
                  'world=$WORLD_SIZE local_world=$LOCAL_WORLD_SIZE '
                  'group_world=$GROUP_WORLD_SIZE role_rank=$ROLE_RANK '
                  'role_world=$ROLE_WORLD_SIZE restart=$TORCHELASTIC_RESTART_COUNT pid=$$"')
        nprocs = [1, 3, 2]
        agents = []
        for i, n in enumerate(nprocs):
            agents.append(self.agent(ADDRS[i], ["/bin/sh", "-c", script], nnodes="3",
                                     nproc=n, extra=["--no-python"], name=f"node{i}"))
            if i < 2:
                self.wait_joined(agents[-1], i + 1)
        for agent in agents:
            self.assertExit(agent, 0)
        offset = 0
        for i, (agent, n) in enumerate(zip(agents, nprocs)):
            recs = sorted(worker_records(agent.stdout_lines), key=lambda r: r["local_rank"])
            self.assertEqual({r["prefix_host"] for r in recs}, {HOSTNAME})
            self.assertEqual([(r["local_rank"], r["rank"], r["prefix_rank"]) for r in recs],
                             [(lr, offset + lr, offset + lr) for lr in range(n)],
                             self.describe_all())
            for r in recs:
                self.assertEqual(
                    (r["group_rank"], r["world"], r["local_world"], r["group_world"],
                     r["role_rank"], r["role_world"], r["restart"]),
                    (i, 6, n, 3, r["rank"], 6, 0), r)
            offset += n


if __name__ == "__main__":
    main()
