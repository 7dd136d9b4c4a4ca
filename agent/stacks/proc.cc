#include "agent/stacks/proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rendezvous/base/unique_fd.h"

namespace drun::stacks {

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t limit) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return absl::ErrnoToStatus(errno, path);
  std::string out;
  char buf[8192];
  while (out.size() < limit) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, path);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

absl::StatusOr<ProcStat> ParseStat(const std::string& text) {
  size_t open = text.find('(');
  size_t close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) {
    return absl::DataLossError("malformed stat line");
  }
  ProcStat st;
  st.comm = text.substr(open + 1, close - open - 1);
  std::vector<absl::string_view> f =
      absl::StrSplit(absl::string_view(text).substr(close + 1), ' ', absl::SkipEmpty());
  // f[0] is field 3 (state); utime and stime are fields 14 and 15.
  if (f.size() < 13 || f[0].empty()) return absl::DataLossError("short stat line");
  st.state = f[0][0];
  uint64_t utime = 0, stime = 0;
  if (!absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
    return absl::DataLossError("bad cpu times in stat line");
  }
  static const long ticks = sysconf(_SC_CLK_TCK);
  st.cpu_seconds =
      static_cast<double>(utime + stime) / static_cast<double>(ticks > 0 ? ticks : 100);
  return st;
}

absl::StatusOr<ProcStat> ReadStat(const std::string& stat_path) {
  absl::StatusOr<std::string> text = ReadSmallFile(stat_path);
  if (!text.ok()) return text.status();
  return ParseStat(*text);
}

std::vector<int> ListTasks(pid_t pid) {
  std::vector<int> tids;
  std::string dir = absl::StrCat("/proc/", pid, "/task");
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return tids;
  while (struct dirent* e = readdir(d)) {
    int tid = 0;
    if (absl::SimpleAtoi(e->d_name, &tid) && tid > 0) tids.push_back(tid);
  }
  closedir(d);
  // readdir order of /proc/PID/task is already ascending; sorting makes it a contract.
  std::sort(tids.begin(), tids.end());
  return tids;
}

std::string ReadWchan(pid_t pid) {
  absl::StatusOr<std::string> w = ReadSmallFile(absl::StrCat("/proc/", pid, "/wchan"), 256);
  if (!w.ok()) return "";
  std::string s(absl::StripAsciiWhitespace(*w));
  return s == "0" ? "" : s;
}

long ProcessUid(pid_t pid) {
  struct stat st;
  if (stat(absl::StrCat("/proc/", pid).c_str(), &st) != 0) return -1;
  return static_cast<long>(st.st_uid);
}

absl::StatusOr<std::vector<Mapping>> ReadMaps(pid_t pid) {
  absl::StatusOr<std::string> text = ReadSmallFile(absl::StrCat("/proc/", pid, "/maps"), 64 << 20);
  if (!text.ok()) return text.status();
  // An unreadable maps file reads as empty rather than failing on some kernels.
  if (text->empty())
    return absl::PermissionDeniedError(absl::StrCat("/proc/", pid, "/maps is empty"));
  std::vector<Mapping> maps;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    // start-end perms offset dev inode [path]
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(' ', 5));
    if (f.size() < 5) continue;
    Mapping m;
    std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(f[0], '-');
    if (!absl::SimpleHexAtoi(range.first, &m.start) || !absl::SimpleHexAtoi(range.second, &m.end) ||
        !absl::SimpleHexAtoi(f[2], &m.offset)) {
      continue;
    }
    m.executable = f[1].size() >= 3 && f[1][2] == 'x';
    if (f.size() == 6) m.path = std::string(absl::StripLeadingAsciiWhitespace(f[5]));
    maps.push_back(std::move(m));
  }
  return maps;
}

int YamaPtraceScope() {
  absl::StatusOr<std::string> s = ReadSmallFile("/proc/sys/kernel/yama/ptrace_scope", 64);
  int scope = -1;
  if (!s.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*s), &scope)) return -1;
  return scope;
}

}  // namespace drun::stacks
