"""Errors of a multi-node job: the rendezvous never filling up, a wrong token or run id,
losing the rendezvous server, an unreachable endpoint, bad --nnodes, a duplicate static
--node-rank, and garbage on the rendezvous port."""
import errno
import os
import signal
import socket
import struct

from mn_testlib import (report, Gate, MultiNodeTestCase, base_env, free_port, main, worker_command,
                        worker_records)

SERVER_LOST_BOUND = 15.0  # coarse: the stream of a killed host ends at once



def drun_lines(agent):
    return [line for line in agent.stderr_lines if line.startswith("drun: ")]


class ErrorsTest(MultiNodeTestCase):

    def assertRejected(self, agent, pattern):
        """The agent exits 1 and its last drun line says the rendezvous rejected it."""
        self.assertExit(agent, 1)
        lines = drun_lines(agent)
        self.assertTrue(lines, agent.describe())
        self.assertRegex(lines[-1], r"^drun: the rendezvous \(rendezvous server at "
                         + self.endpoint.replace(".", r"\.") + r"\) rejected this node: "
                         + pattern)
        self.assertEqual(worker_records(agent.stdout_lines), [], "a rejected node runs nothing")

    def test_join_timeout_alone_names_the_count(self):
        a = self.agent("127.0.0.1", worker_command(), nnodes="2",
                       conf={"join_timeout": "2"}, name="alone")
        self.assertExit(a, 1, timeout=30)
        self.assertRegex(drun_lines(a)[-1],
                         r"^drun: job failed: rendezvous timed out: 1 of at least 2 nodes "
                         r"joined within join_timeout \(2 s\)", a.describe())
        self.assertEqual(worker_records(a.stdout_lines), [])
        self.assertGreater(a.exited_at - a.started, 1.5)

    def test_join_timeout_two_of_three_every_agent_names_the_count(self):
        cmd = worker_command()
        # Long enough for the second agent to join on a loaded machine (a bound, not a
        # delay: the test waits for it to have joined).
        conf = {"join_timeout": "5", "last_call_timeout": "1"}
        a = self.agent("127.0.0.1", cmd, nnodes="3", conf=conf, name="node0")
        self.wait_joined(a, 1)
        b = self.agent("127.0.0.2", cmd, nnodes="3", conf=conf, name="node1")
        self.wait_joined(b, 2)
        for agent in (a, b):
            self.assertExit(agent, 1, timeout=30)
            self.assertRegex(drun_lines(agent)[-1],
                             r"^drun: job failed: rendezvous timed out: 2 of at least 3 nodes "
                             r"joined within join_timeout \(5 s\)", self.describe_all())
            self.assertEqual(worker_records(agent.stdout_lines), [])

    def test_wrong_token_is_rejected_and_the_right_one_joins(self):
        cmd = worker_command()
        a = self.agent("127.0.0.1", cmd, env=base_env(DRUN_RDZV_TOKEN="s3cret-job-token"),
                       name="host")
        self.wait_joined(a, 1)
        wrong = self.agent("127.0.0.2", cmd, env=base_env(DRUN_RDZV_TOKEN="another-token"),
                           name="wrong-token")
        self.assertRejected(wrong, r"wrong job token")
        missing = self.agent("127.0.0.2", cmd, name="no-token")
        self.assertRejected(missing, r"wrong job token")
        token_file = os.path.join(self.tmp, "token")
        with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write("s3cret-job-token\n")
        right = self.agent("127.0.0.3", cmd, extra=["--rdzv-token-file", token_file],
                           name="token-file")
        for agent in (a, right):
            self.assertExit(agent, 0)
        self.assertEqual(len(worker_records(a.stdout_lines + right.stdout_lines)), 4)

    def test_wrong_run_id_is_rejected(self):
        cmd = worker_command()
        a = self.agent("127.0.0.1", cmd, rdzv_id="job-a", name="host")
        self.wait_joined(a, 1)
        other = self.agent("127.0.0.2", cmd, rdzv_id="job-b", name="other-job")
        self.assertRejected(other, r"run id 'job-b' does not match this job's run id 'job-a'")
        same = self.agent("127.0.0.3", cmd, rdzv_id="job-a", name="same-job")
        for agent in (a, same):
            self.assertExit(agent, 0)
        for r in worker_records(a.stdout_lines + same.stdout_lines):
            self.assertEqual(r["run_id"], "job-a")

    def test_losing_the_rendezvous_server_ends_every_agent(self):
        gate = Gate(self.tmp)
        self.addCleanup(gate.open)
        cmd = worker_command("--then", "gate", "--gate", gate.path)
        agents = []
        for i, addr in enumerate(["127.0.0.1", "127.0.0.2", "127.0.0.3"]):
            agents.append(self.agent(addr, cmd, nnodes="3", name=f"node{i}"))
            if i < 2:
                self.wait_joined(agents[-1], i + 1)
        host, b, c = agents
        for agent in agents:
            self.wait_workers(agent, 2, world=6)
        pids = [r["pid"] for a in agents for r in worker_records(a.stdout_lines)]

        killed_at = host.kill(signal.SIGKILL)
        latencies = {}
        for agent in (b, c):
            agent.wait(SERVER_LOST_BOUND)
            latencies[agent.name] = agent.exited_at - killed_at
            self.assertNotEqual(agent.returncode, 0, agent.describe())
            self.assertTrue(any(
                line.startswith(f"drun: job failed: lost the rendezvous server at "
                                f"{self.endpoint}: ") for line in agent.stderr_lines),
                agent.describe())
        report("kill -9 of the host agent: the other agents exited after "
               + ", ".join(f"{k} {v:.3f}s" for k, v in latencies.items()))
        self.assertNoWorkersLeft(pids)

    def test_unreachable_endpoint_fails_after_read_timeout(self):
        port = free_port()  # nobody listens there
        agent = self.agent("127.0.0.2", worker_command(), endpoint=f"127.0.0.1:{port}",
                           conf={"read_timeout": "1"}, name="lonely")
        started = agent.started
        self.assertExit(agent, 1, timeout=30)
        elapsed = agent.exited_at - started
        report(f"unreachable endpoint with read_timeout=1: exit after {elapsed:.3f}s")
        lines = drun_lines(agent)
        self.assertEqual(len(lines), 1, agent.describe())
        self.assertRegex(lines[0], rf"^drun: cannot reach the rendezvous server at "
                         rf"127\.0\.0\.1:{port} within 1 s: ")
        self.assertGreaterEqual(elapsed, 0.9)
        self.assertLess(elapsed, 15)

    def test_nnodes_min_above_max_is_a_one_line_error(self):
        agent = self.start(["--nnodes", "3:2", "--nproc-per-node", 1, "--rdzv-backend", "c10d",
                            "--rdzv-endpoint", self.endpoint] + worker_command(),
                           name="bad-nnodes")
        agent.wait(30)
        self.assertNotEqual(agent.returncode, 0)
        self.assertEqual(agent.stdout_lines, [])
        self.assertEqual(len(agent.stderr_lines), 1, agent.describe())
        self.assertRegex(agent.stderr_lines[0], r"^drun: --nnodes 3:2: .*minimum.*maximum")

    def test_duplicate_node_rank_in_static_mode_is_rejected(self):
        gate = Gate(self.tmp)
        self.addCleanup(gate.open)
        cmd = worker_command("--then", "gate", "--gate", gate.path)

        def static(rank, addr, name):
            return self.start(["--rdzv-backend", "static", "--nnodes", 2, "--node-rank", rank,
                               "--master-addr", "127.0.0.1", "--master-port", self.port,
                               "--nproc-per-node", 2, "--local-addr", addr,
                               "--rdzv-id", "static-job"] + cmd, name=name)

        a = static(0, "127.0.0.1", "rank0")
        b = static(1, "127.0.0.2", "rank1")
        for agent in (a, b):
            self.wait_workers(agent, 2, world=4)
        dup = static(1, "127.0.0.3", "rank1-again")
        self.assertRejected(dup, r"duplicate --node-rank 1")
        self.assertEqual(len(drun_lines(dup)), 1, dup.describe())
        gate.open()
        for agent in (a, b):
            self.assertExit(agent, 0)
        recs = {r["rank"]: r for r in worker_records(a.stdout_lines + b.stdout_lines)}
        self.assertEqual(sorted(recs), [0, 1, 2, 3])
        self.assertEqual([recs[r]["group_rank"] for r in range(4)], [0, 0, 1, 1])

    def test_garbage_on_the_rendezvous_port_does_not_crash_the_server(self):
        a = self.agent("127.0.0.1", worker_command(), name="host")
        self.wait_joined(a, 1)
        for payload in garbage_payloads():
            with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
                try:
                    s.sendall(payload)
                    s.shutdown(socket.SHUT_WR)
                    # Read whatever the server answers until it closes (bounded).
                    while s.recv(65536):
                        pass
                except socket.timeout:
                    pass  # it may keep a half-closed connection open; that is fine
                except OSError as e:
                    # The server may hang up before we are done (reset, broken pipe,
                    # not connected): what matters is that it lives on.
                    self.assertIn(e.errno, (errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN),
                                  repr(e))
        self.assertIsNone(a.proc.poll(), f"the host died of garbage\n{a.describe()}")
        b = self.agent("127.0.0.2", worker_command(), name="joiner")
        for agent in (a, b):
            self.assertExit(agent, 0)
        self.assertEqual(len(worker_records(a.stdout_lines + b.stdout_lines)), 4)


