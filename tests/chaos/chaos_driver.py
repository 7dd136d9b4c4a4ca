#!/usr/bin/python3
"""drun's chaos suite: seeded, bounded fault injection on the ssh testbed.

    chaos_driver.py --short                      # ctest: seed 1, one episode per fault kind
    chaos_driver.py --minutes 45 --report F.md   # soak (or DRUN_CHAOS_MINUTES=45)
    chaos_driver.py --seed S --episode E         # replay one episode (or DRUN_CHAOS_SEED/_EPISODE)
    chaos_driver.py --list-kinds

Each episode: (seed, episode) -> a fault plan -> a job run over the testbed (5 hosts x 2
workers, --nnodes 2:3, the resumable stand-in job tests/chaos/chaos_worker.py) -> the
invariants (chaos_checks.py) on the workers' own records, the exit codes and what is left on
the hosts. The plan depends on (seed, episode) only, so any episode replays alone. Every
failure is printed with its seed, episode, invariant and evidence; the run exits 1 if any
episode broke an invariant. Needs root (tests/ssh/ssh_testlib.py); run it under
`flock /tmp/drun-testbed.lock` beside other testbeds.
"""
import argparse
import json
import re
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "ssh"))
import ssh_testlib as t  # noqa: E402
import chaos_checks as checks  # noqa: E402

HOSTS = ["red01", "orange07", "yellow03", "green02", "blue05"]
NPROC = 2
NNODES = "2:3"
STEPS = 30  # the short run's job: about 5 s without faults
SOAK_STEPS = 120  # a soak's: about 20 s, so that faults of up to 30 s land mid-job
EVERY = 4
STEP_TIME = 0.15
RUN_BOUND = float(os.environ.get("DRUN_CHAOS_RUN_BOUND", "150"))  # a hang becomes a failure
LAUNCHER_SIGNALS = {"launcher_sigint": signal.SIGINT, "launcher_sigterm": signal.SIGTERM,
                    "launcher_sigkill": signal.SIGKILL}
KINDS = ["kill_worker", "kill_agent", "freeze_agent", "cut_link", "throttle_link",
         "while_forming", "launcher_sigint", "launcher_sigterm", "launcher_sigkill",
         "kill_agent_after_finish", "cut_below_min", "freeze_launcher"]
JOIN_TIMEOUT = 60
# cut_below_min: the job must fail within min(60 s, join_timeout / 2) of the cut, plus slack.
FAIL_FAST = min(60, JOIN_TIMEOUT / 2) + 15
RESUMED = set(LAUNCHER_SIGNALS) | {"cut_below_min"}  # a second launcher resumes the job


class Plan:
    """One episode's faults, a pure function of (seed, episode, soak)."""

    def __init__(self, seed, episode, soak=False):
        rng = random.Random(f"drun-chaos:{seed}:{episode}")
        self.seed, self.episode, self.soak = seed, episode, soak
        self.kind = KINDS[(seed + episode) % len(KINDS)]
        # The fault comes once a round reached this step.
        self.at_step = rng.randint(3, 60 if soak else 12)
        self.pick = rng.random()  # which running rank or host it hits
        self.pick2 = rng.random()
        # Link cuts 2-30 s in a soak, 2-6 s in the short run; freezes and throttles alike.
        self.duration = round(rng.uniform(2, 30 if soak else 6), 1)
        self.kbit = rng.choice([8, 16, 64])
        self.steps = SOAK_STEPS if soak else STEPS

    def describe(self):
        return (f"seed={self.seed} episode={self.episode} kind={self.kind} "
                f"at_step={self.at_step} duration={self.duration}s")


