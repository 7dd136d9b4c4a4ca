#include "agent/cpu_placement.h"

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace drun {

using Mode = v1::JobSpec::NumaBinding;

namespace {

struct ModeName {
  Mode mode;
  const char* name;
};
constexpr ModeName kModes[] = {{v1::JobSpec::NUMA_BINDING_NODE, "node"},
                               {v1::JobSpec::NUMA_BINDING_SOCKET, "socket"},
                               {v1::JobSpec::NUMA_BINDING_EXCLUSIVE, "exclusive"},
                               {v1::JobSpec::NUMA_BINDING_CORE_COMPLEX, "core-complex"}};

}  // namespace

absl::StatusOr<Mode> ParseNumaBinding(absl::string_view text) {
  for (const ModeName& m : kModes) {
    if (text == m.name) return m.mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", text, "' is not a binding; write node, socket, exclusive or core-complex"));
}

std::string NumaBindingName(Mode mode) {
  for (const ModeName& m : kModes) {
    if (mode == m.mode) return m.name;
  }
  return "none";
}

std::set<int> ParseCpuList(absl::string_view text) {
  std::set<int> out;
  for (absl::string_view part : absl::StrSplit(absl::StripAsciiWhitespace(text), ',', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> r = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int lo, hi;
    if (!absl::SimpleAtoi(r.first, &lo)) continue;
    if (r.second.empty() || !absl::SimpleAtoi(r.second, &hi)) hi = lo;
    for (int c = lo; c <= hi && c - lo < 65536; ++c) out.insert(c);
  }
  return out;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(cpus[i]) : absl::StrCat(cpus[i], "-", cpus[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

namespace {

std::vector<CpuInfo> UsableCpus(const CpuTopology& topo) {
  std::vector<CpuInfo> out;
  for (const CpuInfo& c : topo.cpus) {
    if (topo.allowed.count(c.id)) out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const CpuInfo& a, const CpuInfo& b) { return a.id < b.id; });
  return out;
}

bool EveryRankHasGpu(const CpuTopology& topo, const std::vector<int>& rank_gpus) {
  if (topo.gpu_numa.empty() || rank_gpus.empty()) return false;
  return std::all_of(rank_gpus.begin(), rank_gpus.end(), [&](int g) {
    return g >= 0 && g < static_cast<int>(topo.gpu_numa.size());
  });
}

// Each rank's anchor NUMA node: its GPU's, or (CPU training) the node of the
// middle core of its equal slice of the usable cores in (node, core) order.
absl::StatusOr<std::vector<int>> Anchors(const std::vector<CpuInfo>& usable, const CpuTopology& topo,
                                         const std::vector<int>& rank_gpus) {
  const int n = static_cast<int>(rank_gpus.size());
  std::vector<int> anchors(n);
  if (EveryRankHasGpu(topo, rank_gpus)) {
    for (int r = 0; r < n; ++r) {
      const int node = std::max(topo.gpu_numa[rank_gpus[r]], 0);
      const bool any = std::any_of(usable.begin(), usable.end(), [&](const CpuInfo& c) { return c.numa == node; });
      if (!any) {
        return absl::FailedPreconditionError(absl::StrCat(
            "GPU ", rank_gpus[r], " (local rank ", r, ") sits on NUMA node ", node,
            ", where drun may use no CPU (its affinity mask and cpuset)"));
      }
      anchors[r] = node;
    }
    return anchors;
  }
  std::set<std::pair<int, int>> core_set;
  for (const CpuInfo& c : usable) core_set.insert({c.numa, c.core});
  const std::vector<std::pair<int, int>> cores(core_set.begin(), core_set.end());
  const long total = static_cast<long>(cores.size());
  for (int r = 0; r < n; ++r) anchors[r] = cores[static_cast<size_t>((2L * r + 1) * total / (2L * n))].first;
  return anchors;
}

// The usable CPUs matching `keep`, grouped by `key` (core or cache), groups
// in ascending key order.
template <typename Keep, typename Key>
std::vector<std::vector<int>> Groups(const std::vector<CpuInfo>& usable, Keep keep, Key key) {
  std::map<int, std::vector<int>> by_key;
  for (const CpuInfo& c : usable) {
    if (keep(c)) by_key[key(c)].push_back(c.id);
  }
  std::vector<std::vector<int>> out;
  for (auto& [k, ids] : by_key) out.push_back(std::move(ids));
  return out;
}

std::vector<int> Flatten(const std::vector<std::vector<int>>& groups, size_t from, size_t to) {
  std::vector<int> out;
  for (size_t i = from; i < to; ++i) out.insert(out.end(), groups[i].begin(), groups[i].end());
  std::sort(out.begin(), out.end());
  return out;
}

// `index` of `count` ranks anchored on one node: its slice of the node's cores.
std::vector<int> ExclusiveSlice(const std::vector<std::vector<int>>& cores, int index, int count) {
  const int c = static_cast<int>(cores.size());
  if (c < count) return cores[static_cast<size_t>(index % c)];
  const int per = c / count, extra = c % count;
  const int start = index * per + std::min(index, extra);
  const int end = start + per + (index < extra ? 1 : 0);
  return Flatten(cores, static_cast<size_t>(start), static_cast<size_t>(end));
}

std::vector<int> CoreComplexSlice(std::vector<std::vector<int>> caches, int index) {
  std::stable_sort(caches.begin(), caches.end(),
                   [](const std::vector<int>& a, const std::vector<int>& b) { return a.size() > b.size(); });
  return caches[static_cast<size_t>(index) % caches.size()];
}

int PackageOfNode(const std::vector<CpuInfo>& usable, int node) {
  for (const CpuInfo& c : usable) {
    if (c.numa == node) return c.package;
  }
  return 0;
}

// Rank r's CPUs; `index`/`count`: its place among the ranks of its anchor.
std::vector<int> RankCpus(const std::vector<CpuInfo>& usable, Mode mode, int node, int index, int count) {
  auto on_node = [node](const CpuInfo& c) { return c.numa == node; };
  auto by_core = [](const CpuInfo& c) { return c.core; };
  switch (mode) {
    case v1::JobSpec::NUMA_BINDING_SOCKET: {
      const int package = PackageOfNode(usable, node);
      auto groups = Groups(usable, [package](const CpuInfo& c) { return c.package == package; }, by_core);
      return Flatten(groups, 0, groups.size());
    }
    case v1::JobSpec::NUMA_BINDING_EXCLUSIVE:
      return ExclusiveSlice(Groups(usable, on_node, by_core), index, count);
    case v1::JobSpec::NUMA_BINDING_CORE_COMPLEX:
      return CoreComplexSlice(Groups(usable, on_node, [](const CpuInfo& c) { return c.cache; }), index);
    default: {
      auto groups = Groups(usable, on_node, by_core);
      return Flatten(groups, 0, groups.size());
    }
  }
}

// Whole cores in each share, divided among the ranks holding the same set.
void SetThreads(const std::vector<CpuInfo>& usable, std::vector<CpuShare>* shares) {
  std::map<int, int> core_of;
  for (const CpuInfo& c : usable) core_of[c.id] = c.core;
  for (CpuShare& s : *shares) {
    std::set<int> cores;
    for (int id : s.cpus) cores.insert(core_of[id]);
    const long holders = std::count_if(shares->begin(), shares->end(),
                                       [&](const CpuShare& o) { return o.cpus == s.cpus; });
    s.threads = std::max(1, static_cast<int>(static_cast<long>(cores.size()) / holders));
  }
}

}  // namespace

absl::StatusOr<std::vector<CpuShare>> PlanCpuShares(const CpuTopology& topo, Mode mode,
                                                    const std::vector<int>& rank_gpus) {
  const std::vector<CpuInfo> usable = UsableCpus(topo);
  if (usable.empty()) return absl::FailedPreconditionError("drun may use none of this node's CPUs");
  if (rank_gpus.empty()) return std::vector<CpuShare>{};
  auto anchors = Anchors(usable, topo, rank_gpus);
  if (!anchors.ok()) return anchors.status();
  std::vector<CpuShare> shares(rank_gpus.size());
  for (size_t r = 0; r < shares.size(); ++r) {
    const int node = (*anchors)[r];
    const int index = static_cast<int>(std::count(anchors->begin(), anchors->begin() + static_cast<long>(r), node));
    const int count = static_cast<int>(std::count(anchors->begin(), anchors->end(), node));
    shares[r].cpus = RankCpus(usable, mode, node, index, count);
  }
  SetThreads(usable, &shares);
  return shares;
}

namespace {

std::string ReadSys(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return std::string(absl::StripAsciiWhitespace(ss.str()));
}

int ReadInt(const std::string& path, int fallback) {
  int v;
  return absl::SimpleAtoi(ReadSys(path), &v) ? v : fallback;
}

std::vector<std::string> ListDir(const std::string& dir, absl::string_view prefix) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (absl::StartsWith(e->d_name, prefix)) out.push_back(e->d_name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// The lowest CPU sharing the highest-level data or unified cache with `cpu_dir`'s CPU.
int LastLevelCache(const std::string& cpu_dir, int fallback) {
  int best_level = -1, key = fallback;
  for (const std::string& index : ListDir(cpu_dir + "/cache", "index")) {
    const std::string dir = absl::StrCat(cpu_dir, "/cache/", index);
    const std::string type = ReadSys(dir + "/type");
    if (type != "Unified" && type != "Data") continue;
    const int level = ReadInt(dir + "/level", -1);
    const std::set<int> shared = ParseCpuList(ReadSys(dir + "/shared_cpu_list"));
    if (level > best_level && !shared.empty()) {
      best_level = level;
      key = *shared.begin();
    }
  }
  return key;
}

CpuInfo ReadCpu(const std::string& sys_root, int id) {
  const std::string dir = absl::StrCat(sys_root, "/devices/system/cpu/cpu", id);
  CpuInfo c;
  c.id = id;
  const std::set<int> siblings = ParseCpuList(ReadSys(dir + "/topology/thread_siblings_list"));
  c.core = siblings.empty() ? id : *siblings.begin();
  c.package = std::max(0, ReadInt(dir + "/topology/physical_package_id", 0));
  c.cache = LastLevelCache(dir, c.core);
  return c;
}

// NVIDIA display or 3D controllers in PCI address order: their NUMA nodes.
std::vector<int> GpuNumaNodes(const std::string& sys_root) {
  const std::string base = sys_root + "/bus/pci/devices/";
  std::vector<int> out;
  for (const std::string& dev : ListDir(base, "")) {
    if (dev[0] == '.') continue;
    const std::string cls = ReadSys(base + dev + "/class");
    if (ReadSys(base + dev + "/vendor") != "0x10de") continue;
    if (!absl::StartsWith(cls, "0x0300") && !absl::StartsWith(cls, "0x0302")) continue;
    out.push_back(ReadInt(base + dev + "/numa_node", -1));
  }
  return out;
}

}  // namespace

CpuTopology ReadCpuTopology(const std::string& sys_root, std::set<int> allowed) {
  CpuTopology t;
  std::set<int> online = ParseCpuList(ReadSys(sys_root + "/devices/system/cpu/online"));
  if (online.empty()) online = allowed;
  std::map<int, int> numa_of;
  const std::string nodes = sys_root + "/devices/system/node/";
  for (const std::string& node : ListDir(nodes, "node")) {
    int n;
    if (!absl::SimpleAtoi(node.substr(4), &n)) continue;
    for (int cpu : ParseCpuList(ReadSys(nodes + node + "/cpulist"))) numa_of[cpu] = n;
  }
  for (int id : online) {
    CpuInfo c = ReadCpu(sys_root, id);
    c.numa = numa_of.count(id) ? numa_of[id] : 0;
    t.cpus.push_back(c);
  }
  t.allowed = std::move(allowed);
  t.gpu_numa = GpuNumaNodes(sys_root);
  return t;
}

std::set<int> AllowedCpus() {
  std::set<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) out.insert(c);
    }
  }
  // cgroup v2: the line "0::/path" of /proc/self/cgroup.
  std::istringstream lines(ReadSys("/proc/self/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    if (!absl::StartsWith(line, "0::")) continue;
    const std::set<int> cpuset =
        ParseCpuList(ReadSys(absl::StrCat("/sys/fs/cgroup", line.substr(3), "/cpuset.cpus.effective")));
    if (cpuset.empty()) break;
    std::set<int> both;
    std::set_intersection(out.begin(), out.end(), cpuset.begin(), cpuset.end(), std::inserter(both, both.end()));
    return both;
  }
  return out;
}

absl::StatusOr<std::string> VirtualLocalDevice(const std::map<std::string, std::string>& env, int lr) {
  auto it = env.find("CUDA_VISIBLE_DEVICES");
  if (it == env.end()) return absl::StrCat(lr);
  // Set but empty: no GPU is visible (a CPU job); every worker keeps it so.
  if (absl::StripAsciiWhitespace(it->second).empty()) return std::string();
  std::vector<std::string> devices = absl::StrSplit(it->second, ',');
  if (lr >= static_cast<int>(devices.size())) {
    return absl::FailedPreconditionError(absl::StrCat("--virtual-local-rank: local rank ", lr,
                                                      " has no GPU in CUDA_VISIBLE_DEVICES=", it->second));
  }
  return std::string(absl::StripAsciiWhitespace(devices[static_cast<size_t>(lr)]));
}

namespace {

// Local rank lr's GPU index as a number (-1: none known): its device, else
// the lr-th of CUDA_VISIBLE_DEVICES, else lr.
int RankGpu(const std::map<std::string, std::string>& env, const std::string& device, int lr) {
  std::string text = device;
  if (text.empty()) {
    auto virt = VirtualLocalDevice(env, lr);
    text = virt.ok() ? *virt : "";
  }
  int g;
  return absl::SimpleAtoi(text, &g) ? g : -1;
}

}  // namespace

absl::StatusOr<std::vector<WorkerPlacement>> PlaceWorkers(const v1::JobSpec& spec,
                                                          const std::map<std::string, std::string>& env,
                                                          const NprocPlan& nproc, const std::string& sys_root) {
  std::vector<WorkerPlacement> out(static_cast<size_t>(std::max(nproc.count, 0)));
  std::vector<int> rank_gpus;
  for (int lr = 0; lr < nproc.count; ++lr) {
    WorkerPlacement& p = out[static_cast<size_t>(lr)];
    if (!nproc.devices.empty()) {
      p.cuda_visible_device = nproc.devices[static_cast<size_t>(lr)];
    } else if (spec.virtual_local_rank()) {
      auto d = VirtualLocalDevice(env, lr);
      if (!d.ok()) return d.status();
      p.cuda_visible_device = *d;
    }
    rank_gpus.push_back(RankGpu(env, p.cuda_visible_device, lr));
  }
  if (spec.numa_binding() == v1::JobSpec::NUMA_BINDING_NONE) return out;
  auto shares = PlanCpuShares(ReadCpuTopology(sys_root, AllowedCpus()), spec.numa_binding(), rank_gpus);
  if (!shares.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--numa-binding ", NumaBindingName(spec.numa_binding()), ": ", shares.status().message()));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].cpus = (*shares)[i].cpus;
    out[i].omp_threads = (*shares)[i].threads;
  }
  return out;
}

}  // namespace drun
