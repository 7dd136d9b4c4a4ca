"""Stock lab PCs under Slurm (issue #13, docs/slurm.md): every node as Debian and Ubuntu install
it — its own name on 127.0.1.1 in /etc/hosts — plus a decoy second interface docker0 that leads
nowhere (cluster.sh stock on). gloo, left alone, resolves the hostname, advertises 127.0.1.1
and every cross-node connection is refused. drun gives the workers GLOO_SOCKET_IFNAME and
NCCL_SOCKET_IFNAME for the interface each node reaches the rendezvous through (on the step's
first node too, whose own name is loopback there), under `srun drun` and `--launcher slurm`,
says which in one line per node, keeps a user's own setting, and --iface CIDR chooses another."""
import os

from slurm_testlib import DECOY_SUBNET, HERE, NODE_ADDR, NODES, SlurmTestCase, main

WORKER = os.path.join(HERE, "programs", "iface_worker.py")
SAID = "gloo and NCCL use interface"


class StockNodes(SlurmTestCase):
    STOCK = True

    def iface_lines(self, output):
        """The workers' IFACE lines, as dicts (with the output prefix's host)."""
        rows = []
        for line in output.splitlines():
            head, sep, rest = line.partition("]: IFACE ")
            if sep:
                row = dict(kv.split("=", 1) for kv in rest.split())
                row["prefix_host"] = head.lstrip("[").split(":")[0]
                rows.append(row)
        return rows

    def said(self, output):
        return [l for l in self.drun_lines(output) if SAID in l]

    def assert_trained_on_eth0(self, job, launcher=False):
        info = job.wait()
        out = job.output()
        self.assert_completed(job, info)
        workers = self.iface_lines(out)
        self.assertEqual(sorted(int(w["rank"]) for w in workers), list(range(6)), out)
        self.assertEqual(sorted(w["host"] for w in workers), sorted(NODES * 2), out)
        for w in workers:
            self.assertEqual(w["prefix_host"], w["host"], w)
            self.assertEqual(w["resolved"], "127.0.1.1", w)  # the stock trap is in place
            self.assertEqual((w["GLOO_SOCKET_IFNAME"], w["NCCL_SOCKET_IFNAME"]), ("eth0", "eth0"), w)
        reduced = [l for l in out.splitlines() if "]: allreduce rank=" in l]
        self.assertEqual(len(reduced), 6, out)
        for line in reduced:
            self.assertTrue(line.endswith(" world=6 sum=21 gathered=0,1,2,3,4,5"), line)
        # One line per node, naming the node's own address on eth0 (not lo's 127.0.0.1);
        # --launcher slurm shows its agents' lines with their node's name.
        said = self.said(out)
        self.assertEqual(sorted(said), sorted(
            f"drun: {n + ': ' if launcher else ''}{SAID} eth0 ({NODE_ADDR[n]}, this node's address "
            f"toward the rendezvous); --iface NAME|CIDR chooses another" for n in NODES), out)

    def test_srun_drun_trains_with_each_nodes_interface_toward_the_rendezvous(self):
        job = self.submit(f"""
#SBATCH --nodes=3 --ntasks-per-node=1
srun {self.drun} --nproc-per-node 2 {WORKER} --train
""", name="stock-srun")
        self.assert_trained_on_eth0(job)

    def test_launcher_slurm_trains_with_each_nodes_interface_toward_the_rendezvous(self):
        job = self.submit(f"""
#SBATCH --nodes=3
{self.drun} --launcher slurm --nproc-per-node 2 {WORKER} --train
""", name="stock-launcher")
        self.assert_trained_on_eth0(job, launcher=True)

    def test_without_it_gloo_fails_as_on_stock_pcs(self):
        # The control: an empty GLOO_SOCKET_IFNAME (the user's, so drun keeps it) makes gloo
        # fall back to the hostname, 127.0.1.1, and the cross-node connections are refused.
        job = self.submit(f"""
#SBATCH --nodes=3 --ntasks-per-node=1
srun {self.drun} --nproc-per-node 2 -x GLOO_SOCKET_IFNAME= {WORKER} --train
""", name="stock-control")
        info = job.wait()
        out = job.output()
        self.assertEqual(info.get("JobState"), "FAILED", out)
        workers = self.iface_lines(out)
        self.assertEqual(len(workers), 6, out)
        for w in workers:
            self.assertEqual((w["GLOO_SOCKET_IFNAME"], w["NCCL_SOCKET_IFNAME"]), ("", "eth0"), w)
        self.assertNotIn("]: allreduce rank=", out)
        named = [l for l in out.splitlines() if "127.0.1.1" in l and "]: IFACE " not in l]
        self.assertTrue(named, out)
        said = self.said(out)
        self.assertEqual(len(said), 3, out)
        for line in said:
            self.assertIn("; GLOO_SOCKET_IFNAME as you set it", line)

    def test_iface_by_subnet_picks_each_nodes_decoy(self):
        job = self.submit(f"""
#SBATCH --nodes=3 --ntasks-per-node=1
srun {self.drun} --nproc-per-node 1 --iface {DECOY_SUBNET} {WORKER}
""", name="stock-iface")
        info = job.wait()
        out = job.output()
        self.assert_completed(job, info)
        workers = self.iface_lines(out)
        self.assertEqual(sorted(w["host"] for w in workers), NODES, out)
        for w in workers:
            self.assertEqual((w["GLOO_SOCKET_IFNAME"], w["NCCL_SOCKET_IFNAME"]), ("docker0", "docker0"), w)
        self.assertEqual(self.said(out), [f"drun: {SAID} docker0 (--iface {DECOY_SUBNET})"] * 3, out)


if __name__ == "__main__":
    main()
