"""The chaos suite's resumable training job: a no-torch stand-in that starts in milliseconds.

    chaos_worker.py --dir SHARED --steps N [--every K] [--step-time S] [--linger S]

Each rank, in each round drun starts:
  1. learns the round's identity from drun's own c10d store (MASTER_ADDR:MASTER_PORT, the
     torch 1.13 wire protocol): COMPARE_SET of key "chaos/round" from "" to a fresh random id
     returns whichever id the round's first rank wrote. drun gives each round a fresh store,
     so one id = one round as drun formed it;
  2. reads the checkpoint SHARED/ckpt.json (the last committed step and the round that
     committed it; step 0 when absent) and resumes after it;
  3. per step: a barrier through the store (ADD, the last arrival SETs a go key, all WAIT for
     it: the collective that keeps ranks in lockstep, as an all-reduce would), "compute"
     (--step-time seconds), a record; rank 0 then commits every K-th step (and the last) to
     the checkpoint (write + rename), then a record (a stop between the two leaves a
     checkpoint without its record: the checks allow it, see chaos_checks.check_progress);
  4. after the last step a final barrier, rank 0 waits --linger seconds (so a test can act
     while the other nodes' workers have all succeeded), a "done" record, exit 0.
A worker whose store goes away (its round was stopped) exits 1 without another record.

Records: one JSON object per line in SHARED/records/<host>-<pid>.jsonl, each with t (time.time(),
one clock for every host of the testbed), kind (start|step|commit|done), round, rank, world,
step, host, pid. tests/chaos/chaos_driver.py checks its invariants on them.
"""
import argparse
import json
import os
import socket
import struct
import sys
import time
import uuid

# torch 1.13's TCPStore opcodes (rendezvous/store/c10d_store_parser.cc, kV113Ops).
SET, COMPARE_SET, GET, ADD, CHECK, WAIT = 0, 1, 2, 3, 4, 5


class Store:
    """A minimal client of drun's c10d store in torch 1.13's dialect."""

    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=60)
        self.sock.settimeout(None)

    def _send(self, op, *fields):
        out = bytes([op])
        for f in fields:
            out += struct.pack("<q", f) if isinstance(f, int) else struct.pack("<Q", len(f)) + f
        self.sock.sendall(out)

    def _read(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the store closed the connection")
            buf += chunk
        return buf

    def compare_set(self, key, expected, desired):
        self._send(COMPARE_SET, key.encode(), expected.encode(), desired.encode())
        (n,) = struct.unpack("<Q", self._read(8))
        return self._read(n).decode()

    def add(self, key, delta):
        self._send(ADD, key.encode(), delta)
        return struct.unpack("<q", self._read(8))[0]

    def set(self, key, value):
        self._send(SET, key.encode(), value.encode())

    def wait(self, key):
        self.sock.sendall(bytes([WAIT]) + struct.pack("<Q", 1) + struct.pack("<Q", len(key))
                          + key.encode())
        self._read(1)

    def barrier(self, name, world):
        if self.add(f"chaos/arrive/{name}", 1) == world:
            self.set(f"chaos/go/{name}", "1")
        self.wait(f"chaos/go/{name}")


class Recorder:
    def __init__(self, directory, base):
        os.makedirs(os.path.join(directory, "records"), exist_ok=True)
        self.path = os.path.join(directory, "records", f"{base['host']}-{base['pid']}.jsonl")
        self.base = base

    def __call__(self, kind, **fields):
        rec = dict(self.base, t=time.time(), kind=kind, **fields)
        with open(self.path, "a") as f:
            f.write(json.dumps(rec) + "\n")
        # The same event on stdout, through drun, for the driver to wait on.
        print(f"chaos kind={kind} step={fields.get('step')} round={rec['round']} "
              f"rank={rec['rank']}", flush=True)


def read_checkpoint(directory):
    """(step, round that committed it) of SHARED/ckpt.json; (0, None) before any commit."""
    try:
        with open(os.path.join(directory, "ckpt.json")) as f:
            ckpt = json.load(f)
        return ckpt["step"], ckpt["round"]
    except FileNotFoundError:
        return 0, None


def commit(directory, step, round_id):
    path = os.path.join(directory, "ckpt.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"step": step, "round": round_id}, f)
    os.rename(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--step-time", type=float, default=0.2)
    ap.add_argument("--linger", type=float, default=0.0)
    args = ap.parse_args()
    env = os.environ
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    try:
        store = Store(env["MASTER_ADDR"], int(env["MASTER_PORT"]))
        round_id = store.compare_set("chaos/round", "", uuid.uuid4().hex)
    except OSError as e:
        print(f"chaos_worker rank {rank}: the store: {e}", file=sys.stderr, flush=True)
        return 1
    rec = Recorder(args.dir, {"round": round_id, "rank": rank, "world": world,
                              "host": socket.gethostname(), "pid": os.getpid()})
    done, ckpt_round = read_checkpoint(args.dir)
    first = done + 1
    rec("start", step=first, ckpt_round=ckpt_round,
        restart=int(env.get("TORCHELASTIC_RESTART_COUNT", "0")))
    try:
        for step in range(first, args.steps + 1):
            store.barrier(f"step{step}", world)
            time.sleep(args.step_time)  # the step's computation
            rec("step", step=step)
            if rank == 0 and (step % args.every == 0 or step == args.steps):
                commit(args.dir, step, round_id)
                rec("commit", step=step)
        store.barrier("end", world)
    except OSError as e:
        print(f"chaos_worker rank {rank}: the store: {e}", file=sys.stderr, flush=True)
        return 1
    if rank == 0 and args.linger > 0:
        time.sleep(args.linger)
    rec("done", step=args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
