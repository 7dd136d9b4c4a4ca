"""Only the job's members reach its c10d store (issue #14, docs/architecture.md "Who may
connect"): two agents in their own network namespaces run a job; a third namespace on the
same bridge, not part of the job, opens a real torch TCPStore client to the job's store and
is refused (closed at accept), while a member node's client reads and writes keys; the
refusal is said once on the host's console and counted in its --report; the job itself is
unaffected. The endpoint is the host node's address, so the rendezvous and the store listen
on that address alone (`ss -ltn` in its namespace).

Network safety as in test_link_cut.py: an `unreachable` route for the subnet first, every
address inside namespaces this test made. Needs root, `ip netns` and Debian's PyTorch."""
import json
import os
import subprocess

from mn_testlib import PYTHON, Gate, NetnsTestCase, main, worker_command

SUBNET = "10.213.34"  # unique to this test
PORT = 29400

PROBE = """
import datetime, sys
from torch.distributed import TCPStore
host, port = sys.argv[1], int(sys.argv[2])
try:
    s = TCPStore(host, port, is_master=False, timeout=datetime.timedelta(seconds=10),
                 wait_for_workers=False)
    s.set("probe", "written")
    print("served", s.get("probe").decode())
except Exception as e:
    print("refused", type(e).__name__)
"""


class MembersTest(NetnsTestCase):
    SUBNET = SUBNET
    # nodes 0 and 1 run the job; 2 is an outsider

    def probe(self, node, host, port):
        out = subprocess.run(self.lab.wrapper(node) + [PYTHON, "-c", PROBE, host, str(port)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=60)
        return out.stdout.strip().splitlines()[-1]

    def test_a_non_member_is_refused_and_a_member_served(self):
        gate = Gate(self.tmp)
        self.addCleanup(gate.open)
        cmd = worker_command("--then", "gate", "--gate", gate.path)
        report = os.path.join(self.tmp, "host_report.json")
        agents = [self.agent(self.lab.addr(i), cmd, name=f"ns{i}", wrapper=self.lab.wrapper(i),
                             extra=["--report", report] if i == 0 else [])
                  for i in range(2)]
        records = []
        for a in agents:
            records += self.wait_workers(a, 2)
        host, port = records[0]["master"].rsplit(":", 1)
        self.assertEqual(host, self.lab.addr(0), records)
        # The endpoint is an address of the host node: its rendezvous and the round's store
        # listen there alone (ss, in the host node's namespace).
        ss = subprocess.run(self.lab.wrapper(0) + ["ss", "-Hltn"], stdout=subprocess.PIPE,
                            text=True, check=True).stdout
        local = sorted(line.split()[3] for line in ss.splitlines() if line.split())
        self.assertEqual(local, sorted({f"{host}:{PORT}", f"{host}:{port}"}), ss)
        self.assertEqual(self.probe(2, host, port), "refused RuntimeError")
        self.assertEqual(self.probe(1, host, port), "served written")
        agents[0].wait_for_line(rf"c10d store refused a connection from {self.lab.addr(2)}, "
                                r"which is not a node of the current round", stream="stderr")
        gate.open()
        for a in agents:
            self.assertExit(a, 0)
        refusals = [l for l in agents[0].stderr_lines if "refused a connection" in l]
        self.assertEqual(len(refusals), 1, agents[0].describe())
        with open(report) as f:
            self.assertGreaterEqual(json.load(f)["refused_connections"], 1)


if __name__ == "__main__":
    main()
