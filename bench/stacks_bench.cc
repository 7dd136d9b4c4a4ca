// Times drun::stacks::Capture against N sleeping /usr/bin/python3 processes
// (N = 4, 16, 64 unless given): sequentially (median ms per process, total)
// and with 4 capture threads (total), Python frames only and Python + native.
// Usage: drun_stacks_bench [--torch] [--python PATH] [N...]  (--torch: each
// process imports torch first, like a real worker, which makes native
// unwinding costlier; --python: another interpreter, or a script that execs
// one, keeping the pid)
// Each process signals readiness over a pipe before it is captured; every
// process started is killed by its pid at the end.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/process.h"
#include "agent/stacks/stacks.h"
#include "agent/stacks/tools.h"

namespace {

constexpr char kScript[] =
    "import os, time\n"
    "def wait_forever():\n"
    "    os.write(1, b'r') and time.sleep(10**6)\n"
    "wait_forever()\n";

// Starts all n at once (importing torch takes seconds), then waits for each
// one's readiness byte: it is then inside wait_forever.
std::vector<pid_t> StartPythons(int n, bool torch, const std::string& python) {
  std::vector<pid_t> pids;
  std::vector<drun::UniqueFd> ready;
  const std::string script = std::string(torch ? "import torch\n" : "") + kScript;
  for (int i = 0; i < n; ++i) {
    drun::UniqueFd r, w;
    if (!drun::MakePipe(&r, &w)) exit(1);
    drun::SpawnRequest req;
    req.argv = {python, "-c", script};
    req.env = {"PATH=/usr/bin:/bin"};
    req.stdout_fd = w.get();
    absl::StatusOr<pid_t> pid = drun::SpawnProcessGroup(req);
    if (!pid.ok()) exit(1);
    pids.push_back(*pid);
    ready.push_back(std::move(r));
  }
  for (drun::UniqueFd& r : ready) {
    char c;
    if (read(r.get(), &c, 1) != 1) exit(1);
  }
  return pids;
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

void Run(int n, bool torch, const std::string& python) {
  std::vector<pid_t> pids = StartPythons(n, torch, python);
  drun::stacks::CaptureOptions opts;
  std::vector<double> each;
  int frames_ok = 0;
  const absl::Time t0 = absl::Now();
  for (pid_t p : pids) {
    const absl::Time s = absl::Now();
    absl::StatusOr<drun::stacks::ProcessStacks> st = drun::stacks::Capture(p, opts);
    each.push_back(Ms(absl::Now() - s));
    if (st.ok() && !st->threads.empty() && !st->threads[0].python.empty()) ++frames_ok;
  }
  const double seq_total = Ms(absl::Now() - t0);
  std::sort(each.begin(), each.end());
  std::atomic<size_t> next{0};
  const absl::Time t1 = absl::Now();
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < pids.size();) {
        (void)drun::stacks::Capture(pids[i], opts);
      }
    });
  }
  for (auto& w : workers) w.join();
  const double par_total = Ms(absl::Now() - t1);
  printf(
      "%3d processes, Python frames (builtin): sequential median %.2f ms/process (max %.2f), "
      "total %.1f ms; 4 threads total %.1f ms; %d/%d with Python frames\n",
      n, each[each.size() / 2], each.back(), seq_total, par_total, frames_ok, n);
  // Python and native frames (eu-stack attaches with ptrace), 4 captures at a time.
  drun::stacks::CaptureOptions native = opts;
  native.native = true;
  std::atomic<int> native_ok{0};
  next = 0;
  workers.clear();
  const absl::Time t2 = absl::Now();
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < pids.size();) {
        absl::StatusOr<drun::stacks::ProcessStacks> st = drun::stacks::Capture(pids[i], native);
        if (st.ok() && !st->threads.empty() && !st->threads[0].native.empty()) ++native_ok;
      }
    });
  }
  for (auto& w : workers) w.join();
  printf(
      "%3d processes, Python + native frames (%s), 4 threads: total %.1f ms, %d/%d with "
      "native frames\n",
      n, drun::stacks::FindTool("eu-stack").empty() ? "gdb" : "eu-stack", Ms(absl::Now() - t2),
      native_ok.load(), n);
  for (pid_t p : pids) kill(p, SIGKILL);
  for (pid_t p : pids) waitpid(p, nullptr, 0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--dump") {
    drun::stacks::CaptureOptions opts;
    opts.native = argc > 3 && std::string(argv[3]) == "--native";
    absl::StatusOr<drun::stacks::ProcessStacks> st = drun::stacks::Capture(atoi(argv[2]), opts);
    if (!st.ok()) {
      fprintf(stderr, "drun_stacks_bench: %s\n", st.status().ToString().c_str());
      return 1;
    }
    fputs(drun::stacks::FormatText(*st).c_str(), stdout);
    return 0;
  }
  std::vector<int> counts;
  bool torch = false;
  std::string python = "/usr/bin/python3";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--torch") {
      torch = true;
    } else if (std::string(argv[i]) == "--python" && i + 1 < argc) {
      python = argv[++i];
    } else {
      counts.push_back(atoi(argv[i]));
    }
  }
  if (counts.empty()) counts = {4, 16, 64};
  if (torch) printf("(each process has imported torch)\n");
  for (int n : counts) Run(n, torch, python);
  return 0;
}
