"""--node-setup: a shell command run once per node before the workers start."""
import os
import shlex

from drun_testlib import (PYTHON, DrunTestCase, base_env, example, load_json_files, main, program,
                          texts_of)

NPROC = 4


class NodeSetupTest(DrunTestCase):

    def test_failing_setup_ends_job_with_its_code(self):
        run = self.drun("--standalone", "--nproc-per-node", NPROC, "--node-setup", "exit 7",
                        program("node_setup_probe.py"), self.tmp,
                        os.path.join(self.tmp, "setup.log"))
        self.assertExit(run, 7)
        self.assertEqual(load_json_files(self.tmp, "probe_"), {}, "a worker ran")
        self.assertEqual(run.stdout_lines, [], run.describe())

    def test_setup_runs_once_before_workers(self):
        setup_log = os.path.join(self.tmp, "setup.log")
        data_dir = os.path.join(self.tmp, "fashion-mnist")
        # The example's dataset preparation, and a line appended per run of the command.
        command = (f"{shlex.quote(PYTHON)} {shlex.quote(example('prepare_fashion_mnist.py'))} "
                   f"{shlex.quote(data_dir)} && echo setup-ran >> {shlex.quote(setup_log)}")
        run = self.drun("--standalone", "--nproc-per-node", NPROC, "--node-setup", command,
                        program("node_setup_probe.py"), self.tmp, setup_log, data_dir)
        self.assertExit(run, 0)
        with open(setup_log) as f:
            self.assertEqual(f.read().splitlines(), ["setup-ran"])
        probes = load_json_files(self.tmp, "probe_")
        self.assertEqual(len(probes), NPROC, run.describe())
        for name, probe in probes.items():
            with self.subTest(probe=name):
                self.assertEqual(probe["setup_log"], ["setup-ran"])
                self.assertEqual(probe["dataset_files"], [
                    "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
                    "train-images-idx3-ubyte", "train-labels-idx1-ubyte"])
        for rank in range(NPROC):
            self.assertIn(f"rank {rank} probed", texts_of(run.stdout_lines, rank))

    def test_python_exec_in_the_command_is_the_workers_interpreter(self):
        # Set by the user: that value; unset: the interpreter the workers run (python3 on PATH),
        # so the configs' "node-setup: $PYTHON_EXEC prepare.py" never runs an empty command.
        for env, want in ((base_env(PYTHON_EXEC=PYTHON), PYTHON), (base_env(PYTHON_EXEC=None), "python3")):
            run = self.drun("--standalone", "--node-setup", 'echo "py=$PYTHON_EXEC"', "--no-python",
                            "true", env=env)
            self.assertExit(run, 0)
            self.assertIn(f"[setup]: py={want}", run.stdout_lines, run.describe())


if __name__ == "__main__":
    main()
