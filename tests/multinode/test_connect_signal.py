"""A node still waiting for its rendezvous server obeys Ctrl-C/SIGTERM at once (exit
128+N), instead of after --rdzv-conf read_timeout, both while nothing listens on the
endpoint yet (drun keeps dialing) and once a TCP connection is up but the server has not
answered (a listener that never speaks gRPC)."""
import os
import signal
import socket
import subprocess
import time
import unittest

DRUN = os.environ.get("DRUN")


def command(port):
    return [DRUN, "--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{port}",
            "--rdzv-conf", "is_host=false,read_timeout=60", "--no-python", "true"]


def blocked_signals(pid):
    """The process's blocked-signal mask from /proc, or 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigBlk:"):
                    return int(line.split()[1], 16)
    except FileNotFoundError:
        pass
    return 0


@unittest.skipUnless(DRUN, "DRUN is not set (ctest sets it to the built drun binary)")
class ConnectSignalTest(unittest.TestCase):
    def start(self, port):
        """drun as a client of 127.0.0.1:port; killed (by pid) at cleanup if still there."""
        proc = subprocess.Popen(command(port), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

        def reap():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        self.addCleanup(reap)
        return proc

    def stop(self, proc, sig):
        """Sends sig; asserts drun exits 128+sig at once; returns its stderr."""
        started = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=10)
        self.assertEqual(proc.returncode, 128 + sig, err)
        self.assertLess(time.monotonic() - started, 5, "the signal waited for read_timeout")
        return err

    def run_dialing(self, sig):
        # A port nothing listens on: connections are refused and drun dials again.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            proc = self.start(s.getsockname()[1])
            # drun blocks its handled signals before it dials (they go to its signalfd);
            # wait for that state, bounded, then signal it.
            deadline = time.monotonic() + 30
            while not blocked_signals(proc.pid) & (1 << (sig - 1)):
                self.assertIsNone(proc.poll(), "drun exited before dialing")
                self.assertLess(time.monotonic(), deadline, "drun never blocked its signals")
                time.sleep(0.01)
            err = self.stop(proc, sig)
        self.assertIn(b"while waiting for the rendezvous server", err)

    def run_unanswered(self, sig):
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(16)
            proc = self.start(listener.getsockname()[1])
            listener.settimeout(30)  # a bound, not a delay: drun dials at once
            conn, _ = listener.accept()
            self.stop(proc, sig)
            conn.close()

    def test_sigterm_while_dialing(self):
        self.run_dialing(signal.SIGTERM)

    def test_sigint_while_dialing(self):
        self.run_dialing(signal.SIGINT)

    def test_sigterm_while_unanswered(self):
        self.run_unanswered(signal.SIGTERM)

    def test_sigint_while_unanswered(self):
        self.run_unanswered(signal.SIGINT)


if __name__ == "__main__":
    unittest.main(verbosity=2)
