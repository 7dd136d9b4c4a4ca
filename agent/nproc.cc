#include "agent/nproc.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace drun {

namespace {

constexpr char kHint[] = "write a number, cpu, gpu, auto, or gpu:0,1,... (GPU indices)";

absl::StatusOr<std::vector<std::string>> ParseGpuList(absl::string_view spec) {
  std::vector<std::string> devices;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    int idx;
    if (!absl::SimpleAtoi(part, &idx) || idx < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--nproc-per-node: '", part, "' is not a GPU index in 'gpu:", spec, "'; ",
                       kHint));
    }
    devices.push_back(std::to_string(idx));
  }
  return devices;
}

}  // namespace

absl::Status ValidateNprocSpec(absl::string_view spec) {
  return ResolveNproc(spec, NodeFacts{1, 1}).status();
}

absl::StatusOr<NprocPlan> ResolveNproc(absl::string_view spec, const NodeFacts& facts) {
  NprocPlan plan;
  if (spec == "cpu") {
    plan.count = std::max(1, facts.cpus);
  } else if (spec == "gpu") {
    if (facts.gpus < 1) {
      return absl::FailedPreconditionError(
          "--nproc-per-node gpu: no GPU found on this node; use a number, cpu or auto");
    }
    plan.count = facts.gpus;
  } else if (spec == "auto") {
    plan.count = facts.gpus > 0 ? facts.gpus : std::max(1, facts.cpus);
  } else if (spec.rfind("gpu:", 0) == 0) {
    if (facts.gpus < 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--nproc-per-node ", spec, ": no GPU found on this node; use a number, cpu or auto"));
    }
    auto devices = ParseGpuList(spec.substr(4));
    if (!devices.ok()) return devices.status();
    plan.devices = *devices;
    plan.count = static_cast<int>(plan.devices.size());
  } else {
    int n;
    if (!absl::SimpleAtoi(spec, &n) || n < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--nproc-per-node: '", spec, "' is not valid; ", kHint));
    }
    plan.count = n;
  }
  return plan;
}

int CountGpus() {
  int n = 0;
  if (DIR* d = opendir("/proc/driver/nvidia/gpus")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(d);
  } else if (DIR* d = opendir("/dev")) {
    while (dirent* e = readdir(d)) {
      int idx;
      if (strncmp(e->d_name, "nvidia", 6) == 0 && absl::SimpleAtoi(e->d_name + 6, &idx)) ++n;
    }
    closedir(d);
  }
  if (const char* vis = getenv("CUDA_VISIBLE_DEVICES")) {
    // Like CUDA: the listed devices, up to the first invalid entry.
    int visible = 0;
    absl::string_view v(vis);
    if (!v.empty()) {
      for (absl::string_view part : absl::StrSplit(v, ',')) {
        if (part.empty() || part[0] == '-') break;
        ++visible;
      }
    }
    n = std::min(n, visible);
  }
  return n;
}

NodeFacts ProbeNode() {
  NodeFacts f;
  // Like Python's os.cpu_count(): online CPUs, not the affinity mask.
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  f.cpus = cpus > 0 ? static_cast<int>(cpus) : 1;
  f.gpus = CountGpus();
  return f;
}

}  // namespace drun
