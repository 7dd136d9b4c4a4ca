// The --numa-binding planner on topologies given as data (2-core VM, 16-core
// PC, 2-socket SMT server, AMD core complexes), the /sys reader on a tree
// written here, and --virtual-local-rank's devices.
#include "agent/cpu_placement.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

namespace drun {
namespace {

using v1::JobSpec;

// `cores` physical cores, their SMT siblings numbered after them (cpu k and
// k+cores), split evenly into `nodes` NUMA nodes (one socket each) and each
// node into `complexes` last-level-cache groups.
CpuTopology Layout(int cores, bool smt, int nodes, int complexes = 1) {
  CpuTopology t;
  const int per_node = cores / nodes, per_complex = per_node / complexes;
  for (int thread = 0; thread < (smt ? 2 : 1); ++thread) {
    for (int k = 0; k < cores; ++k) {
      CpuInfo c;
      c.id = k + thread * cores;
      c.core = k;
      c.numa = k / per_node;
      c.package = c.numa;
      c.cache = k / per_complex * per_complex;
      t.cpus.push_back(c);
      t.allowed.insert(c.id);
    }
  }
  return t;
}

std::vector<int> Range(int lo, int hi) {  // [lo, hi]
  std::vector<int> v;
  for (int i = lo; i <= hi; ++i) v.push_back(i);
  return v;
}

std::vector<int> Join(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<CpuShare> Plan(const CpuTopology& t, JobSpec::NumaBinding mode, std::vector<int> gpus) {
  auto r = PlanCpuShares(t, mode, gpus);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : std::vector<CpuShare>{};
}

std::vector<int> NoGpus(int n) { return std::vector<int>(static_cast<size_t>(n), -1); }

TEST(CpuPlacementTest, TwoCoresTwoRanksOneCpuEach) {
  auto s = Plan(Layout(2, false, 1), JobSpec::NUMA_BINDING_EXCLUSIVE, NoGpus(2));
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].cpus, std::vector<int>{0});
  EXPECT_EQ(s[1].cpus, std::vector<int>{1});
  EXPECT_EQ(s[0].threads, 1);
  EXPECT_EQ(s[1].threads, 1);
}

TEST(CpuPlacementTest, MoreRanksThanCoresTakeCoresInTurn) {
  auto s = Plan(Layout(2, false, 1), JobSpec::NUMA_BINDING_EXCLUSIVE, NoGpus(4));
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].cpus, std::vector<int>{0});
  EXPECT_EQ(s[1].cpus, std::vector<int>{1});
  EXPECT_EQ(s[2].cpus, std::vector<int>{0});
  EXPECT_EQ(s[3].cpus, std::vector<int>{1});
  for (const auto& x : s) EXPECT_EQ(x.threads, 1);
}

TEST(CpuPlacementTest, SixteenCorePcTwoRanksEightCoresEach) {
  auto s = Plan(Layout(16, false, 1), JobSpec::NUMA_BINDING_EXCLUSIVE, NoGpus(2));
  EXPECT_EQ(s[0].cpus, Range(0, 7));
  EXPECT_EQ(s[1].cpus, Range(8, 15));
  EXPECT_EQ(s[0].threads, 8);
  EXPECT_EQ(s[1].threads, 8);
  // Three ranks: the first takes the extra core.
  s = Plan(Layout(16, false, 1), JobSpec::NUMA_BINDING_EXCLUSIVE, NoGpus(3));
  EXPECT_EQ(s[0].cpus, Range(0, 5));
  EXPECT_EQ(s[1].cpus, Range(6, 10));
  EXPECT_EQ(s[2].cpus, Range(11, 15));
  EXPECT_EQ(s[0].threads, 6);
  EXPECT_EQ(s[2].threads, 5);
}

