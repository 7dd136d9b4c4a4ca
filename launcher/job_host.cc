#include "launcher/job_host.h"

#include <errno.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "agent/output.h"

namespace drun {

namespace {

Duration Seconds(double s) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}

bool ReadExactly(int fd, char* buf, size_t n) {
  while (n > 0) {
    ssize_t r = read(fd, buf, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    buf += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

RendezvousState::Config RendezvousConfigFor(const v1::JobSpec& spec, const std::string& token) {
  RendezvousState::Config c;
  c.min_nodes = spec.min_nodes();
  c.max_nodes = spec.max_nodes();
  c.max_restarts = spec.max_restarts();
  c.run_id = spec.run_id();
  c.token = token;
  c.use_agent_store = spec.agent_store();
  c.join_timeout = Seconds(spec.join_timeout_s());
  c.last_call_timeout = Seconds(spec.last_call_timeout_s());
  c.keepalive_timeout = Seconds(spec.keepalive_timeout_s());
  c.spec = spec;
  return c;
}

absl::StatusOr<std::unique_ptr<JobHost>> JobHost::Start(const v1::JobSpec& spec,
                                                        const std::string& token,
                                                        const std::string& listen_host, int port) {
  auto host = std::unique_ptr<JobHost>(new JobHost);
  host->spec_ = spec;
  host->token_ = token;
  const std::string addr = listen_host.find(':') == std::string::npos
                               ? absl::StrCat(listen_host, ":", port)
                               : absl::StrCat("[", listen_host, "]:", port);
  auto server = RendezvousServer::Start(addr, RendezvousConfigFor(spec, token));
  if (!server.ok()) return server.status();
  host->server_ = std::move(*server);
  return host;
}

std::string JobHost::LaunchMessage(const std::string& dial_host, const std::string& hostname,
                                   const std::string& local_addr) const {
  v1::AgentLaunch launch;
  *launch.mutable_spec() = spec_;
  launch.set_token(token_);
  launch.set_rdzv_target(dial_host.find(':') == std::string::npos
                             ? absl::StrCat(dial_host, ":", port())
                             : absl::StrCat("[", dial_host, "]:", port()));
  launch.set_hostname(hostname);
  launch.set_local_addr(local_addr);
  return EncodeAgentLaunch(launch);
}

int JobHost::Report(const v1::Finish& finish) {
  if (finish.exit_code() != 0) {
    WriteAll(2, absl::StrCat("drun: job failed: ", finish.message(), "\n"));
    if (finish.has_failure()) WriteAll(2, FormatRootCause(finish.failure()));
  }
  return finish.exit_code();
}

std::string EncodeAgentLaunch(const v1::AgentLaunch& launch) {
  std::string body = launch.SerializeAsString();
  uint32_t n = static_cast<uint32_t>(body.size());
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + body;
}

absl::StatusOr<v1::AgentLaunch> ReadAgentLaunch(int fd) {
  const auto bad = absl::InvalidArgumentError(
      "drun agent expects a launch message on its standard input; it is started by drun's "
      "ssh and slurm launchers, not by hand");
  unsigned char len[4];
  if (!ReadExactly(fd, reinterpret_cast<char*>(len), 4)) return bad;
  uint32_t n = len[0] | (len[1] << 8) | (len[2] << 16) | (static_cast<uint32_t>(len[3]) << 24);
  if (n > (64u << 20)) return bad;
  std::string body(n, '\0');
  if (!ReadExactly(fd, body.data(), n)) return bad;
  v1::AgentLaunch launch;
  if (!launch.ParseFromString(body)) return bad;
  return launch;
}

}  // namespace drun
