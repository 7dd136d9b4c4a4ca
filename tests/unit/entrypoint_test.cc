#include "agent/entrypoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace drun {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

v1::JobSpec Spec(v1::JobSpec::EntrypointKind kind, const std::string& entry) {
  v1::JobSpec s;
  s.set_kind(kind);
  s.set_entrypoint(entry);
  s.set_working_dir(::testing::TempDir());
  return s;
}

TEST(Entrypoint, InterpreterAsScriptIsRefusedWithTheFix) {
  for (const char* py : {"python", "python3", "/usr/bin/python3.11", "pypy3", "python3-dbg"}) {
    EXPECT_TRUE(IsPythonInterpreter(py)) << py;
  }
  for (const char* not_py : {"train.py", "pythonic.py", "/bin/sh", "python3x"}) {
    EXPECT_FALSE(IsPythonInterpreter(not_py)) << not_py;
  }
  v1::JobSpec s = Spec(v1::JobSpec::PYTHON_SCRIPT, "python");
  s.add_args("train.py");
  auto st = CheckEntrypoint(s, {{"PYTHON_EXEC", "/bin/sh"}});
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("'python' is an interpreter"));
  EXPECT_THAT(st.message(), HasSubstr("drun [options] train.py"));
  EXPECT_THAT(st.message(), HasSubstr("--no-python"));
}

TEST(Entrypoint, MissingScriptProgramOrInterpreter) {
  auto missing = CheckEntrypoint(Spec(v1::JobSpec::PYTHON_SCRIPT, "nope.py"), {{"PYTHON_EXEC", "/bin/sh"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.message(), HasSubstr("nope.py: no such file in"));
  const std::string script = ::testing::TempDir() + "/there.py";
  std::ofstream(script) << "print(1)\n";
  EXPECT_TRUE(CheckEntrypoint(Spec(v1::JobSpec::PYTHON_SCRIPT, "there.py"), {{"PYTHON_EXEC", "/bin/sh"}}).ok());
  auto no_python = CheckEntrypoint(Spec(v1::JobSpec::PYTHON_SCRIPT, "there.py"),
                                   {{"PYTHON_EXEC", "/nonexistent/python3"}});
  ASSERT_FALSE(no_python.ok());
  EXPECT_THAT(no_python.message(), HasSubstr("(PYTHON_EXEC)"));
  auto prog = CheckEntrypoint(Spec(v1::JobSpec::PROGRAM, "no-such-program-xyz"), {{"PATH", "/usr/bin:/bin"}});
  ASSERT_FALSE(prog.ok());
  EXPECT_THAT(prog.message(), HasSubstr("not found on PATH"));
  EXPECT_TRUE(CheckEntrypoint(Spec(v1::JobSpec::PROGRAM, "true"), {{"PATH", "/usr/bin:/bin"}}).ok());
  // A module cannot be checked without running the interpreter: only the interpreter is.
  EXPECT_TRUE(CheckEntrypoint(Spec(v1::JobSpec::PYTHON_MODULE, "pkg.train"), {{"PYTHON_EXEC", "/bin/sh"}}).ok());
}

TEST(Entrypoint, WorkerArgv) {
  v1::JobSpec s = Spec(v1::JobSpec::PYTHON_MODULE, "pkg.train");
  s.add_args("--lr");
  EXPECT_EQ(WorkerArgv(s, "/usr/bin/python3"),
            (std::vector<std::string>{"/usr/bin/python3", "-u", "-m", "pkg.train", "--lr"}));
  EXPECT_EQ(WorkerProgram(Spec(v1::JobSpec::PYTHON_SCRIPT, "t.py"), {{"PYTHON_EXEC", "sh"}, {"PATH", "/usr/bin:/bin"}}),
            "/usr/bin/sh");
}

// drun installed by pip into a venv or conda env: that environment's python3.
class EnvironmentPythonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/envpy." + std::to_string(getpid());
    std::filesystem::create_directories(root_ + "/env/bin");
    Touch(root_ + "/env/bin/drun", 0755);
    Touch(root_ + "/env/bin/python3", 0755);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  static void Touch(const std::string& path, int mode) {
    std::ofstream(path) << "#!/bin/sh\n";
    chmod(path.c_str(), mode);
  }
  std::string root_;
};

TEST_F(EnvironmentPythonTest, VenvGivesItsPython) {
  Touch(root_ + "/env/pyvenv.cfg", 0644);
  EXPECT_EQ(EnvironmentPython(root_ + "/env/bin/drun"), root_ + "/env/bin/python3");
}

TEST_F(EnvironmentPythonTest, CondaEnvGivesItsPython) {
  std::filesystem::create_directories(root_ + "/env/conda-meta");
  EXPECT_EQ(EnvironmentPython(root_ + "/env/bin/drun"), root_ + "/env/bin/python3");
}

TEST_F(EnvironmentPythonTest, PlainPrefixGivesNothing) {
  // /usr/bin/drun beside /usr/bin/python3 (the .deb): python3 on PATH stays the default.
  EXPECT_EQ(EnvironmentPython(root_ + "/env/bin/drun"), "");
}

TEST_F(EnvironmentPythonTest, VenvWithoutPython3GivesNothing) {
  Touch(root_ + "/env/pyvenv.cfg", 0644);
  std::filesystem::remove(root_ + "/env/bin/python3");
  EXPECT_EQ(EnvironmentPython(root_ + "/env/bin/drun"), "");
  Touch(root_ + "/env/bin/python3", 0644);  // not executable
  EXPECT_EQ(EnvironmentPython(root_ + "/env/bin/drun"), "");
}

TEST_F(EnvironmentPythonTest, NotInABinDirectoryGivesNothing) {
  Touch(root_ + "/env/pyvenv.cfg", 0644);
  EXPECT_EQ(EnvironmentPython(root_ + "/env/drun"), "");
  EXPECT_EQ(EnvironmentPython("drun"), "");
}

}  // namespace
}  // namespace drun
