"""Nothing secret where other users can read it (issue #14): a -x NAME=VALUE given on the
command line is gone from every drun process's /proc/PID/cmdline (what `ps` shows to every
user) once the command line is parsed, in the single-node drun and in drun-net; the workers
still get the value; drun's processes' environment is the owner's alone; logs are written in
directories of mode 0700 and files of mode 0600 (docs/architecture.md "Secrets")."""
import hashlib
import json
import os
import secrets
import signal
import stat
import subprocess
import sys
import tempfile

from drun_testlib import DrunTestCase, descendants, free_port, main, program

NOBODY = 65534


def as_nobody(pids):
    """What another user (uid/gid 65534) reads of each pid: cmdline, and whether its environ
    could be read."""
    code = ("import json, sys\n"
            "out = {}\n"
            "for pid in sys.argv[1:]:\n"
            "    try:\n"
            "        cmd = open(f'/proc/{pid}/cmdline', 'rb').read().decode(errors='replace')\n"
            "    except OSError:\n"
            "        continue\n"
            "    try:\n"
            "        open(f'/proc/{pid}/environ', 'rb').read()\n"
            "        env = 'readable'\n"
            "    except PermissionError:\n"
            "        env = 'denied'\n"
            "    except OSError:\n"
            "        continue\n"
            "    out[pid] = [cmd, env]\n"
            "print(json.dumps(out))\n")

    def drop():
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    res = subprocess.run([sys.executable, "-c", code] + [str(p) for p in pids],
                         preexec_fn=drop, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(res.stdout)


class SecretsTest(DrunTestCase):

    def setUp(self):
        super().setUp()
        if os.getuid() != 0:
            self.skipTest("needs root to read /proc as another user")
        self.secret = "s3cr3t-" + secrets.token_hex(12)
        self.digest = hashlib.sha256(self.secret.encode()).hexdigest()[:16]
        self.tmp = tempfile.mkdtemp(prefix="drun-secrets-")

    def run_and_look(self, *mode_args, nproc=2):
        log_dir = os.path.join(self.tmp, "logs", "deeper")
        run = self.start(*mode_args, "--nproc-per-node", nproc, "-x", f"DRUN_TEST_SECRET={self.secret}",
                         "--log-dir", log_dir, "--tee", "3", program("secret_probe.py"))
        lines = run.wait_for_line(r"ready rank=\d+ secret=", count=nproc)
        seen = as_nobody([run.pid] + descendants(run.pid))
        run.send_signal(signal.SIGTERM)
        run.wait()
        return run, lines, seen, log_dir

    def check(self, run, lines, seen, log_dir):
        self.assertTrue(all(line.endswith(f"secret={self.digest}") for line in lines), lines)
        self.assertIn(str(run.pid), seen, seen)
        for pid, (cmdline, env) in seen.items():
            self.assertNotIn(self.secret, cmdline, f"pid {pid}: {cmdline!r}")
            self.assertEqual(env, "denied", f"pid {pid}")
        drun_cmd = seen[str(run.pid)][0]
        self.assertIn("DRUN_TEST_SECRET=" + "*" * len(self.secret), drun_cmd)
        self.check_modes(log_dir)

    def check_modes(self, log_dir):
        dirs, files = [], []
        for root, ds, fs in os.walk(os.path.join(self.tmp, "logs")):
            dirs += [os.path.join(root, d) for d in ds]
            files += [os.path.join(root, f) for f in fs]
        dirs.append(os.path.join(self.tmp, "logs"))
        self.assertTrue(files, dirs)
        for d in dirs:
            self.assertEqual(stat.S_IMODE(os.stat(d).st_mode), 0o700, d)
        for f in files:
            self.assertEqual(stat.S_IMODE(os.stat(f).st_mode), 0o600, f)

    def test_single_node(self):
        self.check(*self.run_and_look())

    def test_multi_node_drun_net(self):
        # A c10d rendezvous makes drun exec drun-net, which parses the line again.
        port = free_port()
        self.check(*self.run_and_look("--nnodes", "1:2", "--rdzv-backend", "c10d",
                                      "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-conf",
                                      "last_call_timeout=0.1"))


if __name__ == "__main__":
    main()
