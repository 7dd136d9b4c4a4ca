// drun: the light binary. It runs single-node jobs itself and hands every
// other mode to drun-net (main_net.cc) by exec with the same arguments and
// environment: loading gRPC costs more start-up time and memory than a whole
// single-node job of /bin/true. The build checks that it links no gRPC
// (tests/unit/CMakeLists.txt: light_binary_links_no_grpc).
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/entrypoint.h"
#include "agent/output.h"
#include "agent/worker_env.h"
#include "launcher/job/cli.h"
#include "launcher/job/config_file.h"
#include "launcher/node.h"
#include "launcher/stacks_command.h"
#include "rendezvous/base/exit_code.h"

extern char** environ;

namespace drun {
namespace {

// This executable's path; empty if /proc cannot say.
std::string SelfExe() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  return n > 0 ? std::string(self, n) : std::string();
}

// drun installed in a venv or conda env (pip install drun-*.whl): unless PYTHON_EXEC names
// an interpreter, the workers run that environment's python3 (agent/entrypoint.h
// EnvironmentPython), on this node and, through the forwarded PYTHON_EXEC, on the others.
void DefaultToEnvironmentPython(const std::string& self) {
  const char* chosen = getenv("PYTHON_EXEC");
  if (chosen != nullptr && *chosen != '\0') return;
  const std::string python = EnvironmentPython(self);
  if (!python.empty()) setenv("PYTHON_EXEC", python.c_str(), 1);
}

// drun-net lives next to drun (the build tree) or in ../lib/drun (installed).
// Returns only when neither can be run: why, in words.
std::string TryExecNet(char** argv) {
  const std::string self = SelfExe();
  std::string dir = ".";
  if (!self.empty()) {
    dir = std::filesystem::path(self).parent_path().string();
    setenv("DRUN_LAUNCHED_AS", self.c_str(), 1);
  }
  const std::string here = dir + "/drun-net";
  const std::string installed = std::filesystem::path(dir + "/../lib/drun/drun-net").lexically_normal().string();
  for (const std::string& candidate : {here, installed}) execv(candidate.c_str(), argv);
  return absl::StrCat("drun-net (drun's networked half, for multi-node, ssh and Slurm jobs) is neither ", here,
                      " nor ", installed, ": ", strerror(errno), "; copy both files (docs/install.md)");
}

[[noreturn]] void ExecNet(char** argv) {
  const std::string why = TryExecNet(argv);
  Fail(kExitNoNetworkBinary, absl::StrCat("this job needs ", why));
  _exit(kExitNoNetworkBinary);
}

// --version: drun-net's (it names the libraries), else this drun's own and
// what is missing: asking the version is no job, and succeeds.
int Version(char** argv) {
  const std::string why = TryExecNet(argv);
  WriteAll(1, absl::StrCat(VersionWords(), "\n"));
  WriteAll(2, absl::StrCat("drun: only single-node jobs can run: ", why, "\n"));
  return 0;
}

int Main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "agent") ExecNet(argv);
  DefaultToEnvironmentPython(SelfExe());
  EnvMap env = EnvironToMap(environ);
  if (argc >= 2 && std::string(argv[1]) == "stacks") {
    return RunStacksCommand(std::vector<std::string>(argv + 2, argv + argc), env);
  }
  auto cl = ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc), env, isatty(0) == 1);
  if (!cl.ok()) return Fail(kExitBadInput, std::string(cl.status().message()));
  if (cl->usage) return WriteAll(2, UsageText()), kExitBadInput;
  if (cl->help) return WriteAll(1, HelpText(cl->help_topic)), 0;
  if (!cl->print_completion.empty()) return WriteAll(1, CompletionScript(cl->print_completion)), 0;
  if (cl->version) return Version(argv);
  if (cl->print_config) return WriteAll(1, RenderJobFile(cl->resolved)), 0;
  if (NeedsNetwork(*cl)) ExecNet(argv);
  HideSecrets(*cl, argc, argv);
  v1::JobSpec spec = cl->spec;
  if (int code = PrepareJob(*cl, env, /*workers_here=*/true, &spec); code != 0) return code;
  auto token = ReadJobToken(*cl, env);
  if (!token.ok()) return Fail(kExitBadInput, std::string(token.status().message()));
  RunSingleNode(*cl, std::move(spec), std::move(env), *token);
}

}  // namespace
}  // namespace drun

int main(int argc, char** argv) { return drun::Main(argc, argv); }
