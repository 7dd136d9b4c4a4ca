"""The ssh launcher starting real jobs from one command: PyTorch gloo training across 3 hosts
x 2 workers and over mpirun's -np 5 (3 + 1 + 1), an mpirun-style host file with `max_slots = 2`, -x/--env-file forwarding with a
~/.ssh/config alias, and --rsh through OpenSSH's client."""
import os
import re
import subprocess

import ssh_testlib as t


class LaunchTest(t.SshTestCase):
    HOSTS = ["red01", "orange07", "purple11"]

    def test_gloo_training_3_hosts_x_2_workers(self):
        hf = self.bed.write_hostfile("red01\norange07\npurple11\n")
        p = self.drun(["--hostfile", hf, "--nproc-per-node", "2",
                       os.path.join(t.HERE, "..", "multinode", "programs", "train_allreduce.py")])
        code = self.finish(p)
        out = p[1].lines()
        self.assertEqual(code, 0, p[1].describe())
        reduced = t.records(out, "allreduce")
        self.assertEqual(sorted(r["rank"] for r in reduced), list(range(6)), p[1].describe())
        for r in reduced:
            self.assertEqual((r["world"], r["sum"], r["gathered"]), (6, 21, "0,1,2,3,4,5"))
            self.assertEqual(r["prefix_rank"], r["rank"])
        hosts = {}
        for r in reduced:
            hosts.setdefault(r["prefix_host"], []).append(r["rank"])
        self.assertEqual(sorted(hosts), sorted(self.HOSTS))
        self.assertTrue(all(len(v) == 2 for v in hosts.values()), hosts)
        weights = {r["weight"] for r in t.records(out, "trained")}
        self.assertEqual(len(weights), 1, out)  # DDP: the same weights everywhere
        # The progress lines in the order of events: once the launcher said every host's
        # agent joined, no host says it is still waiting for nodes (issue 22 item 13: a
        # host's "waiting: 1 of 3" came after "agents joined on 3 of 3 hosts").
        err = p[1].lines("stderr")
        joined = [i for i, l in enumerate(err) if l.startswith("drun: agents joined on 3 of 3 hosts")]
        self.assertEqual(len(joined), 1, p[1].describe())
        self.assertEqual([l for l in err[joined[0]:] if re.search(r"waiting: \d+ of \d+", l)], [],
                         p[1].describe())
        self.assertHostsClean()

    def test_mpirun_np_is_the_jobs_total_spread_over_the_hosts(self):
        # mpirun's line: -np N is the whole job's count, each host's slots filled first, then
        # round-robin (red01: its 2 slots + 1; the others 1 each), so hosts differ in nproc.
        # Before, -np with a host list was refused even with --nnodes.
        hf = self.bed.write_hostfile("red01 slots=2\norange07\npurple11\n")
        p = self.drun(["--hostfile", hf, "-np", "5", "--nnodes", "3",
                       os.path.join(t.HERE, "..", "multinode", "programs", "train_allreduce.py")])
        code = self.finish(p)
        out = p[1].lines()
        self.assertEqual(code, 0, p[1].describe())
        reduced = t.records(out, "allreduce")
        self.assertEqual(sorted(r["rank"] for r in reduced), list(range(5)), p[1].describe())
        for r in reduced:
            self.assertEqual((r["world"], r["sum"]), (5, 15))
        hosts = {}
        for r in reduced:
            hosts.setdefault(r["prefix_host"], []).append(r["rank"])
        self.assertEqual({h: len(v) for h, v in hosts.items()},
                         {"red01": 3, "orange07": 1, "purple11": 1}, p[1].describe())
        self.assertHostsClean()

    def test_max_slots_hostfile_env_forwarding_and_ssh_config_alias(self):
        # The seeds' syntax; "orange" is a ~/.ssh/config alias of orange07.
        self.bed.write_ssh_config("Host orange\n  HostName orange07\n  User root\n")
        self.addCleanup(self.bed.write_ssh_config, "")
        hf = self.bed.write_hostfile("# lab machines\nred01 max_slots = 2\n"
                                     "orange max_slots = 2   # via ~/.ssh/config\n")
        envfile = os.path.join(self.bed.tmp, "job.env")
        with open(envfile, "w") as f:
            f.write("# forwarded\nexport FWD_C='from file'\nFWD_B=overridden-by-x\n")
        env = self.bed.env(FWD_A="from-env", VIRTUAL_ENV="/opt/venv-test")
        p = self.drun(["--hostfile", hf, "-x", "FWD_A", "-x", "FWD_B=from-x",
                       "--env-file", envfile, os.path.join(t.PROGRAMS, "worker.py"),
                       "--env", "FWD_A,FWD_B,FWD_C,VIRTUAL_ENV,NOT_FORWARDED"],
                      env=env)
        code = self.finish(p)
        self.assertEqual(code, 0, p[1].describe())
        recs = t.records(p[1].lines())
        self.assertEqual(len(recs), 4, p[1].describe())
        per_host = {}
        for r in recs:
            per_host.setdefault(r["prefix_host"], set()).add(r["host"])
            self.assertEqual(r["world"], 4)
            self.assertEqual(r["local_world"], 2)
            self.assertEqual(r["FWD_A"], "from-env")
            self.assertEqual(r["FWD_B"], "from-x")
            self.assertEqual(r["FWD_C"], "from")  # the record parser splits on spaces
            self.assertEqual(r["VIRTUAL_ENV"], "/opt/venv-test")
            self.assertEqual(r["NOT_FORWARDED"], "<unset>")
        self.assertEqual(per_host, {"red01": {"red01"}, "orange": {"orange07"}})
        self.assertTrue(any("FWD_C=from file" in line for line in p[1].lines()))
        self.assertHostsClean()

    def test_login_through_the_ssh_agent(self):
        # The only key that may log in lives in ssh-agent, not in ~/.ssh.
        key = os.path.join(self.bed.tmp, "agent_key")
        t.run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key)
        with open(key + ".pub") as f, open(self.bed.authorized_keys, "a") as out:
            out.write(f.read())
        default = self.bed.key
        for suffix in ("", ".pub"):
            os.rename(default + suffix, default + suffix + ".off")
            self.addCleanup(os.rename, default + suffix + ".off", default + suffix)
        sock = os.path.join(self.bed.tmp, "agent.sock")
        agent = subprocess.Popen(["ssh-agent", "-D", "-a", sock], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.addCleanup(agent.wait)
        self.addCleanup(agent.kill)
        t.Lines(agent, "ssh-agent").wait_for(r"SSH_AUTH_SOCK=", timeout=20)
        t.run("ssh-add", "-q", key, env={"SSH_AUTH_SOCK": sock, "PATH": os.environ["PATH"]})
        p = self.drun(["-H", "red01,orange07", os.path.join(t.PROGRAMS, "worker.py")],
                      env=self.bed.env(SSH_AUTH_SOCK=sock))
        self.assertEqual(self.finish(p), 0, p[1].describe())
        self.assertEqual(len(t.records(p[1].lines())), 2)
        # Without the agent, the same command is refused at pre-flight.
        p = self.drun(["-H", "red01", os.path.join(t.PROGRAMS, "worker.py")])
        self.assertEqual(self.finish(p), 1)
        self.assertIn("login refused", p[1].lines("stderr")[0])
        self.assertHostsClean()

    def test_rsh_through_openssh(self):
        p = self.drun(["-H", "red01,purple11:2", "--rsh", "ssh -o BatchMode=yes",
                       os.path.join(t.PROGRAMS, "worker.py")])
        code = self.finish(p)
        self.assertEqual(code, 0, p[1].describe())
        recs = t.records(p[1].lines())
        self.assertEqual(sorted((r["host"], r["local_world"]) for r in recs),
                         [("purple11", 2), ("purple11", 2), ("red01", 1)], p[1].describe())
        self.assertHostsClean()


if __name__ == "__main__":
    t.main()
