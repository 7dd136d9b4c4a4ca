"""The commands the documentation shows run as shown.

Every line of every shell code block (fenced, or indented by four spaces) in DOCS is a
command (a "$ " prompt taken off), except comments and drun's own output lines
("drun: ..."). Each command must be in
COMMANDS: either run here, in document order, with the outcome the docs promise, or
skipped with the reason written next to it (it needs several machines, ssh hosts, Slurm,
root, or it builds drun). A command added to the docs that is in neither list fails
test_every_command_is_run_or_skipped, and an entry whose command left the docs fails it
too, so the lists follow the docs.

The commands run with bash in a temporary directory that holds what they name:
- train.py: the example DDP trainer (examples/mnist_ddp.py) on the first 500 samples of
  each worker's shard, so that the docs' `train.py` runs in seconds; prepare_data.py, a
  data preparation step that needs torch; examples/ and configs/ of this tree; build/, the
  build tree of the drun under test ($DRUN, set by ctest).
- `drun` on PATH is $DRUN; for docs/install.md it is the tree that doc's
  `cmake --install build --prefix ~/.local` puts in a temporary HOME.
- First on PATH is a `python3` without torch (a venv of /usr/bin/python3 without its
  site-packages), as pyenv's or conda's python3 is on many machines: a command that needs
  torch must name its interpreter, as the docs tell the reader to, with
  `export PYTHON_EXEC=/usr/bin/python3` (applied to the doc's later commands) or
  `PYTHON_EXEC=... drun ...`. PYTHON_EXEC itself is unset at the start of each doc.
"""
import glob
import os
import re
import shlex
import shutil
import subprocess
import time

from drun_testlib import (REPO, WORKER_VARS, DrunTestCase, drun_path,
                          kill_and_reap_descendants, main, rank_lines, texts_of)

DOCS = ("README.md", "docs/quickstart.md", "docs/install.md", "docs/migrating.md",
        "examples/README.md")

# A bound per command that turns a hang into a failure; the training runs take 5-20 s on
# an idle 2-core machine.
COMMAND_TIMEOUT = float(os.environ.get("DRUN_DOCS_COMMAND_TIMEOUT", "300"))


# ---------------------------------------------------------------------------------------
# What the docs show


class Command:
    def __init__(self, doc, line, text):
        self.doc, self.line, self.text = doc, line, text

    def where(self):
        return f"{self.doc}:{self.line}"


def strip_comment(text):
    """The command without a trailing shell comment (a '#' after a blank, outside quotes)."""
    quote = None
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[:i].rstrip()
    return text.rstrip()


SHELL_FENCES = ("", "sh", "bash", "shell", "console")


def code_lines(path):
    """(line number, text) of every line inside a shell code block of the Markdown file:
    indented blocks, and fenced ones with no language or a shell's (not ```yaml, ...)."""
    with open(path) as f:
        lines = f.read().split("\n")
    result = []
    fence = None
    fence_is_shell = False
    indented = False
    previous_blank = True
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if fence:
            if stripped.startswith(fence):
                fence = None
            elif fence_is_shell:
                result.append((number, line))
            previous_blank = False
            continue
        if stripped.startswith("```") or stripped.startswith("~~~"):
            fence = stripped[:3]
            fence_is_shell = stripped[3:].strip().lower() in SHELL_FENCES
            indented = False
            previous_blank = False
            continue
        if line.startswith("    ") and stripped and (indented or previous_blank):
            indented = True
            result.append((number, line))
        elif stripped:
            indented = False
        previous_blank = not stripped
    return result


def doc_commands(doc):
    """The commands of one doc, continuation lines joined, comments and output left out."""
    commands = []
    pending = None
    for number, line in code_lines(os.path.join(REPO, doc)):
        text = line.strip()
        if text.startswith("$ "):
            text = text[2:]  # a prompt
        if pending:
            start, so_far = pending
            text = so_far + " " + text
            number = start
            pending = None
        if text.endswith("\\"):
            pending = (number, text[:-1].rstrip())
            continue
        text = strip_comment(text)
        if not text or text.startswith("drun: "):
            continue  # a comment (#SBATCH included), or drun's output shown as an example
        commands.append(Command(doc, number, text))
    return commands


def all_commands():
    return [c for doc in DOCS for c in doc_commands(doc)]


# ---------------------------------------------------------------------------------------
# What runs, what is skipped and why


class Skip:
    def __init__(self, reason):
        self.reason = reason


class Export:
    """`export NAME=value`: set for the doc's later commands."""


