// The summary's hints (agent/root_cause_hints.h) and the interpreter kinds they
// fit (agent/python_env.h), with real interpreters: a venv made by
// /usr/bin/python3 -m venv, pyenv's (~/.pyenv, skipped where absent), the
// system's /usr/bin/python3.
#include "agent/root_cause_hints.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "agent/python_env.h"

namespace drun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// torch's own lines, as Debian's packages print them (docs/torchrun26_reference.md, and
// torch 2.14.1 in Debian sid).
constexpr char kTorch26Libuv[] =
    "[rank0]: RuntimeError: use_libuv was requested but PyTorch was build without libuv support";
constexpr char kTorch214Libuv[] =
    "[rank1]: torch.distributed.DistStoreError: use_libuv was requested but PyTorch was built without "
    "libuv support, run with USE_LIBUV=0 to disable it.";

v1::Failure WithLine(const std::string& line) {
  v1::Failure f;
  f.set_rank(0);
  f.add_stderr_tail("Traceback (most recent call last):");
  f.add_stderr_tail(line);
  return f;
}

std::string TempDir() {
  char tmpl[] = "/tmp/drun-hints-XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? d : "";
}

TEST(ClassifyStderr, EveryWordingOfTorchWithoutLibuv) {
  for (const char* line : {kTorch26Libuv, kTorch214Libuv}) {
    EXPECT_EQ(ClassifyStderr(WithLine(line)), std::set<FailureCause>{FailureCause::kTorchWithoutLibuv}) << line;
  }
  EXPECT_EQ(ClassifyStderr(WithLine("ModuleNotFoundError: No module named 'torch'")),
            std::set<FailureCause>{FailureCause::kNoTorch});
  EXPECT_EQ(ClassifyStderr(WithLine("EOFError: EOF when reading a line")),
            std::set<FailureCause>{FailureCause::kStdinEnded});
  EXPECT_THAT(ClassifyStderr(WithLine("ValueError: EOFError is not the point here")), IsEmpty());
  EXPECT_THAT(ClassifyStderr(WithLine("RuntimeError: libuv is fine")), IsEmpty());
}

TEST(RootCauseHints, TorchWithoutLibuvNamesUseLibuv0ForEveryWording) {
  for (const char* line : {kTorch26Libuv, kTorch214Libuv}) {
    std::vector<std::string> hints = RootCauseHints(WithLine(line));
    ASSERT_EQ(hints.size(), 1u) << line;
    EXPECT_THAT(hints[0], HasSubstr("run with USE_LIBUV=0"));
    EXPECT_THAT(hints[0], Not(HasSubstr("--no-agent-store")));  // drun arranges the store itself now
  }
  v1::Failure had = WithLine(kTorch214Libuv);
  had.set_use_libuv_off(true);  // the workers had USE_LIBUV=0: the program's own TCPStore asked
  EXPECT_THAT(RootCauseHints(had), ElementsAre(HasSubstr("use_libuv=False")));
}

TEST(RootCauseHints, EndOfFileOnStdinPointsAtStdinAll) {
  v1::Failure f;
  f.set_rank(1);
  f.add_stderr_tail("  File \"/usr/lib/python3.11/bdb.py\", line 90, in dispatch_line");
  f.add_stderr_tail("bdb.BdbQuit");
  EXPECT_THAT(RootCauseHints(f), ElementsAre(AllOf(HasSubstr("rank 1 read end-of-file from its stdin"),
                                                   HasSubstr("--stdin all"))));
}

