"""Each worker leaves three processes outside its process group, as programs do: a child in
a session of its own (subprocess.Popen(..., start_new_session=True)) that starts one more
process, and a daemon (a double fork and setsid). Their pids go to
PIDDIR/escapee_<rank>_{session,inner,daemon}.pid; the worker then prints "ready" and exits 0
(MODE exit) or waits to be stopped (MODE wait). Every one of them sleeps for an hour with
this file's name in its command line.
    new_session_child.py PIDDIR [MODE]"""
import os
import subprocess
import sys

piddir = sys.argv[1]
mode = sys.argv[2] if len(sys.argv) > 2 else "exit"
rank = os.environ.get("RANK", "0")
me = os.path.abspath(__file__)
SLEEP = "import time; time.sleep(3600)"
# The child in its own session: it starts one more process, then says both pids on fd W.
SESSION = f"""
import os, sys
w = int(sys.argv[2])
inner = os.fork()
if inner == 0:
    os.close(w)
    os.execv(sys.executable, [sys.executable, "-c", {SLEEP!r}, sys.argv[1]])
os.write(w, f"{{os.getpid()}} {{inner}}".encode())
os.close(w)
{SLEEP}
"""


def write_pid(name, pid):
    path = os.path.join(piddir, f"escapee_{rank}_{name}.pid")
    with open(path + ".tmp", "w") as f:
        f.write(str(pid))
    os.rename(path + ".tmp", path)


def read_all(fd):
    data = b""
    while True:
        chunk = os.read(fd, 64)
        if not chunk:
            return data.decode()
        data += chunk


r, w = os.pipe()
subprocess.Popen([sys.executable, "-c", SESSION, me, str(w)], pass_fds=[w], start_new_session=True)
os.close(w)
session, inner = read_all(r).split()
os.close(r)
write_pid("session", session)
write_pid("inner", inner)

r, w = os.pipe()
if os.fork() == 0:  # the daemon's double fork
    os.setsid()
    if os.fork() == 0:
        os.close(r)
        os.write(w, str(os.getpid()).encode())
        os.close(w)
        os.execv(sys.executable, [sys.executable, "-c", SLEEP, me])
    os._exit(0)
os.close(w)
write_pid("daemon", read_all(r))
os.close(r)
os.wait()  # the daemon's first fork
print(f"ready rank {rank}", flush=True)
if mode == "wait":
    import signal
    signal.pause()
