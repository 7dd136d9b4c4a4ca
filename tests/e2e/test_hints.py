"""The root-cause summary's hints, as a new user meets them.

A `python3` without torch first on PATH (pyenv, conda, a venv: on these machines pyenv's
3.11) and no PYTHON_EXEC: every worker fails with "No module named 'torch'", and drun's
summary names the interpreter the workers ran and the fix, PYTHON_EXEC=/usr/bin/python3.
The stand-in for pyenv's interpreter is a `python3` script that runs Debian's Python
without its site-packages (-S), so it truly has no torch.
"""
import os
import stat

from drun_testlib import DrunTestCase, base_env, main, rank_lines


class HintsTest(DrunTestCase):

    def no_torch_python_dir(self):
        d = os.path.join(self.tmp, "shims")
        os.makedirs(d)
        shim = os.path.join(d, "python3")
        with open(shim, "w") as f:
            f.write('#!/bin/sh\nexec /usr/bin/python3 -S "$@"\n')
        os.chmod(shim, stat.S_IRWXU)
        return d, shim

    def test_no_module_named_torch_names_the_interpreter_and_python_exec(self):
        shims, shim = self.no_torch_python_dir()
        script = os.path.join(self.tmp, "train.py")
        with open(script, "w") as f:
            f.write("import torch\n")
        env = base_env(PYTHON_EXEC=None, PATH=f"{shims}:{os.environ.get('PATH', '/usr/bin:/bin')}")
        run = self.drun("--standalone", "--nproc-per-node", 2, script, env=env, cwd=self.tmp)
        self.assertExit(run, 1)
        hints = [l for l in run.stderr_lines if l.startswith("drun: hint: ")]
        self.assertEqual(len(hints), 1, run.describe())
        self.assertIn(shim, hints[0])
        self.assertIn("PYTHON_EXEC=/usr/bin/python3", hints[0])
        # With the fix the same job runs.
        ok = self.drun("--standalone", "--nproc-per-node", 2, script,
                       env=base_env(PYTHON_EXEC="/usr/bin/python3"), cwd=self.tmp)
        self.assertExit(ok, 0)

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