# ---------------------------------------------------------------------------------------
# Garbage: plain junk, HTTP/1.1, a broken HTTP/2 stream, and a well-formed gRPC call to
# the rendezvous whose message is not a valid protobuf, or a valid one out of order.

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def h2_frame(kind, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream) + payload


def hpack_literal(name, value):
    """A literal header field without indexing, new name, no Huffman coding."""
    name, value = name.encode(), value.encode()
    assert len(name) < 127 and len(value) < 127
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def grpc_call(message, end_stream=True):
    headers = b"".join(hpack_literal(k, v) for k, v in [
        (":method", "POST"), (":scheme", "http"), (":path", "/drun.v1.Rendezvous/Attach"),
        (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers")])
    body = b"\x00" + struct.pack(">I", len(message)) + message
    return (H2_PREFACE + h2_frame(0x4, 0, 0, b"")  # SETTINGS
            + h2_frame(0x1, 0x4, 1, headers)       # HEADERS, END_HEADERS
            + h2_frame(0x0, 0x1 if end_stream else 0, 1, body))  # DATA


def garbage_payloads():
    yield bytes(range(256)) * 64
    yield b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    yield H2_PREFACE + b"\xff" * 4096  # a frame header claiming a huge frame, then junk
    yield H2_PREFACE + h2_frame(0x1, 0x4, 1, b"\xff\xfe\xfd" * 20)  # undecodable headers
    # AgentMessage bytes that are not a protobuf (field 15, wire type 7).
    yield grpc_call(b"\x7f\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")
    # A valid AgentMessage out of order: a Join (field 4, empty) before any Hello, then
    # a heartbeat, then the stream ends.
    yield grpc_call(b"\x22\x00")
    # A gRPC length prefix promising 16 MB that never arrive.
    yield grpc_call(b"")[:-5] + b"\x00\x01\x00\x00\x00"


if __name__ == "__main__":
    main()
