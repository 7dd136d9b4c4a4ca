#include "agent/nproc.h"

#include <gtest/gtest.h>

namespace drun {
namespace {

TEST(NprocTest, Forms) {
  NodeFacts cpu_only{8, 0}, gpus{8, 2};
  EXPECT_EQ(ResolveNproc("3", cpu_only)->count, 3);
  EXPECT_EQ(ResolveNproc("cpu", gpus)->count, 8);
  EXPECT_EQ(ResolveNproc("gpu", gpus)->count, 2);
  EXPECT_EQ(ResolveNproc("auto", gpus)->count, 2);
  EXPECT_EQ(ResolveNproc("auto", cpu_only)->count, 8);
  auto list = ResolveNproc("gpu:1,3,5", gpus);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->count, 3);
  EXPECT_EQ(list->devices, (std::vector<std::string>{"1", "3", "5"}));
  EXPECT_TRUE(ResolveNproc("4", cpu_only)->devices.empty());
}

TEST(NprocTest, Errors) {
  auto no_gpu = ResolveNproc("gpu", NodeFacts{4, 0});
  ASSERT_FALSE(no_gpu.ok());
  EXPECT_NE(no_gpu.status().message().find("no GPU"), std::string::npos);
  // A GPU list on a node without GPUs is refused as gpu is, not run as CPU workers.
  auto no_gpu_list = ResolveNproc("gpu:0,5", NodeFacts{4, 0});
  ASSERT_FALSE(no_gpu_list.ok());
  EXPECT_EQ(no_gpu_list.status().message(),
            "--nproc-per-node gpu:0,5: no GPU found on this node; use a number, cpu or auto");
  EXPECT_TRUE(ValidateNprocSpec("gpu:0,5").ok());
  for (const char* bad : {"0", "x", "gpu:", "gpu:a", "gpu:-1", ""}) {
    EXPECT_FALSE(ResolveNproc(bad, NodeFacts{4, 4}).ok()) << bad;
  }
  EXPECT_TRUE(ValidateNprocSpec("gpu").ok());
}

TEST(NprocTest, ProbeCountsCpus) { EXPECT_GE(ProbeNode().cpus, 1); }

}  // namespace
}  // namespace drun
