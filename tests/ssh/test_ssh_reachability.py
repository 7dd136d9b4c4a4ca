"""Hosts that cannot be reached while the job runs (docs/ssh.md, "Replacing agents"): a
job left with fewer than --nnodes MIN hosts in it fails within min(60 s, join_timeout / 2),
naming the hosts it lost, instead of waiting out the join timeout; the survivors are sent
SIGTERM (their workers stop with the --shutdown-timeout grace, as on Ctrl-C)."""
import os
import time

import ssh_testlib as t


class ReachabilityTest(t.SshTestCase):
    HOSTS = ["red01", "orange07", "purple11"]

    def test_two_links_cut_for_good_fail_the_job_naming_them(self):
        gate = t.Gate(self.bed.tmp, name="gate-reach")
        self.addCleanup(gate.open)
        cut = []
        self.addCleanup(lambda: [t.run("ip", "-n", self.bed.host_ns[h], "link", "set", "eth0", "up")
                                 for h in cut])
        p = self.drun(["-H", ",".join(self.HOSTS), "--nnodes", "2:3", "--rdzv-conf",
                       "join_timeout=40", "--shutdown-timeout", "5",
                       os.path.join(t.PROGRAMS, "worker.py"), "--then", "gate", "--gate", gate.path])
        p[1].wait_for(r"worker host=", count=3)
        for host in ("orange07", "purple11"):
            self.bed.cut(host)
            cut.append(host)
        cut_at = time.monotonic()
        code = self.finish(p, timeout=120)
        took = time.monotonic() - cut_at
        err = p[1].lines("stderr")
        self.assertEqual(code, 1, p[1].describe())
        failed = [l for l in err if l.startswith("drun: job failed: only 1 host in the job for 20 s")]
        self.assertTrue(failed, p[1].describe())
        self.assertIn("orange07 (", failed[0])
        self.assertIn("purple11 (", failed[0])
        self.assertNotIn("red01 (", failed[0])
        # Loss noticed in seconds, then the 20 s bound (half of join_timeout=40).
        self.assertLess(took, 90, p[1].describe())
        # The survivor's agent is sent SIGTERM (its workers, if any ran, get it with the
        # grace), not its channel's end (a lost launcher's SIGHUP).
        self.assertFalse([l for l in err if "red01" in l and "channel closed" in l], p[1].describe())
        # Every agent ends, the cut hosts' by the rendezvous' silence, with its workers.
        self.assertHostsClean(timeout=30)


if __name__ == "__main__":
    t.main()
