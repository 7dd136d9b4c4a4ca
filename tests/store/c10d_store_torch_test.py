#!/usr/bin/python3
"""Real PyTorch 1.13 clients (Debian's python3-torch) against drun_store_server.

Run with Debian's interpreter, which has torch:
    /usr/bin/python3 tests/store/c10d_store_torch_test.py --server build/rendezvous/drun_store_server

Every blocking step has a deadline (store timeouts, subprocess timeouts); nothing sleeps.
"""
import argparse
import datetime
import os
import subprocess
import sys
import textwrap
import threading
import unittest

SERVER = None  # path of drun_store_server, from --server
HOST = "127.0.0.1"
TIMEOUT = datetime.timedelta(seconds=30)


class StoreServer:
    """drun_store_server in a subprocess; stops when its stdin is closed."""

    def __init__(self):
        self.proc = subprocess.Popen(
            [SERVER, "--host", HOST, "--log"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        if not line.strip():
            raise RuntimeError("drun_store_server did not print its port: "
                               + self.proc.stderr.read())
        self.port = int(line)

    def stop(self):
        """Stops the server; returns its stderr (protocol error log)."""
        _, err = self.proc.communicate(timeout=30)  # closes stdin: the stop signal
        if self.proc.returncode != 0:
            raise RuntimeError(f"drun_store_server exited {self.proc.returncode}: {err}")
        return err


def client(port, world_size=1):
    import torch.distributed as dist
    # torch 2.x asks for libuv unless told not to, and builds without it (Debian's 2.6 and
    # 2.14) refuse: follow USE_LIBUV as torch's env:// does (1.13 has no such argument).
    libuv = {"use_libuv": False} if os.environ.get("USE_LIBUV", "1") != "1" else {}
    return dist.TCPStore(HOST, port, world_size, is_master=False, timeout=TIMEOUT, **libuv)


class ServerCase(unittest.TestCase):
    """A fresh drun_store_server and one torch client per test."""

    def setUp(self):
        self.server = StoreServer()
        self.store = client(self.server.port)

    def tearDown(self):
        del self.store
        err = self.server.stop()
        # Real clients never trip the server's protocol checks.
        self.assertIn("(0 protocol errors)", err)


class TorchStoreOpsTest(ServerCase):

    def test_set_and_get(self):
        self.store.set("k1", "v1")
        self.assertEqual(self.store.get("k1"), b"v1")
        self.store.set("k1", b"\x00\xffbin")
        self.assertEqual(self.store.get("k1"), b"\x00\xffbin")
        big = bytes(range(256)) * 4096  # 1 MiB
        self.store.set("big", big)
        self.assertEqual(self.store.get("big"), big)

    def test_value_over_64_mib_round_trips(self):
        # torch's own servers take it; drun's used to reset the connection past 64 MiB.
        huge = bytes(range(256)) * (65 * 4096) + b"tail"  # 65 MiB + 4 bytes
        self.store.set("huge", huge)
        other = client(self.server.port)
        got = other.get("huge")
        self.assertEqual(len(got), len(huge))
        self.assertTrue(got == huge)
        self.store.set("huge", b"small again")
        self.assertEqual(other.get("huge"), b"small again")

    def test_values_are_shared_between_clients(self):
        other = client(self.server.port)
        self.store.set("shared", "x")
        self.assertEqual(other.get("shared"), b"x")

    def test_add_stores_decimal_text(self):
        self.assertEqual(self.store.add("cnt", 5), 5)
        self.assertEqual(self.store.add("cnt", -2), 3)
        self.assertEqual(self.store.get("cnt"), b"3")
        self.store.set("num", "40")
        self.assertEqual(self.store.add("num", 2), 42)

    def test_compare_set(self):
        self.store.set("k", "v1")
        self.assertEqual(self.store.compare_set("k", "v1", "v2"), b"v2")
        self.assertEqual(self.store.compare_set("k", "zz", "v3"), b"v2")
        self.assertEqual(self.store.get("k"), b"v2")
        self.assertEqual(self.store.compare_set("absent", "", "n1"), b"n1")
        self.assertEqual(self.store.get("absent"), b"n1")
        # Absent key, non-empty expectation: torch's server answers `expected`.
        self.assertEqual(self.store.compare_set("absent2", "x", "y"), b"x")

    def test_wait_for_present_keys(self):
        self.store.set("a", "1")
        self.store.set("b", "2")
        self.store.wait(["a", "b"])
        self.store.wait(["a"], datetime.timedelta(seconds=5))

    def test_wait_is_released_by_another_client(self):
        other = client(self.server.port)
        done = threading.Event()
        errors = []

        def waiter():
            try:
                self.store.wait(["late1", "late2"])
                done.set()
            except Exception as e:  # reported below
                errors.append(e)

        t = threading.Thread(target=waiter)
        t.start()
        other.set("late1", "x")
        other.add("late2", 1)
        t.join(timeout=30)
        self.assertFalse(errors)
        self.assertTrue(done.is_set())
        self.assertEqual(self.store.get("late2"), b"1")

    def test_wait_with_timeout_then_connection_still_usable(self):
        with self.assertRaisesRegex(RuntimeError, "[Tt]imeout"):
            self.store.wait(["never"], datetime.timedelta(milliseconds=200))
        # The key appears after the client gave up. torch's own 1.13 server would now push
        # a stray STOP_WAITING byte that corrupts this client's next reply; drun's server
        # drops the abandoned wait when the client's next request arrives.
        self.store.set("other", "ok")
        client(self.server.port).set("never", "late")
        self.assertEqual(self.store.get("other"), b"ok")
        self.assertEqual(self.store.get("never"), b"late")

    def test_delete_key(self):
        self.store.set("k1", "v")
        self.assertTrue(self.store.delete_key("k1"))
        self.assertFalse(self.store.delete_key("k1"))

    def test_num_keys(self):
        # "init/" (the worker counter every client adds to) is a key too.
        self.assertEqual(self.store.num_keys(), 1)
        self.store.set("a", "1")
        self.store.add("b", 1)
        self.assertEqual(self.store.num_keys(), 3)
        self.store.delete_key("a")
        self.assertEqual(self.store.num_keys(), 2)

    def test_worker_counter(self):
        # With world_size given every client adds 1 to the one key "init/" (sent without
        # the "/" prefix), so more clients add no keys.
        client(self.server.port, world_size=3)
        client(self.server.port, world_size=3)
        self.assertEqual(self.store.num_keys(), 1)

    def test_prefix_store(self):
        import torch.distributed as dist
        p = dist.PrefixStore("pfx", self.store)
        p.set("k", "v")
        self.assertEqual(self.store.get("pfx/k"), b"v")
        self.assertEqual(p.add("n", 2), 2)

    def test_set_timeout_applies_to_wait(self):
        self.store.set_timeout(datetime.timedelta(milliseconds=200))
        with self.assertRaisesRegex(RuntimeError, "[Tt]imeout"):
            self.store.get("missing")  # get = wait + get


WORKER = textwrap.dedent("""
    import datetime, os, sys
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    dist.barrier()
    print(f"rank {rank} of {dist.get_world_size()}: sum {t.item():.0f}", flush=True)
    dist.destroy_process_group()
""")


class TorchInitProcessGroupTest(unittest.TestCase):
    WORLD_SIZE = 4

    def test_gloo_all_reduce_with_agent_store(self):
        server = StoreServer()
        try:
            procs = []
            for rank in range(self.WORLD_SIZE):
                env = dict(os.environ)
                env.update({
                    "RANK": str(rank),
                    "LOCAL_RANK": str(rank),
                    "WORLD_SIZE": str(self.WORLD_SIZE),
                    "MASTER_ADDR": HOST,
                    "MASTER_PORT": str(server.port),
                    "TORCHELASTIC_USE_AGENT_STORE": "True",
                    "TORCHELASTIC_RESTART_COUNT": "0",
                    "OMP_NUM_THREADS": "1",
                    "GLOO_SOCKET_IFNAME": "lo",
                })
                procs.append(subprocess.Popen(
                    [sys.executable, "-c", WORKER], env=env, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True))
            outputs = []
            for rank, p in enumerate(procs):
                try:
                    out, err = p.communicate(timeout=180)
                except subprocess.TimeoutExpired:
                    for q in procs:
                        q.kill()
                    raise
                self.assertEqual(p.returncode, 0, f"rank {rank} failed:\n{err}")
                outputs.append(out.strip())
            expected_sum = self.WORLD_SIZE * (self.WORLD_SIZE + 1) // 2
            self.assertEqual(outputs, [f"rank {r} of {self.WORLD_SIZE}: sum {expected_sum}"
                                       for r in range(self.WORLD_SIZE)])
            # The ranks used the agent store: their keys (under /worker/attempt_0) are there,
            # and so is the worker counter they all added to.
            store = client(server.port)
            self.assertEqual(store.add("/worker/attempt_0/default_pg/store_based_barrier_key:1", 0),
                             self.WORLD_SIZE)
            del store
        finally:
            err = server.stop()
        self.assertIn("(0 protocol errors)", err)


class TorchStore2xOpsTest(ServerCase):
    """The ops torch 2.x added (APPEND, MULTI_GET/SET, CHECK, QUEUE_*, LIST_KEYS, BARRIER),
    through torch's own Python API. Each test runs where the client has the method (the
    compat suite's 2.6 and 2.14) and is skipped, saying so, where it has not (1.13 here)."""

    def need(self, *methods):
        for m in methods:
            if not hasattr(self.store, m):
                self.skipTest(f"this torch's TCPStore has no {m}()")

    def test_append(self):
        self.need("append")
        self.store.set("k", "ab")
        self.store.append("k", "cd")
        self.store.append("fresh", "x")  # appending to a missing key creates it
        self.assertEqual(self.store.get("k"), b"abcd")
        self.assertEqual(self.store.get("fresh"), b"x")

    def test_multi_set_and_multi_get(self):
        self.need("multi_set", "multi_get")
        self.store.multi_set(["a", "b"], ["1", "2"])
        self.assertEqual(self.store.multi_get(["b", "a"]), [b"2", b"1"])

    def test_check(self):
        self.need("check")
        self.store.set("here", "1")
        self.assertTrue(self.store.check(["here"]))
        self.assertFalse(self.store.check(["here", "absent"]))

    def test_queue_push_pop_len(self):
        self.need("queue_push", "queue_pop", "queue_len")
        try:
            self.store.queue_push("q", "first")
        except NotImplementedError as e:
            # torch 2.14's client without libuv (Debian's: use_libuv=False) refuses queues
            # itself, before sending: "queues not implemented on legacy TCPStore backend".
            self.skipTest(f"this client: {e}")
        self.store.queue_push("q", "second")
        self.assertEqual(self.store.queue_len("q"), 2)
        self.assertEqual(self.store.queue_pop("q"), b"first")
        self.assertEqual(self.store.queue_pop("q", block=False), b"second")
        import torch.distributed as dist
        with self.assertRaises(dist.QueueEmptyError):
            self.store.queue_pop("q", block=False)
        # A blocking pop is released by another client's push.
        got = []
        t = threading.Thread(target=lambda: got.append(self.store.queue_pop("q")))
        t.start()
        client(self.server.port).queue_push("q", "late")
        t.join(timeout=30)
        self.assertEqual(got, [b"late"])

    def test_list_keys(self):
        self.need("list_keys")
        self.store.set("x", "1")
        self.store.add("y", 1)
        self.assertEqual(sorted(self.store.list_keys()), ["x", "y"])

    def test_barrier_releases_when_all_arrive(self):
        self.need("barrier")
        other = client(self.server.port, world_size=2)
        errors = []

        def arrive(store):
            try:
                store.barrier("b", 2)
            except Exception as e:  # reported below
                errors.append(e)

        t = threading.Thread(target=arrive, args=(other,))
        t.start()
        arrive(self.store)
        t.join(timeout=30)
        self.assertFalse(t.is_alive())
        self.assertEqual(errors, [])


def main():
    global SERVER
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True, help="path of drun_store_server")
    args, rest = parser.parse_known_args()
    SERVER = os.path.abspath(args.server)
    try:
        import torch  # noqa: F401
    except ImportError:
        # ctest reports this exit code as "skipped" (SKIP_RETURN_CODE), not as a pass.
        print(f"{sys.executable} has no torch (Debian: apt-get install python3-torch)",
              file=sys.stderr)
        return 77
    prog = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
