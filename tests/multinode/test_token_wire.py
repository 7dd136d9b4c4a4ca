"""The job token and the job's -x values never cross the rendezvous wire, and a captured
join cannot be replayed (rendezvous/join_auth.h, docs/architecture.md "The job token on
the wire").

A two-node job on loopback runs with a job token and `-x SECRET_VALUE` while tcpdump
(Debian's) captures the rendezvous port: the capture must show the join (HTTP/2 preface,
the run id) but neither the token nor the -x value, although both workers got the value.
Then the bytes an agent sent, as captured, are sent again on a new connection while the
job still runs: the server refuses them as a wrong job token (its Challenge is fresh per
stream), and the job goes on unaffected and ends 0.

Needs root (packet capture) and tcpdump; skipped with the reason otherwise. tcpdump is
started, waited for ("listening on" on its stderr) and ended by its pid.
"""
import hashlib
import os
import secrets
import select
import shutil
import signal
import socket
import struct
import subprocess
import time

from mn_testlib import Gate, MultiNodeTestCase, base_env, main, prefixed

RUN_ID = "tokenwire"
CAPTURE_BOUND = 30.0  # bounds, not delays


def tcpdump_unavailable_reason():
    if os.geteuid() != 0:
        return "packet capture needs root (run the suite as root)"
    if shutil.which("tcpdump") is None:
        return "tcpdump is not installed (tests/install_deps.sh installs it)"
    return None


