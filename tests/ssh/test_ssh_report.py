"""--summary and --report with the ssh launcher (issue #13, docs/report.md): the launching
machine prints one table with every host's ranks and writes one JSON file; on failure the
table comes without --summary, before the root cause. A report path that cannot be written
is refused before anything starts on any host."""
import json
import os
import re

import ssh_testlib as t
from drun_testlib import documented_fields

WORKER = os.path.join(t.PROGRAMS, "worker.py")
EXIT_CODE = os.path.join(t.HERE, "..", "e2e", "programs", "exit_code.py")
ROW = re.compile(r"^drun: (\S+)\s+(\d+)\s+(\d+) (\S+)\s+(\d+)\s+[\d.]+\s+[\d.]+ MiB$")


class ReportTest(t.SshTestCase):
    def rows(self, err):
        return [ROW.match(l).groups() for l in err if ROW.match(l)]

    def test_summary_and_report_gather_every_host(self):
        report = os.path.join(self.bed.tmp, "report.json")
        p = self.drun(["-H", ",".join(self.HOSTS), "--nproc-per-node", "2", "--summary",
                       "--report", report, "--run-id", "gathered", WORKER])
        self.assertEqual(self.finish(p), 0, p[1].describe())
        err = p[1].lines("stderr")
        rows = self.rows(err)
        self.assertEqual(sorted(int(r[1]) for r in rows), list(range(6)), p[1].describe())
        self.assertEqual({r[0] for r in rows}, set(self.HOSTS))
        self.assertEqual({r[3] for r in rows}, {"0"})
        self.assertRegex(err[-1], r"^drun: 1 round, exit code 0, [\d.]+ s in all$")
        with open(report) as f:
            r = json.load(f)
        self.assertEqual((r["run_id"], r["exit_code"], r["failure"]), ("gathered", 0, None))
        self.assertEqual(sorted(w["rank"] for w in r["workers"]), list(range(6)))
        self.assertEqual({w["host"] for w in r["workers"]}, set(self.HOSTS))
        self.assertEqual(sorted(n["host"] for n in r["nodes"]), sorted(self.HOSTS))
        _, nested = documented_fields()
        for n in r["nodes"]:
            self.assertEqual(set(n), nested["nodes"])
            self.assertEqual((n["exit_code"], n["rounds_total"]), (0, 1))
        self.assertHostsClean()

    def test_failure_prints_every_hosts_table_then_the_root_cause(self):
        report = os.path.join(self.bed.tmp, "failed.json")
        p = self.drun(["-H", ",".join(self.HOSTS), "--nproc-per-node", "2", "--report", report,
                       EXIT_CODE, "4", "3"])
        self.assertEqual(self.finish(p), 3, p[1].describe())
        err = p[1].lines("stderr")
        rows = self.rows(err)
        self.assertEqual(sorted(int(r[1]) for r in rows), list(range(6)), p[1].describe())
        self.assertEqual([r[3] for r in rows if r[1] == "4"], ["3"])
        table_end = max(i for i, l in enumerate(err) if ROW.match(l))
        cause = err.index("drun: ===== root cause: first failure =====")
        self.assertLess(table_end, cause, p[1].describe())
        with open(report) as f:
            r = json.load(f)
        self.assertEqual((r["exit_code"], r["failure"]["rank"], r["failure"]["exit_code"]), (3, 4, 3))
        self.assertEqual(len(r["workers"]), 6)
        self.assertHostsClean()

    def test_unwritable_report_path_is_refused_before_anything_starts(self):
        p = self.drun(["-H", ",".join(self.HOSTS), "--report", "/nonexistent/dir/r.json", WORKER])
        self.assertEqual(self.finish(p), 2, p[1].describe())
        err = p[1].lines("stderr")
        self.assertEqual(len(err), 1, p[1].describe())
        self.assertRegex(err[0], r"^drun: cannot write the report to /nonexistent/dir/r\.json: No such "
                                 r"file or directory; give --report a path in a directory you can write$")
        self.assertEqual(p[1].lines(), [])
        self.assertHostsClean(timeout=5)


if __name__ == "__main__":
    t.main()
