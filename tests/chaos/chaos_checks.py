"""The chaos suite's invariants, checked on the workers' own records (chaos_worker.py), the
launchers' exit codes and what each host has left; and the figures per fault kind.

Invariants of an episode (each failure names the invariant and its evidence):
  exit_code     every launcher run exited as expected (0; 128+N after SIGINT/SIGTERM;
                killed by SIGKILL; a failure when fewer hosts than --nnodes MIN are
                reachable), within the run's bound (bounded)
  fails_fast    with fewer reachable hosts than MIN the launcher ended within
                min(60 s, join_timeout / 2) + 15 s of the cut
  fault         the plan's fault was injected
  ranks         in every round each rank of 0..W-1 started at most once, all with W; a round
                that made a step had every rank
  split_brain   no worker of a round wrote a record after a newer round started
  progress      commits strictly increase; each round resumed from a checkpoint that was
                made, and nothing committed before it started is lost; every rank of a
                round resumed at the same step
  completed     the job's last step was committed and every rank of its last round ended
  no_rerun      no round started after the last step was committed
  processes     every host runs only what it ran before the episode (its sshd)
  tmp           no drun temp directory or control socket was left in a host's /tmp or in the
                launcher's TMPDIR / XDG_RUNTIME_DIR
"""
import glob
import json
import os
import statistics


FAILURE = "a failure"  # an expected exit code: any exit above 0 (the job failed, drun said why)


class RunResult:
    def __init__(self, code, expected, bounded, console, launcher_dirs, ended, stderr_tail):
        self.code, self.expected, self.bounded = code, expected, bounded
        self.stderr_tail = stderr_tail  # the launcher's last lines of its own (drun: ...)
        self.ended = ended  # time.time() when it exited
        self.console = console  # the launcher's last lines
        self.launcher_dirs = launcher_dirs  # its TMPDIR and XDG_RUNTIME_DIR


class Fault:
    def __init__(self, kind, target, start, end):
        self.kind, self.target, self.start, self.end = kind, target, start, end


class EpisodeResult:
    def __init__(self, plan, fault, failures, recovery, rounds):
        self.plan, self.fault = plan, fault
        self.failures = failures  # [(invariant, evidence)]
        self.recovery = recovery  # seconds from the fault to the next step done, or None
        self.rounds = rounds
        self.seconds = 0.0

    @property
    def survived(self):
        return not self.failures

    def replay(self):
        soak = " --soak-plan" if self.plan.soak else ""
        return (f"DRUN_CHAOS_SEED={self.plan.seed} DRUN_CHAOS_EPISODE={self.plan.episode} "
                f"tests/chaos/chaos_driver.py{soak}")

    def summary(self):
        head = (f"chaos: {self.plan.describe()}: {'ok' if self.survived else 'FAILED'}; "
                f"fault: {self.fault.target if self.fault else 'none'}; rounds {self.rounds}; "
                f"recovery {fmt(self.recovery)}; {self.seconds:.1f}s")
        lines = [head]
        for inv, evidence in self.failures:
            lines.append(f"chaos: FAILED seed={self.plan.seed} episode={self.plan.episode} "
                         f"invariant={inv}: {evidence}")
        if self.failures:
            lines.append(f"chaos: replay with: {self.replay()}")
        return "\n".join(lines)


def fmt(seconds):
    return "-" if seconds is None else f"{seconds:.1f}s"


def load_records(shared):
    recs = []
    for path in glob.glob(os.path.join(shared, "records", "*.jsonl")):
        with open(path) as f:
            for line in f:
                if line.endswith("\n"):
                    recs.append(json.loads(line))
    return sorted(recs, key=lambda r: r["t"])


def rounds_of(recs):
    """{round id: its records}, and the ids in the order the rounds started."""
    by = {}
    for r in recs:
        by.setdefault(r["round"], []).append(r)
    order = sorted(by, key=lambda k: min(r["t"] for r in by[k] if r["kind"] == "start"))
    return by, order


def first_start(rs):
    return min(r["t"] for r in rs if r["kind"] == "start")


def check_ranks(by):
    out = []
    for rid, rs in by.items():
        starts = [r for r in rs if r["kind"] == "start"]
        ranks = sorted(r["rank"] for r in starts)
        worlds = {r["world"] for r in rs}
        world = max(worlds)
        if len(worlds) != 1 or len(set(ranks)) != len(ranks) or any(not 0 <= k < world
                                                                    for k in ranks):
            out.append(("ranks", f"round {rid[:8]}: ranks {ranks}, world sizes {sorted(worlds)}"))
        elif any(r["kind"] == "step" for r in rs) and ranks != list(range(world)):
            out.append(("ranks", f"round {rid[:8]} stepped with ranks {ranks} of {world}"))
    return out


