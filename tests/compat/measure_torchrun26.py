"""Measures what Debian 13's torchrun 2.6 gives its workers in each of its modes, for
docs/torchrun26_reference.md (the reference docs/semantics.md is checked against).

    sudo /usr/bin/python3 tests/compat/measure_torchrun26.py [--drun build/launcher/drun] > out.md

Needs the chroot (tests/compat/setup_torch26.sh). Every case starts one or two torchrun
processes in the chroot with a worker that prints its environment and then tries
init_process_group (gloo, env://); each run is bounded (a hang is reported as such) and
everything it started is killed by pid afterwards. Prints Markdown on stdout.
"""
import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import time

import torch26lib
import drun_testlib
from drun_testlib import become_subreaper, kill_and_reap_descendants

RUN_BOUND = 90  # seconds a case may take before it is called a hang
SHOWN = ["MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK",
         "GROUP_WORLD_SIZE", "LOCAL_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE",
         "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
         "TORCHELASTIC_MAX_RESTARTS"]
NOT_FROM_LAUNCHER = {"PATH", "PYTHONPATH", "PWD", "SHLVL", "_", "OLDPWD"}

# The worker writes its report to a file of its own in $MEASURE_OUT (under /tmp, seen by
# both sides of the chroot): torchrun's workers share one stdout pipe, and a report larger
# than PIPE_BUF could interleave with another worker's.
WORKER = """\
import datetime, json, os, sys
env = dict(os.environ)
def report(init):
    with open(os.path.join(env["MEASURE_OUT"], f"{os.getpid()}.json"), "w") as f:
        json.dump({"env": env, "init": init}, f)
try:
    import torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    t = __import__("torch").tensor([1.0]); dist.all_reduce(t)
    report(f"ok (all_reduce of 1s = {t.item():.0f})")
    dist.destroy_process_group()
except Exception as e:
    report("error: " + " ".join(str(e).split())[:300])
    if env.get("MEASURE_RAISE") == "1":  # let the launcher report it
        raise
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_is_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def launch(argv, env):
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def run_case(commands, env):
    """Runs the commands together; returns ([(argv, returncode|None, stderr)], [reports])."""
    with torch26lib.shared_tempdir("drun-torchrun26-out-") as out_dir:
        env = dict(env, MEASURE_OUT=out_dir)
        procs = [launch(argv, env) for argv in commands]
        deadline = time.monotonic() + RUN_BOUND
        results = []
        for argv, p in zip(commands, procs):
            try:
                _, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
                results.append((argv, p.returncode, err))
            except subprocess.TimeoutExpired:
                kill_and_reap_descendants()  # the whole case, by pid
                _, err = p.communicate()
                results.append((argv, None, err))
        kill_and_reap_descendants()
        reports = []
        for name in sorted(os.listdir(out_dir)):
            with open(os.path.join(out_dir, name)) as f:
                reports.append(json.load(f))
    return results, reports


def workers_of(reports, launch_env):
    """[(rank, env, other new vars, init)] of the workers' reports, by rank."""
    rows = []
    for data in reports:
        env = data["env"]
        new = {k: v for k, v in env.items()
               if launch_env.get(k) != v and k not in NOT_FROM_LAUNCHER and k not in SHOWN
               and k != "MEASURE_OUT"}
        rows.append((int(env.get("RANK", -1)), env, new, data["init"]))
    return sorted(rows, key=lambda r: r[0])


def md_escape(text):
    return text.replace("|", "\\|")


def shown_argv(argv):
    """The torchrun part of a command (after `torch26-chroot.sh run DIR`)."""
    return " ".join(argv[argv.index("torchrun"):] if "torchrun" in argv else argv)


def is_banner(line):
    """The OMP_NUM_THREADS banner every torchrun with nproc > 1 prints (shown once)."""
    if "run.py:" not in line:
        return False
    text = line.split("] ", 1)[-1].strip() if "] " in line else ""
    return text == "" or set(text) == {"*"} or text.startswith("Setting OMP_NUM_THREADS")


def one_value(values):
    values = sorted(values)
    return values[0] if len(values) == 1 else f"{values[0]} (one per worker, {len(values)})"


def describe_port(ports, given):
    text = "/".join(sorted(ports))
    if given is None:
        return text
    return text + (" (= given)" if ports == {str(given)} else f" (given {given}: not used)")


