// drun: parses the job, then runs this node's agent (and, for single-node
// jobs, the rendezvous in-process).
#include <unistd.h>

#include <errno.h>
#include <signal.h>
#include <string.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "agent/local_rendezvous.h"
#include "agent/nproc.h"
#include "agent/output.h"
#include "agent/process.h"
#include "agent/worker_env.h"
#ifndef DRUN_LIGHT
#include "agent/grpc_rendezvous_client.h"
#endif
#include "launcher/cli.h"
#include "agent/agent_launch.h"
#include "rendezvous/base/endpoint.h"
#ifndef DRUN_LIGHT
#include "launcher/job_host.h"
#endif
#ifndef DRUN_LIGHT
#include "launcher/slurm/slurm_env.h"
#endif
#ifndef DRUN_LIGHT
#include "launcher/slurm/slurm_launcher.h"
#endif
#ifndef DRUN_LIGHT
#include "launcher/ssh/ssh_launcher.h"
#endif
#ifndef DRUN_LIGHT
#include "rendezvous/link_liveness.h"
#include "rendezvous/rendezvous_server.h"
#endif

extern char** environ;

namespace drun {
namespace {

// The job is over and everything drun owes is written (report, summary,
// logs: Agent::Run has flushed them) and its workers and guardian are gone:
// leave without unwinding gRPC (thread joins, channel teardown) and the other
// libraries. The kernel closes the rendezvous connection; the server expects
// that after Finish. At a thousand agents on one machine this is a
// measurable part of each agent's CPU after the round.
[[noreturn]] void QuickExit(int code) {
  fflush(nullptr);
  _exit(code);
}

int Fail(int code, const std::string& message) {
  WriteAll(2, absl::StrCat("drun: ", message, "\n"));
  return code;
}

#ifndef DRUN_LIGHT
// A signal while connecting ends drun like a signal anywhere else: 128+N.
int FailConnect(const absl::Status& s) {
  if (absl::IsCancelled(s)) {
    int sig = 0;
    const std::string m(s.message());
    size_t at = m.find("signal ");
    if (at != std::string::npos) sig = atoi(m.c_str() + at + 7);
    Fail(0, std::string(s.message()));
    return 128 + (sig > 0 ? sig : SIGTERM);
  }
  return Fail(1, std::string(s.message()));
}

Duration Seconds(double s) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}
#endif  // DRUN_LIGHT

std::string Hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

#ifdef DRUN_LIGHT
// This is the light drun: it runs single-node jobs itself and hands everything
// that needs the network (gRPC, libssh, Slurm) to drun-net, by exec with the
// same arguments and environment. Loading gRPC's libraries alone costs more
// start-up time and memory than a whole single-node job of /bin/true.
[[noreturn]] void ExecNet(char** argv) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string dir = ".";
  if (n > 0) {
    self[n] = '\0';
    dir = std::filesystem::path(self).parent_path().string();
  }
  if (n > 0) setenv("DRUN_LAUNCHED_AS", self, 1);
  for (const std::string& candidate : {dir + "/drun-net", dir + "/../lib/drun/drun-net"}) {
    execv(candidate.c_str(), argv);
  }
  Fail(127, absl::StrCat("cannot run drun-net (it belongs next to drun in ", dir,
                         " or in ", dir, "/../lib/drun): ", strerror(errno)));
  _exit(127);
}

bool NeedsNet(const CommandLine& cl, const EnvMap& env) {
  const v1::JobSpec& s = cl.spec;
  return cl.version || cl.launcher != "local" || env.count("SLURM_STEP_ID") ||
         (!cl.standalone &&
          (s.max_nodes() > 1 || !s.rdzv_endpoint().empty() || s.rdzv_backend() == "static"));
}
#else
// The link to the server is watched by the kernel within the keep-alive
// timeout (rendezvous/link_liveness.h). Heartbeats only prove that the
// server process is not stuck, so they are rare: four per silence timeout
// (10 x the keep-alive timeout). The host's agent talks to a server in its
// own process: it cannot lose it to a cut link, and a slow answer from a busy
// server is no reason to end the job for every node.
void SetLiveness(const v1::JobSpec& spec, bool in_process_server, GrpcClientOptions* copt) {
  const auto link = std::chrono::milliseconds(static_cast<int64_t>(
      1000 * (spec.keepalive_timeout_s() > 0 ? spec.keepalive_timeout_s() : 2)));
  const auto silence = ProcessSilenceTimeout(link);
  copt->link_timeout = link;
  copt->heartbeat = silence / 4;
  copt->silence = in_process_server ? Duration::zero() : Duration(silence);
}

