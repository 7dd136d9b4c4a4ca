"""A worker for the log collection tests: writes SIZE random bytes (any byte value: NULs,
carriage returns, invalid UTF-8, no newline at the end) on stdout and one line naming its
host on stderr, and keeps its own copy of both in COPIES/<rank>.{out,err} (a directory the
test reads), so the test can check the log files byte for byte. With a third argument GATE
(a FIFO the test holds open) it then waits until the test opens the gate. No PyTorch: plain
Python."""
import os
import socket
import sys

size = int(sys.argv[1])
copies = sys.argv[2]
rank = os.environ["RANK"]
data = os.urandom(size)
err = f"rank {rank} on {socket.gethostname()}\n".encode()
with open(os.path.join(copies, f"{rank}.out"), "wb") as f:
    f.write(data)
with open(os.path.join(copies, f"{rank}.err"), "wb") as f:
    f.write(err)
out = sys.stdout.buffer
for i in range(0, size, 65536):
    out.write(data[i:i + 65536])
out.flush()
sys.stderr.buffer.write(err)
sys.stderr.flush()
if len(sys.argv) > 3:
    with open(sys.argv[3], "rb") as gate:
        gate.read()
