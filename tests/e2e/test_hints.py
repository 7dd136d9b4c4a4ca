"""The root-cause summary's hints, as a new user meets them.

An interpreter without torch (a venv, pyenv's Python, ...) and every worker fails with
"No module named 'torch'": drun's summary names the interpreter the workers ran and the fix
that fits it (agent/python_env.h), with real interpreters: a venv made by
`/usr/bin/python3 -m venv` (the hint keeps the venv: install torch into it, or recreate it
with --system-site-packages, which then runs the job with Debian's torch), pyenv's own
interpreters from ~/.pyenv (skipped where there is none).

A torch built without libuv (Debian's 2.6 and 2.14) prints one of two wordings; the hint
names USE_LIBUV=0 for each. Here torch is 1.13, which has no libuv check, so a program
prints torch's exact line, as a failed worker would (tests/compat runs the real 2.6 and 2.14).
"""
import os
import subprocess

from drun_testlib import DrunTestCase, base_env, main, rank_lines

PYENV_ROOT = os.path.join(os.path.expanduser("~"), ".pyenv")
LIBUV_LINES = {
    "2.6": "RuntimeError: use_libuv was requested but PyTorch was build without libuv support",
    "2.14": "torch.distributed.DistStoreError: use_libuv was requested but PyTorch was built "
            "without libuv support, run with USE_LIBUV=0 to disable it.",
}


def hints_of(run):
    return [l for l in run.stderr_lines if l.startswith("drun: hint: ")]


class HintsTest(DrunTestCase):

    def train_py(self):
        script = os.path.join(self.tmp, "train.py")
        with open(script, "w") as f:
            f.write("import torch\nprint('torch', torch.__version__)\n")
        return script

    def venv(self, *flags):
        d = os.path.join(self.tmp, "venv")
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", *flags, d], check=True,
                       timeout=120)
        return d

    def test_venv_without_torch_keeps_the_venv(self):
        venv, script = self.venv(), self.train_py()
        python = os.path.join(venv, "bin", "python3")
        run = self.drun("--standalone", "--nproc-per-node", 2, script,
                        env=base_env(PYTHON_EXEC=python), cwd=self.tmp)
        self.assertExit(run, 1)
        hints = hints_of(run)
        self.assertEqual(len(hints), 1, run.describe())
        self.assertIn(f"of the venv {venv}, which has no torch", hints[0])
        self.assertIn(f"{venv}/bin/pip install torch", hints[0])
        self.assertIn(f"-m venv --system-site-packages {venv}", hints[0])
        self.assertNotIn("PYTHON_EXEC", hints[0])
        # The fix the hint names, as written: the same venv then sees Debian's torch.
        fix = hints[0].split(" by recreating the venv with ", 1)[1].split()
        subprocess.run(fix, check=True, timeout=120)
        ok = self.drun("--standalone", "--nproc-per-node", 2, script,
                       env=base_env(PYTHON_EXEC=python), cwd=self.tmp)
        self.assertExit(ok, 0)
        self.assertEqual(len(rank_lines(ok.stdout_lines)), 2, ok.describe())

    def test_pyenv_interpreters(self):
        shim = os.path.join(PYENV_ROOT, "shims", "python3")
        if not os.access(shim, os.X_OK):
            self.skipTest(f"no pyenv in {PYENV_ROOT}")
        script = self.train_py()
        versions = sorted(os.listdir(os.path.join(PYENV_ROOT, "versions")))
        interpreters = [shim] + [os.path.join(PYENV_ROOT, "versions", v, "bin", "python3")
                                 for v in versions[-1:]]
        for python in interpreters:
            if subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0:
                continue  # this one has torch: no failure to hint at
            run = self.drun("--standalone", "--nproc-per-node", 1, script,
                            env=base_env(PYTHON_EXEC=python), cwd=self.tmp)
            self.assertExit(run, 1)
            hints = hints_of(run)
            self.assertEqual(len(hints), 1, run.describe())
            self.assertIn(f"the workers ran {python}, pyenv's Python ({PYENV_ROOT})", hints[0])
            self.assertIn("pip install torch", hints[0])

    def test_torch_without_libuv_names_use_libuv_0_for_each_wording(self):
        for version, line in LIBUV_LINES.items():
            script = os.path.join(self.tmp, f"libuv{version}.py")
            with open(script, "w") as f:
                f.write(f"import sys\nsys.stderr.write({line!r} + '\\n')\nsys.exit(1)\n")
            run = self.drun("--standalone", "--nproc-per-node", 2, script, cwd=self.tmp)
            self.assertExit(run, 1)
            hints = hints_of(run)
            self.assertEqual(len(hints), 1, f"torch {version}: {run.describe()}")
            self.assertIn("run with USE_LIBUV=0", hints[0])
            # Given USE_LIBUV=0 already, the program's own TCPStore is what asked.
            run = self.drun("--standalone", "--nproc-per-node", 1, "-x", "USE_LIBUV=0", script,
                            cwd=self.tmp)
            self.assertEqual(len(hints_of(run)), 1, run.describe())
            self.assertIn("use_libuv=False", hints_of(run)[0])

    def test_no_hint_when_the_failure_is_something_else(self):
        script = os.path.join(self.tmp, "fail.py")
        with open(script, "w") as f:
            f.write("raise SystemExit('no torch here, but no import error either')\n")
        run = self.drun("--standalone", "--nproc-per-node", 1, script, cwd=self.tmp)
        self.assertExit(run, 1)
        self.assertEqual([l for l in run.stderr_lines if "hint:" in l], [], run.describe())
        self.assertEqual(rank_lines(run.stdout_lines), [])


if __name__ == "__main__":
    main()
