"""Stock lab PCs (issue #13, docs/ssh.md "Which interface gloo and NCCL use"): every host as
Debian and Ubuntu install it — its own name on 127.0.1.1 in /etc/hosts — plus a decoy second
interface (a dummy "docker0" that leads nowhere). gloo, left alone, resolves the hostname,
advertises 127.0.1.1 to its peers and every cross-host connection is refused. drun gives the
workers GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME for the interface each node reaches the
rendezvous through, says which in one line per host, and a user's own setting wins; --iface
NAME|CIDR chooses another on every host."""
import os

import ssh_testlib as t

WORKER = os.path.join(t.PROGRAMS, "worker.py")
TRAIN = os.path.join(t.HERE, "..", "multinode", "programs", "train_allreduce.py")
VARS = "GLOO_SOCKET_IFNAME,NCCL_SOCKET_IFNAME"


class StockHostsTest(t.SshTestCase):
    STOCK = True

    def test_workers_get_the_interface_toward_the_rendezvous_and_say_so(self):
        p = self.drun(["-H", ",".join(self.HOSTS), "--nproc-per-node", "2", WORKER, "--env", VARS])
        self.assertEqual(self.finish(p), 0, p[1].describe())
        workers = t.records(p[1].lines())
        self.assertEqual(len(workers), 6, p[1].describe())
        for w in workers:
            self.assertEqual(w["resolved"], "127.0.1.1")  # the stock trap is in place
            self.assertEqual((w["GLOO_SOCKET_IFNAME"], w["NCCL_SOCKET_IFNAME"]), ("eth0", "eth0"))
        said = [l for l in p[1].lines("stderr") if "gloo and NCCL use interface" in l]
        self.assertEqual(sorted(l.split(":")[1].strip() for l in said), sorted(self.HOSTS), said)
        for host, line in zip(sorted(self.HOSTS), sorted(said, key=lambda l: l.split(":")[1])):
            self.assertIn(f"interface eth0 ({self.bed.addr[host]}, ", line)
            self.assertTrue(line.endswith("; --iface NAME|CIDR chooses another"), line)
        self.assertHostsClean()

    def test_gloo_training_across_stock_hosts(self):
        p = self.drun(["-H", ",".join(self.HOSTS), "--nproc-per-node", "2", TRAIN])
        self.assertEqual(self.finish(p), 0, p[1].describe())
        reduced = t.records(p[1].lines(), "allreduce")
        self.assertEqual(sorted(r["rank"] for r in reduced), list(range(6)), p[1].describe())
        for r in reduced:
            self.assertEqual((r["world"], r["sum"]), (6, 21))
        self.assertHostsClean()

    def test_without_it_gloo_fails_as_on_stock_pcs(self):
        # The control: an empty GLOO_SOCKET_IFNAME (the user's, so drun keeps it) makes gloo
        # fall back to the hostname, 127.0.1.1, and the cross-host connections are refused.
        p = self.drun(["-H", ",".join(self.HOSTS), "--nproc-per-node", "2",
                       "-x", "GLOO_SOCKET_IFNAME=", TRAIN])
        self.assertNotEqual(self.finish(p), 0, p[1].describe())
        self.assertIn("127.0.1.1", "\n".join(p[1].lines() + p[1].lines("stderr")), p[1].describe())
        self.assertHostsClean()

    def test_iface_by_subnet_picks_each_hosts_interface_in_it(self):
        p = self.drun(["-H", ",".join(self.HOSTS), "--nproc-per-node", "1",
                       "--iface", f"{t.DECOY_PREFIX}.0/24", WORKER, "--env", VARS])
        self.assertEqual(self.finish(p), 0, p[1].describe())
        workers = t.records(p[1].lines())
        self.assertEqual(len(workers), 3, p[1].describe())
        for w in workers:
            self.assertEqual((w["GLOO_SOCKET_IFNAME"], w["NCCL_SOCKET_IFNAME"]), ("docker0", "docker0"))
        said = [l for l in p[1].lines("stderr") if "gloo and NCCL use interface" in l]
        self.assertEqual(len(said), 3, p[1].describe())
        for line in said:
            self.assertTrue(line.endswith(f"interface docker0 (--iface {t.DECOY_PREFIX}.0/24)"), line)
        self.assertHostsClean()

    def test_a_users_own_setting_wins(self):
        p = self.drun(["-H", ",".join(self.HOSTS), "--nproc-per-node", "1",
                       "-x", "GLOO_SOCKET_IFNAME=docker0", WORKER, "--env", VARS])
        self.assertEqual(self.finish(p), 0, p[1].describe())
        workers = t.records(p[1].lines())
        self.assertEqual(len(workers), 3, p[1].describe())
        for w in workers:
            self.assertEqual((w["GLOO_SOCKET_IFNAME"], w["NCCL_SOCKET_IFNAME"]), ("docker0", "eth0"))
        said = [l for l in p[1].lines("stderr") if "gloo and NCCL use interface" in l]
        self.assertEqual(len(said), 3, p[1].describe())
        for line in said:
            self.assertIn("GLOO_SOCKET_IFNAME as you set it", line)
        self.assertHostsClean()


if __name__ == "__main__":
    t.main()
