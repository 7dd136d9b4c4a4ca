#include "agent/stacks/tools.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/process.h"
#include "rendezvous/base/unique_fd.h"

extern char** environ;

namespace drun::stacks {

std::string FindTool(const std::string& name) {
  const char* path = getenv("PATH");
  return FindOnPath(name, path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
}

namespace {

constexpr size_t kMaxOutput = 16 << 20;

std::vector<std::string> ToolEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, "LC_ALL=") && !absl::StartsWith(*e, "LANG=")) env.push_back(*e);
  }
  env.push_back("LC_ALL=C");  // the parsers below read the tools' untranslated text
  return env;
}

// Reads `fd` until EOF or `deadline`; false when the deadline came first.
bool ReadUntil(int fd, absl::Time deadline, std::string* out) {
  char buf[65536];
  for (;;) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;  // the loop head decides whether time is up
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return true;
    if (out->size() < kMaxOutput) out->append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

absl::StatusOr<std::string> RunTool(const std::vector<std::string>& argv, absl::Duration timeout) {
  UniqueFd null_in(open("/dev/null", O_RDONLY | O_CLOEXEC));
  UniqueFd null_err(open("/dev/null", O_WRONLY | O_CLOEXEC));
  UniqueFd out_r, out_w;
  if (!null_in || !null_err || !MakePipe(&out_r, &out_w)) return absl::ErrnoToStatus(errno, "pipe");
  SpawnRequest req;
  req.argv = argv;
  req.env = ToolEnvironment();
  req.stdin_fd = null_in.get();
  req.stdout_fd = out_w.get();
  req.stderr_fd = null_err.get();
  absl::StatusOr<pid_t> pid = SpawnProcessGroup(req);
  if (!pid.ok()) return pid.status();
  out_w.reset();  // EOF on out_r now means the tool (and its children) are done
  std::string out;
  const bool finished = ReadUntil(out_r.get(), absl::Now() + timeout, &out);
  if (!finished) kill(-*pid, SIGKILL);  // its own group: the tool and anything it started
  // Another reaper in this process (the agent's wait loop) may have taken the
  // status already: ECHILD is then fine.
  while (waitpid(*pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (!finished) {
    return absl::DeadlineExceededError(
        absl::StrCat(argv[0], " did not finish within ", absl::FormatDuration(timeout)));
  }
  return out;
}

namespace {

// "file:line[:col]" -> file and line (0 when absent): strips up to two
// trailing numeric fields; the leftmost one stripped is the line.
void SplitFileLine(absl::string_view s, Frame* f) {
  absl::string_view file = s;
  int nums[2] = {0, 0};
  int n = 0;
  while (n < 2) {
    size_t colon = file.rfind(':');
    int v = 0;
    if (colon == absl::string_view::npos || !absl::SimpleAtoi(file.substr(colon + 1), &v)) break;
    nums[n++] = v;
    file = file.substr(0, colon);
  }
  f->file = std::string(file);
  f->line = n == 0 ? 0 : nums[n - 1];
}

bool ParseThreadNumber(absl::string_view text, absl::string_view prefix, int* tid) {
  if (!absl::ConsumePrefix(&text, prefix)) return false;
  text = text.substr(0, text.find_first_not_of("0123456789"));
  return absl::SimpleAtoi(text, tid);
}

}  // namespace

std::vector<ToolThread> ParseEuStack(absl::string_view out) {
  std::vector<ToolThread> threads;
  for (absl::string_view raw : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    int tid = 0;
    if (ParseThreadNumber(raw, "TID ", &tid)) {
      threads.push_back(ToolThread{tid, "", {}});
      continue;
    }
    if (threads.empty()) continue;
    std::vector<Frame>& frames = threads.back().frames;
    if (absl::StartsWith(raw, "    ") && !frames.empty()) {  // source of the frame above
      SplitFileLine(absl::StripAsciiWhitespace(raw), &frames.back());
      continue;
    }
    if (!absl::StartsWith(raw, "#")) continue;
    // "#3  0x000055d4e93 name - /module" (name and " - module" are optional).
    std::vector<absl::string_view> f =
        absl::StrSplit(raw, absl::MaxSplits(' ', 1), absl::SkipEmpty());
    if (f.size() < 2) continue;
    absl::string_view rest = absl::StripLeadingAsciiWhitespace(f[1]);
    rest = absl::StripLeadingAsciiWhitespace(rest.substr(std::min(rest.find(' '), rest.size())));
    Frame frame;
    size_t dash = rest.rfind(" - ");
    if (dash != absl::string_view::npos) {
      frame.module = std::string(rest.substr(dash + 3));
      rest = rest.substr(0, dash);
    } else if (absl::StartsWith(rest, "- ")) {
      frame.module = std::string(rest.substr(2));
      rest = "";
    }
    frame.function = rest.empty() ? "??" : std::string(absl::StripAsciiWhitespace(rest));
    frames.push_back(std::move(frame));
  }
  return threads;
}

std::vector<ToolThread> ParseGdb(absl::string_view out) {
  std::vector<ToolThread> threads;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "Thread ")) {
      ToolThread t;
      size_t lwp = line.find("(LWP ");
      if (lwp == absl::string_view::npos || !ParseThreadNumber(line.substr(lwp), "(LWP ", &t.tid)) {
        continue;
      }
      size_t q1 = line.find('"', lwp), q2 = line.rfind('"');
      if (q1 != absl::string_view::npos && q2 > q1)
        t.name = std::string(line.substr(q1 + 1, q2 - q1 - 1));
      threads.push_back(std::move(t));
      continue;
    }
    if (threads.empty() || !absl::StartsWith(line, "#")) continue;
    // "#2  0x000055 in func (args) at file.cc:3" or "#0  func (args) at f:26".
    absl::string_view rest = line.substr(std::min(line.find(' '), line.size()));
    rest = absl::StripLeadingAsciiWhitespace(rest);
    if (absl::StartsWith(rest, "0x")) {
      size_t in = rest.find(" in ");
      rest = in == absl::string_view::npos ? "" : rest.substr(in + 4);
    }
    Frame frame;
    size_t paren = rest.find(" (");
    frame.function = std::string(rest.substr(0, paren));
    if (frame.function.empty()) frame.function = "??";
    size_t at = rest.rfind(" at "), from = rest.rfind(" from ");
    if (at != absl::string_view::npos) SplitFileLine(rest.substr(at + 4), &frame);
    if (from != absl::string_view::npos) frame.module = std::string(rest.substr(from + 6));
    threads.back().frames.push_back(std::move(frame));
  }
  return threads;
}

