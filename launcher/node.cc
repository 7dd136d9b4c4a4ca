#include "launcher/node.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "agent/agent_launch.h"
#include "agent/entrypoint.h"
#include "agent/local_rendezvous.h"
#include "agent/log_layout.h"
#include "agent/nproc.h"
#include "agent/output.h"
#include "agent/process.h"
#include "agent/stacks/rank_capture.h"
#include "rendezvous/base/endpoint.h"
#include "rendezvous/base/exit_code.h"
#include "rendezvous/base/private_files.h"

namespace drun {

int Fail(int code, const std::string& message) {
  Say(message);
  return code;
}

void QuickExit(int code) {
  fflush(nullptr);
  _exit(code);
}

std::string Hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

int PrepareJob(const CommandLine& cl, const EnvMap& env, bool workers_here, v1::JobSpec* spec) {
  for (const std::string& n : cl.notices) Say(n);
  if (workers_here) {
    if (absl::Status st = CheckEntrypoint(*spec, env); !st.ok()) return Fail(kExitBadInput, std::string(st.message()));
  }
  // Like torchrun: log files need a directory; keep it and say where (a
  // node's own agent says it with the run's directory: Agent::SayLogDir).
  absl::StatusOr<std::string> made = LogLayout::DefaultRoot(spec);
  if (!made.ok()) return Fail(kExitLauncherFailed, std::string(made.status().message()));
  if (!made->empty() && !workers_here) Say(absl::StrCat("log directory set to ", *made));
  return 0;
}

AgentOptions MakeAgentOptions(AgentSetup setup) {
  AgentOptions o;
  const bool launched = setup.role == AgentRole::kLaunched;
  o.host_in_prefix = launched || SpansNodes(setup.spec);
  o.lifeline_fd = launched ? 0 : -1;  // the launch message came on standard input
  o.launcher_reports_end = launched && setup.launcher_reports_end;
  o.console_relay = launched && setup.console_relay;
  o.launcher_announces_start = launched && setup.launcher_announces_start;
  o.quiet = setup.spec.quiet();
  o.spec = std::move(setup.spec);
  o.hostname = setup.hostname.empty() ? Hostname() : std::move(setup.hostname);
  o.nproc = std::move(setup.nproc);
  o.base_env = std::move(setup.env);
  o.advertise_addr = std::move(setup.advertise_addr);
  o.socket_iface = std::move(setup.socket_iface);
  o.summary = setup.summary;
  o.report_path = std::move(setup.report_path);
  o.members_are_tasks = setup.members_are_tasks;
  o.summary_elsewhere = setup.summary_elsewhere;
  o.version = DrunVersion();
  o.capture = CaptureRank;
  absl::StatusOr<std::string> dir = ControlDir(o.base_env, /*create=*/true);
  if (dir.ok()) {
    o.control_dir = *dir;
  } else {
    Say(absl::StrCat("drun stacks will not find this job: ", dir.status().message()));
  }
  return o;
}

absl::StatusOr<SocketIface> ChooseSocketIface(const v1::JobSpec& spec, const std::string& advertise_addr,
                                              bool many_nodes) {
  SocketIface iface;
  if (!spec.iface().empty()) {
    absl::StatusOr<IfaceChoice> choice = ParseIfaceChoice(spec.iface());
    absl::StatusOr<std::string> name = choice.ok() ? ResolveIface(*choice) : choice.status();
    if (!name.ok()) {
      return absl::Status(name.status().code(),
                          absl::StrCat("--iface ", spec.iface(), " on ", Hostname(), ": ", name.status().message()));
    }
    iface.name = *name;
    iface.why = absl::StrCat("--iface ", spec.iface());
    iface.given = true;
    return iface;
  }
  if (!many_nodes) return iface;
  iface.name = InterfaceOf(advertise_addr);
  iface.why = absl::StrCat(advertise_addr, ", this node's address toward the rendezvous");
  return iface;
}

void RunSingleNode(const CommandLine& cl, v1::JobSpec spec, EnvMap env, const std::string& token) {
  auto nproc = ResolveNproc(spec.nproc_per_node(), ProbeNode());
  if (!nproc.ok()) QuickExit(Fail(kExitBadInput, std::string(nproc.status().message())));
  // The guardian is forked before any thread exists; the handled signals are
  // blocked before any thread exists, so only the agent's signalfd sees them.
  Guardian guardian = Guardian::Start();
  Agent::BlockHandledSignals();

  RendezvousState::Config config = RendezvousConfigFor(spec, token);
  config.fixed_master_addr = spec.master_addr();  // resolved: 127.0.0.1 unless --master-addr
  config.keepalive_timeout = Duration::zero();  // one process: nothing to lose

  auto iface = ChooseSocketIface(spec, "", /*many_nodes=*/false);
  if (!iface.ok()) QuickExit(Fail(kExitBadInput, std::string(iface.status().message())));
  AgentSetup setup;
  setup.role = AgentRole::kSingleNode;
  setup.spec = spec;
  setup.nproc = *nproc;
  setup.env = std::move(env);
  setup.socket_iface = *iface;
  setup.summary = cl.summary;
  setup.report_path = cl.report_path;
  AgentOptions options = MakeAgentOptions(std::move(setup));
  // One machine: the store needs no other interface than the one workers dial.
  auto rdzv = std::make_unique<LocalRendezvous>(std::move(config), spec.master_addr());
  // Not destroyed: see QuickExit.
  Agent* agent = new Agent(std::move(options), std::move(rdzv), &guardian);
  const int code = agent->Run();
  guardian.Release();
  QuickExit(code);
}

}  // namespace drun
