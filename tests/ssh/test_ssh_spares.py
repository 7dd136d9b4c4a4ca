"""Hosts that are off (issue #13, docs/ssh.md "Hosts that are off"): an elastic job starts as
soon as MIN hosts' agents joined and tries the others again every 5 s; a host that comes up
joins as a spare. A job that cannot reach MIN refuses, naming every host that failed, within
the connect timeout (5 s) even for a host that answers TCP but never speaks ssh."""
import os
import signal
import time

import ssh_testlib as t

WORKER = os.path.join(t.PROGRAMS, "worker.py")


class SparesTest(t.SshTestCase):
    HOSTS = ["red01", "orange07", "purple11", "green02"]

    def link(self, name, state):
        t.run("ip", "-n", self.bed.host_ns[name], "link", "set", "eth0", state)

    def test_elastic_job_starts_without_a_host_that_is_off_and_takes_it_when_it_is_up(self):
        self.link("green02", "down")
        self.addCleanup(self.link, "green02", "up")
        gate = t.Gate(self.bed.tmp, name="gate-spare")
        self.addCleanup(gate.open)
        p = self.drun(["-H", ",".join(self.HOSTS), "--nnodes", "2:3", "--shutdown-timeout", "5",
                       WORKER, "--then", "gate", "--gate", gate.path])
        p[1].wait_for(r"worker host=", count=3)
        first = t.records(p[1].lines())
        self.assertEqual(sorted(r["host"] for r in first), ["orange07", "purple11", "red01"])
        self.assertEqual({r["world"] for r in first}, {3})
        p[1].wait_for(r"^drun: green02: .*trying it again every 5 s: it joins the job when it "
                      r"answers$", stream="stderr")
        self.link("green02", "up")
        p[1].wait_for(r"^drun: green02: answers again; its agent joined the job$", stream="stderr")
        p[1].wait_for(r"^drun: green02: .*spare: the job runs at its maximum size", stream="stderr")
        gate.open()
        self.assertEqual(self.finish(p), 0, p[1].describe())
        err = p[1].lines("stderr")
        said = [l for l in err if l.startswith("drun: green02: ") and "cannot connect" in l]
        self.assertEqual(len(said), 1, err)  # tried again quietly
        self.assertEqual(len(t.records(p[1].lines())), 3, p[1].describe())  # no restart
        self.assertHostsClean()

    def test_too_few_hosts_refuses_naming_each_within_the_connect_timeout(self):
        # orange07 is off (no answer to ARP); purple11 is frozen: its kernel completes the TCP
        # handshake but its sshd never speaks (SIGSTOP of our own child, by pid).
        self.link("orange07", "down")
        self.addCleanup(self.link, "orange07", "up")
        sshd = self.bed.sshd["purple11"]
        os.kill(sshd.pid, signal.SIGSTOP)
        self.addCleanup(os.kill, sshd.pid, signal.SIGCONT)
        t0 = time.monotonic()
        p = self.drun(["-H", "red01,orange07,purple11", "--nnodes", "2:3", WORKER])
        code = self.finish(p)
        elapsed = time.monotonic() - t0
        err = p[1].lines("stderr")
        self.assertEqual(code, 1, p[1].describe())
        self.assertRegex("\n".join(err), r"(?m)^drun: orange07: cannot connect: ")
        self.assertRegex("\n".join(err), r"(?m)^drun: purple11: cannot connect: ")
        self.assertEqual(err[-1], "drun: pre-flight failed on 2 of 3 hosts; nothing was started")
        self.assertLess(elapsed, 12, err)  # coarse: the default connect timeout is 5 s
        self.assertEqual(p[1].lines("stdout"), [])
        self.assertHostsClean(timeout=5)


if __name__ == "__main__":
    t.main()
