"""No process outlives its job: workers and the grandchildren they fork (staying in the
worker's process group) are gone after success, after Ctrl-C, SIGTERM and kill -9 of drun."""
import glob
import os
import signal
import time

from drun_testlib import DrunTestCase, base_env, main, program, read_pid_files, wait_pids_dead

NPROC = 4
MARKER = "fork_grandchild.py"


class ProcessCleanupTest(DrunTestCase):

    def pids(self):
        pids = read_pid_files(self.tmp, "worker_")
        pids.update(read_pid_files(self.tmp, "grandchild_"))
        self.assertEqual(len(pids), 2 * NPROC, pids)
        return pids

    def assertAllDead(self, pids):
        alive = wait_pids_dead(pids.values(), marker=MARKER)
        self.assertEqual(alive, [], "still alive 2 s after drun ended: "
                         + ", ".join(f"{n}={p}" for n, p in pids.items() if p in alive))

    def assertWorkersGot(self, signame):
        got = {}
        for rank in range(NPROC):
            path = os.path.join(self.tmp, f"signal_{rank}")
            if os.path.exists(path):
                with open(path) as f:
                    got[rank] = f.read()
        self.assertEqual(got, {rank: signame for rank in range(NPROC)},
                         f"drun did not forward {signame} to every worker")

    def start_waiting_workers(self, env=None):
        run = self.start("--standalone", "--nproc-per-node", NPROC, "--shutdown-timeout", 5,
                         program("fork_grandchild.py"), self.tmp, "wait", env=env)
        run.wait_for_line(r"^\[rank\d+\]: ready rank", count=NPROC)
        return run, self.pids()

    def test_nothing_left_after_success(self):
        run = self.drun("--standalone", "--nproc-per-node", NPROC,
                        program("fork_grandchild.py"), self.tmp, "exit")
        self.assertExit(run, 0)
        self.assertAllDead(self.pids())

    def test_nothing_left_after_sigint(self):
        run, pids = self.start_waiting_workers()
        run.send_signal(signal.SIGINT)
        run.wait(timeout=30)
        self.assertExit(run, 130)
        self.assertAllDead(pids)
        self.assertWorkersGot("SIGINT")

    def test_nothing_left_after_sigterm(self):
        run, pids = self.start_waiting_workers()
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=30)
        self.assertExit(run, 143)
        self.assertAllDead(pids)
        self.assertWorkersGot("SIGTERM")

    def test_nothing_left_after_kill_9(self):
        run, pids = self.start_waiting_workers()
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
        self.assertExit(run, -signal.SIGKILL)
        self.assertAllDead(pids)

    def test_kill_9_leaves_no_temporary_directory_or_socket(self):
        # drun's own files: the error files' /tmp/drun-XXXXXX and the `drun stacks` socket.
        tmpdir, xdg = os.path.join(self.tmp, "t"), os.path.join(self.tmp, "xdg")
        os.mkdir(tmpdir)
        os.mkdir(xdg, 0o700)
        run, pids = self.start_waiting_workers(env=base_env(TMPDIR=tmpdir, XDG_RUNTIME_DIR=xdg))
        self.assertEqual(len(glob.glob(os.path.join(tmpdir, "drun-*"))), 1)
        self.assertEqual(len(glob.glob(os.path.join(xdg, "drun", "*.sock"))), 1)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
        self.assertAllDead(pids)
        # The guardian removes them right after it killed the workers: a bounded poll.
        deadline = time.monotonic() + 10
        while (glob.glob(os.path.join(tmpdir, "drun-*")) or
               glob.glob(os.path.join(xdg, "drun", "*.sock"))) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(glob.glob(os.path.join(tmpdir, "drun-*")), [])
        self.assertEqual(glob.glob(os.path.join(xdg, "drun", "*.sock")), [])


if __name__ == "__main__":
    main()
