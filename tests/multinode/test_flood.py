"""A non-member floods the job's port (issue #14): two agents in their own network
namespaces run 4 gloo ranks that all_reduce and use the store every step, on one port for
the rendezvous and the store; a third namespace on the same bridge, not in the job, opens
10 000 connections per second to that port (closed at once, and silent ones held open) for
the whole run. The job finishes with the right results, the silent connections beyond 64
are closed by the server at once, and the run's time is reported beside a run without the
flood (a coarse bound only; bench/flood_bench.py measures).

Network safety as in test_link_cut.py. Needs root, `ip netns`, a C compiler and Debian's
PyTorch."""
import os
import re
import subprocess
import tempfile
import unittest

from mn_testlib import report, NetnsTestCase, main

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH_PROGRAMS = os.path.join(HERE, "..", "..", "bench", "programs")
SUBNET = "10.213.35"  # unique to this test
PORT = 29400
STEPS = 150



class FloodTest(NetnsTestCase):

    SUBNET = SUBNET  # nodes 0 and 1 run the job; 2 floods

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.build = tempfile.mkdtemp(prefix="drun-flood-")
        cls.flood = os.path.join(cls.build, "conn_flood")
        cc = subprocess.run([os.environ.get("CC", "cc"), "-O2", "-o", cls.flood,
                             os.path.join(BENCH_PROGRAMS, "conn_flood.c")])
        if cc.returncode != 0:
            raise unittest.SkipTest("no C compiler for bench/programs/conn_flood.c")

    def run_job(self, floods=()):
        cmd = [os.path.join(BENCH_PROGRAMS, "reduce_loop.py"), str(STEPS)]
        agents = [self.agent(self.lab.addr(i), cmd, name=f"ns{i}", wrapper=self.lab.wrapper(i),
                             extra=["--master-port", str(PORT)])
                  for i in range(2)]
        flooders = [subprocess.Popen(self.lab.wrapper(2) + [self.flood, self.lab.addr(0), str(PORT)]
                                     + list(f), stdout=subprocess.PIPE, text=True)
                    for f in floods]
        for a in agents:
            self.assertExit(a, 0)
        stats = [f.communicate(timeout=120)[0].strip() for f in flooders]
        line = [l for l in agents[0].stdout_lines + agents[1].stdout_lines if "reduce world=" in l]
        self.assertEqual(len(line), 1, agents[0].describe())
        seconds = float(re.search(r"seconds=([\d.]+)", line[0]).group(1))
        self.assertIn("world=4", line[0])
        return seconds, stats

    def test_the_job_is_unaffected_by_a_flood_from_a_non_member(self):
        quiet, _ = self.run_job()
        flooded, stats = self.run_job(floods=[("10000", "8", "close"), ("1000", "8", "silent")])
        report(f"{STEPS} steps of all_reduce + store get/set, 4 ranks: {quiet:.2f} s without, "
               f"{flooded:.2f} s with the flood; flooders: {stats}")
        closes = dict(kv.split("=") for kv in stats[0].split())
        silent = dict(kv.split("=") for kv in stats[1].split())
        self.assertGreater(int(closes["connected"]), 1000, stats)  # it did flood
        # Beyond 64 waiting, the server closed the silent ones at once.
        self.assertGreater(int(silent["closed_by_peer"]), 0, stats)
        self.assertLess(flooded, max(3 * quiet, quiet + 10), "coarse bound")


if __name__ == "__main__":
    main()
