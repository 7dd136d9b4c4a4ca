"""tests/apt_get.sh, which tests/install_deps.sh (and so examples/run_demo.sh) installs with:
it waits for another apt holding dpkg's lock or the package lists' lock (a fresh machine's
unattended-upgrades) instead of failing at once. The locks are held here as apt holds them
(fcntl), and released once apt_get.sh says it waits."""
import fcntl
import os
import subprocess
import unittest

APT_GET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apt_get.sh")


@unittest.skipUnless(os.geteuid() == 0, "needs root (apt's locks)")
class AptLockTest(unittest.TestCase):

    def run_while_locked(self, lock, args, waiting_text):
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o640)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            p = subprocess.Popen(["bash", APT_GET, *args], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
            seen = []
            for line in p.stdout:
                seen.append(line)
                if waiting_text in line:
                    break
            self.assertIn(waiting_text, "".join(seen))
        finally:
            os.close(fd)  # releases the lock: apt goes on
        rest = p.stdout.read()
        self.assertEqual(p.wait(timeout=300), 0, "".join(seen) + rest)

    def test_install_waits_for_dpkg_lock(self):
        self.run_while_locked("/var/lib/dpkg/lock-frontend",
                              ["install", "-y", "--no-install-recommends", "procps"],
                              "Waiting for cache lock")

    def test_update_tries_again_while_the_lists_are_locked(self):
        self.run_while_locked("/var/lib/apt/lists/lock", ["update"], "trying again in 5 s")


if __name__ == "__main__":
    unittest.main(verbosity=2)
