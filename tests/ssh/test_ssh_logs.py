"""--log-dir on a file system every host shares (the testbed's hosts share the machine's):
each host's agent claims a directory of its own, so no host overwrites another's logs and
every line a worker printed is in a log file (before: every host wrote
<dir>/none/attempt_0/<local_rank>/ and the last writer won)."""
import os
import re

import ssh_testlib as t


class SharedLogDirTest(t.SshTestCase):
    HOSTS = ["red01", "orange07", "purple11"]

    def test_every_hosts_lines_are_kept(self):
        logs = os.path.join(self.bed.tmp, "shared-logs")
        hf = self.bed.write_hostfile("red01\norange07\npurple11\n")
        count = 200
        program = os.path.join(t.PROGRAMS, "log_lines.py")
        for attempt in range(2):  # a rerun keeps the first run's logs too
            p = self.drun(["--hostfile", hf, "--nproc-per-node", "2", "--log-dir", logs,
                           program, str(count)])
            code = self.finish(p)
            self.assertEqual(code, 0, p[1].describe())
        found = {}  # (run dir, rank) -> stdout text
        for root, _, files in os.walk(logs):
            if "stdout.log" not in files:
                continue
            rel = os.path.relpath(root, logs).split(os.sep)
            # <run>/<host>/attempt_0/<local_rank>
            self.assertEqual(len(rel), 4, rel)
            self.assertIn(re.sub(r"\.\d+$", "", rel[1]), self.HOSTS, rel)
            with open(os.path.join(root, "stdout.log")) as f:
                text = f.read()
            with open(os.path.join(root, "stderr.log")) as f:
                err = f.read()
            rank = int(re.match(r"rank (\d+) ", text).group(1))
            self.assertEqual(err, f"rank {rank} stderr\n")
            found.setdefault(rank, []).append(text)
        self.assertEqual(sorted(found), list(range(6)), sorted(found))
        for rank, texts in found.items():
            self.assertEqual(len(texts), 2, (rank, len(texts)))  # one per run
            want = "".join(f"rank {rank} line {i} sum {i * (i + 1) // 2}\n" for i in range(count))
            for text in texts:
                self.assertEqual(text, want)
        self.assertHostsClean()


class NamesTest(t.SshTestCase):
    HOSTS = ["red01", "orange07", "purple11"]

    def test_node_setup_lines_name_their_host(self):
        p = self.drun(["-H", ",".join(self.HOSTS), "--node-setup", "echo prepared; hostname",
                       "--no-python", "/bin/true"])
        self.assertEqual(self.finish(p), 0, p[1].describe())
        out = p[1].lines()
        for host in self.HOSTS:
            # The prefix names the host it ran on, which the command's own output confirms.
            self.assertIn(f"[{host}:setup]: prepared", out, p[1].describe())
            self.assertIn(f"[{host}:setup]: {host}", out, p[1].describe())
        self.assertEqual([l for l in out if l.startswith("[setup]")], [])
        self.assertHostsClean()


if __name__ == "__main__":
    t.main()
