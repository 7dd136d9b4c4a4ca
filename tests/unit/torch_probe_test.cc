// The workers' torch, probed without importing it (agent/torch_probe.h), and the
// NCCL error-handling name their environment gets from it (agent/worker_env.h):
// real interpreters, Debian's /usr/bin/python3 (torch 1.13) and one without
// torch (pyenv's, where there is one).
#include "agent/torch_probe.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>

namespace drun {
namespace {

TEST(TorchProbe, ParsesVersions) {
  for (auto [text, major, minor] : {std::tuple<const char*, int, int>{"1.13.1", 1, 13},
                                    {"2.14.1+debian\n", 2, 14},
                                    {"2.6.0a0+git1234", 2, 6},
                                    {"2.2", 2, 2}}) {
    TorchVersion v = ParseTorchVersion(text);
    EXPECT_TRUE(v.known) << text;
    EXPECT_EQ(v.major, major) << text;
    EXPECT_EQ(v.minor, minor) << text;
  }
  for (const char* bad : {"", "torch", "2", "x.1", "2.x"}) EXPECT_FALSE(ParseTorchVersion(bad).known) << bad;
}

TEST(TorchProbe, NameByVersion) {
  EXPECT_EQ(NcclErrorVarFor(ParseTorchVersion("1.13.1")), NcclErrorVar::kLegacy);
  EXPECT_EQ(NcclErrorVarFor(ParseTorchVersion("2.1.2")), NcclErrorVar::kLegacy);
  EXPECT_EQ(NcclErrorVarFor(ParseTorchVersion("2.2.0")), NcclErrorVar::kTorchPrefixed);
  EXPECT_EQ(NcclErrorVarFor(ParseTorchVersion("2.14.1+debian")), NcclErrorVar::kTorchPrefixed);
  EXPECT_EQ(NcclErrorVarFor(TorchVersion{}), NcclErrorVar::kBoth);
}

TEST(TorchProbe, DebiansPythonHasTorch113) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  const EnvMap env = {{"PATH", "/usr/bin:/bin"}};
  const auto t0 = std::chrono::steady_clock::now();
  TorchVersion v = ProbeTorchVersion("/usr/bin/python3", env, "/", std::chrono::seconds(30));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(v.known);
  EXPECT_EQ(v.major, 1);
  EXPECT_EQ(v.minor, 13);
  EXPECT_EQ(NcclErrorVarFor(v), NcclErrorVar::kLegacy);
  RecordProperty("probe_ms", std::to_string(ms));
  // Through the job's spec: a Python script probes, a program does not.
  v1::JobSpec spec;
  spec.set_kind(v1::JobSpec::PYTHON_SCRIPT);
  spec.set_python_exec("/usr/bin/python3");
  EXPECT_TRUE(ProbeWorkersTorch(spec, env).known);
  spec.set_kind(v1::JobSpec::PROGRAM);
  spec.set_entrypoint("/usr/bin/python3");
  EXPECT_FALSE(ProbeWorkersTorch(spec, env).known);
}

TEST(TorchProbe, NoTorchOrNoInterpreterIsUnknown) {
  const EnvMap env = {{"PATH", "/usr/bin:/bin"}};
  EXPECT_FALSE(ProbeTorchVersion("/nonexistent/python3", env, "/", std::chrono::seconds(5)).known);
  // Debian's Python without its site-packages (-S, through a wrapper) finds no torch.
  char dir[] = "/tmp/drun-probe-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string no_site = std::string(dir) + "/python3-S", slow = std::string(dir) + "/python3-slow";
  ASSERT_EQ(system(("printf '#!/bin/sh\\nexec /usr/bin/python3 -S \"$@\"\\n' > " + no_site +
                    " && printf '#!/bin/sh\\nsleep 30\\n' > " + slow + " && chmod +x " + no_site + " " + slow)
                       .c_str()),
            0);
  EXPECT_FALSE(ProbeTorchVersion(no_site, env, "/", std::chrono::seconds(30)).known);
  // A probe past its bound is killed (its whole process group) and unknown, in time.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(ProbeTorchVersion(slow, env, "/", std::chrono::milliseconds(300)).known);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  ASSERT_EQ(system((std::string("rm -rf ") + dir).c_str()), 0);
}

TEST(WorkerEnvNccl, EachTorchGetsTheNameItReads) {
  v1::JobSpec spec;
  v1::Assignment a;
  WorkerEnvInput in;
  in.nccl_error_var = NcclErrorVar::kLegacy;
  EnvMap env = BuildWorkerEnv({}, spec, a, in);
  EXPECT_EQ(env["NCCL_ASYNC_ERROR_HANDLING"], "1");
  EXPECT_EQ(env.count("TORCH_NCCL_ASYNC_ERROR_HANDLING"), 0u);
  in.nccl_error_var = NcclErrorVar::kTorchPrefixed;
  env = BuildWorkerEnv({}, spec, a, in);
  EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
  EXPECT_EQ(env.count("NCCL_ASYNC_ERROR_HANDLING"), 0u);  // torch 2.x would warn about it
  in.nccl_error_var = NcclErrorVar::kBoth;
  env = BuildWorkerEnv({}, spec, a, in);
  EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
  EXPECT_EQ(env["NCCL_ASYNC_ERROR_HANDLING"], "1");
  // A user's choice under either name stands alone.
  in.nccl_error_var = NcclErrorVar::kTorchPrefixed;
  env = BuildWorkerEnv({{"NCCL_ASYNC_ERROR_HANDLING", "0"}}, spec, a, in);
  EXPECT_EQ(env["NCCL_ASYNC_ERROR_HANDLING"], "0");
  EXPECT_EQ(env.count("TORCH_NCCL_ASYNC_ERROR_HANDLING"), 0u);
}

}  // namespace
}  // namespace drun