class Episode:
    """Runs one plan on the testbed: the job (twice when the launcher is stopped: the second
    run resumes), the fault, then the checks."""

    def __init__(self, bed, plan):
        self.bed, self.plan = bed, plan
        self.dir = tempfile.mkdtemp(prefix=f"ep{plan.episode}-", dir=bed.tmp)
        os.chmod(self.dir, 0o755)
        self.shared = os.path.join(self.dir, "shared")
        os.makedirs(self.shared)
        self.runs = []  # checks.RunResult
        self.procs = []  # the launchers it started
        self.fault = None  # checks.Fault

    # -- the job ---------------------------------------------------------------------------

    def start(self, linger=0.0):
        n = len(self.runs)
        tmp, xdg = (os.path.join(self.dir, f"{d}{n}") for d in ("tmp", "xdg"))
        for d in (tmp, xdg):
            os.makedirs(d, mode=0o700)
        hostfile = self.bed.write_hostfile("".join(f"{h} slots={NPROC}\n" for h in HOSTS),
                                           name=f"hosts-{self.plan.episode}")
        args = ["--hostfile", hostfile, "--nnodes", NNODES, "--max-restarts", "20",
                "--shutdown-timeout", "3", "--rdzv-conf", f"join_timeout={JOIN_TIMEOUT},last_call_timeout=1",
                os.path.join(HERE, "chaos_worker.py"), "--dir", self.shared,
                "--steps", str(self.plan.steps),
                "--every", str(EVERY), "--step-time", str(STEP_TIME), "--linger", str(linger)]
        proc, lines = self.bed.drun_run(args, env=self.bed.env(TMPDIR=tmp, XDG_RUNTIME_DIR=xdg),
                                        name=f"drun ep{self.plan.episode} run{n}")
        self.procs.append(proc)
        return proc, lines, [tmp, xdg]

    def finish(self, proc, lines, launcher_dirs, expected):
        try:
            code = proc.wait(timeout=RUN_BOUND)
            bounded = True
        except subprocess.TimeoutExpired:
            proc.kill()
            code, bounded = proc.wait(), False
        ended = getattr(self, "ended", None) or time.time()
        self.ended = None
        lines.join()
        self.runs.append(checks.RunResult(code, expected, bounded, lines.describe(40),
                                          launcher_dirs, ended, lines.lines("stderr")[-25:]))

    # -- faults ----------------------------------------------------------------------------

    def wait_step(self, lines, step):
        lines.wait_for(rf"\]: chaos kind=step step={step} ", timeout=RUN_BOUND)

    def current_round(self):
        recs = checks.load_records(self.shared)
        starts = [r for r in recs if r["kind"] == "start"]
        last = max(starts, key=lambda r: r["t"])["round"]
        return sorted((r for r in starts if r["round"] == last), key=lambda r: r["rank"])

    def active_hosts(self):
        return sorted({r["host"] for r in self.current_round()})

    def agent_of(self, host):
        pids = self.bed.agent_pids(host)
        if not pids:
            raise AssertionError(f"no agent on {host}\n{self.bed.describe_hosts()}")
        return pids[0]

    def pick(self, items, which):
        return items[int(which * len(items)) % len(items)]

    def inject(self, proc, lines):
        """The plan's fault, once the job reached the plan's step. Sets self.fault."""
        p = self.plan
        self.wait_step(lines, p.at_step)
        kind = p.kind
        t0 = time.time()
        if kind == "kill_worker" or kind == "while_forming":
            victim = self.pick(self.current_round(), p.pick)
            os.kill(victim["pid"], signal.SIGKILL)
            target = f"{victim['host']} rank {victim['rank']} pid {victim['pid']}"
            if kind == "while_forming":
                target += "; then " + self.kill_agent_while_forming(lines, victim["host"])
            end = time.time()
        elif kind == "kill_agent":
            host = self.pick(self.active_hosts(), p.pick)
            os.kill(self.agent_of(host), signal.SIGKILL)
            target, end = f"agent on {host}", time.time()
        elif kind in ("freeze_agent", "freeze_launcher"):
            host = self.pick(self.active_hosts(), p.pick)
            pid = self.agent_of(host) if kind == "freeze_agent" else proc.pid
            os.kill(pid, signal.SIGSTOP)
            time.sleep(p.duration)  # the fault's length (the plan), not a wait for an event
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            who = f"agent on {host}" if kind == "freeze_agent" else "the launcher"
            target, end = f"{who} for {p.duration}s", time.time()
        elif kind in ("cut_link", "throttle_link"):
            host = self.pick(self.active_hosts(), p.pick)
            cut = kind == "cut_link"
            self.bed.cut(host) if cut else self.bed.throttle(host, p.kbit)
            try:
                time.sleep(p.duration)  # the fault's length (the plan)
            finally:
                self.bed.restore(host) if cut else self.bed.unthrottle(host)
            what = "" if cut else f" to {p.kbit} kbit/s"
            target, end = f"{host}'s link{what} for {p.duration}s", time.time()
        elif kind == "cut_below_min":
            target = self.cut_below_min(proc)
            end = time.time()
        elif kind in LAUNCHER_SIGNALS:
            proc.send_signal(LAUNCHER_SIGNALS[kind])
            target, end = f"the launcher ({LAUNCHER_SIGNALS[kind].name})", time.time()
        else:
            raise ValueError(kind)
        self.fault = checks.Fault(kind, target, getattr(self, "fault_start", t0), end)

    def cut_below_min(self, proc):
        """Cuts every host's link but one (fewer reachable hosts than --nnodes MIN) until the
        launcher ends, then restores them."""
        kept = self.pick(self.active_hosts(), self.plan.pick)
        cut = [h for h in HOSTS if h != kept]
        try:
            for h in cut:
                self.bed.cut(h)
            self.fault_start = time.time()
            try:
                proc.wait(timeout=RUN_BOUND)
            except subprocess.TimeoutExpired:
                pass
            self.ended = time.time()
        finally:
            for h in cut:
                self.bed.restore(h)
        return f"links of {', '.join(cut)} (kept {kept}) until the launcher ended"

    def kill_agent_while_forming(self, lines, spared):
        """After a worker was killed: as soon as a node says its round stops, the agent of
        another active host is killed, while the next round forms."""
        before = len([x for x in lines.lines("stderr") if "stopping round" in x])
        lines.wait_for(r"stopping round", stream="stderr", count=before + 1, timeout=RUN_BOUND)
        others = [h for h in self.active_hosts() if h != spared] or [spared]
        host = self.pick(others, self.plan.pick2)
        os.kill(self.agent_of(host), signal.SIGKILL)
        return f"agent on {host} while the next round formed"

    def inject_after_finish(self, lines):
        """Every rank but 0 has finished (rank 0 lingers): the agent of a host without rank 0,
        whose workers have all succeeded and whose success the rendezvous has, is killed."""
        self.wait_step(lines, 1)
        world = self.current_round()[0]["world"]
        lines.wait_for(r"\]: chaos kind=done ", count=world - 1, timeout=RUN_BOUND)
        rnd = self.current_round()
        rank0_host = rnd[0]["host"]
        hosts = sorted({r["host"] for r in rnd} - {rank0_host})
        host = self.pick(hosts, self.plan.pick)
        # Finished means the rendezvous has the node's success, which the agent says: a
        # worker's last line comes before its exit, and its exit before the agent's report.
        lines.wait_for(rf"drun: {re.escape(host)}: done: the workers here all succeeded",
                       stream="stderr", timeout=RUN_BOUND)
        t0 = time.time()
        os.kill(self.agent_of(host), signal.SIGKILL)
        self.fault = checks.Fault(self.plan.kind, f"agent on {host} (its workers done)", t0,
                                  time.time())

    # -- the episode -----------------------------------------------------------------------

    def run(self):
        kind = self.plan.kind
        before = checks.tmp_snapshot(self.bed, HOSTS)
        if kind == "kill_agent_after_finish":
            proc, lines, dirs = self.start(linger=4.0)
            self.guard(lambda: self.inject_after_finish(lines), proc)
            self.finish(proc, lines, dirs, expected=0)
        else:
            proc, lines, dirs = self.start()
            self.guard(lambda: self.inject(proc, lines), proc)
            expected = 0
            if kind in LAUNCHER_SIGNALS:
                sig = LAUNCHER_SIGNALS[kind]
                expected = -sig if sig == signal.SIGKILL else 128 + sig
            elif kind == "cut_below_min":
                expected = checks.FAILURE
            self.finish(proc, lines, dirs, expected=expected)
            if kind in RESUMED:  # the job is resumed by a second launcher
                self.leftovers_between_runs = self.bed.wait_back_to_baseline(timeout=30)
                proc, lines, dirs = self.start()
                self.finish(proc, lines, dirs, expected=0)
        left = self.bed.wait_back_to_baseline(timeout=30)
        after = checks.tmp_snapshot(self.bed, HOSTS)
        return checks.evaluate(self, before, after, left, self.plan.steps, FAIL_FAST)

    def guard(self, inject, proc):
        """Runs the injection; a failure to inject (the job ended first, no agent) is the
        episode's finding, and the launcher is not left running."""
        try:
            inject()
        except (AssertionError, IndexError, ProcessLookupError, ValueError) as e:
            self.inject_error = str(e).splitlines()[0] if str(e) else type(e).__name__
            # The job goes on (or has ended); the checks see what happened.


