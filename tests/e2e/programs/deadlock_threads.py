"""Two Python threads deadlock on two locks (each holds one and waits for the other);
the main thread joins them. Prints 'deadlocked' once both hold their first lock."""
import threading

a, b = threading.Lock(), threading.Lock()
both = threading.Barrier(3)


def first():
    with a:
        both.wait()
        b.acquire()  # FIRST WAITS


def second():
    with b:
        both.wait()
        a.acquire()  # SECOND WAITS


threads = [threading.Thread(target=first, name="first"), threading.Thread(target=second, name="second")]
for t in threads:
    t.start()
both.wait()
# Said from the line the main thread then blocks on (joining), so a dump taken once the
# line is out finds it on this line.
print("deadlocked", flush=True) or [t.join() for t in threads]  # MAIN JOINS
