"""Nothing left behind, and hot spares: kill -9 of the launcher, Ctrl-C, kill -9 of one
remote agent, a spare host taking over a lost node, and a cut link; afterwards every host
runs exactly the processes it ran before (its sshd)."""
import os
import re
import signal
import tempfile

import ssh_testlib as t


NEW_SESSION_CHILD = os.path.join(t.REPO, "tests", "e2e", "programs", "new_session_child.py")


class TeardownTest(t.SshTestCase):
    HOSTS = ["red01", "orange07", "purple11", "green02"]

    def test_new_session_children_end_with_the_job(self):
        # Each worker leaves a child in a session of its own (start_new_session), that one's
        # child, and a daemon: each host's agent, their subreaper, ends them with the job.
        piddir = tempfile.mkdtemp(dir=self.bed.tmp)
        p = self.drun(["-H", "red01,orange07", "--nproc-per-node", "2", NEW_SESSION_CHILD, piddir])
        self.assertEqual(self.finish(p), 0, p[1].describe())
        self.assertEqual(len([n for n in os.listdir(piddir) if n.startswith("escapee_")]), 12)
        self.assertHostsClean()

    def start_gated(self, hosts, extra=()):
        gate = t.Gate(self.bed.tmp, name=f"gate-{self.id().rsplit('.', 1)[-1]}")
        self.addCleanup(gate.open)
        p = self.drun(["-H", ",".join(hosts), *extra, "--shutdown-timeout", "5",
                       os.path.join(t.PROGRAMS, "worker.py"), "--then", "gate",
                       "--gate", gate.path])
        return p, gate

    def running_hosts(self, lines, count, **match):
        pattern = r"worker host=" + "".join(f"(?=.*\\b{k}={v}\\b)" for k, v in match.items())
        lines.wait_for(pattern, count=count)
        return [r for r in t.records(lines.lines()) if all(r.get(k) == v for k, v in match.items())]

    def test_kill9_launcher_leaves_nothing(self):
        p, _ = self.start_gated(["red01", "orange07", "purple11"])
        self.running_hosts(p[1], 3)
        p[0].send_signal(signal.SIGKILL)
        p[0].wait()
        self.assertHostsClean()

    def test_ctrl_c_stops_every_agent(self):
        p, _ = self.start_gated(["red01", "orange07", "purple11"])
        self.running_hosts(p[1], 3)
        p[0].send_signal(signal.SIGINT)
        self.assertEqual(self.finish(p), 128 + signal.SIGINT, p[1].describe())
        err = p[1].lines("stderr")
        self.assertIn("drun: got SIGINT: stopping the agents on every host (again to drop them "
                      "at once)", err)
        # Each agent got the launcher's SIGINT itself (not its channel's end, once a SIGHUP):
        # stopping its workers, or, when a peer's stop had already ended its round, leaving.
        got = [e for e in err if re.search(r"got SIGINT(: stopping the workers| while waiting in the "
                                           r"rendezvous)", e)]
        self.assertEqual(len(got), 3, err)
        self.assertFalse([e for e in err if "channel closed" in e], err)
        self.assertHostsClean()

    def test_kill9_of_one_agent_restarts_it_there(self):
        p, gate = self.start_gated(["red01", "orange07", "purple11"])
        self.running_hosts(p[1], 3)
        agents = self.bed.agent_pids("orange07")
        self.assertEqual(len(agents), 1, self.bed.describe_hosts())
        os.kill(agents[0], signal.SIGKILL)
        # Whichever comes first: the rendezvous losing its stream, or the channel's end.
        p[1].wait_for(r"^drun: orange07: (the rendezvous lost its agent|the agent was killed by "
                      r"SIGKILL); starting a new agent there", stream="stderr")
        # The survivors name the lost node by host, node rank and address.
        p[1].wait_for(r"^drun: (red01|purple11): stopping round 0: host orange07 was lost "
                      rf"\(node rank [0-2], {self.bed.addr['orange07']}\)$", stream="stderr")
        # A second round on the same three hosts.
        recs = self.running_hosts(p[1], 6)
        self.assertEqual(sorted(r["host"] for r in recs[3:]), ["orange07", "purple11", "red01"])
        gate.open()
        self.assertEqual(self.finish(p), 0, p[1].describe())
        self.assertHostsClean()

    def spare_run(self, lose):
        p, gate = self.start_gated(self.HOSTS, extra=["--nnodes", "3"])
        first = self.running_hosts(p[1], 3)
        running = sorted(r["host"] for r in first)
        spare = (set(self.HOSTS) - set(running)).pop()
        victim = running[0]
        lose(victim)
        recs = self.running_hosts(p[1], 6)
        second = sorted(r["host"] for r in recs[3:])
        self.assertEqual(second, sorted(set(running) - {victim} | {spare}), p[1].describe())
        self.assertEqual({r["world"] for r in recs[3:]}, {3})
        return p, gate, victim

    def test_spare_takes_over_a_killed_agent(self):
        def kill_agent(host):
            for pid in self.bed.agent_pids(host):
                os.kill(pid, signal.SIGKILL)
        p, gate, victim = self.spare_run(kill_agent)
        gate.open()
        self.assertEqual(self.finish(p), 0, p[1].describe())
        self.assertHostsClean()

    def test_spare_takes_over_a_cut_link(self):
        cut = []

        def cut_link(host):
            self.bed.cut(host)
            cut.append(host)
        try:
            p, gate, victim = self.spare_run(cut_link)
            p[1].wait_for(rf"^drun: {victim}: the rendezvous lost its agent", stream="stderr")
            gate.open()
            self.assertEqual(self.finish(p), 0, p[1].describe())
            # The cut host's agent stops on its own (rendezvous silence), its workers with it,
            # and its sshd drops the dead session (ClientAliveInterval).
            self.assertHostsClean(timeout=30)
        finally:
            for host in cut:
                t.run("ip", "-n", self.bed.host_ns[host], "link", "set", "eth0", "up")


if __name__ == "__main__":
    t.main()
