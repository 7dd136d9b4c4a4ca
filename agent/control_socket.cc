#include "agent/control_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/process.h"
#include "rendezvous/base/frame.h"
#include "rendezvous/base/say.h"

namespace drun {
namespace {

constexpr size_t kMaxFrame = 64u << 20;
constexpr const char kSuffix[] = ".sock";

void SetTimeouts(int fd, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// A socket's address. A path longer than sun_path (108 bytes: a deep
// XDG_RUNTIME_DIR) is reached through its directory, opened here and named
// /proc/self/fd/N/<file>; `dir` must stay open until bind() or connect().
struct UnixAddr {
  sockaddr_un addr{};
  UniqueFd dir;
};

absl::StatusOr<UnixAddr> UnixAddress(const std::string& path) {
  UnixAddr a;
  a.addr.sun_family = AF_UNIX;
  std::string name = path;
  if (name.size() >= sizeof a.addr.sun_path) {
    const size_t slash = path.rfind('/');
    a.dir.reset(open(slash == std::string::npos ? "." : path.substr(0, slash).c_str(),
                     O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!a.dir) return absl::ErrnoToStatus(errno, absl::StrCat("control socket ", path));
    name = absl::StrCat("/proc/self/fd/", a.dir.get(), "/", path.substr(slash + 1));
  }
  if (name.size() >= sizeof a.addr.sun_path) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  memcpy(a.addr.sun_path, name.c_str(), name.size() + 1);
  return a;
}

// The directory is this user's alone: a real directory, owned by us, that no
// one else may write (or, for one we did not create, even read).
absl::Status CheckPrivate(const std::string& dir) {
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("control directory ", dir));
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "control directory ", dir, " is not a private directory of this user (mode 0700, owner uid ",
        geteuid(), "); remove it and run again"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ControlDir(const std::map<std::string, std::string>& env, bool create) {
  std::string dir = absl::StrCat("/tmp/drun-", geteuid());
  if (auto it = env.find("XDG_RUNTIME_DIR"); it != env.end() && !it->second.empty()) {
    struct stat st;
    if (stat(it->second.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid()) {
      dir = absl::StrCat(it->second, "/drun");
    }
  }
  if (create && mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create control directory ", dir));
  }
  if (absl::Status st = CheckPrivate(dir); !st.ok()) return st;
  return dir;
}

absl::StatusOr<ControlListener> ControlListener::Open(const std::string& dir) {
  // What drun runs killed with their guardians left here (agent/process.h).
  RemoveStaleEntries(dir);
  const std::string path = absl::StrCat(dir, "/", getpid(), kSuffix);
  absl::StatusOr<UnixAddr> addr = UnixAddress(path);
  if (!addr.ok()) return addr.status();
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return absl::ErrnoToStatus(errno, "control socket");
  unlink(path.c_str());  // a dead agent of the same pid left it
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr->addr), sizeof addr->addr) != 0 ||
      listen(fd.get(), 16) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("control socket ", path));
  }
  return ControlListener(std::move(fd), path);
}

ControlListener::~ControlListener() {
  if (fd_.valid()) unlink(path_.c_str());
}

UniqueFd ControlListener::Accept(v1::ControlRequest* request) {
  UniqueFd conn(accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!conn) return conn;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != geteuid()) {
    return UniqueFd();
  }
  SetTimeouts(conn.get(), 1000);
  std::optional<std::string> body = ReadFrame(conn.get(), 1 << 16);
  if (!body || !request->ParseFromString(*body)) return UniqueFd();
  SetTimeouts(conn.get(), 2000);
  return conn;
}

void SendControlReply(const UniqueFd& fd, const v1::ControlReply& reply) {
  WriteAll(fd.get(), EncodeFrame(reply.SerializeAsString()));
}

v1::ControlReply GatheredReply(v1::ControlReply header, std::vector<v1::ControlReply> nodes) {
  header.set_whole_job(true);
  int ranks = 0;
  int world = 0;
  for (v1::ControlReply& n : nodes) {
    ranks += n.local_ranks();
    world = std::max(world, n.world_size());
    *header.add_nodes() = std::move(n);
  }
  header.set_local_ranks(ranks);
  header.set_world_size(world);
  return header;
}

absl::StatusOr<v1::ControlReply> AskAgent(const std::string& socket_path,
                                          v1::ControlRequest::Kind kind, int timeout_ms) {
  absl::StatusOr<UnixAddr> addr = UnixAddress(socket_path);
  if (!addr.ok()) return addr.status();
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return absl::ErrnoToStatus(errno, "socket");
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr->addr), sizeof addr->addr) != 0) {
    return absl::UnavailableError(absl::StrCat(socket_path, ": ", strerror(errno)));
  }
  SetTimeouts(fd.get(), timeout_ms);
  v1::ControlRequest request;
  request.set_kind(kind);
  if (WriteAll(fd.get(), EncodeFrame(request.SerializeAsString())) != 0) {
    return absl::UnavailableError(absl::StrCat(socket_path, ": ", strerror(errno)));
  }
  std::optional<std::string> body = ReadFrame(fd.get(), kMaxFrame);
  v1::ControlReply reply;
  if (!body || !reply.ParseFromString(*body)) {
    return absl::DeadlineExceededError(
        absl::StrCat("the agent at ", socket_path, " gave no answer within ", timeout_ms, " ms"));
  }
  return reply;
}

std::vector<RunningJob> ListRunningJobs(const std::string& dir) {
  std::vector<RunningJob> jobs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    int pid = 0;
    if (!absl::EndsWith(name, kSuffix) ||
        !absl::SimpleAtoi(name.substr(0, name.size() - strlen(kSuffix)), &pid)) {
      continue;
    }
    const std::string path = entry.path().string();
    absl::StatusOr<v1::ControlReply> info = AskAgent(path, v1::ControlRequest::INFO, 2000);
    if (info.ok()) {
      jobs.push_back({path, *std::move(info)});
    } else if (absl::IsUnavailable(info.status()) && kill(pid, 0) != 0) {
      unlink(path.c_str());  // its agent is gone
    }
  }
  std::sort(jobs.begin(), jobs.end(),
            [](const RunningJob& a, const RunningJob& b) { return a.info.pid() < b.info.pid(); });
  return jobs;
}

}  // namespace drun
