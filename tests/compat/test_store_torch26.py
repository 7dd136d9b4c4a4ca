"""drun's c10d store (drun_store_server, built here) with PyTorch 2.6 clients (Debian 13's
python3-torch in a chroot):

    /usr/bin/python3 tests/compat/test_store_torch26.py --suite ops --server build/rendezvous/drun_store_server

  --suite ops  tests/store/c10d_store_torch_test.py, unchanged: every store operation
               (TorchStoreOpsTest; its init_process_group test asserts torch 1.13's key layout)
  --suite pg   c10d_store_torch26_pg_test.py: init_process_group of four torch 2.6 workers with
               the server as their agent store, checking the keys torch 2.6 writes

The test file starts the server itself (`--server PATH`, then reads the port from its first
stdout line and stops it by closing its stdin). Inside the chroot the host's server binary
cannot run (it links Debian 12's libraries, and the repository is not visible there), so the
path given to it is a relay script in /tmp: the relay asks this driver, over a Unix socket
in /tmp, to start drun_store_server on the host, prints the port it gets back, and when its
stdin closes has the driver stop the server and hands back the server's stderr and exit code.
The clients talk to the server over loopback TCP, as they would to any c10d store.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import threading

import sidlib
import torch26lib

TEST_FILE = os.path.join(torch26lib.REPO, "tests", "store", "c10d_store_torch_test.py")
PG_TEST_FILE = os.path.join(torch26lib.HERE, "c10d_store_torch26_pg_test.py")
SUITES = {"ops": (TEST_FILE, ["TorchStoreOpsTest", "TorchStore2xOpsTest"]), "pg": (PG_TEST_FILE, [])}
TIMEOUT = 600  # a bound for the whole chroot run; it takes well under a minute

RELAY = """\
#!/usr/bin/python3
# Stands in for drun_store_server inside the chroot (see test_store_torch26.py).
import json, socket, sys
sock = socket.socket(socket.AF_UNIX)
sock.connect({socket_path!r})
f = sock.makefile("rw")
f.write(json.dumps(sys.argv[1:]) + "\\n"); f.flush()
sys.stdout.write(f.readline()); sys.stdout.flush()   # the port line (empty: failed)
sys.stdin.read()                                     # stdin closed: stop the server
f.write("stop\\n"); f.flush()
reply = json.loads(f.readline())
sys.stderr.write(reply["stderr"])
sys.exit(reply["returncode"])
"""


def serve_one(conn, server):
    """One relay connection: start a server with the relay's arguments, pass its port line,
    stop it on "stop" and report its stderr and exit code."""
    with conn, conn.makefile("rw") as f:
        args = json.loads(f.readline())
        proc = subprocess.Popen([server] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            f.write(proc.stdout.readline())
            f.flush()
            f.readline()  # "stop", or EOF when the relay died: stop the server either way
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        f.write(json.dumps({"stderr": err, "returncode": proc.returncode}) + "\n")
        f.flush()


def broker(listener, server):
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:  # listener closed: the test run is over
            return
        threading.Thread(target=serve_one, args=(conn, server), daemon=True).start()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True, help="path of drun_store_server")
    parser.add_argument("--suite", choices=sorted(SUITES), required=True)
    parser.add_argument("--torch", choices=["2.6", "2.14"], default="2.6",
                        help="2.14: the sid chroot (sidlib.py), unmodified; its clients are told "
                             "USE_LIBUV=0, which the test file passes as use_libuv=False")
    args, rest = parser.parse_known_args()
    server = os.path.abspath(args.server)
    lib = sidlib if args.torch == "2.14" else torch26lib
    lib.require_chroot()
    env = dict(os.environ, USE_LIBUV="0") if args.torch == "2.14" else None
    with torch26lib.shared_tempdir("drun-compat-store-") as tmp:
        socket_path = os.path.join(tmp, "broker.sock")
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(socket_path)
        listener.listen(16)
        threading.Thread(target=broker, args=(listener, server), daemon=True).start()
        relay = torch26lib.write_executable(os.path.join(tmp, "store_server_relay.py"),
                                            RELAY.format(socket_path=socket_path))
        test_file, tests = SUITES[args.suite]
        test, = torch26lib.stage(tmp, test_file)
        torch26lib.stage(tmp, TEST_FILE)  # the pg suite imports it
        chroot = [lib.TOOL, "run", lib.ROOT, "python3"]
        version = subprocess.run(chroot + ["-c", "import torch; print(torch.__version__)"],
                                 stdout=subprocess.PIPE, text=True, timeout=120).stdout.strip()
        print(f"clients: torch {version}", flush=True)
        if not version.startswith(args.torch + "."):
            print(f"expected torch {args.torch} in {lib.ROOT}", file=sys.stderr)
            return 1
        cmd = chroot + [test, "--server", relay] + (rest or tests)
        print("+ " + " ".join(cmd), flush=True)
        try:
            rc = subprocess.run(cmd, timeout=TIMEOUT, env=env).returncode
        finally:
            listener.close()
    # The test file exits 77 when the interpreter has no torch: for this suite a failure.
    return 1 if rc == 77 else rc


if __name__ == "__main__":
    sys.exit(main())
