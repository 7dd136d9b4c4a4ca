"""A private tmux server for the terminal tests (tests/e2e/test_io.py, tests/ssh/
test_ssh_stdin.py): a real terminal whose screen the test reads, for programs that behave
differently on a TTY (pdb, progress bars, prompts)."""
import os
import re
import subprocess
import time


class Tmux:
    """A private tmux server (its own socket) running one command in a 200x50 pane (or
    `width` columns)."""

    def __init__(self, tmp, command, width=200):
        self.sock = os.path.join(tmp, "tmux.sock")
        self.run("new-session", "-d", "-s", "t", "-x", str(width), "-y", "50", command)

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


def pdb_dialogue(tmux, rank0, rank1):
    """The terminal tests' pdb session: rank 0 (console prefix regex `rank0`, e.g.
    r"\\[rank0\\]") stops at breakpoint() with x = 42; types `p x`, sees 42 on a line of
    its own under the prefix and the next prompt, types `c`; returns the screen once the
    pane shows DRUN_EXIT=N, after checking the exit was 0 and both ranks finished."""
    tmux.wait_for(rf"^{rank0}: \(Pdb\) ?$")  # tmux trims trailing blanks
    tmux.keys("p x", "Enter")
    tmux.wait_for(rf"^{rank0}: 42$")
    # The next prompt (a second "(Pdb)" line) before typing on.
    tmux.wait_for(rf"^{rank0}: 42\n(.*\n)*{rank0}[:+] \(Pdb\) ?$")
    tmux.keys("c", "Enter")
    screen = tmux.wait_for(r"^DRUN_EXIT=\d+")
    assert "DRUN_EXIT=0" in screen, screen
    assert re.search(rf"(?m)^{rank0}: \(Pdb\) p x$", screen), screen
    # The worker's line is "(Pdb) finished 0 42" (prompt, then output): shown whole, or
    # continued under the "+" prefix when rank 1 wrote or the typed "c" ended the line.
    assert re.search(rf"(?m)^{rank0}[:+] (\(Pdb\) )?finished 0 42$", screen), screen
    assert re.search(rf"(?m)^{rank1}: finished 1 42$", screen), screen
    return screen
