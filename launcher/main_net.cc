// drun-net: everything that needs the network. The light drun (main_light.cc)
// execs it for every mode but a single node: a node of a multi-node job
// (static or c10d, typed on every node), `drun agent` (started over ssh or by
// srun), the ssh and Slurm launchers, a task of an srun step, and --version.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "agent/agent_launch.h"
#include "agent/entrypoint.h"
#include "agent/grpc_rendezvous_client.h"
#include "agent/log_layout.h"
#include "agent/nproc.h"
#include "agent/output.h"
#include "agent/process.h"
#include "agent/worker_env.h"
#include "rendezvous/base/endpoint.h"
#include "rendezvous/base/event_loop.h"
#include "rendezvous/base/exit_code.h"
#include "rendezvous/base/signal_name.h"
#include "rendezvous/base/unique_fd.h"
#include "launcher/job/cli.h"
#include "launcher/job/config_file.h"
#include "launcher/node.h"
#include "launcher/slurm/slurm_env.h"
#include "launcher/slurm/slurm_launcher.h"
#include "launcher/ssh/ssh_launcher.h"
#include "rendezvous/link_liveness.h"
#include "rendezvous/rendezvous_server.h"

extern char** environ;

namespace drun {
namespace {

// A signal while connecting ends drun like a signal anywhere else: 128+N.
int FailConnect(const absl::Status& s, int stop_signal) {
  Fail(0, std::string(s.message()));
  return stop_signal > 0 ? ExitCodeForSignal(stop_signal) : kExitLauncherFailed;
}

Duration Seconds(double s) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}

// Every timeout of the agent's rendezvous client, from the job spec alone:
// the connect deadline is read_timeout, for a launched agent as for one
// started by hand. The link to the server is watched by the kernel within
// the keep-alive timeout (rendezvous/link_liveness.h). Heartbeats only prove
// that the server process is not stuck; their pace follows the job's size
// (PaceFor; the server's Pace replaces it after the Hello). The host's agent
// talks to a server in its own process: it cannot lose it to a cut link,
// and a slow answer from a busy server is no reason to end the job for
// every node.
void SetTimeouts(const v1::JobSpec& spec, bool in_process_server, GrpcClientOptions* copt) {
  const auto link = LinkTimeout(spec);
  const Pace pace = PaceFor(link, spec.max_nodes());
  copt->connect_timeout = Seconds(spec.read_timeout_s());
  copt->link_timeout = link;
  copt->heartbeat = pace.heartbeat;
  copt->silence = in_process_server ? Duration::zero() : Duration(pace.silence);
}

// `drun agent`: a node started by a launcher (ssh, srun). The job arrives on
// standard input, which then stays open as the lifeline to the launcher.
int AgentMain() {
  auto launch = ReadAgentLaunch(0);
  if (!launch.ok()) return Fail(kExitBadInput, std::string(launch.status().message()));
  if (absl::Status st = CheckLaunchHere(*launch, VersionWords()); !st.ok()) {
    return Fail(kExitLauncherFailed, std::string(st.message()));
  }
  const v1::JobSpec& spec = launch->spec();
  if (!spec.working_dir().empty() && chdir(spec.working_dir().c_str()) != 0) {
    return Fail(kExitLauncherFailed, absl::StrCat("cannot enter the job's working directory ", spec.working_dir(),
                                " on this host: ", strerror(errno)));
  }
  EnvMap env = EnvironToMap(environ);
  if (absl::Status st = CheckEntrypoint(spec, env); !st.ok()) return Fail(kExitBadInput, std::string(st.message()));
  auto nproc = ResolveNproc(spec.nproc_per_node(), ProbeNode());
  if (!nproc.ok()) return Fail(kExitBadInput, std::string(nproc.status().message()));
  Guardian guardian = Guardian::Start();
  Agent::BlockHandledSignals();

  // --rdzv-tls: the launcher's paths, read on this host.
  auto tls = LoadClientTls(spec);
  if (!tls.ok()) return Fail(kExitBadInput, std::string(tls.status().message()));
  GrpcClientOptions copt;
  copt.target = launch->rdzv_target();
  copt.token = launch->token();
  copt.tls = *tls;
  SetTimeouts(spec, /*in_process_server=*/false, &copt);
  int stop_signal = 0;
  auto client = ConnectRendezvous(copt, &stop_signal);
  if (!client.ok()) return FailConnect(client.status(), stop_signal);

  AgentSetup setup;
  setup.role = AgentRole::kLaunched;
  setup.spec = spec;
  setup.nproc = *nproc;
  setup.hostname = launch->hostname();
  setup.launcher_reports_end = launch->launcher_reports_end();
  setup.console_relay = launch->console_relay();
  setup.launcher_announces_start = launch->launcher_announces_start();
  setup.advertise_addr = launch->local_addr();
  if (setup.advertise_addr.empty()) {
    auto ep = ParseEndpoint(copt.target, 0);
    auto ip = ep.ok() ? ResolveHost(ep->host) : absl::StatusOr<std::string>(ep.status());
    if (ip.ok()) setup.advertise_addr = RouteSourceAddress(*ip, ep->port);
  }
  auto iface = ChooseSocketIface(spec, setup.advertise_addr, /*many_nodes=*/true);
  if (!iface.ok()) return Fail(kExitBadInput, std::string(iface.status().message()));
  setup.socket_iface = *iface;
  setup.env = std::move(env);
  AgentOptions options = MakeAgentOptions(std::move(setup));
  // Not destroyed: see QuickExit.
  Agent* agent = new Agent(std::move(options), std::move(client.value()), &guardian);
  int code = agent->Run();
  guardian.Release();
  QuickExit(code);
}

// Whether this node hosts the rendezvous server, and whether that was said
// explicitly (then a port that is taken is an error, not a reason to join as
// a client). is_host says so; else node rank 0 of a static job; else the node
// whose address (--local-addr when several nodes share a machine) or hostname
// the endpoint names.
struct HostDecision {
  bool is_host = false;
  bool explicit_host = false;
};

// Whether `host` is this machine's name (or a longer name beginning with it
// and a dot, as an FQDN).
bool NamesThisMachine(const std::string& host) {
  const std::string self = Hostname();
  return host == self ||
         (host.size() > self.size() && host.compare(0, self.size(), self) == 0 && host[self.size()] == '.');
}

HostDecision DecideHost(const v1::JobSpec& spec, const Endpoint& ep, const std::string& ip) {
  switch (spec.host_role()) {
    case v1::JobSpec::HOST_ROLE_HOST:
      return {true, true};
    case v1::JobSpec::HOST_ROLE_CLIENT:
      return {false, true};
    default:
      break;
  }
  if (spec.rdzv_backend() == v1::JobSpec::STATIC) return {spec.node_rank() <= 0, true};
  if (!spec.local_addr().empty()) {
    auto local = ResolveHost(spec.local_addr());
    return {local.ok() && *local == ip, false};
  }
  // Kubernetes: the master pod's service name resolves to a service address,
  // not to the pod's own; its hostname is the pod's name.
  return {NamesThisMachine(ep.host) || IsLocalAddress(ip), false};
}

// Debian and Ubuntu write the machine's own name on 127.0.1.1 in /etc/hosts,
// so a node hosting the rendezvous at its own name reaches it through lo: the
// nodes of the other machines, and its workers' gloo and NCCL sockets, need
// the address that faces them instead. An endpoint written as an address, or
// as localhost, is taken as meant (RendezvousBindAddress).
bool OwnNameOnLoopback(const v1::JobSpec& spec, const Endpoint& ep, const std::string& advertise_addr) {
  return SpansNodes(spec) && spec.local_addr().empty() && IsLoopbackAddress(advertise_addr) &&
         !NumericSockAddr(ep).ok() && NamesThisMachine(ep.host);
}

// A multi-node job at an endpoint such as localhost:PORT: every machine that
// is given it hosts a rendezvous of its own and waits there for the others.
// Only nodes on this machine can join, which is legitimate (several nodes on
// one machine), so this is a notice, not an error. A loopback address written
// as such (127.0.0.1:PORT) is taken as meant, without a notice.
void NoteLoopbackEndpoint(const CommandLine& cl, const v1::JobSpec& spec, const Endpoint& ep, const std::string& ip) {
  if (!SpansNodes(spec) || !IsLoopbackAddress(ip) || NumericSockAddr(ep).ok() || NamesThisMachine(ep.host)) return;
  Say(absl::StrCat(cl.Describe(Opt::kRdzvEndpoint), " is this machine's loopback (", ip,
                   "): only nodes started on this machine can join; for nodes on other machines name "
                   "this one as they reach it (--rdzv-endpoint ", Hostname(), ":", ep.port, ")"));
}

// For OwnNameOnLoopback: the first node to arrive tells which address this
// machine has toward the others (the kernel's source address toward it). Waited
// for before this node's own agent joins, so that its Hello, the interface it
// gives its workers and a --no-agent-store MASTER_ADDR all carry it; so with
// c10d a node of another machine is group rank 0. Bounded by the join timeout
// (the last call timeout with --nnodes 1:N, where this node may run alone); a
// first node from this same machine means the job stays here: "" (loopback
// stays). A stop signal meanwhile ends drun with 128+N.
std::string AwaitAddressTowardOtherNodes(RendezvousServer& server, const v1::JobSpec& spec, int port) {
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&stop, sig);  // blocked: BlockHandledSignals
  UniqueFd sigfd(signalfd(-1, &stop, SFD_NONBLOCK | SFD_CLOEXEC));
  const double bound = spec.min_nodes() > 1 ? spec.join_timeout_s() : spec.last_call_timeout_s();
  const TimePoint deadline = Clock::now() + Seconds(bound > 0 ? bound : 30);
  while (Clock::now() < deadline) {
    pollfd fds[2] = {{server.event_fd(), POLLIN, 0}, {sigfd.get(), POLLIN, 0}};
    if (PollUntil(fds, sigfd.valid() ? 2 : 1, deadline) < 0) return "";
    int sig = 0;
    if (sigfd.valid()) DrainSignalFd(sigfd.get(), [&](int s, const signalfd_siginfo&) { sig = s; });
    if (sig != 0) {
      QuickExit(Fail(ExitCodeForSignal(sig), absl::StrCat("stopped by ", SignalName(sig),
                                                          " while waiting for the other nodes")));
    }
    while (std::optional<RendezvousServer::Event> ev = server.NextEvent()) {
      if (ev->kind != RendezvousServer::Event::kNodeArrived) continue;
      return IsLoopbackAddress(ev->addr) ? "" : RouteSourceAddress(ev->addr, port);
    }
  }
  return "";
}

