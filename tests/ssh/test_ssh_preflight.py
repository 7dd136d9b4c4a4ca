"""Pre-flight: every host checked at once before anything starts; one clear line per failing
host (unknown host key, refused login, unreachable host, drun missing, script missing), a
non-zero exit, and nothing started anywhere. --ssh-accept-new and a changed host key."""
import os
import re
import shutil

import ssh_testlib as t
from ssh_testlib import HostSpec


class PreflightTest(t.SshTestCase):
    HOSTS = [HostSpec("red01"), HostSpec("blue03", known=False),
             HostSpec("gray05", authorized=False), HostSpec("plum09", has_drun=False)]

    def setUp(self):
        super().setUp()
        saved = self.bed.known_hosts + ".saved"
        shutil.copy2(self.bed.known_hosts, saved)
        self.addCleanup(shutil.copy2, saved, self.bed.known_hosts)

    def worker(self):
        return os.path.join(t.PROGRAMS, "worker.py")

    def test_one_line_per_failing_host_and_nothing_started(self):
        hf = self.bed.write_hostfile("red01\nblue03\ngray05\nplum09\nghost\n")
        p = self.drun(["--hostfile", hf, self.worker()])
        code = self.finish(p)
        err = p[1].lines("stderr")
        self.assertEqual(code, 1, p[1].describe())
        by_host = {}
        for line in err:
            m = re.match(r"^drun: (\S+): (.*)$", line)
            if m:
                by_host.setdefault(m.group(1), []).append(m.group(2))
        self.assertEqual(sorted(by_host), ["blue03", "ghost", "gray05", "plum09"], err)
        self.assertTrue(all(len(v) == 1 for v in by_host.values()), err)
        self.assertRegex(by_host["blue03"][0],
                         r"host key is not known \(ssh-ed25519 SHA256:\S+\).*"
                         r"ssh-keyscan blue03 >> ~/.ssh/known_hosts.*--ssh-accept-new")
        self.assertRegex(by_host["gray05"][0], r"login refused for user root.*authorized_keys")
        self.assertRegex(by_host["ghost"][0], r"cannot connect: .*(No route|[Tt]imeout|unreachable)")
        self.assertRegex(by_host["plum09"][0],
                         rf"drun is not at {re.escape(self.bed.drun)} there.*--remote-drun PATH")
        self.assertEqual(err[-1], "drun: pre-flight failed on 4 of 5 hosts; nothing was started")
        self.assertEqual(p[1].lines("stdout"), [])
        # Nothing was started on the good host either.
        self.assertHostsClean(timeout=5)

    def test_remote_drun_elsewhere(self):
        # plum09 lacks drun at the launcher's path; --remote-drun names another one.
        p = self.drun(["-H", "plum09", "--remote-drun", "/nonexistent/drun", self.worker()])
        self.assertEqual(self.finish(p), 1)
        self.assertIn("drun: plum09: drun is not at /nonexistent/drun there", p[1].lines("stderr")[0])

    def test_missing_script(self):
        p = self.drun(["-H", "red01", "no_such_script.py"])
        self.assertEqual(self.finish(p), 1)
        self.assertRegex(p[1].lines("stderr")[0],
                         r"^drun: red01: the script .*/no_such_script.py is not there")

    def test_accept_new_adds_the_key(self):
        p = self.drun(["-H", "blue03", "--ssh-accept-new", self.worker()])
        self.assertEqual(self.finish(p), 0, p[1].describe())
        self.assertEqual(len(t.records(p[1].lines())), 1)
        with open(self.bed.known_hosts) as f:
            self.assertIn("blue03", f.read())
        # Known from now on: no flag needed.
        p = self.drun(["-H", "blue03", self.worker()])
        self.assertEqual(self.finish(p), 0, p[1].describe())
        self.assertHostsClean()

    def test_changed_host_key_is_refused_even_with_accept_new(self):
        with open(self.bed.known_hosts) as f:
            lines = f.readlines()
        red = next(line for line in lines if line.startswith("red01 "))
        other = next(line for line in lines if line.startswith("plum09 "))
        forged = "red01 " + other.split(" ", 1)[1]
        with open(self.bed.known_hosts, "w") as f:
            f.writelines([line for line in lines if line != red] + [forged])
        p = self.drun(["-H", "red01", "--ssh-accept-new", self.worker()])
        self.assertEqual(self.finish(p), 1)
        self.assertRegex(p[1].lines("stderr")[0],
                         r"^drun: red01: the host key changed .*ssh-keygen -R red01")

    def test_bad_input_is_one_line(self):
        hf = self.bed.write_hostfile("red01 slotz=2\n", name="badhosts")
        p = self.drun(["--hostfile", hf, self.worker()])
        self.assertEqual(self.finish(p), 2)
        self.assertEqual(len(p[1].lines("stderr")), 1, p[1].describe())
        self.assertRegex(p[1].lines("stderr")[0], r"^drun: .*badhosts:1: ")
        p = self.drun(["-H", "red01", "-x", "SURELY_NOT_SET_ANYWHERE", self.worker()])
        self.assertEqual(self.finish(p), 2)
        self.assertIn("SURELY_NOT_SET_ANYWHERE is not set", p[1].lines("stderr")[0])


if __name__ == "__main__":
    t.main()