// `drun agent`: a node started by a launcher (ssh, srun). The job arrives on
// standard input, which then stays open as the lifeline to the launcher.
int AgentMain() {
  auto launch = ReadAgentLaunch(0);
  if (!launch.ok()) return Fail(2, std::string(launch.status().message()));
  const v1::JobSpec& spec = launch->spec();
  if (!spec.working_dir().empty() && chdir(spec.working_dir().c_str()) != 0) {
    return Fail(1, absl::StrCat("cannot enter the job's working directory ", spec.working_dir(),
                                " on this host: ", strerror(errno)));
  }
  auto nproc = ResolveNproc(spec.nproc_per_node(), ProbeNode());
  if (!nproc.ok()) return Fail(2, std::string(nproc.status().message()));
  Guardian guardian = Guardian::Start();
  Agent::BlockHandledSignals();

  GrpcClientOptions copt;
  copt.target = launch->rdzv_target();
  copt.connect_timeout = std::chrono::seconds(30);
  SetLiveness(spec, /*in_process_server=*/false, &copt);
  auto client = ConnectRendezvous(copt);
  if (!client.ok()) return FailConnect(client.status());

  AgentOptions options;
  options.spec = spec;
  options.hostname = launch->hostname().empty() ? Hostname() : launch->hostname();
  options.nproc = *nproc;
  options.token = launch->token();
  options.host_in_prefix = true;
  options.lifeline_fd = 0;
  options.quiet = spec.quiet();
  options.advertise_addr = launch->local_addr();
  if (options.advertise_addr.empty()) {
    auto ep = ParseEndpoint(copt.target, 0);
    auto ip = ep.ok() ? ResolveHost(ep->host) : absl::StatusOr<std::string>(ep.status());
    if (ip.ok()) options.advertise_addr = RouteSourceAddress(*ip, ep->port);
  }
  options.base_env = EnvironToMap(environ);
  // Not destroyed: see QuickExit.
  Agent* agent = new Agent(std::move(options), std::move(*client), &guardian);
  int code = agent->Run();
  guardian.Release();
  QuickExit(code);
}

#endif  // DRUN_LIGHT

int Main(int argc, char** argv) {
#ifdef DRUN_LIGHT
  if (argc >= 2 && std::string(argv[1]) == "agent") ExecNet(argv);
#else
  // Started by the light drun: remember its path (remote hosts run the same
  // one) and keep the variable out of the workers' environment.
  if (const char* as = getenv("DRUN_LAUNCHED_AS")) {
    SetDrunPath(as);
    unsetenv("DRUN_LAUNCHED_AS");
  }
  if (argc >= 2 && std::string(argv[1]) == "agent") return AgentMain();
#endif
  EnvMap env = EnvironToMap(environ);
  auto cl = ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc), env);
  if (!cl.ok()) return Fail(2, std::string(cl.status().message()));
  if (cl->help) {
    WriteAll(1, HelpText());
    return 0;
  }
  if (cl->print_config) {
    WriteAll(1, RenderJobFile(cl->resolved));
    return 0;
  }
#ifdef DRUN_LIGHT
  if (NeedsNet(*cl, env)) ExecNet(argv);
#else
  if (cl->version) {
    WriteAll(1, VersionText());
    return 0;
  }
  // [slurm auto-configuration] (issue: Slurm) adjusts *cl from SLURM_* here.
  if (auto st = ApplySlurmEnvironment(&*cl, &env); !st.ok()) return Fail(2, std::string(st.message()));