class Capture:
    """tcpdump writing every packet of `port` on lo to `path` as it arrives."""

    def __init__(self, path, port):
        self.path = path
        self.proc = subprocess.Popen(
            ["tcpdump", "-i", "lo", "-n", "-U", "--immediate-mode", "-s", "0", "-w", path,
             "tcp", "port", str(port)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.stderr = b""

    def wait_listening(self):
        """Waits for tcpdump's "listening on" line: from then on packets are captured."""
        deadline = time.monotonic() + CAPTURE_BOUND
        fd = self.proc.stderr.fileno()
        while b"listening on" not in self.stderr:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError(f"tcpdump did not start listening: {self.stderr!r}")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise AssertionError(f"tcpdump exited: {self.stderr!r}")
            self.stderr += chunk

    def stop(self):
        """SIGINT by pid (tcpdump flushes and exits); returns its summary on stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, rest = self.proc.communicate(timeout=CAPTURE_BOUND)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, rest = self.proc.communicate()
        self.stderr += rest or b""
        return self.stderr.decode(errors="replace")


def pcap_streams(path, server_port):
    """The TCP payload each client sent to `server_port`, reassembled by sequence number:
    {(client ip, client port): bytes}. Classic pcap (tcpdump -w), IPv4 over Ethernet (lo),
    Linux cooked v1 or v2."""
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    link = struct.unpack(endian + "I", data[20:24])[0]
    link_header = {1: 14, 113: 16, 276: 20}[link]
    segments = {}  # (ip, port) -> {seq: payload}
    isn = {}
    off = 24
    while off + 16 <= len(data):
        _, _, caplen, _ = struct.unpack(endian + "IIII", data[off:off + 16])
        pkt = data[off + 16:off + 16 + caplen]
        off += 16 + caplen
        ip = pkt[link_header:]
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        ihl = (ip[0] & 0x0F) * 4
        total = struct.unpack("!H", ip[2:4])[0]
        tcp = ip[ihl:total]
        sport, dport, seq = struct.unpack("!HHI", tcp[:8])
        flags = tcp[13]
        payload = tcp[(tcp[12] >> 4) * 4:]
        if dport != server_port:
            continue
        key = (socket.inet_ntoa(ip[12:16]), sport)
        if flags & 0x02:  # SYN: the stream starts at its sequence number + 1
            isn[key] = (seq + 1) & 0xFFFFFFFF
        if payload:
            segments.setdefault(key, {})[seq] = payload
    streams = {}
    for key, segs in segments.items():
        if key not in isn:
            continue  # joined before the capture: not whole
        out = bytearray()
        for seq in sorted(segs, key=lambda s: (s - isn[key]) & 0xFFFFFFFF):
            rel = (seq - isn[key]) & 0xFFFFFFFF
            payload = segs[seq]
            if rel + len(payload) > len(out):  # skips retransmitted bytes
                out += payload[len(out) - rel:] if rel <= len(out) else b""
        streams[key] = bytes(out)
    return streams


def send_and_read_until(port, data, needle, bound=CAPTURE_BOUND):
    """Sends `data` on a new connection to 127.0.0.1:port; reads what comes back until it
    contains `needle`, the server closes, or `bound` passes. Returns what was read."""
    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=bound) as s:
        s.sendall(data)
        deadline = time.monotonic() + bound
        while needle not in got and time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            got += chunk
    return got


class TokenWireTest(MultiNodeTestCase):

    def test_an_agent_with_a_token_refuses_a_server_that_cannot_prove_it(self):
        """A server started without the token (or a fake one) cannot prove it: the agent
        runs nothing it sends, says why in one line and exits 1."""
        gate = Gate(self.tmp)
        self.addCleanup(gate.open)
        cmd = ["--no-python", "/bin/sh", "-c", 'echo "worker rank=$RANK"; read _ < "$1"', "sh",
               gate.path]
        host = self.agent("127.0.0.1", cmd, nproc=1, env=base_env(), rdzv_id=RUN_ID, name="host")
        self.wait_joined(host, 1)
        node = self.agent("127.0.0.2", cmd, nproc=1, env=base_env(DRUN_RDZV_TOKEN="tok-1"),
                          rdzv_id=RUN_ID, name="with-token")
        self.assertExit(node, 1)
        last = [line for line in node.stderr_lines if line.startswith("drun: ")][-1]
        self.assertEqual(last, f"drun: job failed: lost the rendezvous server at {self.endpoint}: "
                         "it did not prove that it knows this job's token (a server of another "
                         "job, or one started without the token): give every node the same "
                         "DRUN_RDZV_TOKEN or --rdzv-token-file", node.describe())
        self.assertEqual([t for _, _, t in prefixed(node.stdout_lines)], [], "it ran nothing")

    def test_capture_shows_neither_token_nor_x_value_and_a_replayed_join_is_refused(self):
        reason = tcpdump_unavailable_reason()
        if reason:
            self.skipTest(reason)
        token = "tok-" + secrets.token_hex(16)
        secret = "SECRET-" + secrets.token_hex(16)
        env = base_env(DRUN_RDZV_TOKEN=token)
        pcap = os.path.join(self.tmp, "rdzv.pcap")
        capture = Capture(pcap, self.port)
        self.addCleanup(capture.stop)
        capture.wait_listening()

        gate = Gate(self.tmp)
        self.addCleanup(gate.open)
        # The worker shows a digest of the value it got (never the value), then waits.
        script = ('echo "secret-sha=$(printf %s "$SECRET_VALUE" | sha256sum | cut -c1-64) '
                  'rank=$RANK"; read _ < "$1"; echo "rank=$RANK done"')
        # The value is in the job's spec only (-x NAME=VALUE), not in drun's environment.
        cmd = ["--no-python", "-x", f"SECRET_VALUE={secret}", "/bin/sh", "-c", script, "sh",
               gate.path]
        host = self.agent("127.0.0.1", cmd, nproc=1, env=env, rdzv_id=RUN_ID, name="host")
        self.wait_joined(host, 1)
        node = self.agent("127.0.0.2", cmd, nproc=1, env=env, rdzv_id=RUN_ID, name="node1")
        for agent in (host, node):
            agent.wait_for_line(r"secret-sha=")
        said = [text for _, _, text in prefixed(host.stdout_lines + node.stdout_lines)
                if text.startswith("secret-sha=")]
        digest = hashlib.sha256(secret.encode()).hexdigest()
        self.assertEqual(sorted(said), [f"secret-sha={digest} rank=0", f"secret-sha={digest} rank=1"],
                         self.describe_all())

        summary = capture.stop()
        self.assertRegex(summary, r"\b0 packets dropped by kernel", summary)
        with open(pcap, "rb") as f:
            wire = f.read()
        # The capture is real: the joins are in it, the run id in clear (Hello).
        self.assertIn(b"PRI * HTTP/2.0", wire)
        self.assertIn(RUN_ID.encode(), wire)
        self.assertFalse(token.encode() in wire, "the job token crossed the wire in clear")
        self.assertFalse(secret[len("SECRET-"):].encode() in wire,
                         "the -x value crossed the wire in clear")

        # Replay: what the other node's agent sent, byte for byte, on a new connection.
        streams = pcap_streams(pcap, self.port)
        joins = [b for b in streams.values()
                 if b.startswith(b"PRI * HTTP/2.0") and RUN_ID.encode() in b]
        self.assertEqual(len(joins), 2, f"expected both agents' streams, got {list(streams)}")
        reply = send_and_read_until(self.port, joins[0], b"wrong job token")
        self.assertIn(b"wrong job token", reply, f"the replayed join was not refused: {reply!r}")

        # The job went on unaffected: nobody joined, nothing stopped, both end 0.
        gate.open()
        for agent in (host, node):
            self.assertExit(agent, 0)
            agent.wait_for_line(r"rank=\d done")
        for line in host.stderr_lines + node.stderr_lines:
            self.assertNotRegex(line, r"waiting: 3 of|stopping round|rejected", self.describe_all())


if __name__ == "__main__":
    main()