def run_episodes(plans, report_path=None, show_lines=False):
    reason = t.unavailable_reason()
    if reason:
        print(f"chaos: skipped: {reason}")
        return 77
    try:
        t.drun_path()
    except unittest.SkipTest as e:
        print(f"chaos: skipped: {e}")
        return 77
    t.become_subreaper()
    # The testbed lives outside /tmp so that each host's /tmp is its own (private_tmp).
    base = tempfile.mkdtemp(prefix="drun-chaos-", dir="/var/tmp")
    os.environ["TMPDIR"] = base
    tempfile.tempdir = None
    results = []
    try:
        with t.Testbed(HOSTS, tag="chaos", private_tmp=True) as bed:
            for plan in plans:
                results.append(run_one(bed, plan, show_lines))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    text = checks.markdown(results)
    print(text)
    if report_path:
        with open(report_path, "w") as f:
            f.write(text)
    failed = [r for r in results if not r.survived]
    print(f"chaos: {len(results) - len(failed)} of {len(results)} episodes kept every invariant")
    return 1 if failed else 0


def run_one(bed, plan, show_lines=False):
    print(f"chaos: episode {plan.describe()}", flush=True)
    start = time.monotonic()
    ep = Episode(bed, plan)
    try:
        res = ep.run()
    except Exception as e:  # the harness itself failed: reported as this episode's failure
        res = checks.EpisodeResult(plan, ep.fault, [("harness", f"{type(e).__name__}: {e}")],
                                   None, 0)
    finally:
        for proc in ep.procs:  # our children, by pid
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    res.seconds = time.monotonic() - start
    print(res.summary(), flush=True)
    if show_lines:  # what drun said, also when the episode kept every invariant
        for i, run in enumerate(ep.runs):
            print(f"--- run {i}, the launcher's last lines ---\n" + "\n".join(run.stderr_tail))
    return res


