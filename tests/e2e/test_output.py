"""Console output: per-rank prefixes, whole lines only, stdout/stderr kept apart, rank
filters, torchrun's --log-dir/--redirects/--tee files, and keeping up with a flood."""
import os
import re
import shlex
import shutil
import unittest

from drun_testlib import PYTHON, DrunTestCase, PREFIX_RE, drun_path, main, program, rank_lines, \
    run_dir, texts_of
from tmux_pane import Tmux

NPROC = 4


def log_file(logs, run_id, attempt, local_rank, stream):
    return os.path.join(run_dir(logs, run_id), f"attempt_{attempt}", str(local_rank), f"{stream}.log")


def read_lines(path):
    with open(path) as f:
        return f.read().splitlines()


class OutputTest(DrunTestCase):

    def test_long_lines_written_in_small_pieces_stay_whole(self):
        lines, length = 40, 1500
        run = self.drun("--standalone", "--nproc-per-node", NPROC,
                        program("chunked_lines.py"), lines, length, 7)
        self.assertExit(run, 0)
        line_re = re.compile(r"^\[rank(\d)\]: r(\d)l(\d+):(\d+)$")
        seen = {}
        for stream, console in (("stdout", run.stdout_lines), ("stderr", run.stderr_lines)):
            for line in console:
                if line.startswith("drun: "):
                    self.assertEqual(stream, "stderr", f"drun message on stdout: {line!r}")
                    continue
                m = line_re.match(line)
                self.assertIsNotNone(m, f"broken or unprefixed line on {stream}: {line[:120]!r}")
                rank, body_rank, index, digits = m.groups()
                self.assertEqual(rank, body_rank, f"line of rank {body_rank} under prefix {rank}")
                self.assertEqual(digits, rank * len(digits), "bytes of another rank mixed in")
                self.assertEqual(len(line) - len(f"[rank{rank}]: "), length)
                # Every 10th line went to stderr: it must come out on drun's stderr.
                self.assertEqual(stream, "stderr" if int(index) % 10 == 9 else "stdout")
                seen.setdefault(int(rank), set()).add(int(index))
        self.assertEqual(seen, {r: set(range(lines)) for r in range(NPROC)})

    def test_streams_separate_and_last_line_without_newline(self):
        run = self.drun("--standalone", "--nproc-per-node", NPROC, program("streams.py"), 2)
        self.assertExit(run, 0)
        for rank in range(NPROC):
            with self.subTest(rank=rank):
                self.assertEqual(texts_of(run.stdout_lines, rank),
                                 [f"out {rank} 0", f"out {rank} 1",
                                  f"last {rank} without newline"])
                self.assertEqual(texts_of(run.stderr_lines, rank),
                                 [f"err {rank} 0", f"err {rank} 1"])
        for line in run.stdout_lines:
            self.assertRegex(line, PREFIX_RE, "unprefixed line on stdout")
        self.assertFalse(any("\x1b[" in l for l in run.stdout_lines + run.stderr_lines),
                         "colour codes while not on a terminal")

    def test_local_ranks_filter(self):
        run = self.drun("--standalone", "--nproc-per-node", NPROC, "--local-ranks-filter",
                        "0,2", program("streams.py"), 1)
        self.assertExit(run, 0)
        self.assertEqual(sorted({r for r, _ in rank_lines(run.stdout_lines)}), [0, 2],
                         run.describe())
        self.assertEqual(sorted({r for r, _ in rank_lines(run.stderr_lines)}), [0, 2])

    def test_tee_writes_log_files_and_console(self):
        logs = os.path.join(self.tmp, "logs")
        run = self.drun("--standalone", "--nproc-per-node", NPROC, "--log-dir", logs,
                        "--run-id", "teejob", "-t", "3", program("streams.py"), 2)
        self.assertExit(run, 0)
        for rank in range(NPROC):
            with self.subTest(rank=rank):
                out = read_lines(log_file(logs, "teejob", 0, rank, "stdout"))
                err = read_lines(log_file(logs, "teejob", 0, rank, "stderr"))
                for text in (f"out {rank} 0", f"out {rank} 1", f"last {rank} without newline"):
                    self.assertTrue(any(text in line for line in out), (text, out))
                for text in (f"err {rank} 0", f"err {rank} 1"):
                    self.assertTrue(any(text in line for line in err), (text, err))
                self.assertIn(f"out {rank} 1", texts_of(run.stdout_lines, rank))
                self.assertIn(f"err {rank} 1", texts_of(run.stderr_lines, rank))

    def test_redirect_writes_log_files_only(self):
        logs = os.path.join(self.tmp, "logs")
        run = self.drun("--standalone", "--nproc-per-node", 2, "--log-dir", logs,
                        "--run-id", "redirjob", "--redirects", "3", program("streams.py"), 1)
        self.assertExit(run, 0)
        self.assertEqual(rank_lines(run.stdout_lines), [], run.describe())
        self.assertEqual(rank_lines(run.stderr_lines), [], run.describe())
        for rank in range(2):
            out = read_lines(log_file(logs, "redirjob", 0, rank, "stdout"))
            err = read_lines(log_file(logs, "redirjob", 0, rank, "stderr"))
            self.assertTrue(any(f"out {rank} 0" in line for line in out), out)
            self.assertTrue(any(f"err {rank} 0" in line for line in err), err)

    def test_redirect_per_local_rank(self):
        # Rank 0: stdout to the file only; rank 1: stderr to the file only.
        logs = os.path.join(self.tmp, "logs")
        run = self.drun("--standalone", "--nproc-per-node", 2, "--log-dir", logs,
                        "--run-id", "mapjob", "-r", "0:1,1:2", program("streams.py"), 1)
        self.assertExit(run, 0)
        self.assertEqual(texts_of(run.stdout_lines, 0), [], run.describe())
        self.assertEqual(texts_of(run.stderr_lines, 0), ["err 0 0"])
        self.assertEqual(texts_of(run.stdout_lines, 1), ["out 1 0", "last 1 without newline"])
        self.assertEqual(texts_of(run.stderr_lines, 1), [], run.describe())
        out0 = read_lines(log_file(logs, "mapjob", 0, 0, "stdout"))
        err1 = read_lines(log_file(logs, "mapjob", 0, 1, "stderr"))
        self.assertTrue(any("out 0 0" in line for line in out0), out0)
        self.assertTrue(any("err 1 0" in line for line in err1), err1)

    def test_log_dir_has_a_directory_per_attempt(self):
        logs = os.path.join(self.tmp, "logs")
        run = self.drun("--standalone", "--nproc-per-node", 2, "--max-restarts", 1,
                        "--log-dir", logs, "--run-id", "retry", "--tee", "3",
                        program("restart_once.py"))
        self.assertExit(run, 0)
        err = read_lines(log_file(logs, "retry", 0, 1, "stderr"))
        self.assertTrue(any("attempt 0: rank 1 failing" in line for line in err), err)
        for rank in range(2):
            out = read_lines(log_file(logs, "retry", 1, rank, "stdout"))
            self.assertTrue(any(f"attempt 1: rank {rank} succeeded" in l for l in out), out)

    def test_keeps_up_with_200_mb_of_output(self):
        megabytes = 200
        run = self.start("--standalone", "--nproc-per-node", 1, program("flood.py"), megabytes,
                         count_stdout=True)
        run.wait(timeout=120)
        self.assertExit(run, 0)
        lines_per_mb = 10486
        self.assertEqual(run.stdout_count, megabytes * lines_per_mb + 1, run.describe())
        self.assertEqual(run.stdout_last, b"[rank0]: flood done")
        self.assertGreaterEqual(run.stdout_bytes, megabytes * lines_per_mb * (100 + 9))



