"""A cut link: three agents, each in its own network namespace, on a private bridge (in a
namespace of its own); one non-host agent's side of its link goes down. The agents are
silent to each other from then on (no FIN, no RST), so only heartbeats can tell.

Network safety: before any namespace exists, the test subnet gets an `unreachable` route
in the root namespace; every address and the bridge live in namespaces the test created;
the agents dial only the test addresses (and their own loopback); teardown deletes the
namespaces and the route. Needs root and `ip netns`; skipped otherwise."""

from mn_testlib import report, Gate, NetnsTestCase, main, worker_command, worker_records

SUBNET = "10.213.31"  # unique to this test
PORT = 29400          # a fresh namespace: nothing else listens there
# Coarse safety bounds (seconds). Documented: ~2 s without heartbeats (keep_alive_interval
# 0.5 s x keep_alive_max_attempt 4); the server should notice within ~3 s.
AGENT_NOTICE_BOUND = 10.0
SERVER_NOTICE_BOUND = 10.0
RESUME_BOUND = 30.0



class LinkCutTest(NetnsTestCase):
    SUBNET = SUBNET

    def start_job(self):
        """Three agents at world 6 (the last call is long: the round closes at the max),
        workers waiting on the gate. Returns the agents and the gate."""
        gate = Gate(self.tmp)
        self.addCleanup(gate.open)
        cmd = worker_command("--then", "gate", "--gate", gate.path)
        agents = []
        for i in range(3):
            agents.append(self.agent(self.lab.addr(i), cmd, nnodes="2:3", name=f"ns{i}",
                                     wrapper=self.lab.wrapper(i),
                                     conf={"last_call_timeout": "30"}))
            if i < 2:
                self.wait_joined(agents[-1], i + 1)
        for agent in agents:
            self.wait_workers(agent, 2, world=6)
        return agents, gate

    def pids(self, *agents):
        return [r["pid"] for a in agents for r in worker_records(a.stdout_lines)]

    def test_cut_agent_stops_its_workers_and_exits_non_zero(self):
        (a, b, c), gate = self.start_job()
        cut_pids = self.pids(c)
        cut_at = self.lab.cut(2)
        c.wait(AGENT_NOTICE_BOUND + 10)
        self.assertNotEqual(c.returncode, 0, c.describe())
        (t, _), = c.wait_for_line(
            rf"^drun: job failed: lost the rendezvous server at {self.endpoint}: ", "stderr",
            timeout=1)
        report(f"link cut, cut agent: logged the lost server after {t - cut_at:.3f}s, "
               f"exited ({c.returncode}) after {c.exited_at - cut_at:.3f}s")
        self.assertLess(t - cut_at, AGENT_NOTICE_BOUND)
        self.assertGreater(t - cut_at, 0.5, "noticed before the heartbeats could have lapsed?")
        self.assertNoWorkersLeft(cut_pids)

    def test_server_notices_the_cut_agent_and_survivors_restart_at_world_4(self):
        (a, b, c), gate = self.start_job()
        cut_at = self.lab.cut(2)
        noticed = {}
        for agent in (a, b):
            (t, _), = agent.wait_for_line(r"^drun: stopping round \d+: host .* was lost",
                                          "stderr", timeout=SERVER_NOTICE_BOUND + 20)
            noticed[agent.name] = t - cut_at
        report("link cut, server side: survivors told to stop after "
               + ", ".join(f"{k} {v:.3f}s" for k, v in noticed.items()))
        for name, latency in noticed.items():
            self.assertLess(latency, SERVER_NOTICE_BOUND, f"{name}: {latency:.1f}s")
        for i, agent in enumerate((a, b)):
            recs = self.wait_workers(agent, 2, world=4, timeout=RESUME_BOUND)
            self.assertEqual(sorted(r["rank"] for r in recs), [2 * i, 2 * i + 1])
        c.wait(AGENT_NOTICE_BOUND + 10)
        self.assertNotEqual(c.returncode, 0, c.describe())
        gate.open()
        for agent in (a, b):
            self.assertExit(agent, 0)
        # No worker of any agent, of any round, is left.
        self.assertNoWorkersLeft(self.pids(a, b, c))


if __name__ == "__main__":
    main()
