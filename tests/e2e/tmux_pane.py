"""A private tmux server for the terminal tests (tests/e2e/test_io.py, tests/ssh/
test_ssh_stdin.py): a real terminal whose screen the test reads, for programs that behave
differently on a TTY (pdb, progress bars, prompts)."""
import os
import re
import subprocess
import time


class Tmux:
    """A private tmux server (its own socket) running one command in a 200x50 pane."""

    def __init__(self, tmp, command):
        self.sock = os.path.join(tmp, "tmux.sock")
        self.run("new-session", "-d", "-s", "t", "-x", "200", "-y", "50", command)

    def run(self, *args):
        return subprocess.run(["tmux", "-S", self.sock, *args], check=True,
                              capture_output=True, text=True).stdout

    def screen(self):
        return self.run("capture-pane", "-p", "-t", "t", "-S", "-200")

    def wait_for(self, pattern, bound=120.0):  # a hang bound, never a delay
        # tmux has no event for "the pane shows X": a bounded poll on the pane's content.
        deadline = time.monotonic() + bound
        while True:
            text = self.screen()
            if re.search(pattern, text, re.M):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"pane never showed {pattern!r}:\n{text}")
            time.sleep(0.05)

    def keys(self, *keys):
        self.run("send-keys", "-t", "t", *keys)

    def close(self):
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)