def check_split_brain(by, order):
    out = []
    for i, old in enumerate(order):
        for new in order[i + 1:]:
            t_new = first_start(by[new])
            late = [r for r in by[old] if r["t"] > t_new]
            if late:
                r = late[0]
                out.append(("split_brain", f"round {old[:8]} rank {r['rank']} on {r['host']} "
                            f"wrote {r['kind']} step {r['step']} {r['t'] - t_new:.3f}s after "
                            f"round {new[:8]} started"))
                break
    return out


def check_progress(recs, by, order):
    """Commits strictly increase; each round resumed from a checkpoint that was really made
    (its commit record, or, when a stop came between the checkpoint's rename and its record,
    the step done by rank 0 of the round named in the checkpoint), and no later commit was
    made before the round started (none lost); every rank of a round resumed at one step."""
    out = []
    commits = [r for r in recs if r["kind"] == "commit"]
    steps = [c["step"] for c in commits]
    if any(b <= a for a, b in zip(steps, steps[1:])):
        out.append(("progress", f"commits not strictly increasing: {steps}"))
    made = {(c["round"], c["step"]) for c in commits} | \
        {(r["round"], r["step"]) for r in recs if r["kind"] == "step" and r["rank"] == 0}
    for rid in order:
        t0 = first_start(by[rid])
        starts = [r for r in by[rid] if r["kind"] == "start"]
        resumed = {(r["step"], r.get("ckpt_round")) for r in starts}
        if len(resumed) != 1:
            out.append(("progress", f"round {rid[:8]}'s ranks resumed at different steps: "
                        f"{sorted(s for s, _ in resumed)}"))
            continue
        step, src = resumed.pop()
        lost = [c["step"] for c in commits if c["t"] < t0 and c["step"] >= step]
        if lost:
            out.append(("progress", f"round {rid[:8]} resumed at step {step}, but step "
                        f"{max(lost)} had been committed before it started (progress lost)"))
        elif step > 1 and (src, step - 1) not in made:
            out.append(("progress", f"round {rid[:8]} resumed at step {step} from a checkpoint "
                        f"of round {str(src)[:8]} that no record shows was made"))
    return out


def check_completion(recs, by, order, total):
    out = []
    final = [c for c in recs if c["kind"] == "commit" and c["step"] == total]
    if not final:
        last = [c["step"] for c in recs if c["kind"] == "commit"][-1:]
        return [("completed", f"step {total} was never committed (last commit: {last})")]
    done_round = final[0]["round"]
    world = by[done_round][0]["world"]
    done = sorted(r["rank"] for r in by[done_round] if r["kind"] == "done")
    if done != list(range(world)):
        out.append(("completed", f"round {done_round[:8]} ended with ranks {done} of {world}"))
    later = [rid for rid in order if first_start(by[rid]) > final[0]["t"]]
    if later:
        hosts = sorted({r["host"] for r in by[later[0]]})
        out.append(("no_rerun", f"{len(later)} round(s) started after step {total} was "
                    f"committed (first: {later[0][:8]} on {', '.join(hosts)})"))
    return out


def tmp_snapshot(bed, hosts):
    """drun's temp directories and control sockets in each host's own /tmp."""
    snap = set()
    for h in hosts:
        root = bed.host_path(h, "/tmp")
        for path in glob.glob(os.path.join(root, "drun-*")) + \
                glob.glob(os.path.join(root, "drun-*", "*.sock")):
            if not os.path.basename(path) == f"drun-{os.getuid()}":
                snap.add(f"{h}:/tmp{path[len(root):]}")
    return snap


def launcher_leftovers(runs):
    left = []
    for run in runs:
        for d in run.launcher_dirs:
            for path in glob.glob(os.path.join(d, "drun-*")) + glob.glob(os.path.join(d, "**",
                                                                                    "*.sock"),
                                                                       recursive=True):
                if os.path.basename(path) != f"drun-{os.getuid()}":
                    left.append("launcher:" + path)
    return left