class Run:
    """Runs the command; expects `code`, then calls check(result, work) for what the docs
    promise. before(work) runs first (a precondition). `replace` maps text of the command
    to what it is on this machine (each one listed with its reason)."""

    def __init__(self, check=None, code=0, replace=None, before=None):
        self.check, self.code, self.replace, self.before = check, code, replace or {}, before


def expect_ranks(result, ranks):
    seen = {rank for rank, _ in rank_lines(result.stdout_lines)}
    assert seen == set(ranks), f"output of ranks {sorted(seen)}, expected {sorted(ranks)}"


def expect_trained(result, ranks, epochs):
    """The example trainer ran on `ranks` for `epochs` and evaluated the model."""
    expect_ranks(result, ranks)
    rank0 = texts_of(result.stdout_lines, 0)
    losses = [t for t in rank0 if re.match(r"Epoch: \d+ loss \d", t)]
    assert len(losses) == epochs, f"{len(losses)} epochs, expected {epochs}"
    assert any(re.match(r"Accuracy on testing data: Got \d+/10000", t) for t in rank0), rank0


def check_standalone(result, work):
    expect_trained(result, range(4), epochs=5)


def check_gpu_list(result, work):
    # This machine has no GPU: a GPU list is refused in one line, as `gpu` is, and no
    # worker starts (on a GPU machine it starts one worker per listed GPU; worker_env_test
    # covers the CUDA_VISIBLE_DEVICES mapping).
    assert not result.stdout_lines, result.describe()
    assert "drun: --nproc-per-node gpu:0,2: no GPU found on this node; use a number, cpu " \
        "or auto" in result.stderr_lines, result.describe()


def check_node_setup(result, work):
    expect_trained(result, range(4), epochs=1)
    with open(os.path.join(work, "prepared.txt")) as f:
        assert f.read(), "prepare_data.py did not write torch's version"
    assert any(line.startswith("[setup]: prepared with torch") for line in result.stdout_lines)


def check_version(result, work):
    assert re.match(r"drun \d+\.\d+\.\d+", result.stdout), result.describe()


def check_example(name, epochs=None):
    def check(result, work):
        if epochs is None:
            assert "Rank 0: Sum of all messages is 6" in texts_of(result.stdout_lines, 0)
        else:
            expect_trained(result, range(4), epochs)
    return check


def check_torchrun_reduce(result, work):
    assert "Rank 0: Sum of all messages is 6" in result.stdout_lines, result.describe()


def installed_paths():
    """The paths of docs/install.md's table of what `cmake --install` puts in place."""
    with open(os.path.join(REPO, "docs/install.md")) as f:
        rows = re.findall(r"^\| `([^`]+)`(?:, `([^`]+)`)? \|", f.read(), re.M)
    return [p for row in rows for p in row if p and p != "path under the prefix"]


def check_installed(result, work):
    prefix = os.path.join(work, "home", ".local")
    paths = installed_paths()
    assert "lib/drun/drun-net" in paths and "bin/drun" in paths, paths
    for path in paths:
        assert glob.glob(os.path.join(prefix, path.rstrip("/"))), f"docs/install.md lists {path}, not installed under {prefix}"
    for name in ("bin/drun", "lib/drun/drun-net"):
        assert os.access(os.path.join(prefix, name), os.X_OK), name


def check_man(result, work):
    text = result.stdout
    assert "drun - launch and supervise distributed PyTorch jobs" in text, result.describe()
    # The page of this build (EXIT STATUS names drun-net), not an older one on the system.
    assert "drun-net" in text and "EXIT STATUS" in text, result.describe()


def check_one_lab_pc(result, work):
    expect_trained(result, range(4), epochs=1)


def manifest_is_ours(work):
    # `xargs rm -f` deletes what the manifest lists: only the test's own install.
    prefix = os.path.join(work, "home", ".local") + os.sep
    with open(os.path.join(work, "build", "install_manifest.txt")) as f:
        outside = [p for p in f.read().split("\n") if p and not p.startswith(prefix)]
    assert not outside, ("build/install_manifest.txt lists files outside the test's "
                         f"install (another `cmake --install build` ran meanwhile?): {outside}")


def check_uninstalled(result, work):
    prefix = os.path.join(work, "home", ".local")
    for name in ("bin/drun", "lib/drun/drun-net", "share/man/man1/drun.1.gz"):
        assert not os.path.exists(os.path.join(prefix, name)), f"{name} is still installed"