std::vector<ToolThread> ParsePySpy(absl::string_view out) {
  std::vector<ToolThread> threads;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "Thread ")) {
      ToolThread t;
      ParseThreadNumber(line, "Thread ", &t.tid);  // a hex pthread id leaves tid 0
      if (absl::StartsWith(line, "Thread 0x")) t.tid = 0;
      size_t q1 = line.find('"'), q2 = line.rfind('"');
      if (q1 != absl::string_view::npos && q2 > q1)
        t.name = std::string(line.substr(q1 + 1, q2 - q1 - 1));
      threads.push_back(std::move(t));
      continue;
    }
    // Frames are indented by four spaces; deeper lines are locals/arguments.
    if (threads.empty() || !absl::StartsWith(line, "    ") || absl::StartsWith(line, "     ")) {
      continue;
    }
    absl::string_view s = absl::StripAsciiWhitespace(line);
    size_t open = s.rfind(" (");
    if (open == absl::string_view::npos || !absl::EndsWith(s, ")")) continue;
    Frame frame;
    frame.function = std::string(s.substr(0, open));
    SplitFileLine(s.substr(open + 2, s.size() - open - 3), &frame);
    threads.back().frames.push_back(std::move(frame));
  }
  return threads;
}

}  // namespace drun::stacks
