"""--rdzv-tls CERT,KEY,CA: the rendezvous channel in TLS with client certificates
(rendezvous/base/tls_relay.h, docs/architecture.md "TLS").

Certificates are made at test time with Debian's openssl command
(tests/make_tls_certs.sh): the job's CA, a server and a client certificate it signs, and a
second CA with a client certificate of its own. Nodes are drun agents on loopback, one
per --local-addr (127.0.0.1 hosts the rendezvous).

- Two nodes train with real PyTorch (gloo all_reduce, DDP) over TLS with a job token; when
  the suite runs as root, tcpdump captures the rendezvous port: every agent's stream
  starts with a TLS handshake record, and neither the HTTP/2 preface, the run id nor the
  token is in clear.
- A static job whose workers' store shares the TLS rendezvous port (plain TCPStore
  connections beside TLS agents) trains too; agents a launcher starts (-H with --rsh, no
  sshd) get the launcher's TLS files in their launch message.
- A client certificate of another CA, a plain agent at a TLS rendezvous, a TLS agent at a
  plain rendezvous: each refused agent says why in one line and exits 1, leaves nothing
  running, and the job it tried to join goes on and ends 0 with a proper node.
"""
import os
import secrets
import shutil
import subprocess
import tempfile
import unittest

from mn_testlib import (DEATH_TIMEOUT, Gate, MultiNodeTestCase, base_env, descendants, main,
                        prefixed, program, report, wait_pids_dead)
from test_token_wire import Capture, pcap_streams, tcpdump_unavailable_reason

HERE = os.path.dirname(os.path.abspath(__file__))
MAKE_CERTS = os.path.join(os.path.dirname(HERE), "make_tls_certs.sh")
RUN_ID = "tlsjob"
TRAIN_TIMEOUT = 240  # two `import torch` on two shared cores, then a few collectives


