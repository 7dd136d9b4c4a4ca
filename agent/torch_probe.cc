#include "agent/torch_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/entrypoint.h"
#include "agent/process.h"
#include "rendezvous/base/unique_fd.h"

namespace drun {
namespace {

// Finds torch as `import torch` would, and prints torch/version.py's __version__.
constexpr char kProbe[] =
    "import importlib.util, os, re\n"
    "s = importlib.util.find_spec('torch')\n"
    "p = os.path.join(list(s.submodule_search_locations)[0], 'version.py')\n"
    "print(re.search(r'''^__version__\\s*=\\s*['\"]([^'\"]+)''', open(p).read(), re.M).group(1))\n";

// Reads the child's stdout until EOF or the deadline; false on the deadline.
bool ReadUntilEof(int fd, std::chrono::steady_clock::time_point deadline, std::string* out) {
  char buf[512];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    struct pollfd p = {fd, POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    const ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return true;
    if (out->size() < 4096) out->append(buf, static_cast<size_t>(r));
  }
}

}  // namespace

TorchVersion ParseTorchVersion(const std::string& text) {
  TorchVersion v;
  std::vector<absl::string_view> parts = absl::StrSplit(absl::StripAsciiWhitespace(text), '.');
  if (parts.size() < 2 || !absl::SimpleAtoi(parts[0], &v.major)) return TorchVersion{};
  size_t digits = 0;
  while (digits < parts[1].size() && absl::ascii_isdigit(parts[1][digits])) ++digits;
  if (digits == 0 || !absl::SimpleAtoi(parts[1].substr(0, digits), &v.minor)) return TorchVersion{};
  v.known = true;
  v.text = std::string(absl::StripAsciiWhitespace(text));
  return v;
}

TorchVersion ProbeTorchVersion(const std::string& python, const EnvMap& env, const std::string& cwd,
                               std::chrono::milliseconds bound) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return {};
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  UniqueFd null_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
  SpawnRequest req;
  req.argv = {python, "-c", kProbe};
  req.env = EnvToList(env);
  req.cwd = cwd;
  req.stdin_fd = null_fd.get();
  req.stdout_fd = write_end.get();
  req.stderr_fd = null_fd.get();
  absl::StatusOr<pid_t> pid = SpawnProcessGroup(req);
  write_end.reset();
  if (!pid.ok()) return {};
  std::string out;
  const bool done = ReadUntilEof(read_end.get(), std::chrono::steady_clock::now() + bound, &out);
  if (!done) kill(-*pid, SIGKILL);
  int status = 0;
  while (waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!done || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return {};
  return ParseTorchVersion(out);
}

TorchVersion ProbeWorkersTorch(const v1::JobSpec& spec, const EnvMap& base_env) {
  if (spec.kind() == v1::JobSpec::PROGRAM) return {};
  const EnvMap env = WithForwardedEnv(base_env, spec);
  return ProbeTorchVersion(WorkerProgram(spec, base_env), env, spec.working_dir(), std::chrono::seconds(20));
}

NcclErrorVar NcclErrorVarFor(const TorchVersion& v) {
  if (!v.known) return NcclErrorVar::kBoth;
  return (v.major > 2 || (v.major == 2 && v.minor >= 2)) ? NcclErrorVar::kTorchPrefixed : NcclErrorVar::kLegacy;
}

}  // namespace drun
