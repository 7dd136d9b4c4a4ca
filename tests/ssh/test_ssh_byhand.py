"""Stock lab PCs by hand (issue #13; docs/semantics.md "Which interface gloo and NCCL use"):
the user logs in to each PC and types the same drun line there, torchrun's way, naming one of
the PCs as the rendezvous (`--rdzv-endpoint red01:PORT`, or static `--master-addr red01`).
Each host is as Debian and Ubuntu install it: its own name on 127.0.1.1 in /etc/hosts, and a
decoy second interface ("docker0") that leads nowhere. On red01 its own name resolves to
127.0.1.1, so its route to the rendezvous is loopback; the other nodes and its workers' gloo
sockets need its address toward them instead (eth0 here).

Each host's drun runs in a session of the real sshd of that host, typed through OpenSSH's
client from the client namespace, all three at once as three people (or three terminals)
would."""
import os
import subprocess

import ssh_testlib as t

WORKER = os.path.join(t.PROGRAMS, "worker.py")
TRAIN = os.path.join(t.HERE, "..", "multinode", "programs", "train_allreduce.py")
VARS = "GLOO_SOCKET_IFNAME,NCCL_SOCKET_IFNAME,MASTER_ADDR"
SAID = "gloo and NCCL use interface"


class ByHandStockTest(t.SshTestCase):
    STOCK = True

    def on_host(self, host, args, env=""):
        """`drun ARGS` typed in a shell on `host` (over ssh); returns (Popen, Lines)."""
        line = " ".join(["cd", t.HERE, "&&", "exec", "env", f"PYTHON_EXEC={t.PYTHON}", env,
                         self.bed.drun] + [str(a) for a in args])
        argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", host, line]
        proc = subprocess.Popen(self.bed.client_cmd(argv), env=self.bed.env(), cwd=t.HERE,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        p = (proc, t.Lines(proc, f"drun@{host}"))
        self.procs.append(p)
        return p

    def by_hand(self, args_of):
        """Starts drun on every host at once; args_of(host, node_rank) -> its arguments.
        Waits for all; returns {host: (code, Lines)}."""
        started = {h: self.on_host(h, args_of(h, i)) for i, h in enumerate(self.HOSTS)}
        return {h: (self.finish(p), p[1]) for h, p in started.items()}

    def describe(self, ended):
        return "\n".join(lines.describe() for _, lines in ended.values())

    def assertTrained(self, ended, world=6):
        for host, (code, lines) in ended.items():
            self.assertEqual(code, 0, f"{host}:\n{self.describe(ended)}")
        reduced = [r for _, lines in ended.values() for r in t.records(lines.lines(), "allreduce")]
        self.assertEqual(sorted(r["rank"] for r in reduced), list(range(world)), self.describe(ended))
        for r in reduced:
            self.assertEqual((r["world"], r["sum"]), (world, world * (world + 1) // 2))

    def assertEachSaysEth0(self, ended):
        """Every node's one line names eth0 and its own address on the test subnet."""
        for host, (_, lines) in ended.items():
            said = [l for l in lines.lines("stderr") if SAID in l]
            self.assertEqual(len(said), 1, f"{host}:\n{lines.describe()}")
            self.assertIn(f"interface eth0 ({self.bed.addr[host]}, ", said[0])

    def test_c10d_endpoint_named_by_one_pc(self):
        ended = self.by_hand(lambda h, i: ["--nnodes", "3", "--nproc-per-node", "2",
                                           "--rdzv-backend", "c10d", "--rdzv-endpoint",
                                           f"{self.HOSTS[0]}:29400", TRAIN])
        self.assertTrained(ended)
        self.assertEachSaysEth0(ended)
        self.assertHostsClean()

    def test_workers_env_on_every_pc_without_the_agent_store(self):
        # Without the agent store the workers' TCPStore is group rank 0's, at the address
        # the rendezvous knows that node by: never a loopback one.
        ended = self.by_hand(lambda h, i: ["--nnodes", "3", "--nproc-per-node", "1",
                                           "--rdzv-endpoint", f"{self.HOSTS[0]}:29401",
                                           "--no-agent-store", WORKER, "--env", VARS])
        workers = {}
        for host, (code, lines) in ended.items():
            self.assertEqual(code, 0, f"{host}:\n{self.describe(ended)}")
            mine = t.records(lines.lines())
            self.assertEqual(len(mine), 1, lines.describe())
            workers[host] = mine[0]
        head = [h for h, w in workers.items() if w["group_rank"] == 0]
        self.assertEqual(len(head), 1, workers)
        for host, w in workers.items():
            self.assertEqual(w["resolved"], "127.0.1.1")  # the stock trap is in place
            self.assertEqual((w["GLOO_SOCKET_IFNAME"], w["NCCL_SOCKET_IFNAME"]), ("eth0", "eth0"))
            self.assertEqual(w["MASTER_ADDR"], self.bed.addr[head[0]], workers)
        self.assertEachSaysEth0(ended)
        self.assertHostsClean()

    def test_localhost_endpoint_says_what_is_wrong(self):
        # Typed on every PC, localhost:PORT is each PC's own: each hosts a rendezvous and
        # waits for the others there. Each says so at once, naming what to write instead.
        ended = self.by_hand(lambda h, i: ["--nnodes", "3", "--nproc-per-node", "1",
                                           "--rdzv-endpoint", "localhost:29402",
                                           "--rdzv-conf", "join_timeout=2", WORKER])
        for host, (code, lines) in ended.items():
            self.assertNotEqual(code, 0, lines.describe())
            err = lines.lines("stderr")
            self.assertEqual(err[0], "drun: --rdzv-endpoint localhost:29402 is this machine's loopback "
                             "(127.0.0.1): only nodes started on this machine can join; for nodes on "
                             f"other machines name this one as they reach it (--rdzv-endpoint {host}:29402)",
                             lines.describe())
            self.assertIn("rendezvous timed out: 1 of at least 3 nodes joined", err[-1],
                          self.describe(ended))
        self.assertHostsClean()

    def test_static_master_addr_names_one_pc(self):
        ended = self.by_hand(lambda h, i: ["--nnodes", "3", "--nproc-per-node", "2",
                                           "--rdzv-backend", "static", "--node-rank", str(i),
                                           "--master-addr", self.HOSTS[0], "--master-port", "29403",
                                           TRAIN])
        self.assertTrained(ended)
        self.assertEachSaysEth0(ended)
        self.assertHostsClean()


if __name__ == "__main__":
    t.main()
