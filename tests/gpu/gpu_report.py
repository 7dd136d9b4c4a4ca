"""report.json and report.md of the GPU checks (tests/gpu/gpu_checks.py), written after
every case so that a run cut off still leaves what it finished."""
import datetime
import json
import os

FACT_ROWS = [  # (label, key in the facts)
    ("GPU (nvidia-smi: name, driver, memory, compute capability)", "nvidia_smi"),
    ("GPUs torch sees", "gpu_names"), ("torch", "torch"), ("CUDA (torch's)", "torch_cuda"),
    ("NCCL", "nccl"), ("cuDNN", "cudnn"), ("Python", "python"), ("interpreter", "python_path"),
    ("Lightning", "lightning"), ("pytorch-lightning", "pytorch-lightning"),
    ("accelerate", "accelerate"), ("mpi4py", "mpi4py"), ("glibc", "glibc"),
    ("kernel", "kernel"), ("CPUs (allowed)", "cpus"), ("drun", "drun_version"),
    ("bundle", "bundle"), ("dry run", "dry_run"),
]


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def counts(cases):
    out = {}
    for c in cases:
        out[c["status"]] = out.get(c["status"], 0) + 1
    return out


def fact(facts, key):
    value = facts.get(key)
    if key == "cpus" and value is not None:
        return f"{value} ({facts.get('cpus_allowed')})"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return "-" if value is None else str(value)


def markdown(ctx, finished):
    lines = [f"# drun GPU checks: {ctx.facts.get('gpu_names') or 'no GPU'}", "",
             f"Started {datetime.datetime.fromtimestamp(ctx.started, datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC, "
             + (f"finished {finished}" if finished else "still running (or cut off)")
             + "; " + ", ".join(f"{n} {status}" for status, n in counts(ctx.cases).items())
             + ".", "", "| what | version |", "| --- | --- |"]
    lines += [f"| {label} | {fact(ctx.facts, key)} |".replace("\n", " ")
              for label, key in FACT_ROWS if key in ctx.facts]
    lines += ["", "| group | case | result | time | what was seen |", "| --- | --- | --- | --- | --- |"]
    for c in ctx.cases:
        summary = c["summary"].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {c['group']} | {c['case']} | **{c['status']}** | {c['seconds']} s | {summary} |")
    for c in ctx.cases:
        tail = c["details"].get("output_tail") or c["details"].get("stderr_tail") \
            or c["details"].get("traceback")
        if tail and c["status"] in ("fail", "info"):
            lines += ["", f"## {c['group']} / {c['case']}: {c['status']}", "", "```",
                      tail.rstrip(), "```"]
    return "\n".join(lines) + "\n"


def write(ctx, final=False):
    finished = now() if final else None
    report = {"started": datetime.datetime.fromtimestamp(
                  ctx.started, datetime.timezone.utc).isoformat(),
              "finished": finished, "counts": counts(ctx.cases), "facts": ctx.facts,
              "cases": ctx.cases}
    for name, text in (("report.json", json.dumps(report, indent=1, default=str)),
                       ("report.md", markdown(ctx, finished))):
        tmp = os.path.join(ctx.out, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(ctx.out, name))