def recovery_time(fault, by, order, recs):
    """Seconds to the next step done. When the fault stopped the round (a round started
    after it), from the fault's start to the first step of a newer round; else (the round rode
    out a freeze or a throttle) from the fault's end to the first step after it."""
    newer = [rid for rid in order if first_start(by[rid]) > fault.start]
    if newer:
        steps = [r["t"] for rid in newer for r in by[rid] if r["kind"] == "step"]
        return min(steps) - fault.start if steps else None
    steps = [r["t"] for r in recs if r["kind"] == "step" and r["t"] > fault.end]
    return min(steps) - fault.end if steps else None


def check_runs(ep):
    out = []
    for i, run in enumerate(ep.runs):
        if not run.bounded:
            out.append(("bounded", f"run {i} did not end within its bound\n{run.console}"))
        elif run.code != run.expected and not (run.expected == FAILURE and run.code > 0):
            out.append(("exit_code", f"run {i} exited {run.code}, expected {run.expected}\n"
                        f"{run.console}"))
    return out


def check_fails_fast(ep, bound):
    """After cut_below_min: the first run ended within `bound` seconds of the cut."""
    if ep.plan.kind != "cut_below_min" or ep.fault is None or not ep.runs:
        return []
    took = ep.runs[0].ended - ep.fault.start
    if took <= bound:
        return []
    return [("fails_fast", f"with fewer reachable hosts than --nnodes MIN the launcher ended "
             f"{took:.1f}s after the cut (bound {bound:.0f}s)\n{ep.runs[0].console}")]


def with_launcher_lines(failures, runs):
    """The launchers' last lines added to the first failure of the job's course (ranks,
    split brain, progress, completion, no re-run), as evidence of what drun did."""
    course = ("ranks", "split_brain", "progress", "completed", "no_rerun")
    out, added = [], False
    for inv, evidence in failures:
        if inv in course and not added and runs:
            tails = "\n".join(f"--- run {i}, the launcher's last lines ---\n"
                              + "\n".join(r.stderr_tail) for i, r in enumerate(runs))
            evidence, added = f"{evidence}\n{tails}", True
        out.append((inv, evidence))
    return out


def evaluate(ep, before, after, left_procs, total, fail_fast_bound):
    recs = load_records(ep.shared)
    by, order = rounds_of(recs)
    failures = check_runs(ep) + check_fails_fast(ep, fail_fast_bound)
    if getattr(ep, "inject_error", None) or ep.fault is None:
        failures.append(("fault", f"not injected: {getattr(ep, 'inject_error', '?')}"))
    failures += check_ranks(by) + check_split_brain(by, order)
    failures += check_progress(recs, by, order) + check_completion(recs, by, order, total)
    between = getattr(ep, "leftovers_between_runs", {})
    for name, left in (("after the stopped launcher", between), ("at the end", left_procs)):
        if left:
            failures.append(("processes", f"{name}: " + "; ".join(
                f"{h}: " + ", ".join(f"{p} {c}" for p, c in ps) for h, ps in left.items())))
    tmp = sorted(after - before) + launcher_leftovers(ep.runs)
    if tmp:
        failures.append(("tmp", ", ".join(tmp)))
    failures = with_launcher_lines(failures, ep.runs)
    recovery = recovery_time(ep.fault, by, order, recs) if ep.fault else None
    if ep.plan.kind.startswith("launcher_") or ep.plan.kind in ("kill_agent_after_finish",
                                                                 "cut_below_min"):
        recovery = None  # no next step: the launcher was stopped, or the job had finished
    return EpisodeResult(ep.plan, ep.fault, failures, recovery, len(order))


def markdown(results):
    kinds = []
    for r in results:
        if r.plan.kind not in kinds:
            kinds.append(r.plan.kind)
    rows = ["| fault kind | episodes | survived | recovery min / median / max (s) |",
            "| --- | ---: | ---: | --- |"]
    for k in kinds:
        rs = [r for r in results if r.plan.kind == k]
        rec = sorted(r.recovery for r in rs if r.recovery is not None)
        figs = (f"{rec[0]:.1f} / {statistics.median(rec):.1f} / {rec[-1]:.1f}" if rec else "-")
        rows.append(f"| {k} | {len(rs)} | {sum(r.survived for r in rs)} | {figs} |")
    total = f"\n{sum(r.survived for r in results)} of {len(results)} episodes kept every invariant"
    broken = {}
    for r in results:
        for inv, _ in r.failures:
            broken.setdefault(inv, []).append(f"{r.plan.seed}/{r.plan.episode}")
    lines = [f"- `{inv}`: seed/episode {', '.join(eps)}" for inv, eps in sorted(broken.items())]
    return "\n".join(rows) + total + ("\n\nInvariants broken:\n" + "\n".join(lines)
                                      if lines else "") + "\n"
