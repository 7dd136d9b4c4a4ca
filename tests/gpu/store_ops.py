"""The running torch's TCPStore client, every operation it offers, against drun's store
(tests/gpu/run_gpu_checks.sh, check 3). Connecting sends what the client sends first
(2.x: VALIDATE, then PING).

    store_ops.py HOST PORT        a store already served there (drun_store_server)
    store_ops.py --env            MASTER_ADDR/MASTER_PORT: a worker of drun, its agent store

Prints `GPUCHECK {json}`: for every operation "ok", "absent" (this torch has no such
method) or the error; exits 1 when any operation failed.
"""
import datetime
import json
import os
import sys

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=30)


def expect(value, wanted):
    if value != wanted:
        raise AssertionError(f"got {value!r}, wanted {wanted!r}")


def operations(s, other, prefix):
    """(name, method name, function) for each operation; keys under `prefix`."""
    k = lambda name: f"{prefix}/{name}"  # noqa: E731
    big = bytes(range(256)) * 4096
    return [
        ("set/get", "get", lambda: (s.set(k("a"), b"\x00\xff"), expect(s.get(k("a")), b"\x00\xff"))),
        ("set/get 1 MiB", "get", lambda: (s.set(k("big"), big), expect(s.get(k("big")), big))),
        ("another client sees it", "get", lambda: expect(other.get(k("a")), b"\x00\xff")),
        ("add", "add", lambda: (expect(s.add(k("n"), 5), 5), expect(s.add(k("n"), -2), 3))),
        ("compare_set", "compare_set", lambda: (
            expect(s.compare_set(k("cas"), "", "first"), b"first"),
            expect(s.compare_set(k("cas"), "first", "second"), b"second"),
            expect(s.compare_set(k("cas"), "wrong", "third"), b"second"))),
        ("check", "check", lambda: (expect(s.check([k("a")]), True),
                                    expect(s.check([k("missing")]), False))),
        ("wait (present)", "wait", lambda: s.wait([k("a")])),
        ("wait (timeout)", "wait", lambda: wait_times_out(s, k("never"))),
        ("delete_key", "delete_key", lambda: (expect(s.delete_key(k("n")), True),
                                              expect(s.delete_key(k("n")), False))),
        ("num_keys", "num_keys", lambda: num_keys_grows(s, k("counted"))),
        ("multi_set/multi_get", "multi_get", lambda: (
            s.multi_set([k("m1"), k("m2")], [b"1", b"2"]),
            expect(s.multi_get([k("m1"), k("m2")]), [b"1", b"2"]))),
        ("append", "append", lambda: (s.append(k("log"), b"ab"), s.append(k("log"), b"cd"),
                                      expect(s.get(k("log")), b"abcd"))),
        ("queue_push/queue_len/queue_pop", "queue_push", lambda: (
            s.queue_push(k("q"), b"x"), s.queue_push(k("q"), b"y"),
            expect(s.queue_len(k("q")), 2), expect(s.queue_pop(k("q")), b"x"),
            expect(s.queue_pop(k("q"), block=False), b"y"))),
        ("list_keys", "list_keys", lambda: expect(k("a") in s.list_keys(), True)),
        ("has_extended_api", "has_extended_api", lambda: expect(s.has_extended_api(), True)),
        ("set_timeout", "set_timeout", lambda: s.set_timeout(TIMEOUT)),
    ]


def wait_times_out(s, key):
    try:
        s.wait([key], datetime.timedelta(milliseconds=300))
    except Exception as e:  # torch raises DistStoreError / RuntimeError by version
        return e
    raise AssertionError("wait on a missing key returned")


def num_keys_grows(s, key):
    """At least one more: other workers of the job may add keys meanwhile."""
    before = s.num_keys()
    s.set(key, b"1")
    expect(s.num_keys() >= before + 1, True)


def main():
    if sys.argv[1:] == ["--env"]:
        host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        prefix = f"gpucheck/rank{os.environ.get('RANK', '0')}"
    else:
        host, port, prefix = sys.argv[1], int(sys.argv[2]), "gpucheck"
    s = dist.TCPStore(host, port, is_master=False, timeout=TIMEOUT)
    other = dist.TCPStore(host, port, is_master=False, timeout=TIMEOUT)
    results = {}
    for name, method, fn in operations(s, other, prefix):
        if not hasattr(s, method):
            results[name] = "absent"
            continue
        try:
            fn()
            results[name] = "ok"
        except Exception as e:  # one line per failed operation, the rest still run
            results[name] = f"error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    failed = [n for n, r in results.items() if r.startswith("error")]
    print("GPUCHECK " + json.dumps({"torch": torch.__version__, "ops": results,
                                    "failed": failed}), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
