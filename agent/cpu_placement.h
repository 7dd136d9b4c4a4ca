// Where each local rank runs: --numa-binding (torchrun 2.x's modes node,
// socket, exclusive, core-complex) and --virtual-local-rank's GPU.
//
// The planner is pure: it takes the node's topology as data (CPUs with their
// core, socket, NUMA node and last-level-cache group; the CPUs drun may use,
// i.e. its affinity mask within its cgroup's cpuset; each GPU's NUMA node) and
// returns each rank's CPU set and thread count. ReadCpuTopology reads that
// data from /sys on the node; PlaceWorkers puts both together for the agent.
//
// Each rank has an anchor NUMA node: its GPU's (local rank i uses GPU i, or
// the i-th of CUDA_VISIBLE_DEVICES, or the i-th of --nproc-per-node gpu:LIST)
// when every rank has a GPU this node knows; otherwise (CPU training) the
// ranks are spread over the NUMA nodes in proportion to their usable cores.
//   node:         every usable CPU of the anchor node
//   socket:       every usable CPU of the NUMA nodes of the anchor's socket
//   exclusive:    the anchor node's whole cores (SMT siblings together) split
//                 into disjoint shares among the ranks anchored there, the
//                 lower ranks taking one extra core each when it does not
//                 divide; with more such ranks than cores, rank i takes core
//                 i mod cores
//   core-complex: one last-level-cache group of the anchor node per rank,
//                 the largest groups first, in turn when ranks outnumber them
// A rank's thread count (its OMP_NUM_THREADS unless the user set one) is the
// number of whole cores in its set divided among the ranks given that same set,
// at least 1.
#ifndef DRUN_AGENT_CPU_PLACEMENT_H_
#define DRUN_AGENT_CPU_PLACEMENT_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/nproc.h"
#include "drun/v1/job.pb.h"

namespace drun {

struct CpuInfo {
  int id = 0;       // logical CPU number
  int core = 0;     // the lowest id among its SMT siblings
  int package = 0;  // socket
  int numa = 0;     // NUMA node
  int cache = 0;    // the lowest id sharing its last-level cache
};

struct CpuTopology {
  std::vector<CpuInfo> cpus;  // the online CPUs
  std::set<int> allowed;      // the CPUs drun may use (affinity mask within the cpuset)
  std::vector<int> gpu_numa;  // NUMA node of GPU i, in PCI address order (nvidia-smi's)
};

struct CpuShare {
  std::vector<int> cpus;  // ascending
  int threads = 1;
};

// "node", "socket", "exclusive", "core-complex" (torchrun's choices).
absl::StatusOr<v1::JobSpec::NumaBinding> ParseNumaBinding(absl::string_view text);
std::string NumaBindingName(v1::JobSpec::NumaBinding mode);

// One share per local rank. `rank_gpus[i]` is local rank i's GPU index (-1:
// none). Errors: no usable CPU, or a GPU whose NUMA node has none.
absl::StatusOr<std::vector<CpuShare>> PlanCpuShares(const CpuTopology& topo,
                                                    v1::JobSpec::NumaBinding mode,
                                                    const std::vector<int>& rank_gpus);

// "0-3,8,10-11" <-> {0,1,2,3,8,10,11} (the kernel's cpulist format).
std::set<int> ParseCpuList(absl::string_view text);
std::string FormatCpuList(const std::vector<int>& cpus);

// The node's topology under `sys_root` ("/sys"), with `allowed` as given.
CpuTopology ReadCpuTopology(const std::string& sys_root, std::set<int> allowed);

// This process's affinity mask, narrowed by its cgroup v2 cpuset
// (cpuset.cpus.effective) where one is readable.
std::set<int> AllowedCpus();

// What the agent gives local rank i besides torchrun's variables.
struct WorkerPlacement {
  std::string cuda_visible_device;  // non-empty: the worker's CUDA_VISIBLE_DEVICES
  std::vector<int> cpus;            // empty: drun's own affinity
  int omp_threads = 0;              // 0: torchrun's OMP_NUM_THREADS rule
};

// --virtual-local-rank's device for local rank `lr`: the lr-th entry of
// CUDA_VISIBLE_DEVICES in `env` when set (an error past its end), else "lr".
absl::StatusOr<std::string> VirtualLocalDevice(const std::map<std::string, std::string>& env, int lr);

// Each local rank's placement: devices from --nproc-per-node gpu:LIST or
// --virtual-local-rank, CPUs from --numa-binding (the topology is read only
// then). `env` is the workers' environment before torchrun's variables.
absl::StatusOr<std::vector<WorkerPlacement>> PlaceWorkers(
    const v1::JobSpec& spec, const std::map<std::string, std::string>& env, const NprocPlan& nproc,
    const std::string& sys_root = "/sys");

}  // namespace drun

#endif  // DRUN_AGENT_CPU_PLACEMENT_H_
