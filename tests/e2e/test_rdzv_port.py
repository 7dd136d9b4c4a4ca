"""A rendezvous port that another program holds (issue 22 item 4): the node that should
host cannot listen there and dials what holds it, and a node told to join H:P finds
something that is not a drun rendezvous. Either way one line at once names the endpoint
and the fix, never "lost the rendezvous server ... (link down or host frozen)" after 20 s."""
import http.server
import socket
import threading
import time

from drun_testlib import DrunTestCase, main

NOT_DRUN = "is not a drun rendezvous"
FIX = "if another program holds that port, pick another --rdzv-endpoint port"


class Listener:
    """A program on a loopback port: `serve(conn)` runs for each connection (None: it
    accepts and says nothing)."""

    def __init__(self, serve=None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.serve = serve
        self.conns = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.serve:
                threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def close(self):
        for c in self.conns:
            c.close()
        self.sock.close()


def echo(conn):
    while True:
        try:
            data = conn.recv(65536)
        except OSError:
            return
        if not data:
            return
        conn.sendall(data)


class QuietHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass


class RdzvPortTest(DrunTestCase):

    def assertNamed(self, port, args, bound_s):
        started = time.monotonic()
        run = self.drun("--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{port}", *args,
                        "--no-python", "true", timeout=120)
        elapsed = time.monotonic() - started
        self.assertExit(run, 1)
        lines = [l for l in run.stderr_lines if NOT_DRUN in l]
        self.assertEqual(len(lines), 1, run.describe())
        self.assertIn(f"what answers at 127.0.0.1:{port} {NOT_DRUN}", lines[0])
        self.assertIn(FIX, lines[0])
        self.assertFalse(any("link down or host frozen" in l for l in run.stderr_lines), run.describe())
        self.assertLess(elapsed, bound_s, run.describe())

    def test_a_silent_program_on_the_port_of_the_node_that_should_host(self):
        # 127.0.0.1 is this host: drun would host there, cannot listen, and dials it.
        holder = Listener()
        self.addCleanup(holder.close)
        self.assertNamed(holder.port, [], bound_s=15)

    def test_a_silent_program_where_a_node_joins(self):
        holder = Listener()
        self.addCleanup(holder.close)
        self.assertNamed(holder.port, ["--rdzv-conf", "is_host=false"], bound_s=15)

    def test_an_echo_server_is_named_at_once(self):
        holder = Listener(echo)
        self.addCleanup(holder.close)
        self.assertNamed(holder.port, ["--rdzv-conf", "is_host=false"], bound_s=5)

    def test_an_http_server_is_named_at_once(self):
        server = http.server.HTTPServer(("127.0.0.1", 0), QuietHandler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        self.assertNamed(server.server_address[1], ["--rdzv-conf", "is_host=false"], bound_s=5)


if __name__ == "__main__":
    main()