class TlsTest(MultiNodeTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if shutil.which("openssl") is None:
            raise unittest.SkipTest("the openssl command is not installed (tests/install_deps.sh)")
        cls.certs = tempfile.mkdtemp(prefix="drun-tls-certs-")
        subprocess.run(["sh", MAKE_CERTS, cls.certs], check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.certs, ignore_errors=True)

    def tls(self, who="client", ca="ca"):
        c = self.certs
        return ["--rdzv-tls", f"{c}/{who}.pem,{c}/{who}.key,{c}/{ca}.pem"]

    def gated_node(self, addr, gate, extra, name, env=None):
        """A node whose one worker says hello and waits for the gate."""
        # The FIFO is opened before the hello: once the test has seen it, opening the gate
        # (closing the last writer) ends the read.
        cmd = ["--no-python", "/bin/sh", "-c", 'exec 3<"$1"; echo "worker rank=$RANK"; read _ <&3; echo done',
               "sh", gate.path]
        return self.agent(addr, cmd, nproc=1, rdzv_id=RUN_ID, name=name, env=env, extra=extra)

    def assertRefused(self, agent, line):
        """The agent exits 1 with `line` as its last drun line, ran nothing, and nothing
        it started outlives it (its guardian included)."""
        self.assertExit(agent, 1)
        last = [x for x in agent.stderr_lines if x.startswith("drun: ")][-1]
        self.assertEqual(last, line, agent.describe())
        self.assertEqual(prefixed(agent.stdout_lines), [], "it ran nothing")
        mine = set(descendants())
        running = set()
        for other in self.agents:
            if other.returncode is None:
                running |= {other.pid, *descendants(other.pid)}
        left = wait_pids_dead(mine - running, timeout=DEATH_TIMEOUT)
        self.assertEqual(left, [], "a refused agent left processes behind")

    def finish_with_proper_node(self, host, gate):
        """The job the refused agent tried to join is unaffected: a proper node joins and
        both end 0."""
        node = self.gated_node("127.0.0.2", gate, self.tls(), "proper")
        for agent in (host, node):
            agent.wait_for_line(r"worker rank=")
        gate.open()
        for agent in (host, node):
            self.assertExit(agent, 0)

    def test_two_nodes_train_over_tls_and_the_wire_shows_only_tls(self):
        token = "tok-" + secrets.token_hex(16)
        env = base_env(DRUN_RDZV_TOKEN=token)
        reason = tcpdump_unavailable_reason()
        capture = None
        if reason is None:
            pcap = os.path.join(self.tmp, "rdzv.pcap")
            capture = Capture(pcap, self.port)
            self.addCleanup(capture.stop)
            capture.wait_listening()
        command = [program("train_allreduce.py")]
        host = self.agent("127.0.0.1", command, nproc=1, rdzv_id=RUN_ID, name="host", env=env,
                          extra=self.tls("server"))
        self.wait_joined(host, 1)
        node = self.agent("127.0.0.2", command, nproc=1, rdzv_id=RUN_ID, name="node1", env=env,
                          extra=self.tls("client"))
        for agent in (host, node):
            self.assertExit(agent, 0, timeout=TRAIN_TIMEOUT)
        said = sorted(t for a in (host, node) for _, _, t in prefixed(a.stdout_lines)
                      if t.startswith("allreduce "))
        self.assertEqual(said, ["allreduce rank=0 world=2 sum=3 gathered=0,1",
                                "allreduce rank=1 world=2 sum=3 gathered=0,1"], self.describe_all())
        if capture is None:
            report(f"TLS capture skipped: {reason}")
            return
        summary = capture.stop()
        self.assertRegex(summary, r"\b0 packets dropped by kernel", summary)
        with open(pcap, "rb") as f:
            wire = f.read()
        streams = pcap_streams(pcap, self.port)
        self.assertEqual(len(streams), 2, f"expected both agents' streams, got {list(streams)}")
        for key, data in streams.items():
            # A TLS handshake record (ClientHello) opens every agent's stream.
            self.assertEqual(data[:2], b"\x16\x03", f"{key}: {data[:32]!r}")
            self.assertEqual(data[5:6], b"\x01", f"{key}: not a ClientHello: {data[:32]!r}")
        self.assertNotIn(b"PRI * HTTP/2.0", wire, "the HTTP/2 preface crossed the wire in clear")
        self.assertNotIn(RUN_ID.encode(), wire, "the run id crossed the wire in clear")
        self.assertNotIn(token.encode(), wire, "the job token crossed the wire in clear")

    def test_a_static_job_serves_its_plain_store_on_the_tls_rendezvous_port(self):
        """One port (--master-port = the rendezvous port): the agents' connections are TLS,
        the workers' TCPStore connections on the same port stay plain, and torch trains."""
        common = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "static",
                  "--master-addr", "127.0.0.1", "--master-port", str(self.port), "--rdzv-id", RUN_ID]
        nodes = []
        for rank, (addr, who) in enumerate((("127.0.0.1", "server"), ("127.0.0.2", "client"))):
            nodes.append(self.start(common + ["--node-rank", str(rank), "--local-addr", addr]
                                    + self.tls(who) + [program("train_allreduce.py")],
                                    name=f"static{rank}"))
        for agent in nodes:
            self.assertExit(agent, 0, timeout=TRAIN_TIMEOUT)
        said = sorted(t for a in nodes for _, _, t in prefixed(a.stdout_lines)
                      if t.startswith("allreduce "))
        self.assertEqual(said, ["allreduce rank=0 world=2 sum=3 gathered=0,1",
                                "allreduce rank=1 world=2 sum=3 gathered=0,1"], self.describe_all())

    def test_agents_a_launcher_starts_use_the_launchers_tls_files(self):
        """The --hostfile/-H path without sshd: --rsh with a command that runs `drun agent`
        here. The agents get the paths in their launch message; the launcher's rendezvous
        refuses agents without TLS, so the job ending 0 says they used it."""
        rsh = os.path.join(self.tmp, "local-rsh.sh")
        with open(rsh, "w") as f:
            f.write('#!/bin/sh\nshift\nexec "$@"\n')  # drops HOST, runs `drun agent` here
        os.chmod(rsh, 0o755)
        launcher = self.start(["-H", "127.0.0.2,127.0.0.3", "--rsh", rsh, *self.tls("client"),
                               "--nproc-per-node", "1", "--no-python", "/bin/sh", "-c",
                               'echo "worker rank=$RANK"'], name="launcher")
        self.assertExit(launcher, 0)
        said = sorted(t for _, _, t in prefixed(launcher.stdout_lines))
        self.assertEqual(said, ["worker rank=0", "worker rank=1"], launcher.describe())
        for line in launcher.stderr_lines:
            self.assertNotIn("refused", line, launcher.describe())

    def test_a_client_certificate_of_another_ca_is_refused(self):
        gate = Gate(self.tmp)
        self.addCleanup(gate.open)
        host = self.gated_node("127.0.0.1", gate, self.tls("server"), "host")
        self.wait_joined(host, 1)
        # It trusts the job's CA, but its own certificate is another CA's.
        other = self.gated_node("127.0.0.3", gate, self.tls("other", ca="ca"), "other-ca")
        self.assertRefused(other, f"drun: TLS handshake with {self.endpoint} failed: the server "
                           "refused this node's certificate (tlsv1 alert unknown ca); check --rdzv-tls")
        host.wait_for_line(r"^drun: the rendezvous refused a TLS connection from 127\.0\.0\.1: the "
                           r"agent's certificate is not signed by the CA \(unable to get local "
                           r"issuer certificate\) \(further refusals are only counted\)$", "stderr")
        self.finish_with_proper_node(host, gate)

    def test_a_server_certificate_of_another_ca_is_refused_by_the_agent(self):
        gate = Gate(self.tmp)
        self.addCleanup(gate.open)
        host = self.gated_node("127.0.0.1", gate, self.tls("server"), "host")
        self.wait_joined(host, 1)
        # Its own certificate is fine, but it trusts another CA only.
        agent = self.gated_node("127.0.0.3", gate, self.tls("client", ca="other-ca"), "trusts-other")
        self.assertRefused(agent, f"drun: TLS handshake with {self.endpoint} failed: the server's "
                           "certificate is not signed by the CA (self-signed certificate in "
                           "certificate chain); check --rdzv-tls")
        self.finish_with_proper_node(host, gate)

    def test_a_plain_agent_at_a_tls_rendezvous_is_refused(self):
        gate = Gate(self.tmp)
        self.addCleanup(gate.open)
        host = self.gated_node("127.0.0.1", gate, self.tls("server"), "host")
        self.wait_joined(host, 1)
        plain = self.gated_node("127.0.0.3", gate, [], "plain")
        self.assertRefused(plain, f"drun: job failed: what answers at {self.endpoint} is not a drun "
                           "rendezvous: it closed the connection without a word (a drun rendezvous "
                           "started with --rdzv-tls does that to agents without it: check --rdzv-tls); "
                           "if another program holds that port, pick another --rdzv-endpoint port")
        host.wait_for_line(r"^drun: the rendezvous refused a connection without TLS from "
                           r"127\.0\.0\.1: this job's agents need --rdzv-tls", "stderr")
        self.finish_with_proper_node(host, gate)

    def test_a_tls_agent_at_a_plain_rendezvous_is_refused(self):
        gate = Gate(self.tmp)
        self.addCleanup(gate.open)
        host = self.gated_node("127.0.0.1", gate, [], "plain-host")
        self.wait_joined(host, 1)
        agent = self.gated_node("127.0.0.3", gate, self.tls("client"), "tls-agent")
        self.assertRefused(agent, f"drun: TLS handshake with {self.endpoint} failed: the server "
                           "closed the connection during the handshake (a rendezvous started "
                           "without --rdzv-tls closes agents that use it); check --rdzv-tls")
        node = self.gated_node("127.0.0.2", gate, [], "proper")
        for a in (host, node):
            a.wait_for_line(r"worker rank=")
        gate.open()
        for a in (host, node):
            self.assertExit(a, 0)


if __name__ == "__main__":
    main()