BUILDS = ("builds drun from scratch (many minutes on 2 cores); the drun under test was "
          "built with these commands by tests/run.sh, and test_builds_name_a_build_type "
          "checks the build type is given")
DEPS = "installs Debian packages with apt-get as root; tests/run.sh runs it before building"
MULTINODE = ("waits for other machines (node0 ... as the rendezvous endpoint); "
             "tests/multinode runs this shape with nodes in network namespaces")
SSH = ("starts agents over ssh on the hosts of a host file; tests/ssh runs it against sshd "
       "in network namespaces")
SLURM = "needs a Slurm allocation; tests/slurm runs `srun drun` on a real Slurm cluster"

COMMANDS = {
    # README.md
    "examples/run_demo.sh": Skip(f"{DEPS}, then builds drun and trains 4 workers"),
    "tests/run.sh": Skip("runs the whole suite, this test included"),
    "export PYTHON_EXEC=/usr/bin/python3": Export(),
    "drun --standalone --nproc-per-node 4 train.py --epochs 5": Run(check_standalone),
    "drun --nproc-per-node gpu:0,2 --max-restarts 3 train.py": Run(check_gpu_list, code=2),
    "drun --nproc-per-node 4 --node-setup '$PYTHON_EXEC prepare_data.py' train.py":
        Run(check_node_setup),
    # docs/quickstart.md
    "tests/install_deps.sh": Skip(DEPS),
    "cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build":
        Skip(BUILDS),
    "build/launcher/drun --version": Run(check_version),
    "drun --nnodes 2:4 --nproc-per-node 2 --rdzv-endpoint node0:29400 --rdzv-id job1 train.py":
        Skip(MULTINODE),
    "drun --hostfile hosts --nproc-per-node 2 train.py": Skip(SSH),
    "srun drun --nproc-per-node 2 train.py": Skip(SLURM),
    # docs/install.md
    "cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo": Skip(BUILDS),
    "cmake --build build": Skip(BUILDS),
    "cmake --install build": Skip(
        "installs into /usr/local, outside the test; the `--prefix ~/.local` line is run, "
        "with HOME in the test's directory"),
    "cmake --install build --prefix ~/.local": Run(check_installed),
    "(cd build && cpack -G DEB)": Skip(
        "builds the Debian package (a minute); ctest -R package_deb does, in "
        "build/package-test"),
    "apt install ./build/drun_0.1.0-1_amd64.deb": Skip("installs a package system-wide, as root"),
    "dpkg -L drun": Skip("lists the installed package: needs the `apt install` above"),
    "drun --version": Run(check_version),
    "man drun": Run(check_man),
    "cd /usr/share/doc/drun && PYTHON_EXEC=/usr/bin/python3 drun --config configs/one_lab_pc.yaml":
        Run(check_one_lab_pc, replace={
            # The docs of the `--prefix ~/.local` install (the doc says so below the command).
            "/usr/share/doc/drun": "~/.local/share/doc/drun"}),
    "apt remove drun": Skip("removes a package system-wide, as root"),
    "packaging/make_release.sh OUTDIR": Skip(
        "builds drun a second time (build-release/, many minutes on 2 cores); "
        "packaging/test_release.sh runs its tarball and wheel as a plain user"),
    "xargs rm -f < build/install_manifest.txt": Run(check_uninstalled, before=manifest_is_ours),
    # docs/migrating.md
    "mpirun --hostfile hosts -np 4 -x MASTER_ADDR=pink00 -x MASTER_PORT=1234 ./run_training.sh":
        Skip("the seeds' old command, shown for comparison: mpirun over their lab's hosts"),
    "drun --hostfile hosts --nproc-per-node 2 ddp.py": Skip(SSH),
    # examples/README.md
    "drun --standalone --nproc-per-node 4 examples/reduce.py": Run(check_example("reduce")),
    "drun --standalone --nproc-per-node 4 examples/mnist_ddp.py --epochs 1":
        Run(check_example("mnist", epochs=1)),
    "torchrun --standalone --nproc_per_node 4 -r 9:1 -t 9:1 examples/reduce.py":
        Run(check_torchrun_reduce),
    "drun --standalone --nproc-per-node 4 --node-setup 'python3 examples/prepare_fashion_mnist.py "
    "/tmp/fmnist' examples/mnist_ddp.py --data-dir /tmp/fmnist":
        Run(check_example("mnist", epochs=1)),
}


# ---------------------------------------------------------------------------------------
# The directory the commands run in

