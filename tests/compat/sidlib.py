"""The compat suite's torch 2.14 half: Debian sid (python3-torch 2.14, accelerate 1.14,
Python 3.14) in a chroot built by tests/chroot.sh (setup_sid.sh, the
fixture), unmodified: its torch is built without libuv and nothing changes that.

As with torch26lib: `tests/chroot.sh run` shares this machine's network, process tree, /tmp
and environment, not the repository; everything a torch 2.14 process reads is staged under
/tmp and named by absolute path. The shared helpers (temp dirs, staging) are torch26lib's.
"""
import os

from torch26lib import REPO, drun_env, shared_tempdir, stage, write_executable  # noqa: F401

TOOL = os.environ.get("DRUN_SID_CHROOT_TOOL",
                      os.path.join(REPO, "tests", "chroot.sh"))
ROOT = os.environ.get("DRUN_SID_ROOT", "/var/lib/drun-sid")


def require_chroot():
    if not os.access(TOOL, os.X_OK):
        raise RuntimeError(f"{TOOL} not found or not executable (DRUN_SID_CHROOT_TOOL names another)")
    if not os.access(os.path.join(ROOT, "usr", "bin", "python3"), os.X_OK):
        raise RuntimeError(f"no sid chroot in {ROOT}: run tests/compat/setup_sid.sh "
                           "(ctest runs it as the fixture compat.sid.setup)")


def python_wrapper(directory):
    """PYTHON_EXEC for torch 2.14 workers: python3 inside the chroot, exec'd all the way."""
    return write_executable(os.path.join(directory, "python3-torch214"),
                            "#!/bin/sh\n"
                            f"exec '{TOOL}' run '{ROOT}' python3 \"$@\"\n")


def chroot_python():
    return [TOOL, "run", ROOT, "python3"]
