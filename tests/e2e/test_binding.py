"""Where a single-node job listens (issue #14, first step; docs/architecture.md "Where
drun listens"): every worker is on this machine, so drun's c10d store listens on the
address the workers dial (127.0.0.1, or the --master-addr given) and on no other
interface. Read from the kernel's own table of listening sockets (/proc/net/tcp{,6})."""
import os
import signal
import socket
import struct

from drun_testlib import DrunTestCase, main, program


def listening(port):
    """The local addresses with a TCP socket listening on `port`, as text."""
    found = []
    for name, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            with open(name) as f:
                rows = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            fields = row.split()
            addr, port_hex = fields[1].split(":")
            if fields[3] != "0A" or int(port_hex, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(addr)
            # The kernel prints each 32-bit word in host (little-endian) order.
            raw = b"".join(struct.pack("<I", w) for w in struct.unpack(">" + "I" * (len(raw) // 4), raw))
            found.append(socket.inet_ntop(family, raw))
    return sorted(found)


class BindingTest(DrunTestCase):

    def store_addresses(self, *args):
        run = self.start("--standalone", "--nproc-per-node", 1, *args, program("print_master.py"))
        line = run.wait_for_line(r"master \S+:\d+$")[0]
        addr, port = line.rsplit(" ", 1)[1].rsplit(":", 1)
        found = listening(int(port))
        run.send_signal(signal.SIGTERM)
        self.assertEqual(run.wait(), 128 + signal.SIGTERM, run.describe())
        return addr, found

    def test_store_listens_on_loopback_only(self):
        addr, found = self.store_addresses()
        self.assertEqual(addr, "127.0.0.1")
        self.assertEqual(found, ["127.0.0.1"])

    def test_an_explicit_port_too(self):
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        addr, found = self.store_addresses("--master-port", port)
        self.assertEqual(found, ["127.0.0.1"])

    def test_master_addr_of_this_machine_is_the_one_address(self):
        addr, found = self.store_addresses("--master-addr", "127.0.0.2")
        self.assertEqual(addr, "127.0.0.2")
        self.assertEqual(found, ["127.0.0.2"])

    def test_a_loopback_rendezvous_endpoint_is_the_one_address(self):
        # --rdzv-endpoint 127.0.0.1:P: every node is on this machine; the hosting
        # node's rendezvous (and the store on the same port) listens there alone.
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        run = self.start("--nnodes", 1, "--nproc-per-node", 1, "--rdzv-endpoint", f"127.0.0.1:{port}",
                         program("print_master.py"))
        run.wait_for_line(r"master \S+:\d+$")
        found = listening(port)
        run.send_signal(signal.SIGTERM)
        self.assertEqual(run.wait(), 128 + signal.SIGTERM, run.describe())
        self.assertEqual(found, ["127.0.0.1"])


if __name__ == "__main__":
    main()
