"""No process outlives its job: workers and the grandchildren they fork (staying in the
worker's process group) are gone after success, after Ctrl-C, SIGTERM and kill -9 of drun;
so are the processes a worker starts in a session of its own (start_new_session, setsid, a
daemon's double fork) once the job ends. `nohup drun` keeps the job through a hangup."""
import glob
import os
import signal
import time

from drun_testlib import (DrunTestCase, base_env, descendants, kill_and_reap_descendants, main,
                          program, read_pid_files, wait_pids_dead)

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

    def escapees(self, count):
        pids = read_pid_files(self.tmp, "escapee_")
        self.assertEqual(len(pids), count, pids)
        alive = wait_pids_dead(pids.values(), timeout=0.001, marker="new_session_child.py")
        return pids, alive

    def assertEscapeesDead(self, pids):
        alive = wait_pids_dead(pids.values(), marker="new_session_child.py")
        self.assertEqual(alive, [], "still alive 2 s after drun ended: "
                         + ", ".join(f"{n}={p}" for n, p in pids.items() if p in alive))

    def test_nothing_left_from_a_new_session(self):
        # subprocess.Popen(start_new_session=True), its child, and a daemon, per worker: each
        # outside the worker's process group, all adopted by drun (the subreaper) and ended.
        run = self.drun("--standalone", "--nproc-per-node", 2, program("new_session_child.py"),
                        self.tmp)
        self.assertExit(run, 0)
        pids, _ = self.escapees(6)
        self.assertEscapeesDead(pids)
        self.assertIn("drun: ended 6 processes the job left running outside its process "
                      "groups (setsid, a daemon)", run.stderr_lines)

    def test_nothing_left_from_a_new_session_after_sigterm(self):
        run = self.start("--standalone", "--nproc-per-node", 2, program("new_session_child.py"),
                         self.tmp, "wait")
        run.wait_for_line(r"^\[rank\d+\]: ready rank", count=2)
        pids, alive = self.escapees(6)
        self.assertEqual(len(alive), 6, "the escapees run while the job does")
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=30)
        self.assertExit(run, 143)
        self.assertEscapeesDead(pids)

    def test_what_node_setup_left_running_lives_until_the_job_ends(self):
        # A service the --node-setup command starts for the workers (in a session of its
        # own) serves the whole job, then ends with it.
        pidfile = os.path.join(self.tmp, "service.pid")
        setup = ("/usr/bin/python3 -c 'import subprocess; p = subprocess.Popen([\"sleep\", \"300\"], "
                 f"start_new_session=True); open(\"{pidfile}\", \"w\").write(str(p.pid))'")
        run = self.drun("--standalone", "--nproc-per-node", 2, "--node-setup", setup, "--no-python",
                        "/bin/sh", "-c", f"kill -0 $(cat {pidfile}) && echo service-alive")
        self.assertExit(run, 0)
        self.assertEqual(len([l for l in run.stdout_lines if l.endswith("service-alive")]), 2,
                         run.describe())
        with open(pidfile) as f:
            service = int(f.read())
        self.assertEqual(wait_pids_dead([service]), [], "the service outlived the job")

    def test_nohup_keeps_the_job_through_a_hangup(self):
        # nohup's SIGHUP stays ignored. SIGUSR1 comes after SIGHUP (the lower number is
        # delivered first): once the workers have it, drun has taken or left the SIGHUP.
        run = self.start("--standalone", "--nproc-per-node", 2, program("signal_probe.py"),
                         self.tmp, wrapper=["nohup"])
        run.wait_for_line(r"^\[rank\d+\]: ready", count=2)
        os.kill(run.pid, signal.SIGHUP)
        os.kill(run.pid, signal.SIGUSR1)
        run.wait(timeout=30)
        self.assertExit(run, 0)
        self.assertEqual(sorted(n for n in os.listdir(self.tmp) if n.startswith("got_")),
                         ["got_SIGUSR1_0", "got_SIGUSR1_1"])

    def test_a_caught_sighup_stops_the_job(self):
        # Without nohup, SIGHUP stops the job as before (129).
        run = self.start("--standalone", "--nproc-per-node", 2, program("signal_probe.py"),
                         self.tmp)
        run.wait_for_line(r"^\[rank\d+\]: ready", count=2)
        run.send_signal(signal.SIGHUP)
        run.wait(timeout=30)
        self.assertExit(run, 129)
        self.assertEqual(sorted(n for n in os.listdir(self.tmp) if n.startswith("got_")),
                         ["got_SIGHUP_0", "got_SIGHUP_1"])

    def test_the_next_run_removes_what_drun_and_its_guardian_killed_left(self):
        # kill -9 of drun and of its guardian (kill -9 of the process group, the OOM killer):
        # their temporary directory and control socket stay, until this user's next drun.
        tmpdir, xdg = os.path.join(self.tmp, "t"), os.path.join(self.tmp, "xdg")
        os.mkdir(tmpdir)
        os.mkdir(xdg, 0o700)
        env = base_env(TMPDIR=tmpdir, XDG_RUNTIME_DIR=xdg)
        run, pids = self.start_waiting_workers(env=env)
        guardian = [p for p in descendants(run.pid)
                    if os.path.realpath(f"/proc/{p}/exe") == os.path.realpath(run.args[0])]
        self.assertEqual(len(guardian), 1, guardian)
        os.kill(guardian[0], signal.SIGKILL)
        wait_pids_dead(guardian)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
        kill_and_reap_descendants()  # its workers: nobody was left to kill them
        left = (glob.glob(os.path.join(tmpdir, "drun-*")) + glob.glob(os.path.join(xdg, "drun", "*.sock"))
                + glob.glob(os.path.join(xdg, "drun", "*.tmp")))
        self.assertEqual(len(left), 3, left)  # the directory, the socket, the link naming it
        # Not provably stale, so kept: a directory no link names, one a live pid's link names.
        foreign = os.path.join(tmpdir, "drun-foreign")
        os.mkdir(foreign)
        live = os.path.join(tmpdir, "drun-live")
        os.mkdir(live)
        os.symlink(live, os.path.join(xdg, "drun", f"{os.getpid()}.tmp"))
        again = self.drun("--standalone", "--nproc-per-node", 1, program("exit_code.py"), 0, 0, env=env)
        self.assertExit(again, 0)
        self.assertEqual([p for p in left if os.path.lexists(p)], [])
        self.assertTrue(os.path.isdir(foreign))
        self.assertTrue(os.path.isdir(live))
        self.assertTrue(os.path.lexists(os.path.join(xdg, "drun", f"{os.getpid()}.tmp")))
        # A clean run leaves no link of its own.
        self.assertEqual(glob.glob(os.path.join(xdg, "drun", "*.tmp")),
                         [os.path.join(xdg, "drun", f"{os.getpid()}.tmp")])

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
