#include "agent/stdin_wait.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "rendezvous/base/unique_fd.h"

namespace drun {

namespace {

// A small /proc file; nullopt with errno set when it cannot be read.
std::optional<std::string> ReadProc(const std::string& path, size_t limit = 512) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string out(limit, '\0');
  size_t got = 0;
  while (got < limit) {
    const ssize_t n = read(fd.get(), &out[got], limit - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

std::string FdTarget(pid_t pid, uint64_t fd) {
  char buf[128];
  const std::string path = absl::StrCat("/proc/", pid, "/fd/", fd);
  const ssize_t n = readlink(path.c_str(), buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// The process group of /proc/PID/stat's text ("pid (comm) S ppid pgrp ...").
std::optional<pid_t> GroupOf(absl::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == absl::string_view::npos) return std::nullopt;
  std::vector<absl::string_view> f = absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
  int pgrp = 0;
  if (f.size() < 3 || !absl::SimpleAtoi(f[2], &pgrp)) return std::nullopt;
  return pgrp;
}

// The processes of process group `pgrp` (its leader first).
std::vector<pid_t> GroupMembers(pid_t pgrp) {
  std::vector<pid_t> out{pgrp};
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (struct dirent* e = readdir(d)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid) || pid <= 0 || pid == pgrp) continue;
    std::optional<std::string> stat = ReadProc(absl::StrCat("/proc/", pid, "/stat"));
    if (stat && GroupOf(*stat) == pgrp) out.push_back(pid);
  }
  closedir(d);
  return out;
}

template <typename T>
bool ReadMemory(pid_t pid, uint64_t addr, T* out, size_t n = 1) {
  iovec local{out, sizeof(T) * n};
  iovec remote{reinterpret_cast<void*>(addr), sizeof(T) * n};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof(T) * n);
}

// Whether the epoll instance `epfd` of `pid` watches a descriptor for input
// that `is_pipe` accepts: its /proc fdinfo lists "tfd: N events: HEX ...".
template <typename IsPipe>
bool EpollWatchesInput(pid_t pid, uint64_t epfd, const IsPipe& is_pipe) {
  std::optional<std::string> info = ReadProc(absl::StrCat("/proc/", pid, "/fdinfo/", epfd), 1 << 16);
  if (!info) return false;
  for (absl::string_view line : absl::StrSplit(*info, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (f.size() < 4 || f[0] != "tfd:" || f[2] != "events:") continue;
    uint64_t fd = 0;
    const std::string events(f[3]);
    if (absl::SimpleAtoi(f[1], &fd) && (std::strtoul(events.c_str(), nullptr, 16) & POLLIN) && is_pipe(fd)) {
      return true;
    }
  }
  return false;
}

// Whether the blocked call `c` of process `pid` waits for input on a
// descriptor whose /proc link is `pipe`.
bool WaitsOn(pid_t pid, const BlockedCall& c, const std::string& pipe) {
  auto is_pipe = [&](uint64_t fd) { return FdTarget(pid, fd) == pipe; };
  switch (c.nr) {
    case SYS_read:
    case SYS_readv:
    case SYS_pread64:
    case SYS_preadv:
      return is_pipe(c.args[0]);
#ifdef SYS_poll
    case SYS_poll:
#endif
    case SYS_ppoll: {
      const uint64_t n = std::min<uint64_t>(c.args[1], 64);
      std::vector<pollfd> fds(n);
      if (n == 0 || !ReadMemory(pid, c.args[0], fds.data(), n)) return false;
      for (const pollfd& p : fds) {
        if (p.fd >= 0 && (p.events & POLLIN) && is_pipe(static_cast<uint64_t>(p.fd))) return true;
      }
      return false;
    }
#ifdef SYS_select
    case SYS_select:
#endif
    case SYS_pselect6: {
      fd_set set;
      const uint64_t nfds = std::min<uint64_t>(c.args[0], FD_SETSIZE);
      if (c.args[1] == 0 || !ReadMemory(pid, c.args[1], &set)) return false;
      for (uint64_t fd = 0; fd < nfds; ++fd) {
        if (FD_ISSET(static_cast<int>(fd), &set) && is_pipe(fd)) return true;
      }
      return false;
    }
#ifdef SYS_epoll_wait
    case SYS_epoll_wait:
#endif
#ifdef SYS_epoll_pwait2
    case SYS_epoll_pwait2:
#endif
    case SYS_epoll_pwait:
      return EpollWatchesInput(pid, c.args[0], is_pipe);
    default:
      return false;
  }
}

}  // namespace

std::optional<BlockedCall> ParseSyscallLine(absl::string_view line) {
  std::vector<absl::string_view> f = absl::StrSplit(line, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  BlockedCall c;
  if (f.empty() || !absl::SimpleAtoi(f[0], &c.nr) || c.nr < 0 || f.size() < 7) return std::nullopt;
  for (size_t i = 0; i < 6; ++i) {
    const std::string a(f[i + 1]);
    char* end = nullptr;
    errno = 0;
    c.args[i] = std::strtoull(a.c_str(), &end, 16);  // "0x..." (strtoull takes the 0x)
    if (a.rfind("0x", 0) != 0 || errno != 0 || end == nullptr || *end != '\0') return std::nullopt;
  }
  return c;
}

StdinWait WorkerWaitsForStdin(pid_t leader) {
  errno = 0;
  const std::string pipe = FdTarget(leader, 0);
  if (pipe.empty()) {
    // Not ours to look at: as it always was. Gone (or a zombie, which has no
    // descriptors left): it reads nothing.
    return errno == EACCES || errno == EPERM ? StdinWait::kUnknown : StdinWait::kNotWaiting;
  }
  if (pipe.rfind("pipe:", 0) != 0) return StdinWait::kNotWaiting;  // its stdin is not drun's pipe
  bool seen = false;
  for (pid_t pid : GroupMembers(leader)) {
    DIR* d = opendir(absl::StrCat("/proc/", pid, "/task").c_str());
    if (d == nullptr) continue;
    while (struct dirent* e = readdir(d)) {
      int tid = 0;
      if (!absl::SimpleAtoi(e->d_name, &tid)) continue;
      std::optional<std::string> line = ReadProc(absl::StrCat("/proc/", pid, "/task/", tid, "/syscall"));
      if (!line) continue;  // gone, or not ours to read
      seen = true;
      std::optional<BlockedCall> call = ParseSyscallLine(*line);
      if (call && WaitsOn(pid, *call, pipe)) {
        closedir(d);
        return StdinWait::kWaiting;
      }
    }
    closedir(d);
  }
  return seen ? StdinWait::kNotWaiting : StdinWait::kUnknown;
}

}  // namespace drun
