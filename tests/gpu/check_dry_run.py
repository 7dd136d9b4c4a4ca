"""The verdicts a dry run's report must hold (tests/gpu/dry_run_test.sh): no case failed,
the bundle ran self-contained, every case that needs a GPU was skipped for that reason and
no other case was skipped for want of a GPU, and the CPU cases ran."""
import json
import sys

# Cases that run on the CPU in a dry run (their stand-ins included); each must pass.
MUST_PASS = ["bundle", "--nproc-per-node gpu, no GPU visible",
             "stand-in: 2 gloo workers on the CPU", "stand-in: exit code of a gloo worker",
             "4 gloo ranks on the CPU", "seeds, drun's agent store",
             "two nodes typed by hand on loopback (2 x 2 ranks)", "--hang-timeout 10",
             "every TCPStore op, drun's agent store (2 workers)"]


def main(path):
    with open(path) as f:
        report = json.load(f)
    cases = {c["case"]: c for c in report["cases"]}
    problems = [f"{c['group']} / {c['case']}: {c['status']}: {c['summary']}"
                for c in report["cases"] if c["status"] == "fail"]
    problems += [f"{name}: {cases[name]['status'] if name in cases else 'missing'}"
                 for name in MUST_PASS if cases.get(name, {}).get("status") != "pass"]
    gpu_skips = [c["case"] for c in report["cases"] if c["summary"] == "skipped: no GPU"]
    if len(gpu_skips) < 5:
        problems.append(f"only {len(gpu_skips)} cases skipped for want of a GPU: {gpu_skips}")
    if not any(c["case"].startswith("drun stacks") and c["status"] == "pass"
               for c in report["cases"]):
        problems.append("drun stacks did not pass")
    if report["finished"] is None:
        problems.append("the report was not finished")
    for p in problems:
        print("dry run:", p)
    print(f"dry run: {report['counts']}; {len(gpu_skips)} GPU cases skipped")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
