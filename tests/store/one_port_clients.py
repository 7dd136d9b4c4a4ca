#!/usr/bin/python3
"""Real torch 1.13 TCPStore clients for tests/store/one_port_test.cc: two clients reach the
workers' store at 127.0.0.1:PORT (the rendezvous server's own port) and use set/get/add/wait
and num_keys. Prints one line "ok PHASE" on success; any failure raises (exit 1).

    /usr/bin/python3 one_port_clients.py PORT round1|round2|outlive

round2 first checks that no key of round 1 survived (a fresh store per round). outlive first
lets one second pass (a WAIT on a key nobody sets, with a 1 s timeout, on a third client) so
that the server's first-bytes bound (set shorter by the test) closes the clients' silent
second connections (torch 1.13's callback connections); a and b must not notice.
Every blocking call has the store timeout; nothing sleeps.
"""
import datetime
import sys
import threading

try:
    import torch.distributed as dist
except ImportError:
    print("skip: no torch", flush=True)
    sys.exit(77)

port, phase = int(sys.argv[1]), sys.argv[2]
T = datetime.timedelta(seconds=30)
# `a` opens with ADD "init/" (world_size given), `b` with its first request (world_size None):
# both ways a 1.13 client starts a connection.
a = dist.TCPStore("127.0.0.1", port, 2, False, timeout=T)
b = dist.TCPStore("127.0.0.1", port, None, False, timeout=T)

# Only `a`'s "init/" so far: no key of an earlier round (round 1 leaves four).
assert a.num_keys() == 1, f"{a.num_keys()} keys in a fresh store"
a.set("round", phase)
assert b.get("round") == phase.encode(), b.get("round")
assert a.add("n", 5) == 5
assert b.add("n", 2) == 7
# wait on one connection for a key another sets
got = {}
waiter = threading.Thread(target=lambda: got.setdefault("w", b.wait(["late"])))
waiter.start()
a.set("late", "x")
waiter.join(timeout=30)
assert not waiter.is_alive(), "wait did not return"
assert b.get("late") == b"x"
assert b.num_keys() == 4  # init/, round, n, late
print(f"ok {phase}", flush=True)