TRAIN_PY = '''\
"""train.py of the docs: examples/mnist_ddp.py on the first 500 samples of each shard."""
import os
import runpy
import sys

MNIST = {mnist!r}
print(f"train.py: rank {{os.environ['RANK']}} "
      f"CUDA_VISIBLE_DEVICES={{os.environ.get('CUDA_VISIBLE_DEVICES', '')}}", flush=True)
sys.argv = [MNIST] + sys.argv[1:] + ["--limit", "500"]
runpy.run_path(MNIST, run_name="__main__")
'''

PREPARE_DATA_PY = '''\
"""prepare_data.py of the docs: a data preparation step that needs torch."""
import torch

with open("prepared.txt", "w") as f:
    f.write(torch.__version__)
print("prepared with torch", torch.__version__)
'''


def build_dir():
    """The build tree of the drun under test: $DRUN is <build>/launcher/drun."""
    build = os.path.dirname(os.path.dirname(os.path.realpath(drun_path())))
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        raise RuntimeError(f"DRUN={drun_path()} is not <build tree>/launcher/drun")
    return build


def make_work_dir(work):
    """The files the docs' commands name, a python3 without torch, and a HOME."""
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(TRAIN_PY.format(mnist=os.path.join(REPO, "examples", "mnist_ddp.py")))
    with open(os.path.join(work, "prepare_data.py"), "w") as f:
        f.write(PREPARE_DATA_PY)
    for name in ("examples", "configs"):
        os.symlink(os.path.join(REPO, name), os.path.join(work, name))
    os.symlink(build_dir(), os.path.join(work, "build"))
    os.makedirs(os.path.join(work, "bin"))
    os.symlink(drun_path(), os.path.join(work, "bin", "drun"))
    os.makedirs(os.path.join(work, "home"))
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip",
                    os.path.join(work, "venv")], check=True)
    probe = subprocess.run([os.path.join(work, "venv", "bin", "python3"), "-c", "import torch"],
                           capture_output=True)
    assert probe.returncode != 0, "the venv's python3 imports torch; it must not"


