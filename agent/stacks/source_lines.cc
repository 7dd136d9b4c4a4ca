#include "agent/stacks/source_lines.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/stacks/proc.h"

namespace drun::stacks {
namespace {

constexpr size_t kMaxFile = 16 << 20;
constexpr size_t kMaxLine = 500;

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
    absl::StatusOr<std::string> text = ReadProcFile(path, kMaxFile);
    if (!text.ok()) continue;
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
