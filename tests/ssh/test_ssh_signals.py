"""Signals over ssh mean what they mean locally: the signal sent to the launcher is the one
every remote worker gets, followed by --shutdown-timeout's grace (docs/semantics.md). Each of
6 workers (3 hosts x 2) handles only that signal by writing a checkpoint 3 s later
(programs/checkpoint.py), so a SIGHUP in its place, or no grace, leaves checkpoints missing.
A deliberate stop never reports a host as lost, and leaves nothing on the hosts."""
import os
import signal

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


if __name__ == "__main__":
    t.main()
