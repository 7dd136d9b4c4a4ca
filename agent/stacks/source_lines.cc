#include "agent/stacks/source_lines.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rendezvous/base/unique_fd.h"

namespace drun::stacks {
namespace {

constexpr size_t kMaxFile = 16 << 20;
constexpr size_t kMaxLine = 500;

// The first kMaxFile bytes of a regular file; nullopt for anything else. A
// frame's file name is the program's to choose: a FIFO or a device named
// there must not block or flood the reader, so it is opened non-blocking and
// read only when fstat says it is a regular file.
std::optional<std::string> ReadRegularFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  struct stat st;
  if (!fd || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  std::string out;
  char buf[8192];
  while (out.size() < kMaxFile) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace

const std::vector<std::string>& SourceLines::Lines(const std::string& file) {
  auto it = files_.find(file);
  if (it != files_.end()) return it->second;
  std::vector<std::string>& lines = files_[file];
  // "<string>", "<frozen ...>" and the like name no file.
  if (file.empty() || file[0] == '<') return lines;
  std::vector<std::string> candidates;
  if (file[0] == '/') {
    candidates = {absl::StrCat("/proc/", pid_, "/root", file), file};
  } else {
    candidates = {absl::StrCat("/proc/", pid_, "/cwd/", file)};
  }
  for (const std::string& path : candidates) {
    std::optional<std::string> text = ReadRegularFile(path);
    if (!text) continue;
    for (absl::string_view l : absl::StrSplit(*text, '\n')) {
      l = absl::StripAsciiWhitespace(l);
      lines.emplace_back(l.substr(0, kMaxLine));
    }
    break;
  }
  return lines;
}

std::string SourceLines::Line(const std::string& file, int line) {
  const std::vector<std::string>& lines = Lines(file);
  if (line < 1 || static_cast<size_t>(line) > lines.size()) return "";
  return lines[static_cast<size_t>(line) - 1];
}

}  // namespace drun::stacks