# Two ranks drawing `\r` progress bars in lockstep (a gloo barrier between steps), like two
# tqdm bars; each ends its line with " done". At step 10 rank 0 waits until the test opens
# the FIFO argv[1] (the other rank waits at the barrier), so the test sees the screen mid-run.
TWO_BARS = """import os, sys, torch.distributed as dist
dist.init_process_group("gloo")
for i in range(1, 22):
    sys.stdout.write(f"\\rstep {i}/21"); sys.stdout.flush()
    if i == 10 and os.environ["RANK"] == "0":
        open(sys.argv[1]).read()
    dist.barrier()
sys.stdout.write(" done\\n"); sys.stdout.flush()
dist.barrier()
dist.destroy_process_group()
"""


@unittest.skipIf(shutil.which("tmux") is None, "tmux is not installed (tests/install_deps.sh)")
class TerminalBarsTest(DrunTestCase):
    def test_each_ranks_bar_keeps_its_own_row_on_a_terminal(self):
        script = os.path.join(self.tmp, "two_bars.py")
        with open(script, "w") as f:
            f.write(TWO_BARS)
        fifo = os.path.join(self.tmp, "go")
        os.mkfifo(fifo)
        command = " ".join(shlex.quote(a) for a in (
            "env", f"PYTHON_EXEC={PYTHON}", drun_path(), "--standalone", "--nproc-per-node", "2",
            script, fifo))
        tmux = Tmux(self.tmp, f"{command}; echo DRUN_EXIT=$?; exec sleep 600")
        self.addCleanup(tmux.close)
        # Mid-run: both bars at step 10, each on its own row, and no redraw became a row.
        tmux.wait_for(r"^\[rank0\]: step 10/21$")
        screen = tmux.wait_for(r"^\[rank1\]: step 10/21$")
        self.assertEqual(sorted(r for r in screen.splitlines() if "step" in r),
                         ["[rank0]: step 10/21", "[rank1]: step 10/21"], screen)
        with open(fifo, "w"):
            pass  # rank 0 goes on
        screen = tmux.wait_for(r"^DRUN_EXIT=\d+")
        self.assertIn("DRUN_EXIT=0", screen)
        self.assertEqual(sorted(r for r in screen.splitlines() if "step" in r),
                         ["[rank0]: step 21/21 done", "[rank1]: step 21/21 done"], screen)


if __name__ == "__main__":
    main()
