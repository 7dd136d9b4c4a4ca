"""The checks of tests/gpu/run_gpu_checks.sh (read that file and docs/gpu.md first).

Runs drun from a bundle (tests/gpu/make_bundle.sh) with the given Python as the workers'
interpreter, one case after another, each bounded by a timeout and by what is left of the
whole budget, and writes report.json and report.md to --out after every case (a run that is
cut off still leaves the cases it finished). A case's status:

  pass / fail       checked, with what was seen
  skipped: WHY      not run here (no GPU, a package missing, out of time)
  not available     drun in this bundle lacks the feature (e.g. --virtual-local-rank)
  info              nothing to assert; what was seen is the result

Exit status: 0 when no case failed, 1 otherwise, 2 for a bad command line.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(REPO, "examples")
sys.path.insert(0, HERE)

import gpu_report  # noqa: E402

PASS, FAIL, SKIP, NA, INFO = "pass", "fail", "skipped", "not available", "info"
WORKER_LINE = re.compile(r"^\[(?:[^\]\s]*:)?rank(\d+)\]: (.*)$")
# glibc's own libraries: taken from the machine that runs the bundle, never bundled.
GLIBC_SONAMES = re.compile(r"^(libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|"
                           r"libanl|libnsl|libBrokenLocale|libthread_db|libnss_\w+|"
                           r"ld-linux-x86-64|ld-linux-aarch64)\.so(\.[\d.]+)?$")


# ---------------------------------------------------------------- running things


class Result:
    def __init__(self, rc, out, err, seconds, timed_out):
        self.rc, self.out, self.err = rc, out, err
        self.seconds, self.timed_out = seconds, timed_out

    def workers(self, tag="GPUCHECK "):
        """{rank: [text, ...]} of drun's prefixed worker lines; reports() parses tags."""
        by_rank = {}
        for line in self.out.splitlines():
            m = WORKER_LINE.match(line)
            if m:
                by_rank.setdefault(int(m.group(1)), []).append(m.group(2))
        return by_rank

    def reports(self):
        """{rank: dict} from the workers' `GPUCHECK {json}` lines (the last one per rank)."""
        found = {}
        for rank, texts in self.workers().items():
            for text in texts:
                if text.startswith("GPUCHECK "):
                    found[rank] = json.loads(text[len("GPUCHECK "):])
        return found

    def tail(self, n=15):
        lines = (self.out + "\n" + self.err).strip().splitlines()
        return "\n".join(lines[-n:])

    def first_err(self):
        lines = [l for l in self.err.splitlines() if l.strip()]
        return lines[0] if lines else ""


def stop(proc, grace=10):
    """Ends a process this script started: SIGTERM to it (drun then stops its workers),
    then SIGKILL to its process group (it leads one: start_new_session)."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def start(cmd, env, out_path, err_path, cwd=REPO):
    with open(out_path, "w") as out, open(err_path, "w") as err:
        return subprocess.Popen([str(c) for c in cmd], env=env, cwd=cwd, stdout=out,
                                stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)


def run(cmd, env, timeout, cwd=REPO):
    """Runs cmd to its end or its timeout; the output is kept either way."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpucheck-run-") as d:
        out_p, err_p = os.path.join(d, "out"), os.path.join(d, "err")
        p = start(cmd, env, out_p, err_p, cwd)
        timed_out = False
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            stop(p)
        with open(out_p, errors="replace") as f:
            out = f.read()
        with open(err_p, errors="replace") as f:
            err = f.read()
    return Result(p.returncode, out, err, time.monotonic() - t0, timed_out)


def read_text(path):
    with open(path, errors="replace") as f:
        return f.read()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_lines(path, wanted, timeout, proc):
    """Waits until the file holds every string in `wanted` (or proc ended, or timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        text = read_text(path)
        if all(w in text for w in wanted):
            return True
        time.sleep(0.2)  # polling a file another process writes; bounded by the deadline
    return False


# ---------------------------------------------------------------- the context


class Ctx:
    def __init__(self, args):
        self.args = args
        self.python = args.python
        self.bundle = os.path.abspath(args.bundle)
        self.drun = os.path.join(self.bundle, "bin", "drun")
        self.out = args.out
        self.deadline = time.monotonic() + args.budget
        self.tmp = tempfile.mkdtemp(prefix="gpucheck-")
        self.gpus = 0           # set by the versions case
        self.bundle_ok = False  # set by the bundle case
        self.vlr = None         # --virtual-local-rank: True / False once tried
        self.cases = []
        self.facts = {"dry_run": args.dry_run, "python": args.python, "bundle": self.bundle}
        self.started = time.time()

    def env(self, **extra):
        env = dict(os.environ)
        env.update({"PYTHON_EXEC": self.python, "NO_COLOR": "1", "PYTHONUNBUFFERED": "1",
                    "PATH": os.path.join(self.bundle, "bin") + os.pathsep + env.get("PATH", ""),
                    "XDG_RUNTIME_DIR": self.tmp})
        if self.args.dry_run:
            env["CUDA_VISIBLE_DEVICES"] = ""  # a dry run is a CPU run even on a GPU machine
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def left(self):
        return self.deadline - time.monotonic()

    def bound(self, seconds):
        return max(1.0, min(seconds, self.left() - 5))

    def drun_cmd(self, *args):
        return [self.drun] + [str(a) for a in args]

    def program(self, name):
        return os.path.join(HERE, name)

    def record(self, group, case, status, summary, seconds=0.0, **details):
        self.cases.append({"group": group, "case": case, "status": status,
                           "summary": summary, "seconds": round(seconds, 1),
                           "details": details})
        print(f"[{status:>13}] {group} / {case}: {summary} ({seconds:.1f} s)", flush=True)
        gpu_report.write(self)


# ---------------------------------------------------------------- 0. the machine and the bundle

VERSIONS = r"""
import importlib.metadata as md, json, os, platform, sys
v = {"python": platform.python_version(), "python_path": sys.executable,
     "glibc": os.confstr("CS_GNU_LIBC_VERSION").split()[-1], "kernel": platform.release(),
     "cpus": os.cpu_count(), "cpus_allowed": len(os.sched_getaffinity(0))}