// Where the hosting node's rendezvous and the job's store listen: an endpoint
// written as an address of this machine (a loopback one keeps every node on
// it) is the one address every node dials, so they listen there alone; a name
// may resolve to another of this machine's addresses elsewhere (DNS, a stock
// 127.0.1.1 line), so then every interface. "" when that is every interface.
std::string JobListenAddress(const Endpoint& ep, const std::string& ip) {
  const bool literal = NumericSockAddr(ep).ok();
  return literal && (IsLoopbackAddress(ip) || IsLocalAddress(ip)) ? ip : "";
}

// Every interface: a name of both families, since it is dialled as whichever
// family the dialler's resolver gives first (Debian's localhost is ::1 before
// 127.0.0.1).
std::string RendezvousBindAddress(const Endpoint& ep, const std::string& ip) {
  const std::string only = JobListenAddress(ep, ip);
  if (!only.empty()) return Endpoint{only, ep.port}.ToString();
  if (!NumericSockAddr(ep).ok()) return Endpoint{AnyAddress(), ep.port}.ToString();
  return Endpoint{ip.find(':') == std::string::npos ? "0.0.0.0" : "::", ep.port}.ToString();
}

// The address other nodes reach this one at: --local-addr, else the source
// address of its route to the rendezvous. The first node of an srun step
// names itself on 127.0.1.1 where /etc/hosts is Debian's stock one, and so
// reaches its own rendezvous through lo; the other nodes, and its workers'
// gloo and NCCL sockets, need its address toward them.
std::string AdvertiseAddress(const v1::JobSpec& spec, const EnvMap& env, const Endpoint& ep,
                             const std::string& ip, SlurmMode slurm) {
  if (!spec.local_addr().empty()) return spec.local_addr();
  const std::string route = RouteSourceAddress(ip, ep.port);
  if (slurm == SlurmMode::kOff || !IsLoopbackAddress(route)) return route;
  std::string toward = StepAddressTowardOtherNodes(env, ep.port);
  return toward.empty() ? route : toward;
}