def plans_for(args):
    """(plans, seed to print) from the command line and DRUN_CHAOS_SEED / _EPISODE / _MINUTES;
    None for the plans when a --soak has no minutes (skipped)."""
    if args.short:  # the ctest run: fixed, whatever the environment says
        return [Plan(1, e) for e in range(len(KINDS))], 1
    env = os.environ
    seed = args.seed if args.seed is not None else int(env.get("DRUN_CHAOS_SEED", "-1"))
    episode = args.episode if args.episode is not None else \
        int(env.get("DRUN_CHAOS_EPISODE", "-1"))
    minutes = args.minutes if args.minutes is not None else \
        float(env.get("DRUN_CHAOS_MINUTES", "0"))
    if episode >= 0:
        if seed < 0:
            sys.exit("chaos: replaying an episode needs its seed (--seed or DRUN_CHAOS_SEED)")
        return [Plan(seed, episode, soak=args.soak_plan)], None
    if minutes > 0:
        seed = seed if seed >= 0 else random.SystemRandom().randrange(1 << 20)
        return soak_plans(seed, minutes), seed
    if args.soak:
        return None, None
    seed = seed if seed >= 0 else 1
    return [Plan(seed, e) for e in range(args.episodes or len(KINDS))], seed


def soak_plans(seed, minutes):
    """Plans until the soak's time is up (a generator: the deadline is checked per episode).
    A soak's plans vary the fault kind with the episode and cut links for 2-30 s."""
    deadline = time.monotonic() + minutes * 60
    episode = 0
    while time.monotonic() < deadline:
        yield Plan(seed, episode, soak=True)
        episode += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--short", action="store_true", help="the ctest run: seed 1, every kind once")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--episode", type=int, help="replay this one episode of --seed")
    ap.add_argument("--episodes", type=int, help="episodes 0..N-1 of --seed")
    ap.add_argument("--minutes", type=float, help="soak: episodes until this many minutes")
    ap.add_argument("--soak", action="store_true",
                    help="a soak of DRUN_CHAOS_MINUTES minutes; exit 77 (skipped) when unset")
    ap.add_argument("--soak-plan", action="store_true",
                    help="with --episode: the soak's plan (link cuts up to 30 s)")
    ap.add_argument("--report", help="write the markdown table here too")
    ap.add_argument("--show-lines", action="store_true",
                    help="print the launchers' last lines of every episode, not only of failures")
    ap.add_argument("--list-kinds", action="store_true")
    args = ap.parse_args()
    if args.list_kinds:
        print("\n".join(KINDS))
        return 0
    plans, seed = plans_for(args)
    if plans is None:
        print("chaos: soak skipped: set DRUN_CHAOS_MINUTES=N")
        return 77
    if seed is not None:
        print(f"chaos: seed {seed}", flush=True)
    return run_episodes(plans, args.report, args.show_lines)


if __name__ == "__main__":
    sys.exit(main())