TEST(CpuPlacementTest, SmtSiblingsStayTogetherAndNumaNodesAreRespected) {
  const CpuTopology t = Layout(16, true, 2);  // cpus 0-31, node 0: cores 0-7
  auto s = Plan(t, JobSpec::NUMA_BINDING_EXCLUSIVE, NoGpus(4));
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].cpus, Join(Range(0, 3), Range(16, 19)));
  EXPECT_EQ(s[1].cpus, Join(Range(4, 7), Range(20, 23)));
  EXPECT_EQ(s[2].cpus, Join(Range(8, 11), Range(24, 27)));
  EXPECT_EQ(s[3].cpus, Join(Range(12, 15), Range(28, 31)));
  for (const auto& x : s) EXPECT_EQ(x.threads, 4);  // whole cores, not hyperthreads
  // Two ranks: one NUMA node each.
  s = Plan(t, JobSpec::NUMA_BINDING_EXCLUSIVE, NoGpus(2));
  EXPECT_EQ(s[0].cpus, Join(Range(0, 7), Range(16, 23)));
  EXPECT_EQ(s[1].cpus, Join(Range(8, 15), Range(24, 31)));
  EXPECT_EQ(s[0].threads, 8);
  // Three ranks: node 0 to the first, node 1 split between the others.
  s = Plan(t, JobSpec::NUMA_BINDING_EXCLUSIVE, NoGpus(3));
  EXPECT_EQ(s[0].cpus, Join(Range(0, 7), Range(16, 23)));
  EXPECT_EQ(s[1].cpus, Join(Range(8, 11), Range(24, 27)));
  EXPECT_EQ(s[2].cpus, Join(Range(12, 15), Range(28, 31)));
}

TEST(CpuPlacementTest, NodeAndSocketModesShareTheNodeAndDivideItsThreads) {
  const CpuTopology t = Layout(16, true, 2);
  auto s = Plan(t, JobSpec::NUMA_BINDING_NODE, NoGpus(4));
  EXPECT_EQ(s[0].cpus, Join(Range(0, 7), Range(16, 23)));
  EXPECT_EQ(s[1].cpus, s[0].cpus);
  EXPECT_EQ(s[2].cpus, Join(Range(8, 15), Range(24, 31)));
  EXPECT_EQ(s[0].threads, 4);  // 8 cores, 2 ranks
  s = Plan(t, JobSpec::NUMA_BINDING_SOCKET, NoGpus(2));
  EXPECT_EQ(s[1].cpus, Join(Range(8, 15), Range(24, 31)));
  EXPECT_EQ(s[1].threads, 8);
}

TEST(CpuPlacementTest, GpusChooseTheNumaNode) {
  CpuTopology t = Layout(16, true, 2);
  t.gpu_numa = {1, 1, 0, 0};
  auto s = Plan(t, JobSpec::NUMA_BINDING_EXCLUSIVE, {0, 1, 2, 3});
  EXPECT_EQ(s[0].cpus, Join(Range(8, 11), Range(24, 27)));
  EXPECT_EQ(s[1].cpus, Join(Range(12, 15), Range(28, 31)));
  EXPECT_EQ(s[2].cpus, Join(Range(0, 3), Range(16, 19)));
  EXPECT_EQ(s[3].cpus, Join(Range(4, 7), Range(20, 23)));
  // gpu:2,3 (two workers): both on node 0, half of it each.
  s = Plan(t, JobSpec::NUMA_BINDING_EXCLUSIVE, {2, 3});
  EXPECT_EQ(s[0].cpus, Join(Range(0, 3), Range(16, 19)));
  EXPECT_EQ(s[1].cpus, Join(Range(4, 7), Range(20, 23)));
  // A single-node machine reports -1: node 0.
  CpuTopology one = Layout(8, false, 1);
  one.gpu_numa = {-1, -1};
  s = Plan(one, JobSpec::NUMA_BINDING_NODE, {0, 1});
  EXPECT_EQ(s[1].cpus, Range(0, 7));
  EXPECT_EQ(s[1].threads, 4);
  // More workers than GPUs: spread as for CPU training.
  s = Plan(t, JobSpec::NUMA_BINDING_EXCLUSIVE, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(s[0].cpus, (std::vector<int>{0, 1, 16, 17}));
}

TEST(CpuPlacementTest, OnlyTheAllowedCpusAreUsed) {
  CpuTopology t = Layout(16, true, 2);
  t.allowed = {0, 1, 2, 3, 16, 17, 18, 19};  // taskset/cpuset: 4 cores of node 0
  auto s = Plan(t, JobSpec::NUMA_BINDING_EXCLUSIVE, NoGpus(2));
  EXPECT_EQ(s[0].cpus, (std::vector<int>{0, 1, 16, 17}));
  EXPECT_EQ(s[1].cpus, (std::vector<int>{2, 3, 18, 19}));
  EXPECT_EQ(s[0].threads, 2);
  // A GPU on node 1, where none is allowed: a clear error.
  t.gpu_numa = {1};
  auto r = PlanCpuShares(t, JobSpec::NUMA_BINDING_NODE, {0});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("NUMA node 1"), std::string::npos) << r.status();
  t.allowed.clear();
  EXPECT_FALSE(PlanCpuShares(t, JobSpec::NUMA_BINDING_NODE, {-1}).ok());
}

