"""Signals over ssh mean what they mean locally: the signal sent to the launcher is the one
every remote worker gets, followed by --shutdown-timeout's grace (docs/semantics.md). Each of
6 workers (3 hosts x 2) handles only that signal by writing a checkpoint 3 s later
(programs/checkpoint.py), so a SIGHUP in its place, or no grace, leaves checkpoints missing.
A deliberate stop never reports a host as lost, and leaves nothing on the hosts. The same
worker under --standalone and with a drun typed on each host by hand (ByHandTest: the
testbed's namespaces, without ssh) completes the modes outside Slurm."""
import os
import signal
import subprocess

import ssh_testlib as t

WORKERS = 6


class SignalsTest(t.SshTestCase):
    def start(self, on, extra=()):
        ckpt = os.path.join(self.bed.tmp, f"ckpt-{self.id().rsplit('.', 1)[-1]}")
        os.makedirs(ckpt)
        p = self.drun(["-H", ",".join(self.HOSTS), "--nproc-per-node", "2",
                       "--shutdown-timeout", "10", *extra,
                       os.path.join(t.PROGRAMS, "checkpoint.py"), "--dir", ckpt, "--on", on])
        # Every worker has its handler in place once it printed its line.
        p[1].wait_for(r"worker host=", count=WORKERS)
        return p, ckpt

    def checkpoints(self, ckpt):
        out = {}
        for name in os.listdir(ckpt):
            if name.startswith("ckpt-") and not name.endswith(".tmp"):
                with open(os.path.join(ckpt, name)) as f:
                    out[int(name[5:])] = f.read().split()[0]
        return out

    def stop_with(self, sig, on, extra=()):
        p, ckpt = self.start(on, extra)
        p[0].send_signal(sig)
        self.assertEqual(self.finish(p), 128 + sig, p[1].describe())
        name = signal.Signals(sig).name
        self.assertEqual(self.checkpoints(ckpt), {r: name for r in range(WORKERS)},
                         p[1].describe())
        err = p[1].lines("stderr")
        self.assertIn(f"drun: got {name}: stopping the agents on every host (again to drop "
                      "them at once)", err)
        # Each agent says it stops on that signal; nobody was "lost".
        self.assertEqual(len([e for e in err if f"got {name}: stopping the workers" in e]), 3,
                         p[1].describe())
        self.assertEqual([e for e in err if "was lost" in e or "lost its agent" in e], [],
                         p[1].describe())
        self.assertHostsClean()
        return p

    def test_nohup_keeps_the_job_through_a_hangup(self):
        # nohup's SIGHUP stays ignored by the launcher too: the job runs on. SIGUSR1 comes
        # after it (the lower number is taken first) and ends every worker with 0.
        out = os.path.join(self.bed.tmp, "nohup-probe")
        os.makedirs(out)
        probe = os.path.join(t.REPO, "tests", "e2e", "programs", "signal_probe.py")
        proc = subprocess.Popen(self.bed.client_cmd(["nohup", self.bed.drun, "-H", ",".join(self.HOSTS[:2]),
                                                     probe, out]),
                                env=self.bed.env(), cwd=t.HERE, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p = (proc, t.Lines(proc, "nohup drun"))
        self.procs.append(p)
        p[1].wait_for(r"ready \d+", count=2)
        proc.send_signal(signal.SIGHUP)
        proc.send_signal(signal.SIGUSR1)
        self.assertEqual(self.finish(p), 0, p[1].describe())
        self.assertEqual(sorted(os.listdir(out)), ["got_SIGUSR1_0", "got_SIGUSR1_1"], p[1].describe())
        self.assertHostsClean()

    def test_sigterm_reaches_every_worker_as_sigterm(self):
        self.stop_with(signal.SIGTERM, "TERM")

    def test_ctrl_c_reaches_every_worker_as_sigint(self):
        self.stop_with(signal.SIGINT, "INT")

    def test_sighup_reaches_every_worker_as_sighup(self):
        self.stop_with(signal.SIGHUP, "HUP")

    def test_sigterm_through_rsh_openssh(self):
        # --rsh: the notice goes down OpenSSH's client's standard input instead.
        self.stop_with(signal.SIGTERM, "TERM", extra=["--rsh", "ssh -o BatchMode=yes"])

    def test_sigusr1_reaches_every_worker_and_stops_nothing(self):
        p, ckpt = self.start("USR1")
        p[0].send_signal(signal.SIGUSR1)
        # Each worker checkpoints and exits 0 on its own: the job succeeds.
        self.assertEqual(self.finish(p), 0, p[1].describe())
        self.assertEqual(self.checkpoints(ckpt), {r: "SIGUSR1" for r in range(WORKERS)},
                         p[1].describe())
        self.assertEqual([e for e in p[1].lines("stderr") if "stopping" in e], [])
        self.assertHostsClean()

    def test_second_signal_kills_at_once(self):
        p, ckpt = self.start("TERM")
        p[0].send_signal(signal.SIGTERM)
        p[1].wait_for(r"got SIGTERM: stopping the workers", stream="stderr", count=3)
        p[0].send_signal(signal.SIGTERM)
        self.assertEqual(self.finish(p), 128 + signal.SIGTERM, p[1].describe())
        # Killed within their 3 s of work: no checkpoint.
        self.assertEqual(self.checkpoints(ckpt), {}, p[1].describe())
        self.assertIn("drun: got SIGTERM again: dropping every connection", p[1].lines("stderr"))
        self.assertHostsClean()


def read_checkpoints(ckpt):
    out = {}
    for name in os.listdir(ckpt):
        if name.startswith("ckpt-") and not name.endswith(".tmp"):
            with open(os.path.join(ckpt, name)) as f:
                out[int(name[5:])] = f.read().split()[0]
    return out


class ByHandTest(t.SshTestCase):
    """drun typed on each host (here: run in each host's network namespace, all three on
    this machine, so all are named after its hostname, as three agents on one VM are)."""

    def start_nodes(self, on):
        self.ckpt = os.path.join(self.bed.tmp, f"ckpt-{self.id().rsplit('.', 1)[-1]}")
        os.makedirs(self.ckpt)
        endpoint = f"{self.bed.addr[self.HOSTS[0]]}:29517"
        nodes = {}
        for host in self.HOSTS:
            argv = ["ip", "netns", "exec", self.bed.host_ns[host], self.bed.drun, "--nnodes", "3",
                    "--nproc-per-node", "2", "--rdzv-endpoint", endpoint,
                    "--shutdown-timeout", "10", os.path.join(t.PROGRAMS, "checkpoint.py"),
                    "--dir", self.ckpt, "--on", on]
            proc = subprocess.Popen(argv, env=self.bed.env(), cwd=t.HERE,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
            nodes[host] = (proc, t.Lines(proc, f"drun@{host}"))
            self.procs.append(nodes[host])
        for host, p in nodes.items():
            p[1].wait_for(r"worker host=", count=2)
        return nodes

    def test_sigterm_to_every_node(self):
        nodes = self.start_nodes("TERM")
        for p in nodes.values():
            p[0].send_signal(signal.SIGTERM)
        for p in nodes.values():
            self.assertEqual(self.finish(p), 128 + signal.SIGTERM, p[1].describe())
        self.assertEqual(read_checkpoints(self.ckpt), {r: "SIGTERM" for r in range(WORKERS)})
        for p in nodes.values():
            self.assertEqual([e for e in p[1].lines("stderr") if "was lost" in e], [],
                             p[1].describe())
        self.assertHostsClean()

    def test_ctrl_c_on_one_node_is_named_as_such(self):
        nodes = self.start_nodes("INT,TERM")
        stopped = self.HOSTS[2]
        ranks = sorted(int(r["rank"]) for r in t.records(nodes[stopped][1].lines()))
        nodes[stopped][0].send_signal(signal.SIGINT)
        self.assertEqual(self.finish(nodes[stopped]), 128 + signal.SIGINT,
                         nodes[stopped][1].describe())
        # The others name the node that left, by host, node rank and address, and why.
        addr = self.bed.addr[stopped].replace(".", r"\.")
        for host in self.HOSTS[:2]:
            nodes[host][1].wait_for(r"^drun: stopping round 0: host \S+ stopped on SIGINT "
                                    rf"\(node rank [0-2], {addr}\)$", stream="stderr")
        for host in self.HOSTS[:2]:
            nodes[host][0].send_signal(signal.SIGTERM)
            self.finish(nodes[host])
        got = read_checkpoints(self.ckpt)
        self.assertEqual({r: got.get(r) for r in ranks}, {r: "SIGINT" for r in ranks})
        for p in nodes.values():
            self.assertEqual([e for e in p[1].lines("stderr") if "was lost" in e], [],
                             p[1].describe())
        self.assertHostsClean()

    def test_sigterm_standalone(self):
        ckpt = os.path.join(self.bed.tmp, "ckpt-standalone")
        os.makedirs(ckpt)
        proc = subprocess.Popen([self.bed.drun, "--standalone", "--nproc-per-node", str(WORKERS),
                                 "--shutdown-timeout", "10",
                                 os.path.join(t.PROGRAMS, "checkpoint.py"), "--dir", ckpt],
                                env=self.bed.env(), cwd=t.HERE, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p = (proc, t.Lines(proc, "drun-standalone"))
        self.procs.append(p)
        p[1].wait_for(r"worker host=", count=WORKERS)
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.finish(p), 128 + signal.SIGTERM, p[1].describe())
        self.assertEqual(read_checkpoints(ckpt), {r: "SIGTERM" for r in range(WORKERS)})


if __name__ == "__main__":
    t.main()
