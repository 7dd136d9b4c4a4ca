#include "agent/agent_launch.h"

#include "rendezvous/base/frame.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "rendezvous/link_liveness.h"

namespace drun {

namespace {

constexpr char kLifelineSignalTag = 'S';

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The script a Python job runs, or the program a job names by path; "" when
// the job names a program to be found on PATH or a module.
std::string ScriptPath(const v1::JobSpec& spec) {
  const bool by_path = spec.kind() == v1::JobSpec::PYTHON_SCRIPT ||
                       (spec.kind() == v1::JobSpec::PROGRAM &&
                        spec.entrypoint().find('/') != std::string::npos);
  if (!by_path || spec.entrypoint().empty()) return "";
  const std::string& wd = spec.working_dir();
  if (spec.entrypoint()[0] == '/' || wd.empty()) return spec.entrypoint();
  return absl::StrCat(wd, "/", spec.entrypoint());
}

}  // namespace

absl::Status CheckLaunchHere(const v1::AgentLaunch& launch, const std::string& version) {
  if (!launch.launcher_version().empty() && launch.launcher_version() != version) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this host runs ", version, " and the launcher ", launch.launcher_version(),
        "; install the same version here, or pass --remote-drun PATH"));
  }
  const v1::JobSpec& spec = launch.spec();
  const std::string& wd = spec.working_dir();
  if (!wd.empty() && !IsDirectory(wd)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the working directory ", wd, " does not exist there; drun runs the job in the same "
        "directory on every host (use a shared file system)"));
  }
  const std::string script = ScriptPath(spec);
  if (!script.empty() && !IsFile(script)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the script ", script, " is not there; copy it to every host (or use a shared file system)"));
  }
  return absl::OkStatus();
}

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