def report_case(title, measured, launch_env, notes="", given_port=None):
    """Returns (Markdown details, summary row) of one case."""
    results, reports = measured
    md = [f"\n### {title}\n"]
    if notes:
        md.append(notes + "\n")
    for argv, rc, _ in results:
        md.append(f"- `{shown_argv(argv)}` → exit "
                  + ("**hang** (killed after %d s)" % RUN_BOUND if rc is None else f"{rc}"))
    rows = workers_of(reports, launch_env)
    if rows:
        md.append("\n| " + " | ".join(SHOWN) + " | init_process_group |")
        md.append("|" + "---|" * (len(SHOWN) + 1))
        for _, env, _, init in rows:
            md.append("| " + " | ".join(md_escape(env.get(k, "(unset)")) for k in SHOWN)
                      + f" | {md_escape(init)} |")
        others = {}
        for _, _, new, _ in rows:
            for k, v in new.items():
                others.setdefault(k, set()).add(v)
        if others:
            md.append("\nOther variables the workers get: "
                      + ", ".join(f"`{k}={one_value(v)}`" for k, v in sorted(others.items())))
    else:
        md.append("\nNo worker ran.")
    messages = []
    for argv, _, err in results:
        lines = [l for l in err.splitlines() if l.strip() and not is_banner(l)]
        if lines:
            shown = lines if len(lines) <= 100 else lines[:50] + ["[...]"] + lines[-50:]
            md.append(f"\nstderr of `{shown_argv(argv)}` (banner omitted):\n\n```\n"
                      + "\n".join(shown) + "\n```")
            messages.append(lines[-1])
    values = lambda k: {env.get(k, "(unset)") for _, env, _, _ in rows}
    oks = sum(1 for *_, init in rows if init.startswith("ok"))
    exits = ", ".join("hang" if rc is None else str(rc) for _, rc, _ in results)
    summary = [title, exits,
               "/".join(sorted(values("MASTER_ADDR"))) if rows else "-",
               describe_port(values("MASTER_PORT"), given_port) if rows else "-",
               "/".join(sorted(values("WORLD_SIZE"))) if rows else "-",
               "/".join(sorted(values("TORCHELASTIC_USE_AGENT_STORE"))) if rows else "-",
               f"{oks}/{len(rows)}",
               md_escape(" ".join(messages[-1].split())[-200:]) if messages else ""]
    return "\n".join(md), summary


def print_section(title, intro, reports):
    print(f"\n## {title}\n\n{intro}\n")
    print("| case | exit | MASTER_ADDR | MASTER_PORT | WORLD_SIZE | USE_AGENT_STORE "
          "| init ok | last stderr line (banner omitted) |")
    print("|---|---|---|---|---|---|---|---|")
    for _, row in reports:
        print("| " + " | ".join(row) + " |")
    for details, _ in reports:
        print(details)


def torchrun(*args):
    return [torch26lib.TOOL, "run", torch26lib.ROOT, "torchrun", *map(str, args)]


def cases(worker):
    """(title, [commands], notes, the --master-port given or None) of every measured mode."""
    P, Q = free_port(), free_port()
    np = ("--nproc-per-node", 2)
    default_free = port_is_free(29500)
    static = ("--nnodes", 2, "--master-addr", "127.0.0.1")
    c10d = ("--nnodes", 2, "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{P}")
    return [
        ("--standalone", [torchrun("--standalone", *np, worker)], "", None),
        ("--standalone --master-port P", [torchrun("--standalone", *np, "--master-port", P,
                                                   worker)], "", P),
        ("--nnodes 1", [torchrun("--nnodes", 1, *np, worker)], "", None),
        ("--nnodes 1 --master-port P", [torchrun("--nnodes", 1, *np, "--master-port", P,
                                                 worker)], "", P),
        ("static: --nnodes 2 --node-rank R --master-addr 127.0.0.1 --master-port P",
         [torchrun(*static, "--node-rank", r, "--master-port", P, *np, worker)
          for r in (0, 1)], "", P),
        ("static: --nnodes 2 --node-rank R --master-addr 127.0.0.1",
         [torchrun(*static, "--node-rank", r, *np, worker) for r in (0, 1)],
         f"Port 29500 (torchrun's default) was {'free' if default_free else 'in use'} "
         "on 127.0.0.1 before the run.", None),
        ("c10d: --nnodes 2 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:P",
         [torchrun(*c10d, *np, worker) for _ in (0, 1)], "", None),
        ("c10d: --nnodes 2 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:P --master-port Q",
         [torchrun(*c10d, "--master-port", Q, *np, worker) for _ in (0, 1)], "", Q),
        ("--standalone --nnodes 2", [torchrun("--standalone", "--nnodes", 2, *np, worker)],
         "", None),
        ("--standalone --master-addr 10.213.99.99",
         [torchrun("--standalone", "--master-addr", "10.213.99.99", *np, worker)],
         "10.213.99.99 is no address of this machine.", None),
        ("--standalone --master-addr 10.213.99.99 --master-port P",
         [torchrun("--standalone", "--master-addr", "10.213.99.99", "--master-port", P, *np,
                   worker)], "", P),
    ], (P, Q)


