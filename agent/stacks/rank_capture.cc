#include "agent/stacks/rank_capture.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/stacks/stacks.h"

namespace drun {
namespace {

std::string Where(const stacks::ProcessStacks& p) {
  for (const stacks::ThreadStack& t : p.threads) {
    if (t.tid != p.pid) continue;  // the main thread's tid is the pid
    if (!t.python.empty()) {
      const stacks::Frame& f = t.python.front();
      return absl::StrCat(std::filesystem::path(f.file).filename().string(), ":", f.line, " in ",
                          f.function);
    }
    // The innermost native function with a name: "??" names no place, and
    // ranks whose only known frame is "??" would all look alike.
    for (const stacks::Frame& f : t.native) {
      if (!f.function.empty() && f.function != "??") return f.function;
    }
  }
  return "";
}

// Every line of `text` indented, so a dump reads as one block per rank.
std::string Indent(const std::string& text) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    absl::StrAppend(&out, "    ", line, "\n");
  }
  return out;
}

}  // namespace

RankStack CaptureRank(const RankTarget& target) {
  RankStack r;
  r.target = target;
  absl::StatusOr<stacks::ProcessStacks> p = stacks::Capture(target.pid, stacks::CaptureOptions());
  if (!p.ok()) {
    r.unavailable = std::string(p.status().message());
    return r;
  }
  r.state = p->state;
  r.wchan = p->wchan;
  r.cpu_seconds = p->cpu_seconds;
  r.where = Where(*p);
  r.text = Indent(stacks::FormatText(*p));
  r.unavailable = p->unavailable;
  return r;
}

}  // namespace drun