// The rendezvous server, when this node hosts it (DecideHost); null when it
// does not, or when another node on this machine already does (then this one
// joins as a client). A host named explicitly that cannot listen ends drun.
std::unique_ptr<RendezvousServer> HostRendezvous(const v1::JobSpec& spec, const std::string& token,
                                                 const Endpoint& ep, const std::string& ip,
                                                 SlurmMode slurm) {
  const HostDecision host = DecideHost(spec, ep, ip);
  if (!host.is_host) return nullptr;
  RendezvousState::Config config = RendezvousConfigFor(spec, token);
  config.closed_membership = slurm != SlurmMode::kOff;
  config.store_bind_addr = JobListenAddress(ep, ip);
  auto started = RendezvousServer::Start(RendezvousBindAddress(ep, ip), config);
  if (started.ok()) return std::move(*started);
  if (host.explicit_host) QuickExit(Fail(kExitLauncherFailed, std::string(started.status().message())));
  return nullptr;
}

// srun drun's hosting node: the reports the other nodes send through the
// rendezvous as they end (Agent::SendNodeReport), each of which waits up to
// 2 s for its receipt; so 3 s at most here, less once every one arrived.
std::function<std::vector<v1::NodeReport>(int)> GatherFrom(RendezvousServer* server) {
  return [server](int others) {
    std::vector<v1::NodeReport> out;
    const TimePoint deadline = Clock::now() + std::chrono::seconds(3);
    while (static_cast<int>(out.size()) < others) {
      while (std::optional<RendezvousServer::Event> ev = server->NextEvent()) {
        if (ev->kind == RendezvousServer::Event::kReport) out.push_back(std::move(ev->report));
      }
      if (static_cast<int>(out.size()) >= others || Clock::now() >= deadline) break;
      pollfd p{server->event_fd(), POLLIN, 0};
      if (PollUntil(&p, 1, deadline) < 0) break;
    }
    return out;
  };
}