def doc_env(work, doc):
    """The environment a reader of `doc` types in: ours, without launcher variables or
    PYTHON_EXEC, a python3 without torch first on PATH, and `drun` on PATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PET_", "DRUN_", "SLURM_")) and k not in WORKER_VARS
           and k not in ("PYTHON_EXEC", "DRUN", "MANPATH")}
    bins = [os.path.join(work, "venv", "bin")]
    if doc == "docs/install.md":
        env["HOME"] = os.path.join(work, "home")
        bins.insert(0, os.path.join(work, "home", ".local", "bin"))  # as the doc says
    else:
        bins.append(os.path.join(work, "bin"))
    env["PATH"] = os.pathsep.join(bins + [env.get("PATH", "/usr/bin:/bin")])
    env.update(MANPAGER="cat", PAGER="cat", MANWIDTH="100", NO_COLOR="1")
    return env


class Result:
    def __init__(self, command, code, stdout, stderr, elapsed):
        self.command, self.returncode, self.elapsed = command, code, elapsed
        self.stdout, self.stderr = stdout, stderr
        self.stdout_lines = stdout.splitlines()
        self.stderr_lines = stderr.splitlines()

    def describe(self, limit=40):
        return (f"command: {self.command}\nexit: {self.returncode}\n--- stdout (tail) ---\n"
                + "\n".join(self.stdout_lines[-limit:]) + "\n--- stderr (tail) ---\n"
                + "\n".join(self.stderr_lines[-limit:]))


def run_shell(command, env, cwd):
    proc = subprocess.Popen(["bash", "-c", command], env=env, cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace")
    started = time.monotonic()
    try:
        out, err = proc.communicate(timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_and_reap_descendants()  # by pid: drun, its workers, bash
        out, err = proc.communicate()
        raise AssertionError(f"`{command}` did not end within {COMMAND_TIMEOUT:.0f}s\n"
                             f"--- stdout ---\n{out[-4000:]}\n--- stderr ---\n{err[-4000:]}")
    return Result(command, proc.returncode, out, err, time.monotonic() - started)


# ---------------------------------------------------------------------------------------


class DocsTest(DrunTestCase):

    def test_every_command_is_run_or_skipped(self):
        commands = all_commands()
        unknown = [f"{c.where()}: {c.text}" for c in commands if c.text not in COMMANDS]
        self.assertEqual(unknown, [], "commands in the docs that test_docs.py neither runs "
                         "nor skips with a reason; add each to COMMANDS")
        shown = {c.text for c in commands}
        stale = [text for text in COMMANDS if text not in shown]
        self.assertEqual(stale, [], "COMMANDS entries no doc shows any more")

    def test_builds_name_a_build_type(self):
        # The same optimised build everywhere (docs, examples/run_demo.sh, tests/run.sh).
        builds = [c for c in all_commands() if "cmake -S" in c.text]
        self.assertTrue(builds)
        for c in builds:
            self.assertIn("-DCMAKE_BUILD_TYPE=RelWithDebInfo", c.text, c.where())
        for script in ("examples/run_demo.sh", "tests/run.sh"):
            with open(os.path.join(REPO, script)) as f:
                self.assertIn("-DCMAKE_BUILD_TYPE=RelWithDebInfo", f.read(), script)

    def run_doc(self, doc):
        work = os.path.join(self.tmp, "work")
        os.makedirs(work)
        make_work_dir(work)
        env = doc_env(work, doc)
        ran = 0
        for command in doc_commands(doc):
            entry = COMMANDS.get(command.text)
            self.assertIsNotNone(entry, f"{command.where()}: `{command.text}` is not in "
                                 "COMMANDS (test_every_command_is_run_or_skipped)")
            with self.subTest(command=command.text, where=command.where()):
                if isinstance(entry, Skip):
                    self.skipTest(entry.reason)
                if isinstance(entry, Export):
                    name, _, value = shlex.split(command.text)[1].partition("=")
                    env[name] = value
                    continue
                self.run_command(command, entry, env, work)
                ran += 1
        return ran

    def run_command(self, command, entry, env, work):
        text = command.text
        for old, new in entry.replace.items():
            self.assertIn(old, text)
            text = text.replace(old, new)
        if command.text.startswith("man ") and not shutil.which("man", path=env["PATH"]):
            self.skipTest("man is not installed on this machine")
        if entry.before:
            entry.before(work)
        result = run_shell(text, env, work)
        print(f"{command.where()}: ran `{text}`: exit {result.returncode} in "
              f"{result.elapsed:.1f}s", flush=True)
        self.assertEqual(result.returncode, entry.code,
                         f"{command.where()}: exit {result.returncode}, the docs promise "
                         f"{entry.code}\n{result.describe()}")
        if entry.check:
            try:
                entry.check(result, work)
            except AssertionError as e:
                raise AssertionError(f"{command.where()}: {e}\n{result.describe()}") from None

    def test_readme(self):
        self.assertEqual(self.run_doc("README.md"), 3)

    def test_quickstart(self):
        self.assertEqual(self.run_doc("docs/quickstart.md"), 2)

    def test_install(self):
        self.assertGreaterEqual(self.run_doc("docs/install.md"), 4)

    def test_migrating(self):
        self.assertEqual(self.run_doc("docs/migrating.md"), 0)

    def test_examples_readme(self):
        self.assertEqual(self.run_doc("examples/README.md"), 4)

    def test_only_bin_drun_copied(self):
        # docs/install.md: bin/drun alone runs single-node jobs; a networked job names the
        # missing drun-net and exits 127 (the man page's EXIT STATUS).
        alone = os.path.join(self.tmp, "alone", "bin")
        os.makedirs(alone)
        shutil.copy2(os.path.realpath(drun_path()), os.path.join(alone, "drun"))
        env = doc_env(self.tmp, "docs/migrating.md")
        env["PATH"] = alone + os.pathsep + env["PATH"]
        one = run_shell("drun --standalone --nproc-per-node 2 --no-python /bin/true", env,
                        self.tmp)
        self.assertEqual(one.returncode, 0, one.describe())
        net = run_shell("drun --nnodes 2 --rdzv-endpoint 127.0.0.1:9 --no-python /bin/true",
                        env, self.tmp)
        self.assertEqual(net.returncode, 127, net.describe())
        self.assertEqual(len(net.stderr_lines), 1, net.describe())
        self.assertRegex(net.stderr_lines[0],
                         r"^drun: this job needs drun-net .*" + re.escape(alone) +
                         r"/drun-net .*lib/drun/drun-net.*docs/install\.md")
        # --version is no job: drun's own version, a line naming what is missing, exit 0.
        version = run_shell("drun --version", env, self.tmp)
        self.assertEqual(version.returncode, 0, version.describe())
        self.assertRegex(version.stdout, r"^drun \d+\.\d+\.\d+\n$")
        self.assertRegex(version.stderr, r"^drun: only single-node jobs can run: drun-net ")


if __name__ == "__main__":
    main()
