"""~/.ssh/config as OpenSSH reads it (issue #13): a host on another port with its own
UserKnownHostsFile. Plain `ssh lab2` works there; so must drun, and when the key is missing
the command drun suggests must be one that makes it work."""
import os
import re
import subprocess

import ssh_testlib as t
from ssh_testlib import HostSpec

WORKER = os.path.join(t.PROGRAMS, "worker.py")


class CustomPortKnownHostsTest(t.SshTestCase):
    HOSTS = [HostSpec("teal02", port=2222, known=False)]

    def setUp(self):
        super().setUp()
        self.custom = os.path.join(self.bed.tmp, "lab_known_hosts")
        self.bed.write_ssh_config(f"Host lab2\n  HostName teal02\n  Port 2222\n  User root\n"
                                  f"  UserKnownHostsFile {self.custom}\n")
        self.addCleanup(self.bed.write_ssh_config, "")

    def host_key_line(self):
        with open(os.path.join(self.bed.tmp, "hosts", "teal02", "ssh_host_ed25519_key.pub")) as f:
            key_type, key_b64 = f.read().split()[:2]
        return f"[teal02]:2222 {key_type} {key_b64}\n"

    def test_known_in_its_own_file_connects(self):
        with open(self.custom, "w") as f:
            f.write(self.host_key_line())
        p = self.drun(["-H", "lab2", WORKER])
        self.assertEqual(self.finish(p), 0, p[1].describe())
        self.assertEqual(len(t.records(p[1].lines())), 1, p[1].describe())
        self.assertHostsClean()

    def test_unknown_names_the_file_and_port_that_are_read(self):
        open(self.custom, "w").close()
        p = self.drun(["-H", "lab2", WORKER])
        self.assertEqual(self.finish(p), 1, p[1].describe())
        err = p[1].lines("stderr")
        self.assertRegex(err[0], rf"^drun: lab2: the host key is not known .*`ssh-keyscan -p 2222 "
                                 rf"teal02 >> {self.custom}`")
        # The command drun suggests, run where drun ran, makes the next run work.
        suggested = re.search(r"`([^`]+)`", err[0]).group(1)
        subprocess.run(self.bed.client_cmd(["sh", "-c", suggested]), check=True, timeout=30,
                       capture_output=True)
        p = self.drun(["-H", "lab2", WORKER])
        self.assertEqual(self.finish(p), 0, p[1].describe())
        self.assertHostsClean()


if __name__ == "__main__":
    t.main()
