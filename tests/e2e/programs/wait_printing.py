"""Prints 'waiting' and blocks until a signal ends it."""
import signal

print("waiting", flush=True)
signal.pause()