// A real venv: /usr/bin/python3 -m venv, with and without --system-site-packages.
TEST(PythonEnv, VenvFromTheSystemPython) {
  const std::string dir = TempDir();
  ASSERT_FALSE(dir.empty());
  for (bool system_site : {false, true}) {
    const std::string venv = dir + (system_site ? "/with-system" : "/plain");
    const std::string cmd = "/usr/bin/python3 -m venv --without-pip " +
                            std::string(system_site ? "--system-site-packages " : "") + venv;
    ASSERT_EQ(system(cmd.c_str()), 0) << cmd;
    const v1::PythonEnv env = InspectPythonEnv(venv + "/bin/python3");
    EXPECT_EQ(env.kind(), v1::PythonEnv::VENV);
    EXPECT_EQ(env.prefix(), venv);
    EXPECT_EQ(env.system_site_packages(), system_site);
    EXPECT_THAT(env.base_interpreter(), HasSubstr("/usr/bin/python3"));

    v1::Failure f = WithLine("ModuleNotFoundError: No module named 'torch'");
    f.set_program(venv + "/bin/python3");
    *f.mutable_python_env() = env;
    std::vector<std::string> hints = RootCauseHints(f);
    ASSERT_EQ(hints.size(), 1u);
    EXPECT_THAT(hints[0], HasSubstr(venv + "/bin/pip install torch"));
    EXPECT_THAT(hints[0], Not(HasSubstr("PYTHON_EXEC")));  // the venv stays the user's
    if (!system_site) {
      EXPECT_THAT(hints[0], HasSubstr("-m venv --system-site-packages " + venv));
    } else {
      EXPECT_THAT(hints[0], Not(HasSubstr("--system-site-packages")));
    }
  }
  ASSERT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

TEST(PythonEnv, PyenvShimAndVersion) {
  const char* home = getenv("HOME");
  const std::string root = std::string(home ? home : "/root") + "/.pyenv";
  struct stat st;
  if (stat((root + "/shims/python3").c_str(), &st) != 0) GTEST_SKIP() << "no pyenv in " << root;
  EXPECT_EQ(InspectPythonEnv(root + "/shims/python3").kind(), v1::PythonEnv::PYENV);
  EXPECT_EQ(InspectPythonEnv(root + "/shims/python3").prefix(), root);
  const std::string versions = root + "/versions/3.11.7/bin/python3";
  if (stat(versions.c_str(), &st) == 0) {
    EXPECT_EQ(InspectPythonEnv(versions).kind(), v1::PythonEnv::PYENV);
  }
  v1::Failure f = WithLine("ModuleNotFoundError: No module named 'torch'");
  f.set_program(root + "/shims/python3");
  *f.mutable_python_env() = InspectPythonEnv(f.program());
  EXPECT_THAT(RootCauseHints(f), ElementsAre(AllOf(HasSubstr("pyenv's Python"), HasSubstr("pip install torch"))));
}

TEST(PythonEnv, SystemCondaAndUnknown) {
  EXPECT_EQ(InspectPythonEnv("/usr/bin/python3").kind(), v1::PythonEnv::SYSTEM);
  EXPECT_EQ(InspectPythonEnv("python3").kind(), v1::PythonEnv::KIND_UNKNOWN);  // not found on PATH
  // A conda env's layout (no conda on this machine): bin/python beside conda-meta/.
  const std::string dir = TempDir();
  ASSERT_EQ(system(("mkdir -p " + dir + "/conda-meta " + dir + "/bin && ln -s /usr/bin/python3 " + dir +
                    "/bin/python3")
                       .c_str()),
            0);
  const v1::PythonEnv conda = InspectPythonEnv(dir + "/bin/python3");
  EXPECT_EQ(conda.kind(), v1::PythonEnv::CONDA);
  v1::Failure f = WithLine("ModuleNotFoundError: No module named 'torch'");
  f.set_program(dir + "/bin/python3");
  *f.mutable_python_env() = conda;
  EXPECT_THAT(RootCauseHints(f), ElementsAre(HasSubstr("conda install -p " + dir + " pytorch")));
  ASSERT_EQ(system(("rm -rf " + dir).c_str()), 0);

  f.set_program("/usr/bin/python3");
  *f.mutable_python_env() = InspectPythonEnv("/usr/bin/python3");
  EXPECT_THAT(RootCauseHints(f), ElementsAre(HasSubstr("apt install python3-torch")));
}

}  // namespace
}  // namespace drun
