"""A node still waiting for its rendezvous server obeys Ctrl-C/SIGTERM at once (exit
128+N), instead of after --rdzv-conf read_timeout. The "server" here accepts TCP
connections and never speaks gRPC, so the accept is the event that says drun is in its
connecting phase (its signals are blocked there, and must still be honoured)."""
import os
import signal
import socket
import subprocess
import time
import unittest

DRUN = os.environ.get("DRUN")


@unittest.skipUnless(DRUN, "DRUN is not set (ctest sets it to the built drun binary)")
class ConnectSignalTest(unittest.TestCase):
    def run_case(self, sig):
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(16)
            port = listener.getsockname()[1]
            proc = subprocess.Popen(
                [DRUN, "--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{port}",
                 "--rdzv-conf", "is_host=false,read_timeout=60", "--no-python", "true"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                listener.settimeout(30)  # a bound, not a delay: drun dials at once
                conn, _ = listener.accept()
                started = time.monotonic()
                proc.send_signal(sig)
                _, err = proc.communicate(timeout=10)
                elapsed = time.monotonic() - started
                conn.close()
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        self.assertEqual(proc.returncode, 128 + sig, err)
        self.assertLess(elapsed, 5, "the signal waited for read_timeout")
        self.assertIn(b"while waiting for the rendezvous server", err)

    def test_sigterm(self):
        self.run_case(signal.SIGTERM)

    def test_sigint(self):
        self.run_case(signal.SIGINT)


if __name__ == "__main__":
    unittest.main(verbosity=2)
