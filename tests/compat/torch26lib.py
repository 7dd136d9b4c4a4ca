"""Shared helpers of the compat suite: PyTorch 2.6 (Debian 13 in a chroot) under drun.

The chroot is built by ../shared/tools/torch26-chroot.sh (setup_torch26.sh, the suite's
fixture). Its `run` enters the chroot with this machine's network, process tree and /tmp,
but not /work or the repository, and GNU chroot starts in "/": everything a torch 2.6
process must read (programs, data, helper scripts) is staged under /tmp, which is the same
directory inside and outside, and named by absolute path.
"""
import os
import shutil
import stat
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))

import drun_testlib  # noqa: E402  (the e2e harness: DrunProcess, subreaper, cleanup)

TOOL = os.environ.get("TORCH26_CHROOT_TOOL",
                      os.path.join(os.path.dirname(REPO), "shared", "tools", "torch26-chroot.sh"))
ROOT = os.environ.get("DRUN_TORCH26_ROOT", "/var/lib/drun-torch26")
# The one directory shared by both sides of the chroot (torch26-chroot.sh binds /tmp).
SHARED_TMP = "/tmp"


def require_chroot():
    """Fails (not skips: the fixture should have built it) when the chroot is missing."""
    if not os.access(TOOL, os.X_OK):
        raise RuntimeError(f"{TOOL} not found: the shared/ tree must sit beside the "
                           "repository (or set TORCH26_CHROOT_TOOL)")
    if not os.access(os.path.join(ROOT, "usr", "bin", "python3"), os.X_OK):
        raise RuntimeError(f"no torch 2.6 chroot in {ROOT}: run tests/compat/setup_torch26.sh "
                           "(ctest runs it as the fixture compat.setup)")


def shared_tempdir(prefix):
    """A TemporaryDirectory under /tmp (visible at the same path inside the chroot)."""
    return tempfile.TemporaryDirectory(prefix=prefix, dir=SHARED_TMP)


def write_executable(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def python26_wrapper(directory):
    """An interpreter for PYTHON_EXEC: runs python3 inside the chroot with the same
    arguments (exec all the way, so drun's worker pid is the torch 2.6 process)."""
    return write_executable(os.path.join(directory, "python3-torch26"),
                            "#!/bin/sh\n"
                            f"exec '{TOOL}' run '{ROOT}' python3 \"$@\"\n")


def stage(directory, *paths):
    """Copies files into `directory`; returns their new paths."""
    return [shutil.copy(p, directory) for p in paths]


def drun_env(python_exec, **overrides):
    """drun's environment for torch 2.6 workers: the e2e base environment, the chroot's
    interpreter as PYTHON_EXEC, and TMPDIR=/tmp so that drun's per-worker error files
    (TORCHELASTIC_ERROR_FILE) are at a path the workers can also see."""
    env = drun_testlib.base_env(PYTHON_EXEC=python_exec, TMPDIR=SHARED_TMP)
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env