#endif
  v1::JobSpec spec = cl->spec;

  if ((!spec.redirects().empty() || !spec.tee().empty()) && spec.log_dir().empty()) {
    // Like torchrun: log files need a directory; keep it and say where.
    std::string tmpl = (std::filesystem::temp_directory_path() / "drun_logs_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) return Fail(1, "cannot create a log directory under /tmp");
    spec.set_log_dir(tmpl);
    WriteAll(2, absl::StrCat("drun: log directory set to ", tmpl, "\n"));
  }

  std::string token;
  if (!cl->token_file.empty()) {
    std::ifstream in(cl->token_file);
    if (!in || !std::getline(in, token) || token.empty()) {
      return Fail(2, absl::StrCat("--rdzv-token-file ", cl->token_file,
                                  ": cannot read a token from it (one line, not empty)"));
    }
  } else if (auto it = env.find("DRUN_RDZV_TOKEN"); it != env.end()) {
    token = it->second;
  }

  // [launcher dispatch] Launchers that start the agents elsewhere (ssh, srun)
  // host the rendezvous here and return the job's exit code.
#ifndef DRUN_LIGHT
  if (cl->launcher == "slurm") return RunSlurmLauncher(*cl, spec, token, env);
  if (cl->launcher == "ssh") return RunSshLauncher(*cl, spec, token, env);
#endif

  // This process is a node: its workers are resolved here (remote nodes
  // resolve their own).
  auto nproc = ResolveNproc(spec.nproc_per_node(), ProbeNode());
  if (!nproc.ok()) return Fail(2, std::string(nproc.status().message()));

  // The guardian is forked before any thread exists; the handled signals are
  // blocked before any thread exists, so only the agent's signalfd sees them.
  Guardian guardian = Guardian::Start();
  Agent::BlockHandledSignals();

  RendezvousState::Config config = RendezvousConfigFor(spec, token);

  AgentOptions options;
  options.spec = spec;
  options.hostname = Hostname();
  options.nproc = *nproc;
  options.token = token;

  std::unique_ptr<RendezvousClient> rdzv;
#ifndef DRUN_LIGHT
  std::unique_ptr<RendezvousServer> server;
#endif
  const bool distributed = !cl->standalone && (spec.max_nodes() > 1 || !spec.rdzv_endpoint().empty() ||
                                               spec.rdzv_backend() == "static");
  if (!distributed) {
    config.fixed_master_addr = spec.master_addr().empty() ? "127.0.0.1" : spec.master_addr();
    config.fixed_master_port = spec.master_port();
    config.keepalive_timeout = Duration::zero();  // one process: nothing to lose
    if (spec.agent_store()) config.fixed_master_addr.clear();
    rdzv = std::make_unique<LocalRendezvous>(std::move(config));
  } else {
#ifndef DRUN_LIGHT
    const bool is_static = spec.rdzv_backend() == "static";
    std::string endpoint_text = spec.rdzv_endpoint();
    if (endpoint_text.empty()) {
      endpoint_text = absl::StrCat(spec.master_addr().empty() ? "127.0.0.1" : spec.master_addr(), ":",
                                   spec.master_port() > 0 ? spec.master_port() : 29500);
    }
    auto ep = ParseEndpoint(endpoint_text, 29400);
    if (!ep.ok()) return Fail(2, absl::StrCat("--rdzv-endpoint: ", ep.status().message()));
    auto ip = ResolveHost(ep->host);
    if (!ip.ok()) return Fail(1, absl::StrCat("rendezvous endpoint: ", ip.status().message()));
    options.advertise_addr = spec.local_addr();
    if (options.advertise_addr.empty()) options.advertise_addr = RouteSourceAddress(*ip, ep->port);
    // Who hosts: is_host says so, else node rank 0 of a static job, else the
    // node whose address the endpoint names (--local-addr when several nodes
    // share a machine).
    bool is_host;
    bool explicit_host = false;
    if (auto it = spec.rdzv_conf().find("is_host"); it != spec.rdzv_conf().end()) {
      is_host = it->second == "1" || it->second == "true" || it->second == "True" || it->second == "yes";
      explicit_host = true;
    } else if (is_static) {
      is_host = spec.node_rank() <= 0;
      explicit_host = true;
    } else if (!spec.local_addr().empty()) {
      auto local = ResolveHost(spec.local_addr());
      is_host = local.ok() && *local == *ip;
    } else {
      is_host = IsLocalAddress(*ip);
    }
    if (is_host) {
      auto started = RendezvousServer::Start(absl::StrCat(ip->find(':') == std::string::npos ? "0.0.0.0" : "[::]",
                                                          ":", ep->port),
                                             config);
      if (started.ok()) {
        server = std::move(*started);
      } else if (explicit_host) {
        return Fail(1, std::string(started.status().message()));
      }
      // Else another node on this machine hosts it: join as a client.
    }
    GrpcClientOptions copt;
    copt.target = ep->ToString();
    auto rt = spec.rdzv_conf().find("read_timeout");
    copt.connect_timeout = Seconds(rt == spec.rdzv_conf().end() ? 60 : std::stod(rt->second));
    SetLiveness(spec, /*in_process_server=*/server != nullptr, &copt);
    auto client = ConnectRendezvous(copt);
    if (!client.ok()) return FailConnect(client.status());
    rdzv = std::move(*client);
    options.host_in_prefix = spec.max_nodes() > 1;
#endif
  }

  options.base_env = std::move(env);
  options.summary = cl->summary;
  options.report_path = cl->report_path;
  options.quiet = spec.quiet();
  auto agent = std::make_unique<Agent>(std::move(options), std::move(rdzv), &guardian);
  const int code = agent->Run();
#ifndef DRUN_LIGHT
  if (server) {
    // Our own stream ends first, then the other agents have their Finish by
    // now, or lose the server here.
    agent.reset();
    server->Shutdown(std::chrono::seconds(2));
  }
#endif
  guardian.Release();
  QuickExit(code);
}

}  // namespace
}  // namespace drun

int main(int argc, char** argv) { return drun::Main(argc, argv); }