// A node of a multi-node job typed on every node (JobMode::kStatic, kC10d, or
// a task of an srun step): hosts the rendezvous server when it is the host,
// and runs its agent against it.
// `slurm`: a task of an srun step (slurm_env.h): its members are fixed, and in
// task mode each is one worker.
[[noreturn]] void RunNetworkNode(const CommandLine& cl, v1::JobSpec spec, EnvMap env,
                                 const std::string& token, std::shared_ptr<const TlsContext> tls,
                                 SlurmMode slurm) {
  auto nproc = ResolveNproc(spec.nproc_per_node(), ProbeNode());
  if (!nproc.ok()) QuickExit(Fail(kExitBadInput, std::string(nproc.status().message())));
  Guardian guardian = Guardian::Start();
  Agent::BlockHandledSignals();

  auto ep = ParseEndpoint(spec.rdzv_endpoint(), /*default_port=*/0);  // resolved: it names its port (cli.h)
  if (!ep.ok()) QuickExit(Fail(kExitBadInput, absl::StrCat(cl.Describe(Opt::kRdzvEndpoint), ": ", ep.status().message())));
  auto ip = ResolveHost(ep->host);
  if (!ip.ok()) QuickExit(Fail(kExitLauncherFailed, absl::StrCat("rendezvous endpoint: ", ip.status().message())));

  if (slurm == SlurmMode::kOff) NoteLoopbackEndpoint(cl, spec, *ep, *ip);

  std::string advertise_addr = AdvertiseAddress(spec, env, *ep, *ip, slurm);
  auto iface = ChooseSocketIface(spec, advertise_addr, SpansNodes(spec));
  if (!iface.ok()) QuickExit(Fail(kExitBadInput, std::string(iface.status().message())));
  // The host names the run's log directory for every node (its server sends
  // it in Assignment.spec); a node that does not host takes the host's choice.
  v1::JobSpec hosted = spec;
  LogLayout::NameRun(&hosted);
  std::unique_ptr<RendezvousServer> server = HostRendezvous(hosted, token, *ep, *ip, slurm);
  if (server) spec = std::move(hosted);
  if (server && slurm == SlurmMode::kOff && OwnNameOnLoopback(spec, *ep, advertise_addr)) {
    std::string toward = AwaitAddressTowardOtherNodes(*server, spec, ep->port);
    if (!toward.empty()) {
      advertise_addr = toward;
      iface = ChooseSocketIface(spec, advertise_addr, /*many_nodes=*/true);
    }
  }
  GrpcClientOptions copt;
  copt.target = ep->ToString();
  copt.token = token;
  copt.tls = std::move(tls);
  SetTimeouts(spec, /*in_process_server=*/server != nullptr, &copt);
  int stop_signal = 0;
  auto client = ConnectRendezvous(copt, &stop_signal);
  if (!client.ok()) QuickExit(FailConnect(client.status(), stop_signal));

  AgentSetup setup;
  setup.role = AgentRole::kNetworkNode;
  setup.spec = spec;
  setup.nproc = *nproc;
  setup.env = std::move(env);
  setup.advertise_addr = advertise_addr;
  setup.socket_iface = *iface;
  setup.summary = cl.summary;
  setup.report_path = cl.report_path;
  setup.members_are_tasks = slurm == SlurmMode::kPerTask;
  setup.summary_elsewhere = slurm != SlurmMode::kOff && !server;  // one summary per srun step
  AgentOptions options = MakeAgentOptions(std::move(setup));
  if (server) options.refused_connections = [s = server.get()] { return s->refused_connections(); };
  if (server && slurm != SlurmMode::kOff) options.gather_node_reports = GatherFrom(server.get());
  auto agent = std::make_unique<Agent>(std::move(options), std::move(client.value()), &guardian);
  const int code = agent->Run();
  if (server) {
    // Our own stream ends first, then the other agents get their Finish
    // (every stream ends), or lose the server here.
    agent.reset();
    server->Shutdown(FinishGrace(spec.max_nodes()));
  }
  guardian.Release();
  QuickExit(code);
}

