"""Prints MASTER_ADDR:MASTER_PORT and blocks until a signal ends it."""
import os
import signal

print(f"master {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
signal.pause()
