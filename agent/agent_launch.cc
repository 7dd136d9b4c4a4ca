#include "agent/agent_launch.h"

#include "rendezvous/base/frame.h"

#include <errno.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "rendezvous/link_liveness.h"

namespace drun {

namespace {

constexpr char kLifelineSignalTag = 'S';

}  // namespace

RendezvousState::Config RendezvousConfigFor(const v1::JobSpec& spec, const std::string& token) {
  RendezvousState::Config c;
  c.min_nodes = spec.min_nodes();
  c.max_nodes = spec.max_nodes();
  c.max_restarts = spec.max_restarts();
  c.run_id = spec.run_id();
  c.token = token;
  c.use_agent_store = spec.agent_store();
  // A port the user gave is the workers' MASTER_PORT in every mode; with
  // --no-agent-store, rank 0 binds it at the address the user gave.
  c.fixed_master_port = spec.master_port();
  if (!spec.agent_store()) c.fixed_master_addr = spec.master_addr();
  c.join_timeout = SecondsToDuration(spec.join_timeout_s());
  c.last_call_timeout = SecondsToDuration(spec.last_call_timeout_s());
  // Links are watched by the kernel (link_liveness.h); the server's own
  // heartbeat rule only catches a stuck agent process.
  c.keepalive_timeout = ProcessSilenceTimeout(std::chrono::milliseconds(
      static_cast<int64_t>(1000 * (spec.keepalive_timeout_s() > 0 ? spec.keepalive_timeout_s() : 2))));
  c.spec = spec;
  return c;
}

std::string EncodeAgentLaunch(const v1::AgentLaunch& launch) {
  return EncodeFrame(launch.SerializeAsString());
}

absl::StatusOr<v1::AgentLaunch> ReadAgentLaunch(int fd) {
  const auto bad = absl::InvalidArgumentError(
      "drun agent expects a launch message on its standard input; it is started by drun's "
      "ssh and slurm launchers, not by hand");
  std::optional<std::string> body = ReadFrame(fd, 64u << 20);
  v1::AgentLaunch launch;
  if (!body || !launch.ParseFromString(*body)) return bad;
  return launch;
}

std::string EncodeLifelineSignal(int sig) {
  return std::string{kLifelineSignalTag, static_cast<char>(sig & 0x7f)};
}

void LifelineDecoder::Feed(const char* data, size_t n, std::vector<int>* signals) {
  for (size_t i = 0; i < n; ++i) {
    if (tag_seen_) {
      tag_seen_ = false;
      const int sig = static_cast<unsigned char>(data[i]);
      if (sig > 0 && sig < 64) signals->push_back(sig);
    } else {
      tag_seen_ = data[i] == kLifelineSignalTag;
    }
  }
}

}  // namespace drun
