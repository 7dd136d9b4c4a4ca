#include "agent/agent_launch.h"

#include "rendezvous/base/frame.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "rendezvous/link_liveness.h"

namespace drun {

namespace {

constexpr unsigned char kLifelineSignalTag = 'S';
constexpr unsigned char kLifelineInputTag = 'D';
constexpr unsigned char kLifelineInputEndTag = 'E';
constexpr unsigned char kLifelineEchoTag = 'N';

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
  c.restart_identical_failures = spec.restart_policy() == v1::JobSpec::RESTART_ALWAYS;
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
  c.keepalive_timeout = ProcessSilenceTimeout(
      std::chrono::milliseconds(static_cast<int64_t>(1000 * spec.keepalive_timeout_s())));
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
  return std::string{static_cast<char>(kLifelineSignalTag), static_cast<char>(sig & 0x7f)};
}

std::string EncodeLifelineInput(absl::string_view data) {
  std::string out;
  out.reserve(data.size() + 3 * (data.size() / 0xffff + 1));
  while (!data.empty()) {
    const size_t n = std::min<size_t>(data.size(), 0xffff);
    out.push_back(kLifelineInputTag);
    out.push_back(static_cast<char>(n & 0xff));
    out.push_back(static_cast<char>(n >> 8));
    out.append(data.data(), n);
    data.remove_prefix(n);
  }
  return out;
}

std::string EncodeLifelineInputEnd() { return std::string(1, kLifelineInputEndTag); }
std::string EncodeLifelineEcho() { return std::string(1, kLifelineEchoTag); }

void LifelineDecoder::Feed(const char* data, size_t n, LifelineNotices* out) {
  for (size_t i = 0; i < n; ++i) {
    const unsigned char b = static_cast<unsigned char>(data[i]);
    switch (state_) {
      case State::kTag:
        if (b == kLifelineSignalTag) state_ = State::kSignal;
        else if (b == kLifelineInputTag) state_ = State::kLength0;
        else if (b == kLifelineInputEndTag) out->input_end = true;
        else if (b == kLifelineEchoTag) out->echoed = true;
        break;  // anything else: skipped
      case State::kSignal:
        if (b > 0 && b < 64) out->signals.push_back(b);
        state_ = State::kTag;
        break;
      case State::kLength0:
        length_ = b;
        state_ = State::kLength1;
        break;
      case State::kLength1:
        length_ |= static_cast<size_t>(b) << 8;
        state_ = length_ > 0 ? State::kData : State::kTag;
        break;
      case State::kData: {
        // The data notice's bytes, as many of them as this chunk holds.
        const size_t take = std::min(length_, n - i);
        out->input.append(data + i, take);
        length_ -= take;
        i += take - 1;
        if (length_ == 0) state_ = State::kTag;
        break;
      }
    }
  }
}

void LifelineDecoder::Feed(const char* data, size_t n, std::vector<int>* signals) {
  LifelineNotices notices;
  Feed(data, n, &notices);
  signals->insert(signals->end(), notices.signals.begin(), notices.signals.end());
}

StdinRelay::StdinRelay(bool enabled) {
  ended_ = !enabled || fcntl(0, F_GETFD) < 0;  // --stdin none, or no stdin at all
  tty_ = !ended_ && isatty(0);
  // Reading the terminal from a background job fails with EIO (taken for
  // its end) instead of stopping the launcher.
  if (!ended_) signal(SIGTTIN, SIG_IGN);
}

std::string StdinRelay::Read() {
  echoed_ = false;
  if (ended_) return "";
  char buf[65536];
  const ssize_t n = read(0, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return "";
  if (n <= 0) {
    ended_ = true;
    return EncodeLifelineInputEnd();
  }
  std::string out = EncodeLifelineInput(absl::string_view(buf, static_cast<size_t>(n)));
  // The terminal echoed the typed line: its cursor is on a fresh line now.
  echoed_ = tty_ && buf[n - 1] == '\n';
  if (echoed_) out += EncodeLifelineEcho();
  return out;
}

std::string StdinRelay::ForNewAgent() const { return ended_ ? EncodeLifelineInputEnd() : ""; }

}  // namespace drun