TEST(CpuPlacementTest, CoreComplexTakesWholeCacheGroupsLargestFirst) {
  CpuTopology t = Layout(16, false, 1, 2);  // complexes 0-7 and 8-15
  auto s = Plan(t, JobSpec::NUMA_BINDING_CORE_COMPLEX, NoGpus(2));
  EXPECT_EQ(s[0].cpus, Range(0, 7));
  EXPECT_EQ(s[1].cpus, Range(8, 15));
  EXPECT_EQ(s[0].threads, 8);
  t.allowed = {0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15};
  s = Plan(t, JobSpec::NUMA_BINDING_CORE_COMPLEX, NoGpus(3));
  EXPECT_EQ(s[0].cpus, Range(8, 15));
  EXPECT_EQ(s[1].cpus, Range(0, 5));
  EXPECT_EQ(s[2].cpus, Range(8, 15));
  EXPECT_EQ(s[0].threads, 4);  // two ranks hold it
}

TEST(CpuPlacementTest, ModesAndCpuLists) {
  EXPECT_EQ(*ParseNumaBinding("exclusive"), JobSpec::NUMA_BINDING_EXCLUSIVE);
  EXPECT_EQ(*ParseNumaBinding("core-complex"), JobSpec::NUMA_BINDING_CORE_COMPLEX);
  EXPECT_FALSE(ParseNumaBinding("Node").ok());
  EXPECT_FALSE(ParseNumaBinding("").ok());
  EXPECT_EQ(NumaBindingName(JobSpec::NUMA_BINDING_SOCKET), "socket");
  EXPECT_EQ(ParseCpuList("0-3,8,10-11\n"), (std::set<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({}), "");
}

void Write(const std::string& path, const std::string& text) {
  std::string dir = path.substr(0, path.rfind('/'));
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  std::ofstream(path) << text << "\n";
}

TEST(CpuPlacementTest, ReadsTheTopologyFromSys) {
  char tmpl[] = "/tmp/drun-sys-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string sys = tmpl;
  Write(sys + "/devices/system/cpu/online", "0-3");
  for (int c = 0; c < 4; ++c) {  // cores {0,2} and {1,3}; node 0 = cpus 0,2
    const std::string d = sys + "/devices/system/cpu/cpu" + std::to_string(c);
    Write(d + "/topology/thread_siblings_list", c % 2 ? "1,3" : "0,2");
    Write(d + "/topology/physical_package_id", "0");
    Write(d + "/cache/index0/type", "Data");
    Write(d + "/cache/index0/level", "1");
    Write(d + "/cache/index0/shared_cpu_list", c % 2 ? "1,3" : "0,2");
    Write(d + "/cache/index1/type", "Instruction");
    Write(d + "/cache/index1/level", "4");
    Write(d + "/cache/index1/shared_cpu_list", "0-3");
    Write(d + "/cache/index3/type", "Unified");
    Write(d + "/cache/index3/level", "3");
    Write(d + "/cache/index3/shared_cpu_list", c % 2 ? "1,3" : "0,2");
  }
  Write(sys + "/devices/system/node/node0/cpulist", "0,2");
  Write(sys + "/devices/system/node/node1/cpulist", "1,3");
  const std::string pci = sys + "/bus/pci/devices/";
  for (auto [dev, vendor, cls, node] :
       {std::tuple<const char*, const char*, const char*, const char*>{"0000:00:02.0", "0x8086", "0x030000", "-1"},
        {"0000:3b:00.0", "0x10de", "0x030200", "1"},
        {"0000:5e:00.0", "0x10de", "0x040300", "1"},  // its audio function
        {"0000:af:00.0", "0x10de", "0x030000", "0"}}) {
    Write(pci + dev + "/vendor", vendor);
    Write(pci + dev + "/class", cls);
    Write(pci + dev + "/numa_node", node);
  }
  CpuTopology t = ReadCpuTopology(sys, {0, 1, 2, 3});
  ASSERT_EQ(t.cpus.size(), 4u);
  EXPECT_EQ(t.cpus[2].core, 0);
  EXPECT_EQ(t.cpus[3].core, 1);
  EXPECT_EQ(t.cpus[2].numa, 0);
  EXPECT_EQ(t.cpus[3].numa, 1);
  EXPECT_EQ(t.cpus[3].cache, 1);  // level 3, not the instruction cache
  EXPECT_EQ(t.gpu_numa, (std::vector<int>{1, 0}));
  auto s = Plan(t, JobSpec::NUMA_BINDING_EXCLUSIVE, {0, 1});
  EXPECT_EQ(s[0].cpus, (std::vector<int>{1, 3}));  // GPU 0 sits on node 1
  EXPECT_EQ(s[1].cpus, (std::vector<int>{0, 2}));
  EXPECT_EQ(s[0].threads, 1);
  ASSERT_EQ(std::system(("rm -rf '" + sys + "'").c_str()), 0);
}

TEST(CpuPlacementTest, ThisMachinesTopologyCoversTheAllowedCpus) {
  const std::set<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  CpuTopology t = ReadCpuTopology("/sys", allowed);
  auto s = PlanCpuShares(t, JobSpec::NUMA_BINDING_EXCLUSIVE, NoGpus(static_cast<int>(allowed.size())));
  ASSERT_TRUE(s.ok()) << s.status();
  std::set<int> seen;
  for (const auto& x : *s) seen.insert(x.cpus.begin(), x.cpus.end());
  EXPECT_EQ(seen, allowed);
}

TEST(CpuPlacementTest, VirtualLocalRankDevices) {
  EXPECT_EQ(*VirtualLocalDevice({}, 4), "4");
  EXPECT_EQ(*VirtualLocalDevice({{"CUDA_VISIBLE_DEVICES", "3, 5"}}, 1), "5");
  auto r = VirtualLocalDevice({{"CUDA_VISIBLE_DEVICES", "3,5"}}, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("CUDA_VISIBLE_DEVICES=3,5"), std::string::npos);
  // Set but empty hides every GPU (a CPU job): every worker keeps it empty.
  EXPECT_EQ(*VirtualLocalDevice({{"CUDA_VISIBLE_DEVICES", ""}}, 3), "");

  JobSpec spec;
  spec.set_virtual_local_rank(true);
  NprocPlan two;
  two.count = 2;
  auto p = PlaceWorkers(spec, {{"CUDA_VISIBLE_DEVICES", "4,7"}}, two);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)[0].cuda_visible_device, "4");
  EXPECT_EQ((*p)[1].cuda_visible_device, "7");
  EXPECT_TRUE((*p)[1].cpus.empty());
  EXPECT_EQ((*p)[1].omp_threads, 0);
  two.devices = {"1", "3"};  // --nproc-per-node gpu:1,3 names them itself
  p = PlaceWorkers(spec, {{"CUDA_VISIBLE_DEVICES", "4,7"}}, two);
  EXPECT_EQ((*p)[1].cuda_visible_device, "3");
  NprocPlan three;
  three.count = 3;
  EXPECT_FALSE(PlaceWorkers(spec, {{"CUDA_VISIBLE_DEVICES", "4,7"}}, three).ok());
  // Without the flag nothing is narrowed.
  EXPECT_TRUE((*PlaceWorkers(JobSpec{}, {}, three))[2].cuda_visible_device.empty());
}

}  // namespace
}  // namespace drun