def libuv_cases(worker, drun):
    """Debian 13's torch 2.6 as packaged (T26_NOLIBUV=0: no shim): (title, commands, env)."""
    np = ("--nproc-per-node", 2)
    out = [("torchrun --standalone", [torchrun("--standalone", *np, worker)], {}),
           ("torchrun --standalone --rdzv-conf use_libuv=0, USE_LIBUV=0",
            [torchrun("--standalone", "--rdzv-conf", "use_libuv=0", *np, worker)],
            {"USE_LIBUV": "0"}),
           ("torchrun --nnodes 1, USE_LIBUV=0", [torchrun("--nnodes", 1, *np, worker)],
            {"USE_LIBUV": "0"})]
    if drun:
        py = [torch26lib.TOOL, "run", torch26lib.ROOT, "python3"]
        for flags, extra in (((), {}), (("--no-agent-store",), {}),
                             (("--no-agent-store",), {"USE_LIBUV": "0"})):
            title = " ".join(("drun --standalone",) + flags) + (", USE_LIBUV=0" if extra else "")
            out.append((title, [[drun, "--standalone", *flags, "--nproc-per-node", "2",
                                 "--no-python", *py, worker]], extra))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--drun", help="a built drun, for the libuv comparison")
    args = parser.parse_args()
    torch26lib.require_chroot()
    become_subreaper()
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("PET_") and k not in drun_testlib.WORKER_VARS}
    base.update(TMPDIR="/tmp", COLUMNS="100")
    drun = os.path.abspath(args.drun) if args.drun else None
    with torch26lib.shared_tempdir("drun-torchrun26-") as tmp:
        worker = torch26lib.write_executable(os.path.join(tmp, "worker_env.py"), WORKER)
        version = subprocess.run(torchrun()[:-1] + ["python3", "-c",
                                 "import torch; print(torch.__version__)"],
                                 stdout=subprocess.PIPE, text=True, env=base).stdout.strip()
        print(f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC "
              f"with torch {version} (Debian 13 python3-torch) in the chroot "
              f"{torch26lib.ROOT}, on {socket.gethostname()}, by "
              "`tests/compat/measure_torchrun26.py`. Every case runs `--nproc-per-node 2` and "
              f"the worker `{os.path.basename(worker)}` (it records its environment, then runs "
              "`init_process_group(\"gloo\")` and an all_reduce).")
        print("\n## torchrun --help (COLUMNS=100)\n\n```")
        print(subprocess.run(torchrun("--help"), stdout=subprocess.PIPE, text=True,
                             env=base).stdout.rstrip() + "\n```")
        measured, (P, Q) = cases(worker)
        reports = [report_case(title, run_case(commands, base), base, notes, given)
                   for title, commands, notes, given in measured]
        print_section("What the workers see, per mode",
                      f"With the shim (use_libuv defaults to False). P = {P}, Q = {Q} (free "
                      "ports chosen for the run). Every torchrun printed the OMP_NUM_THREADS "
                      "banner (\"Setting OMP_NUM_THREADS environment variable for each process "
                      "to be 1 in default, ...\"), omitted below.", reports)
        reports = []
        for title, commands, extra in libuv_cases(worker, drun):
            env = dict(base, T26_NOLIBUV="0", MEASURE_RAISE="1", **extra)
            reports.append(report_case(title, run_case(commands, env), env))
        print_section("Debian 13's torch 2.6 as packaged (T26_NOLIBUV=0, no shim)",
                      "Without the sitecustomize shim TCPStore() defaults to use_libuv=True, "
                      "which this build of torch refuses. Here the worker re-raises a failed "
                      "init_process_group (MEASURE_RAISE=1), so the launcher reports it as a "
                      "user would see it.", reports)


if __name__ == "__main__":
    sys.exit(main())
