// drun: parses the job, then runs this node's agent (and, for single-node
// jobs, the rendezvous in-process).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "agent/local_rendezvous.h"
#include "agent/nproc.h"
#include "agent/output.h"
#include "agent/process.h"
#include "agent/worker_env.h"
#include "launcher/cli.h"

extern char** environ;

namespace drun {
namespace {

int Fail(int code, const std::string& message) {
  WriteAll(2, absl::StrCat("drun: ", message, "\n"));
  return code;
}

std::string Hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

int Main(int argc, char** argv) {
  EnvMap env = EnvironToMap(environ);
  auto cl = ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc), env);
  if (!cl.ok()) return Fail(2, std::string(cl.status().message()));
  if (cl->help) {
    WriteAll(1, HelpText());
    return 0;
  }
  if (cl->version) {
    WriteAll(1, VersionText());
    return 0;
  }
  v1::JobSpec spec = cl->spec;

  auto nproc = ResolveNproc(spec.nproc_per_node(), ProbeNode());
  if (!nproc.ok()) return Fail(2, std::string(nproc.status().message()));

  if ((!spec.redirects().empty() || !spec.tee().empty()) && spec.log_dir().empty()) {
    // Like torchrun: log files need a directory; keep it and say where.
    std::string tmpl = (std::filesystem::temp_directory_path() / "drun_logs_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) return Fail(1, "cannot create a log directory under /tmp");
    spec.set_log_dir(tmpl);
    WriteAll(2, absl::StrCat("drun: log directory set to ", tmpl, "\n"));
  }

  // The guardian is forked before any thread exists; the handled signals are
  // blocked before any thread exists, so only the agent's signalfd sees them.
  Guardian guardian = Guardian::Start();
  Agent::BlockHandledSignals();

  RendezvousState::Config config;
  config.min_nodes = 1;
  config.max_nodes = 1;
  config.max_restarts = spec.max_restarts();
  config.run_id = spec.run_id();
  config.fixed_master_addr = spec.master_addr().empty() ? "127.0.0.1" : spec.master_addr();
  config.fixed_master_port = spec.master_port();
  config.use_agent_store = false;
  config.spec = spec;

  AgentOptions options;
  options.spec = spec;
  options.hostname = Hostname();
  options.nproc = *nproc;
  options.base_env = std::move(env);
  Agent agent(std::move(options), std::make_unique<LocalRendezvous>(std::move(config)), &guardian);
  int code = agent.Run();
  guardian.Release();
  return code;
}

}  // namespace
}  // namespace drun

int main(int argc, char** argv) { return drun::Main(argc, argv); }
