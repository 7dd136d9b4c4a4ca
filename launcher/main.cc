// drun: parses the job, then runs this node's agent (and, for single-node
// jobs, the rendezvous in-process).
#include <unistd.h>

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
#include "agent/grpc_rendezvous_client.h"
#include "launcher/cli.h"
#include "launcher/endpoint.h"
#include "rendezvous/rendezvous_server.h"

extern char** environ;

namespace drun {
namespace {

int Fail(int code, const std::string& message) {
  WriteAll(2, absl::StrCat("drun: ", message, "\n"));
  return code;
}

Duration Seconds(double s) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
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

  // The guardian is forked before any thread exists; the handled signals are
  // blocked before any thread exists, so only the agent's signalfd sees them.
  Guardian guardian = Guardian::Start();
  Agent::BlockHandledSignals();

  RendezvousState::Config config;
  config.min_nodes = spec.min_nodes();
  config.max_nodes = spec.max_nodes();
  config.max_restarts = spec.max_restarts();
  config.run_id = spec.run_id();
  config.token = token;
  config.use_agent_store = spec.agent_store();
  config.join_timeout = Seconds(spec.join_timeout_s());
  config.last_call_timeout = Seconds(spec.last_call_timeout_s());
  config.spec = spec;

  AgentOptions options;
  options.spec = spec;
  options.hostname = Hostname();
  options.nproc = *nproc;
  options.token = token;

  std::unique_ptr<RendezvousClient> rdzv;
  std::unique_ptr<RendezvousServer> server;
  const bool distributed = !cl->standalone && (spec.max_nodes() > 1 || !spec.rdzv_endpoint().empty() ||
                                               spec.rdzv_backend() == "static");
  if (!distributed) {
    config.fixed_master_addr = spec.master_addr().empty() ? "127.0.0.1" : spec.master_addr();
    config.fixed_master_port = spec.master_port();
    if (spec.agent_store()) config.fixed_master_addr.clear();
    rdzv = std::make_unique<LocalRendezvous>(std::move(config));
  } else {
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
    copt.heartbeat = Seconds(spec.keepalive_interval_s());
    copt.silence = Seconds(spec.keepalive_timeout_s());
    auto client = ConnectRendezvous(copt);
    if (!client.ok()) return Fail(1, std::string(client.status().message()));
    rdzv = std::move(*client);
    options.host_in_prefix = spec.max_nodes() > 1;
  }

  options.base_env = std::move(env);
  int code;
  {
    Agent agent(std::move(options), std::move(rdzv), &guardian);
    code = agent.Run();
  }
  // The other agents have their Finish by now, or lose the server here.
  if (server) server->Shutdown(std::chrono::seconds(2));
  guardian.Release();
  return code;
}

}  // namespace
}  // namespace drun

int main(int argc, char** argv) { return drun::Main(argc, argv); }