int Main(int argc, char** argv) {
  // Started by the light drun: remember its path (remote hosts run the same
  // one) and keep the variable out of the workers' environment.
  if (const char* as = getenv("DRUN_LAUNCHED_AS")) {
    SetDrunPath(as);
    unsetenv("DRUN_LAUNCHED_AS");
  }
  if (argc >= 2 && std::string(argv[1]) == "agent") return AgentMain();
  EnvMap env = EnvironToMap(environ);
  auto cl = ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc), env, isatty(0) == 1);
  if (!cl.ok()) return Fail(kExitBadInput, std::string(cl.status().message()));
  HideSecrets(*cl, argc, argv);
  if (cl->usage) return WriteAll(2, UsageText()), kExitBadInput;
  if (cl->help) return WriteAll(1, HelpText(cl->help_topic)), 0;
  if (!cl->print_completion.empty()) return WriteAll(1, CompletionScript(cl->print_completion)), 0;
  if (cl->print_config) return WriteAll(1, RenderJobFile(cl->resolved)), 0;
  if (cl->version) return WriteAll(1, VersionText()), 0;
  SlurmMode slurm_mode = SlurmMode::kOff;
  if (auto st = ApplySlurmEnvironment(&*cl, &env, &slurm_mode); !st.ok()) {
    return Fail(kExitBadInput, std::string(st.message()));
  }
  v1::JobSpec spec = cl->spec;
  const bool remote_workers = cl->mode == JobMode::kSsh || cl->mode == JobMode::kSlurmLauncher;
  if (int code = PrepareJob(*cl, env, !remote_workers, &spec); code != 0) return code;
  auto token = ReadJobToken(*cl, env);
  if (!token.ok()) return Fail(kExitBadInput, std::string(token.status().message()));
  // --rdzv-tls: the files load and the key is the certificate's before anything starts.
  auto tls = LoadClientTls(spec);
  if (!tls.ok()) return Fail(kExitBadInput, std::string(tls.status().message()));
  switch (cl->mode) {
    case JobMode::kSlurmLauncher:
      return RunSlurmLauncher(*cl, spec, *token, env);
    case JobMode::kSsh:
      return RunSshLauncher(*cl, spec, *token, env);
    case JobMode::kSingleNode:
      RunSingleNode(*cl, std::move(spec), std::move(env), *token);
    default:
      RunNetworkNode(*cl, std::move(spec), std::move(env), *token, *std::move(tls), slurm_mode);
  }
}

}  // namespace
}  // namespace drun

int main(int argc, char** argv) { return drun::Main(argc, argv); }