for dist in ("torch", "lightning", "pytorch-lightning", "accelerate", "mpi4py", "numpy"):
    try:
        v[dist] = md.version(dist)
    except md.PackageNotFoundError:
        v[dist] = None
try:
    import torch
    v["torch_cuda"] = torch.version.cuda
    v["cuda_available"] = torch.cuda.is_available()
    v["gpus"] = torch.cuda.device_count() if v["cuda_available"] else 0
    v["gpu_names"] = [torch.cuda.get_device_name(i) for i in range(v["gpus"])]
    nccl = torch.cuda.nccl.version() if v["cuda_available"] else None
    v["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl
    v["cudnn"] = torch.backends.cudnn.version() if v["cuda_available"] else None
    v["gloo"] = torch.distributed.is_gloo_available()
except Exception as e:
    v["torch_error"] = repr(e)
print(json.dumps(v))
"""


def case_versions(ctx):
    # The first import of torch on a fresh machine reads its libraries from disk (GiBs).
    r = run([ctx.python, "-c", VERSIONS], ctx.env(), ctx.bound(150))
    facts = json.loads(r.out.strip().splitlines()[-1]) if r.rc == 0 else {}
    smi = shutil.which("nvidia-smi")
    if smi:
        q = run([smi, "--query-gpu=name,driver_version,memory.total,compute_cap",
                 "--format=csv,noheader"], ctx.env(), ctx.bound(30))
        facts["nvidia_smi"] = q.out.strip().splitlines() if q.rc == 0 else q.tail(3)
    v = run(ctx.drun_cmd("--version"), ctx.env(), ctx.bound(20))
    facts["drun_version"] = v.out.strip() or v.tail(2)
    with open(os.path.join(ctx.bundle, "MANIFEST.json")) as f:
        manifest = json.load(f)
    facts["bundle"] = {k: manifest[k] for k in
                       ("commit", "made_on", "glibc_here", "glibc_required", "total_bytes")}
    ctx.gpus = 0 if ctx.args.dry_run else facts.get("gpus", 0)
    ctx.facts.update(facts)
    status = INFO if r.rc == 0 else FAIL
    ctx.record("0 machine", "versions", status,
               f"Python {facts.get('python')}, torch {facts.get('torch')} (CUDA "
               f"{facts.get('torch_cuda')}, NCCL {facts.get('nccl')}), {ctx.gpus} GPU(s) "
               f"{facts.get('gpu_names', [])}, glibc {facts.get('glibc')}",
               r.seconds, facts=facts, **({} if r.rc == 0 else {"output_tail": r.tail()}))


def version_tuple(text):
    return tuple(int(x) for x in re.findall(r"\d+", text)[:2])


def loader_list(ctx, path):
    """{soname: resolved path or None} as this machine's loader resolves `path`'s
    libraries with an empty environment (no LD_LIBRARY_PATH)."""
    r = run(["/usr/bin/env", "-i", "/lib64/ld-linux-x86-64.so.2", "--list", path], {},
            ctx.bound(20))
    libs = {}
    for line in r.out.splitlines():
        m = re.match(r"^\s*(\S+) => (not found|(\S+) \(0x)", line)
        if m:
            libs[m.group(1)] = m.group(3)
    return libs


def case_bundle(ctx):
    t0 = time.monotonic()
    glibc = os.confstr("CS_GNU_LIBC_VERSION") or "unknown"
    with open(os.path.join(ctx.bundle, "GLIBC_REQUIRED")) as f:
        required = f.read().strip()
    if version_tuple(glibc) < version_tuple(required):
        ctx.record("0 machine", "bundle", FAIL,
                   f"this machine's {glibc} is older than the bundle needs (glibc "
                   f"{required}; it was made on glibc {ctx.facts['bundle']['glibc_here']}): "
                   "build drun on this machine instead", time.monotonic() - t0)
        return
    outside = {}
    for folder in ("bin", "lib"):
        for name in sorted(os.listdir(os.path.join(ctx.bundle, folder))):
            path = os.path.join(ctx.bundle, folder, name)
            for soname, where in loader_list(ctx, path).items():
                inside = where is not None and where.startswith(ctx.bundle + "/")
                if not inside and not GLIBC_SONAMES.match(soname):
                    outside.setdefault(f"{folder}/{name}", []).append(f"{soname} => {where}")
    runs = {
        "drun --help": ["--help"],
        "drun --version (execs drun-net)": ["--version"],
        "drun, 2 x /bin/true": ["--standalone", "--nproc-per-node", 2, "--no-python", "/bin/true"],
    }
    failed_runs = {}
    for label, args in runs.items():
        r = run(["/usr/bin/env", "-i"] + ctx.drun_cmd(*args), {}, ctx.bound(30))
        if r.rc != 0:
            failed_runs[label] = f"exit {r.rc}: {r.tail(3)}"
    ok = not outside and not failed_runs
    ctx.bundle_ok = ok
    ctx.record("0 machine", "bundle", PASS if ok else FAIL,
               f"{glibc} >= {required} needed; every non-glibc library resolves inside the "
               "bundle under env -i; drun --help, --version, a 2-worker job run under env -i"
               if ok else "the bundle is not self-contained here",
               time.monotonic() - t0, glibc_here=glibc, glibc_required=required,
               libraries_outside=outside, failed_runs=failed_runs)


# ---------------------------------------------------------------- 1. one NCCL worker per GPU


def check_workers(reports, world, backend, extra=None):
    """Problems with the workers' reports: every rank there, collectives right, the
    backend and any further expectations ({key: value} every rank must show)."""
    problems = []
    if sorted(reports) != list(range(world)):
        problems.append(f"ranks reporting {sorted(reports)}, wanted 0..{world - 1}")
    for rank, rep in sorted(reports.items()):
        for key, want in {"world": world, "backend": backend, "all_reduce_ok": True,
                          "ddp_grads_equal": True, **(extra or {})}.items():
            if rep.get(key) != want:
                problems.append(f"rank {rank}: {key}={rep.get(key)!r}, wanted {want!r}")
    return problems


def worker_case(ctx, group, case, nproc, args, world, backend, extra=None, env=None,
                timeout=120, summary=""):
    r = run(ctx.drun_cmd("--standalone", "--nproc-per-node", nproc, *args),
            ctx.env(**(env or {})), ctx.bound(timeout))
    reports = r.reports()
    problems = ([] if r.rc == 0 else [f"drun exited {r.rc}"]) + \
        check_workers(reports, world, backend, extra)
    details = {"workers": reports}
    if problems:
        details.update(problems=problems, output_tail=r.tail())
    ctx.record(group, case, FAIL if problems else PASS,
               "; ".join(problems) if problems else summary, r.seconds, **details)
    return r


def nccl_async_name(ctx):
    """The NCCL error-handling variable the workers' torch reads (docs/gpu.md): torch 2.2 and
    later read TORCH_NCCL_ASYNC_ERROR_HANDLING (and warn about the old name), 1.13 only
    NCCL_ASYNC_ERROR_HANDLING."""
    modern = version_tuple(str(ctx.facts.get("torch", "0.0"))) >= (2, 2)
    return "TORCH_NCCL_ASYNC_ERROR_HANDLING" if modern else "NCCL_ASYNC_ERROR_HANDLING"


def nccl_async_wanted(ctx):
    """drun sets the name the workers' torch reads to 1, unless the user's environment has
    either name (then drun sets neither: the user's value stands)."""
    if "NCCL_ASYNC_ERROR_HANDLING" in os.environ or "TORCH_NCCL_ASYNC_ERROR_HANDLING" in os.environ:
        return os.environ.get(nccl_async_name(ctx))
    return "1"


def case_nproc_gpu(ctx):
    # CUDA_VISIBLE_DEVICES as drun got it: `gpu` leaves it alone (each worker sees every GPU
    # and picks cuda:LOCAL_RANK), as torchrun does.
    inherited = os.environ.get("CUDA_VISIBLE_DEVICES")
    worker_case(ctx, "1 GPU workers", "--nproc-per-node gpu", "gpu",
                [ctx.program("gpu_worker.py")], ctx.gpus, "nccl",
                {"cuda_visible_devices": inherited,
                 "nccl_async_error_handling": nccl_async_wanted(ctx)},
                summary=f"{ctx.gpus} NCCL worker(s), one per GPU; all_reduce and a DDP step "
                        f"right; CUDA_VISIBLE_DEVICES left as drun got it ({inherited!r}); "
                        f"{nccl_async_name(ctx)}={nccl_async_wanted(ctx)}")


def case_nproc_gpu0(ctx):
    worker_case(ctx, "1 GPU workers", "--nproc-per-node gpu:0", "gpu:0",
                [ctx.program("gpu_worker.py")], 1, "nccl",
                {"cuda_visible_devices": "0", "device_count": 1},
                summary="one NCCL worker seeing only GPU 0 (CUDA_VISIBLE_DEVICES=0); "
                        "all_reduce and a DDP step right")


def case_gpu_exit_code(ctx):
    r = run(ctx.drun_cmd("--standalone", "--nproc-per-node", "gpu:0",
                         ctx.program("gpu_worker.py"), "--exit-rank", 0, "--exit-code", 7),
            ctx.env(), ctx.bound(120))
    ok = r.rc == 7 and 0 in r.reports()
    ctx.record("1 GPU workers", "exit code of an NCCL worker", PASS if ok else FAIL,
               f"the worker exited 7 after its collectives; drun exited {r.rc}", r.seconds,
               **({} if ok else {"output_tail": r.tail()}))


def case_gpu_out_of_range(ctx):
    # gpu:N names a GPU the node lacks: drun does not check the index (it would need CUDA);
    # what the worker sees is recorded.
    n = ctx.gpus
    r = run(ctx.drun_cmd("--standalone", "--nproc-per-node", f"gpu:{n}",
                         ctx.program("gpu_worker.py")), ctx.env(), ctx.bound(90))
    rep = r.reports().get(0, {})
    ctx.record("1 GPU workers", f"gpu:{n} (no such GPU)", INFO,
               f"drun exited {r.rc}; the worker saw CUDA_VISIBLE_DEVICES="
               f"{rep.get('cuda_visible_devices')!r}, {rep.get('device_count')} GPU(s), "
               f"ran on {rep.get('device')}", r.seconds, worker=rep,
               output_tail=r.tail(6))


def case_no_gpu_visible(ctx):
    # Runs everywhere: with no GPU visible, `gpu` is refused before any worker starts.
    r = run(ctx.drun_cmd("--standalone", "--nproc-per-node", "gpu", "--no-python", "/bin/true"),
            ctx.env(CUDA_VISIBLE_DEVICES=""), ctx.bound(30))
    ok = r.rc == 2
    ctx.record("1 GPU workers", "--nproc-per-node gpu, no GPU visible", PASS if ok else FAIL,
               f"exit {r.rc}: {r.first_err()}", r.seconds,
               **({} if ok else {"output_tail": r.tail()}))


def case_gloo_stand_in(ctx):
    worker_case(ctx, "1 GPU workers", "stand-in: 2 gloo workers on the CPU", 2,
                [ctx.program("gpu_worker.py"), "--cpu"], 2, "gloo",
                {"omp_num_threads": "1",
                 "nccl_async_error_handling": nccl_async_wanted(ctx)},
                summary="the GPU worker program on the CPU with gloo: all_reduce and a DDP "
                        "step right")


def case_stand_in_exit_code(ctx):
    r = run(ctx.drun_cmd("--standalone", "--nproc-per-node", 2, ctx.program("gpu_worker.py"),
                         "--cpu", "--exit-rank", 1, "--exit-code", 7), ctx.env(), ctx.bound(120))
    ok = r.rc == 7 and sorted(r.reports()) == [0, 1]
    ctx.record("1 GPU workers", "stand-in: exit code of a gloo worker", PASS if ok else FAIL,
               f"rank 1 exited 7 after its collectives; drun exited {r.rc}", r.seconds,
               **({} if ok else {"output_tail": r.tail()}))


# ---------------------------------------------------------------- 2. CPU ranks and a GPU rank


def case_mixed(ctx):
    r = run(ctx.drun_cmd("--standalone", "--nproc-per-node", 4, ctx.program("mixed_worker.py")),
            ctx.env(), ctx.bound(120))
    reports = r.reports()
    gloo_ok = r.rc == 0 and sorted(reports) == [0, 1, 2, 3] and \
        all(rep["gloo_sum_ok"] for rep in reports.values())
    ctx.record("2 mixed ranks", "4 gloo ranks on the CPU", PASS if gloo_ok else FAIL,
               f"drun exited {r.rc}; gloo all_reduce right on {len(reports)} of 4 ranks",
               r.seconds, workers=reports, **({} if gloo_ok else {"output_tail": r.tail()}))
    if ctx.gpus == 0:
        ctx.record("2 mixed ranks", "GPU ranks in an NCCL group beside them", SKIP,
                   "skipped: no GPU")
        return
    gpu_ranks = list(range(min(ctx.gpus, 4)))
    seen = {r: (reports.get(r, {}).get("nccl_group") or {}) for r in gpu_ranks}
    ok = r.rc == 0 and all(g.get("ok") is True for g in seen.values())
    ctx.record("2 mixed ranks", "GPU ranks in an NCCL group beside them", PASS if ok else FAIL,
               f"ranks {gpu_ranks} also all_reduce on their GPU in an NCCL group: "
               f"{[g.get('ok') for g in seen.values()]} ({seen[0].get('device_name')}); the "
               "others gloo only (NCCL allows one rank per GPU)", r.seconds,
               **({} if ok else {"output_tail": r.tail()}))


def vlr_case(ctx, case, nproc, worker_args, backend, extra):
    r = run(ctx.drun_cmd("--standalone", "--nproc-per-node", nproc, "--virtual-local-rank",
                         ctx.program("gpu_worker.py"), *worker_args), ctx.env(), ctx.bound(120))
    reports = r.reports()
    if r.rc == 2 and not reports:  # the command line was refused: no worker ran
        ctx.vlr = False
        ctx.record("2 mixed ranks", case, NA,
                   f"not available in this build: {r.first_err()}", r.seconds)
        return
    ctx.vlr = True
    world = len(reports) if nproc == "gpu" else (1 if str(nproc).startswith("gpu:") else nproc)
    problems = ([] if r.rc == 0 else [f"drun exited {r.rc}"]) + \
        check_workers(reports, world, backend, {"local_rank": 0, **extra})
    ctx.record("2 mixed ranks", case, FAIL if problems else PASS,
               "; ".join(problems) if problems else
               f"every worker sees LOCAL_RANK=0 ({len(reports)} workers, {backend})",
               r.seconds, workers=reports, **({"output_tail": r.tail()} if problems else {}))


def case_vlr_cpu(ctx):
    vlr_case(ctx, "--virtual-local-rank, 2 gloo workers", 2, ["--cpu"], "gloo", {})


def case_vlr_gpu(ctx):
    if ctx.vlr is False:
        ctx.record("2 mixed ranks", "--virtual-local-rank with gpu:0", NA,
                   "not available in this build (see the case above)")
        return
    vlr_case(ctx, "--virtual-local-rank with gpu:0", "gpu:0", [], "nccl",
             {"cuda_visible_devices": "0"})


# ---------------------------------------------------------------- 3. the seeds' programs, the store


# program -> {rank: lines it must print} (tests/e2e/test_seed_programs.py's assertions)
SEEDS = {
    "p2p_send.py": {0: ["Rank 0: Sending 42 to rank 1"], 1: ["Rank 1: Received 42.0 from rank 0"]},
    "reduce.py": {0: ["Rank 0: Sum of all messages is 6"]},
    "p2p_reduce.py": {0: ["Rank 0: Sum of all messages is 6"]},
    "p2p_all_reduce.py": {r: [f"Rank {r}: Sum of all messages is 6"] for r in range(4)},
}


def seed_problems(result, wanted):
    problems = [] if result.rc == 0 else [f"drun exited {result.rc}"]
    workers = result.workers()
    for rank, lines in wanted.items():
        for line in lines:
            if line not in workers.get(rank, []):
                problems.append(f"rank {rank} did not print {line!r}")
    return problems


def seeds_case(ctx, case, flags, env, programs):
    t0 = time.monotonic()
    results, failed = {}, {}
    for name in programs:
        r = run(ctx.drun_cmd("--standalone", "--nproc-per-node", 4, *flags,
                             os.path.join(EXAMPLES, name)), ctx.env(**env), ctx.bound(120))
        problems = seed_problems(r, SEEDS[name])
        results[name] = f"{r.seconds:.1f} s" if not problems else "; ".join(problems)
        if problems:
            failed[name] = r.tail()
    ctx.record("3 programs and store", case, FAIL if failed else PASS,
               f"{len(programs) - len(failed)} of {len(programs)} programs printed what they "
               "must, 4 workers each", time.monotonic() - t0, programs=results,
               **({"output_tails": failed} if failed else {}))


def case_seeds_agent_store(ctx):
    # --quick (the ctest on torch 1.13): two of them; tests/e2e/test_seed_programs.py runs all.
    seeds_case(ctx, "seeds, drun's agent store", [], {},
               ["reduce.py", "p2p_all_reduce.py"] if ctx.args.quick else list(SEEDS))


def case_seeds_no_agent_store(ctx):
    if ctx.args.quick:
        ctx.record("3 programs and store", "seeds, --no-agent-store (rank 0's TCPStore)", SKIP,
                   "skipped: --quick (tests/e2e/test_seed_programs.py covers it on torch 1.13)")
        return
    seeds_case(ctx, "seeds, --no-agent-store (rank 0's TCPStore)", ["--no-agent-store"], {},
               ["reduce.py", "p2p_all_reduce.py"])


def case_mnist(ctx):
    data = ctx.args.data
    if not os.path.isdir(data):
        ctx.record("3 programs and store", "Fashion-MNIST DDP trainer", SKIP,
                   f"skipped: no Fashion-MNIST in {data!r} (make_bundle.sh --no-data)")
        return
    limit, floor = (1000, 40.0) if ctx.args.quick else (5000, 65.0)
    r = run(ctx.drun_cmd("--standalone", "--nproc-per-node", 4,
                         os.path.join(EXAMPLES, "mnist_ddp.py"), "--epochs", 1, "--limit", limit,
                         "--data-dir", data), ctx.env(), ctx.bound(240))
    accuracy = None
    for line in r.workers().get(0, []):
        m = re.search(r"^Accuracy on testing data: Got \d+/10000 with accuracy (\d+\.\d+)$", line)
        if m:
            accuracy = float(m.group(1))
    ok = r.rc == 0 and accuracy is not None and accuracy >= floor
    ctx.record("3 programs and store", "Fashion-MNIST DDP trainer", PASS if ok else FAIL,
               f"4 workers, 1 epoch, --limit {limit}: accuracy {accuracy} % (floor {floor} %)",
               r.seconds, **({} if ok else {"output_tail": r.tail()}))


def store_server(ctx):
    server = os.path.join(ctx.bundle, "bin", "drun_store_server")
    return server if os.access(server, os.X_OK) else None


def case_store_ops_server(ctx):
    server = store_server(ctx)
    if not server:
        ctx.record("3 programs and store", "every TCPStore op, drun_store_server", SKIP,
                   "skipped: the bundle has no drun_store_server")
        return
    t0 = time.monotonic()
    proc = subprocess.Popen([server, "--host", "127.0.0.1", "--log"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        port = int(proc.stdout.readline())
        r = run([ctx.python, ctx.program("store_ops.py"), "127.0.0.1", port], ctx.env(),
                ctx.bound(60))
    finally:
        _, log = proc.communicate(timeout=30)  # closing stdin stops the server
    rep = r.reports().get(0) or parse_plain_report(r.out)
    errors = re.search(r"\((\d+) protocol errors\)", log)
    ok = r.rc == 0 and errors is not None and errors.group(1) == "0"
    ctx.record("3 programs and store", "every TCPStore op, drun_store_server",
               PASS if ok else FAIL,
               f"torch {rep.get('torch')} client: {summarize_ops(rep)}; server: "
               f"{errors.group(0) if errors else 'no error count'}", time.monotonic() - t0,
               ops=rep.get("ops"), **({} if ok else {"output_tail": r.tail(), "server_log": log[-2000:]}))


def parse_plain_report(out):
    for line in out.splitlines():
        if line.startswith("GPUCHECK "):
            return json.loads(line[len("GPUCHECK "):])
    return {}


def summarize_ops(rep):
    ops = rep.get("ops") or {}
    ok = [n for n, v in ops.items() if v == "ok"]
    absent = [n for n, v in ops.items() if v == "absent"]
    return (f"{len(ok)} of {len(ops)} ops ok" + (f", absent in this torch: {absent}" if absent else "")
            + (f", failed: {rep.get('failed')}" if rep.get("failed") else ""))


def case_store_ops_agent(ctx):
    r = run(ctx.drun_cmd("--standalone", "--nproc-per-node", 2, ctx.program("store_ops.py"),
                         "--env"), ctx.env(), ctx.bound(90))
    reports = r.reports()
    ok = r.rc == 0 and sorted(reports) == [0, 1] and not any(p["failed"] for p in reports.values())
    ctx.record("3 programs and store", "every TCPStore op, drun's agent store (2 workers)",
               PASS if ok else FAIL,
               f"drun exited {r.rc}; rank 0: {summarize_ops(reports.get(0, {}))}", r.seconds,
               **({} if ok else {"output_tail": r.tail()}))


def unittest_case(ctx, case, cmd, env):
    r = run(cmd, env, ctx.bound(240))
    ran = re.search(r"^Ran (\d+) tests? in", r.err, re.M)
    verdict = re.search(r"^(OK.*|FAILED.*)$", r.err, re.M)
    ok = r.rc == 0
    ctx.record("3 programs and store", case, PASS if ok else FAIL,
               f"{ran.group(1) if ran else '?'} tests: {verdict.group(1) if verdict else r.rc}",
               r.seconds, **({} if ok else {"output_tail": r.tail(30)}))


def case_store_tests(ctx):
    server = store_server(ctx)
    if not server:
        ctx.record("3 programs and store", "tests/store with this torch", SKIP,
                   "skipped: the bundle has no drun_store_server")
        return
    torch1 = str(ctx.facts.get("torch", "")).startswith("1.")
    store_dir = os.path.join(REPO, "tests", "store")
    # torch 1.x: the whole file; 2.x: its ops class, and init_process_group with 2.x's keys.
    # --quick (the ctest; CI runs the whole file with 1.13 as a test of its own): one test.
    cmd = [ctx.python, os.path.join(store_dir, "c10d_store_torch_test.py"), "--server", server]
    which = (["TorchStoreOpsTest.test_set_and_get"] if ctx.args.quick
             else [] if torch1 else ["TorchStoreOpsTest"])
    unittest_case(ctx, " ".join(["tests/store/c10d_store_torch_test.py"] + which),
                  cmd + which, ctx.env())
    if not torch1:
        unittest_case(ctx, "tests/compat/c10d_store_torch26_pg_test.py (4 gloo ranks)",
                      [ctx.python, os.path.join(REPO, "tests", "compat",
                                                "c10d_store_torch26_pg_test.py"),
                       "--server", server], ctx.env(PYTHONPATH=store_dir))


def wait_listening(port, timeout, proc):
    """Waits until something accepts connections on 127.0.0.1:port (or proc ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.1)  # not listening yet; bounded by the deadline
    return False


def case_two_nodes(ctx):
    # Two drun processes play the nodes of a c10d job (2 ranks each, gloo: NCCL allows one
    # rank per GPU). The hosting node is started first, the other once its rendezvous port
    # accepts: both at once can leave the second waiting on a port not bound yet.
    t0 = time.monotonic()
    port = free_port()
    common = ["--nnodes", 2, "--nproc-per-node", 2, "--rdzv-endpoint", f"127.0.0.1:{port}",
              "--run-id", f"gpucheck2n{os.getpid()}"]
    procs, paths = [], []
    for node in (0, 1):
        out, err = (os.path.join(ctx.tmp, f"node{node}.{s}") for s in ("out", "err"))
        paths.append((out, err))
        procs.append(start(ctx.drun_cmd(*common, "--node-rank", node,
                                        ctx.program("gpu_worker.py"), "--cpu"),
                           ctx.env(), out, err))
        if node == 0:
            wait_listening(port, ctx.bound(30), procs[0])
    rcs = [finish(p, max(1, ctx.bound(120) - (time.monotonic() - t0))) for p in procs]
    outs = [Result(rc, read_text(o), read_text(e), 0, False) for rc, (o, e) in zip(rcs, paths)]
    reports = {**outs[0].reports(), **outs[1].reports()}
    # On loopback drun names the interface for gloo and NCCL, lo, unless the user did.
    ifname = os.environ.get("NCCL_SOCKET_IFNAME", "lo")
    problems = ([] if rcs == [0, 0] else [f"exits {rcs}"]) + \
        check_workers(reports, 4, "gloo", {"nccl_socket_ifname": ifname})
    ctx.record("3 programs and store", "two nodes typed by hand on loopback (2 x 2 ranks)",
               FAIL if problems else PASS,
               "; ".join(problems) if problems else
               "drun-net's rendezvous; 4 gloo ranks: all_reduce and a DDP step right; "
               f"NCCL_SOCKET_IFNAME={ifname} on every rank", time.monotonic() - t0,
               workers=reports,
               **({"output_tail": outs[0].tail(15) + "\n" + outs[1].tail(15)} if problems else {}))


def finish(proc, timeout):
    """proc's exit code, or 'timeout' after stopping it."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        stop(proc)
        return "timeout"


# ---------------------------------------------------------------- 4. Lightning and accelerate


def has_module(ctx, *names):
    return any(ctx.facts.get(n) for n in names)


def framework_case(ctx, case, nproc, program, args, world, check):
    r = run(ctx.drun_cmd("--standalone", "--nproc-per-node", nproc, ctx.program(program), *args),
            ctx.env(), ctx.bound(180))
    reports = r.reports()
    problems = ([] if r.rc == 0 else [f"drun exited {r.rc}"])
    if sorted(reports) != list(range(world)):
        problems.append(f"ranks reporting {sorted(reports)}, wanted 0..{world - 1}")
    problems += [p for rep in reports.values() for p in check(rep)]
    rep0 = reports.get(0, {})
    ctx.record("4 frameworks", case, FAIL if problems else PASS,
               "; ".join(problems) if problems else
               ", ".join(f"{k}={v}" for k, v in rep0.items() if k not in ("rank", "drun_rank")),
               r.seconds, workers=reports, **({"output_tail": r.tail(25)} if problems else {}))


def lightning_check(world):
    def check(rep):
        bad = []
        if rep.get("world") != world or rep.get("rank") != rep.get("drun_rank"):
            bad.append(f"Lightning's rank/world {rep.get('rank')}/{rep.get('world')} "
                       f"!= drun's {rep.get('drun_rank')}/{world}")
        if rep.get("cluster_environment") != "TorchElasticEnvironment":
            bad.append(f"cluster environment {rep.get('cluster_environment')}")
        return bad
    return check


def case_lightning(ctx):
    if not has_module(ctx, "lightning", "pytorch-lightning"):
        ctx.record("4 frameworks", "Lightning Trainer(strategy='ddp')", SKIP,
                   f"skipped: no lightning for {ctx.python}")
        return
    framework_case(ctx, "Lightning ddp, 2 processes on the CPU (gloo)", 2, "lightning_fit.py",
                   ["--accelerator", "cpu", "--devices", 2], 2, lightning_check(2))
    if ctx.gpus == 0:
        ctx.record("4 frameworks", "Lightning ddp on the GPU (NCCL)", SKIP, "skipped: no GPU")
        return
    framework_case(ctx, f"Lightning ddp on the GPU, {ctx.gpus} process(es) (NCCL)", "gpu",
                   "lightning_fit.py", ["--accelerator", "gpu", "--devices", ctx.gpus],
                   ctx.gpus, lightning_check(ctx.gpus))


def accelerate_check(world):
    def check(rep):
        bad = []
        if rep.get("world") != world or rep.get("rank") != rep.get("drun_rank"):
            bad.append(f"accelerate's process {rep.get('rank')}/{rep.get('world')} "
                       f"!= drun's {rep.get('drun_rank')}/{world}")
        if rep.get("gathered_ranks") != list(range(world)):
            bad.append(f"gather gave {rep.get('gathered_ranks')}")
        return bad
    return check


def case_accelerate(ctx):
    if not has_module(ctx, "accelerate"):
        ctx.record("4 frameworks", "accelerate Accelerator()", SKIP,
                   f"skipped: no accelerate for {ctx.python}")
        return
    framework_case(ctx, "accelerate, 2 processes on the CPU", 2, "accelerate_run.py", ["--cpu"],
                   2, accelerate_check(2))
    if ctx.gpus == 0:
        ctx.record("4 frameworks", "accelerate on the GPU", SKIP, "skipped: no GPU")
        return
    framework_case(ctx, f"accelerate on the GPU, {ctx.gpus} process(es)", "gpu",
                   "accelerate_run.py", [], ctx.gpus, accelerate_check(ctx.gpus))


# ---------------------------------------------------------------- 5. drun stacks, --hang-timeout


def line_of(path, marker):
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if marker in line:
                return n
    raise ValueError(f"{marker} not in {path}")


def rank_section(dump, rank):
    m = re.search(rf"^=== rank {rank} .*?(?=^=== rank |\Z)", dump, re.M | re.S)
    return m.group(0) if m else ""


def stacks_facts(dump, script):
    """What the dump shows of rank 0 (in the collective) and rank 1 (sleeping)."""
    r0, r1 = rank_section(dump, 0), rank_section(dump, 1)
    hang, sleep = line_of(script, "HANG LINE"), line_of(script, "SLEEP LINE")
    return {
        "rank0_python_frame": f'File "{script}", line {hang}' in r0,
        "rank1_python_frame": f'File "{script}", line {sleep}' in r1,
        "rank0_native_frames": re.search(r"^\s*#\d+ ", r0, re.M) is not None,
        "rank0_nccl_frames": re.search(r"^\s*#\d+ .*nccl", r0, re.M | re.I) is not None,
        "rank0_python_method": (re.search(r"python: ([^\n]*)", r0) or [None, None])[1],
        "rank0_unavailable": re.findall(r"frames unavailable: [^\n]*", r0),
    }


def take_dump(ctx, run_id, script):
    """drun stacks until rank 0 is inside the collective (up to 3 tries)."""
    for attempt in range(3):
        r = run(ctx.drun_cmd("stacks", run_id), ctx.env(), ctx.bound(60))
        facts = stacks_facts(r.out, script)
        if r.rc != 0 or facts["rank0_python_frame"] or facts["rank0_nccl_frames"]:
            break
        time.sleep(1)  # rank 0 printed its line and may not be in the call yet
    return r, facts, attempt + 1


def case_stacks(ctx):
    script = ctx.program("hang_worker.py")
    run_id = f"gpucheckhang{os.getpid()}"
    out, err = os.path.join(ctx.tmp, "hang.out"), os.path.join(ctx.tmp, "hang.err")
    t0 = time.monotonic()
    proc = start(ctx.drun_cmd("--standalone", "--nproc-per-node", 2, "--run-id", run_id, script),
                 ctx.env(), out, err)
    try:
        ready = wait_for_lines(out, ["rank 1 sleeping", "rank 0 entering all_reduce"],
                               ctx.bound(120), proc)
        if not ready:
            ctx.record("5 hangs", "drun stacks", FAIL, "the ranks never reached the hang",
                       time.monotonic() - t0,
                       output_tail=read_text(out)[-2000:] + read_text(err)[-2000:])
            return
        r, facts, tries = take_dump(ctx, run_id, script)
    finally:
        stop(proc)
    mode = re.search(r"HANG_MODE=(.*)", read_text(out))
    with open(os.path.join(ctx.out, "stacks.txt"), "w") as f:
        f.write(r.out + r.err)
    ok = r.rc == 0 and (facts["rank0_python_frame"] or facts["rank0_native_frames"])
    ctx.record("5 hangs", f"drun stacks ({mode.group(1) if mode else '?'})", PASS if ok else FAIL,
               f"rank 0 in all_reduce: Python frame {facts['rank0_python_frame']}, native "
               f"frames {facts['rank0_native_frames']} (NCCL in them: "
               f"{facts['rank0_nccl_frames']}); rank 1 sleeping: Python frame "
               f"{facts['rank1_python_frame']}; dump in stacks.txt", time.monotonic() - t0,
               tries=tries, **facts, **({} if ok else {"output_tail": r.tail(30)}))


def case_hang_timeout(ctx):
    r = run(ctx.drun_cmd("--standalone", "--nproc-per-node", 2, "--hang-timeout", 10,
                         ctx.program("hang_worker.py")), ctx.env(), ctx.bound(150))
    told = [l for l in r.err.splitlines() if l.startswith("drun: no rank made progress")]
    ok = r.rc == 124
    ctx.record("5 hangs", "--hang-timeout 10", PASS if ok else FAIL,
               f"drun exited {r.rc} after {r.seconds:.0f} s (124 wanted); "
               f"{told[0] if told else 'no hang verdict line'}", r.seconds,
               stderr_tail="\n".join(r.err.splitlines()[-25:]))


# ---------------------------------------------------------------- 6. CPU placement


PLACEMENT_SECONDS = 200


def case_placement(ctx):
    bench = os.path.join(REPO, "bench", "placement_bench.py")
    if not os.path.exists(bench):
        ctx.record("6 placement", "bench/placement_bench.py", SKIP,
                   "skipped: bench/placement_bench.py is not in this tree (issue 24's bench)")
        return
    if ctx.args.dry_run and not ctx.args.with_placement:
        ctx.record("6 placement", "bench/placement_bench.py", SKIP,
                   "skipped: a dry run runs it only with --with-placement (minutes on 2 cores)")
        return
    if ctx.left() < 120:
        ctx.record("6 placement", "bench/placement_bench.py", SKIP,
                   f"skipped: out of time ({ctx.left():.0f} s left of the budget)")
        return
    # Its interface belongs to its author: the arguments it offers are passed, the rest of
    # what it needs comes from the environment (PYTHON_EXEC, DRUN, FASHION_MNIST).
    offered = run([ctx.python, bench, "--help"], ctx.env(), ctx.bound(30)).out
    args = placement_args(ctx, lambda flag: re.search(
        rf"(^|[\s\[]){re.escape(flag)}(?=[\s=\],]|$)", offered, re.M) is not None)
    linked = link_debian_data(ctx, offers_data_dir="--data-dir" in args)
    env = ctx.env(DRUN=ctx.drun, FASHION_MNIST=ctx.args.data)
    # At most PLACEMENT_SECONDS (unless --placement-full), and the two cases of group 3
    # after it keep about a minute when they are to run.
    keep = 60 if "3" in ctx.args.only.split(",") else 10
    cap = ctx.left() - keep if ctx.args.placement_full else min(PLACEMENT_SECONDS,
                                                                ctx.left() - keep)
    r = run([ctx.python, bench] + args, env, ctx.bound(cap))
    ctx.record("6 placement", "bench/placement_bench.py " + " ".join(a for a in args
                                                                    if a.startswith("--")),
               INFO if r.rc == 0 else FAIL,
               f"exit {r.rc}{' (cut off by the budget)' if r.timed_out else ''}; "
               + (f"{linked}; " if linked else "")
               + ("its table follows" if r.rc == 0 else r.tail(1)), r.seconds,
               output_tail=r.tail(40))


def placement_args(ctx, offers):
    """The bench's arguments that it offers: where to write, and a run that fits the
    budget (3 repetitions) unless --placement-full (its defaults, and torchrun beside)."""
    wanted = [("--drun", ctx.drun), ("--python", ctx.python), ("--data-dir", ctx.args.data),
              ("--markdown", os.path.join(ctx.out, "placement.md")),
              ("--json", os.path.join(ctx.out, "placement.json"))]
    torchrun = os.path.join(os.path.dirname(ctx.python), "torchrun")  # the venv's, on the device
    if not ctx.args.placement_full:
        wanted += [("--quick", None), ("--reps", "3")]
    elif os.access(torchrun, os.X_OK):
        wanted += [("--torchrun", None), ("--torchrun-path", torchrun)]
    args = []
    for flag, value in wanted:
        if offers(flag):
            args += [flag] + ([value] if value else [])
    return args


DEBIAN_DATA = "/usr/share/datasets/fashion-mnist"


def link_debian_data(ctx, offers_data_dir):
    """A bench without --data-dir reads the trainer's default, Debian's folder: on a machine
    without it (the GPU machine) the bundle's data is linked there. Says what it did."""
    if offers_data_dir or os.path.isdir(DEBIAN_DATA) or not os.path.isdir(ctx.args.data):
        return ""
    try:
        os.makedirs(os.path.dirname(DEBIAN_DATA), exist_ok=True)
        os.symlink(os.path.abspath(ctx.args.data), DEBIAN_DATA)
    except OSError as e:
        return f"could not link the data to {DEBIAN_DATA}: {e}"
    return f"linked {DEBIAN_DATA} to the bundle's data"


# ---------------------------------------------------------------- the run

# (case function, needs): "gpu" cases are recorded "skipped: no GPU" without one; every
# case but the first two needs a bundle that runs here. In order of importance: what is
# cut off by the budget is at the end.
CASES = [
    (case_versions, None, "versions"), (case_bundle, None, "bundle"),
    (case_nproc_gpu, "gpu", "--nproc-per-node gpu"),
    (case_nproc_gpu0, "gpu", "--nproc-per-node gpu:0"),
    (case_gpu_exit_code, "gpu", "exit code of an NCCL worker"),
    (case_no_gpu_visible, "bundle", "--nproc-per-node gpu, no GPU visible"),
    (case_gloo_stand_in, "bundle", "stand-in: 2 gloo workers on the CPU"),
    (case_stand_in_exit_code, "bundle", "stand-in: exit code of a gloo worker"),
    (case_gpu_out_of_range, "gpu", "gpu:N, a GPU the node lacks"),
    (case_stacks, "bundle", "drun stacks"), (case_hang_timeout, "bundle", "--hang-timeout 10"),
    (case_mixed, "bundle", "4 gloo ranks, GPU ranks beside them"),
    (case_vlr_cpu, "bundle", "--virtual-local-rank, 2 gloo workers"),
    (case_vlr_gpu, "gpu", "--virtual-local-rank with gpu:0"),
    (case_seeds_agent_store, "bundle", "seeds, drun's agent store"),
    (case_store_ops_server, "bundle", "every TCPStore op, drun_store_server"),
    (case_store_ops_agent, "bundle", "every TCPStore op, drun's agent store"),
    (case_store_tests, "bundle", "tests/store with this torch"),
    (case_two_nodes, "bundle", "two nodes typed by hand on loopback"),
    (case_lightning, "bundle", "Lightning Trainer(strategy='ddp')"),
    (case_accelerate, "bundle", "accelerate Accelerator()"),
    (case_placement, "bundle", "bench/placement_bench.py"),
    # Last: the placement bench runs this trainer too, and 1.13 covers the rest in CI.
    (case_seeds_no_agent_store, "bundle", "seeds, --no-agent-store"),
    (case_mnist, "bundle", "Fashion-MNIST DDP trainer"),
]
GROUPS = {  # a case's group, for --only and for the cases skipped before they ran
    "1": ("case_nproc_gpu", "case_nproc_gpu0", "case_gpu_exit_code", "case_no_gpu_visible",
          "case_gloo_stand_in", "case_stand_in_exit_code", "case_gpu_out_of_range"),
    "2": ("case_mixed", "case_vlr_cpu", "case_vlr_gpu"),
    "3": ("case_seeds_agent_store", "case_store_ops_server", "case_store_ops_agent",
          "case_store_tests", "case_two_nodes", "case_seeds_no_agent_store", "case_mnist"),
    "4": ("case_lightning", "case_accelerate"),
    "5": ("case_stacks", "case_hang_timeout"),
    "6": ("case_placement",),
}


GROUP_TITLES = {"0": "0 machine", "1": "1 GPU workers", "2": "2 mixed ranks",
                "3": "3 programs and store", "4": "4 frameworks", "5": "5 hangs",
                "6": "6 placement"}


def group_of(fn):
    return next((g for g, names in GROUPS.items() if fn.__name__ in names), "0")


def run_case(ctx, fn, needs, name):
    label = GROUP_TITLES[group_of(fn)]
    if needs == "gpu" and ctx.gpus == 0:
        ctx.record(label, name, SKIP, "skipped: no GPU")
    elif needs and not ctx.bundle_ok:
        ctx.record(label, name, SKIP, "skipped: the bundle does not run here (case bundle)")
    elif ctx.left() < 15:
        ctx.record(label, name, SKIP, f"skipped: out of time ({ctx.args.budget} s budget)")
    else:
        t0 = time.monotonic()
        try:
            fn(ctx)
        except Exception as e:  # a broken case is recorded; the others still run
            import traceback
            ctx.record(label, name, FAIL, f"the check itself failed: {type(e).__name__}: {e}",
                       time.monotonic() - t0, traceback=traceback.format_exc()[-3000:])


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", required=True, help="the workers' interpreter (PYTHON_EXEC)")
    p.add_argument("--bundle", required=True, help="tests/gpu/make_bundle.sh's folder")
    p.add_argument("--data", default="", help="Fashion-MNIST's folder (the bundle's data/)")
    p.add_argument("--out", required=True, help="folder for report.json, report.md, stacks.txt")
    p.add_argument("--budget", type=float, default=480, help="seconds for every case together")
    p.add_argument("--dry-run", action="store_true", help="CPU only: GPU cases are skipped")
    p.add_argument("--quick", action="store_true", help="smaller trainer run (the ctest)")
    p.add_argument("--with-placement", action="store_true",
                   help="a dry run also runs bench/placement_bench.py")
    p.add_argument("--placement-full", action="store_true",
                   help="the placement bench's full run (else its --quick, when it has one)")
    p.add_argument("--only", default="0,1,2,3,4,5,6",
                   help="comma-separated groups (0 always runs: the machine, the bundle)")
    return p.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    ctx = Ctx(args)
    only = set(args.only.split(",")) | {"0"}
    try:
        for fn, needs, title in CASES:
            if group_of(fn) in only:
                run_case(ctx, fn, needs, title)
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)
        gpu_report.write(ctx, final=True)
    failed = [c for c in ctx.cases if c["status"] == FAIL]
    print(f"gpu checks: {len(ctx.cases)} cases, {len(failed)} failed, "
          f"{sum(c['status'] == SKIP for c in ctx.cases)} skipped; report in {args.out}",
          flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
