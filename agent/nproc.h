// Resolving --nproc-per-node on a node: "N", "cpu", "gpu", "auto" or
// "gpu:1,3,5" (one worker per listed GPU, each seeing only its GPU). "gpu" and
// "gpu:..." are refused on a node without GPUs, never run as CPU workers.
#ifndef DRUN_AGENT_NPROC_H_
#define DRUN_AGENT_NPROC_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace drun {

struct NprocPlan {
  int count = 1;
  // One entry per local rank when CUDA_VISIBLE_DEVICES is to be narrowed.
  std::vector<std::string> devices;
};

// Facts about the node, injected so the resolution is testable.
struct NodeFacts {
  int cpus = 1;
  int gpus = 0;
};

// Validates the syntax only (the launcher calls this before any node runs).
absl::Status ValidateNprocSpec(absl::string_view spec);
absl::StatusOr<NprocPlan> ResolveNproc(absl::string_view spec, const NodeFacts& facts);

// Counts NVIDIA GPUs without linking CUDA: /proc/driver/nvidia/gpus entries
// (else /dev/nvidiaN nodes), narrowed by CUDA_VISIBLE_DEVICES when it is set.
int CountGpus();
NodeFacts ProbeNode();

}  // namespace drun

#endif  // DRUN_AGENT_NPROC_H_
