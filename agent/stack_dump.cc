#include "agent/stack_dump.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "agent/process.h"
#include "absl/strings/str_format.h"
#include "rendezvous/base/mutex.h"
#include "rendezvous/base/quote.h"

namespace drun {
namespace {

constexpr std::chrono::milliseconds kCpuWindow{250};

std::string StateText(const RankStack& r) {
  if (r.state == '?') return "gone";
  std::string s(1, r.state);
  if (!r.wchan.empty()) absl::StrAppend(&s, " (", r.wchan, ")");
  return s;
}

std::string CpuText(const RankTarget& t) {
  if (t.cpu_last_interval < 0 || t.window_s <= 0) return "-";
  return absl::StrFormat("%.0f%%", 100 * t.cpu_last_interval / t.window_s);
}

std::string QuietText(const RankTarget& t) {
  return t.quiet_s < 0 ? "-" : absl::StrFormat("%.1fs", t.quiet_s);
}

}  // namespace

void LastLine::Add(absl::string_view data) {
  // Only a chunk's end matters (it may hold thousands of lines; worker
  // output passes here at GiB/s): the bytes after its last terminator are
  // the line being written, the last non-empty line before them the last
  // line. Found from the end, with no work (or allocation) per line.
  auto append_capped = [](std::string* to, absl::string_view piece) {
    if (to->size() < kMax) to->append(piece.data(), std::min(piece.size(), kMax - to->size()));
  };
  const size_t last_term = data.find_last_of("\r\n");
  if (last_term == absl::string_view::npos) {
    append_capped(&current_, data);
    return;
  }
  for (size_t end = last_term;;) {
    const size_t prev = end == 0 ? absl::string_view::npos : data.find_last_of("\r\n", end - 1);
    if (prev == absl::string_view::npos) {
      append_capped(&current_, data.substr(0, end));  // the chunk's first line continues it
      if (!current_.empty()) last_ = current_;
      break;
    }
    if (end > prev + 1) {
      last_ = std::string(data.substr(prev + 1, std::min(end - prev - 1, kMax)));
      break;
    }
    end = prev;  // an empty line: look further back
  }
  current_.clear();
  append_capped(&current_, data.substr(last_term + 1));
}

std::string LastLine::Get() const { return current_.empty() ? last_ : current_; }

std::string FormatDump(const StackDump& dump) {
  std::string out;
  for (const RankStack& r : dump.ranks) {
    const RankTarget& t = r.target;
    absl::StrAppend(&out, "=== rank ", t.rank, " (local ", t.local_rank, ") on ", t.host, ", pid ",
                    t.pid, ": state ", StateText(r), ", CPU ", CpuText(t), " of a core over ",
                    absl::StrFormat("%.1fs", t.window_s), ", quiet for ", QuietText(t), "\n");
    absl::StrAppend(&out, "    last line: ", t.last_line.empty() ? "(none)" : QuoteText(t.last_line),
                    "\n");
    // The capture's own text says why frames are missing; only a capture
    // that failed as a whole has no text to say it in.
    if (r.text.empty() && !r.unavailable.empty()) {
      absl::StrAppend(&out, "    frames: ", r.unavailable, "\n");
    }
    absl::StrAppend(&out, r.text);
    if (!r.text.empty() && r.text.back() != '\n') out += '\n';
  }
  return out;
}

int QuietestRank(const StackDump& dump) {
  const RankStack* first = nullptr;
  double runner_up = -1;
  double window = 0;
  for (const RankStack& r : dump.ranks) {
    window = std::max(window, r.target.window_s);
    if (!first || r.target.quiet_s > first->target.quiet_s) {
      if (first) runner_up = std::max(runner_up, first->target.quiet_s);
      first = &r;
    } else {
      runner_up = std::max(runner_up, r.target.quiet_s);
    }
  }
  if (!first || first->target.quiet_s < 0 || first->target.quiet_s - runner_up <= window) return -1;
  return first->target.rank;
}

namespace {

// The ranks whose `place` differs from that of a clear majority; nullopt when
// some rank's place is unknown (""), so another kind of place must decide.
using PlaceFn = std::function<std::string(const RankStack&)>;

std::optional<std::vector<int>> Minority(const StackDump& dump, const PlaceFn& place) {
  std::map<std::string, int> count;
  for (const RankStack& r : dump.ranks) {
    std::string p = place(r);
    if (p.empty()) return std::nullopt;
    ++count[std::move(p)];
  }
  std::vector<int> odd;
  auto most = std::max_element(count.begin(), count.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  // Only a clear majority makes the others odd: 2 against 2 says nothing.
  if (most == count.end() || 2 * most->second <= static_cast<int>(dump.ranks.size())) return odd;
  for (const RankStack& r : dump.ranks) {
    if (place(r) != most->first) odd.push_back(r.target.rank);
  }
  return odd;
}

std::string WhereOf(const RankStack& r) { return r.where; }
std::string WaitOf(const RankStack& r) {
  if (r.wchan.empty() || r.state == '?') return "";
  return absl::StrCat(std::string(1, r.state), " ", r.wchan);
}

}  // namespace

std::vector<int> OddRanks(const StackDump& dump) {
  std::vector<int> odd;
  for (const RankStack& r : dump.ranks) {
    if (r.state == 'D') odd.push_back(r.target.rank);
  }
  if (!odd.empty()) return odd;
  // Where each one is (its innermost frame) when every rank's is known; else
  // what the kernel says each waits in (state and wait channel).
  for (auto place : {WhereOf, WaitOf}) {
    if (std::optional<std::vector<int>> m = Minority(dump, place)) return *m;
  }
  return odd;
}

std::string HangVerdict(const StackDump& dump, int culprit) {
  for (const RankStack& r : dump.ranks) {
    if (r.target.rank != culprit) continue;
    if (!r.where.empty()) return absl::StrCat("rank ", culprit, " is at ", r.where);
    const std::string wait = WaitOf(r);
    return absl::StrCat("rank ", culprit, " is at an unknown place",
                        wait.empty() ? "" : absl::StrCat(" (state ", wait, ")"));
  }
  const bool all_known = !dump.ranks.empty() &&
                         std::all_of(dump.ranks.begin(), dump.ranks.end(),
                                     [](const RankStack& r) { return !r.where.empty(); });
  if (all_known && std::all_of(dump.ranks.begin(), dump.ranks.end(), [&](const RankStack& r) {
        return r.where == dump.ranks.front().where;
      })) {
    return absl::StrCat("no rank stands out: every one is at ", dump.ranks.front().where);
  }
  return all_known ? "no rank stands out: no place holds most of them"
                   : "drun cannot tell which rank stands out: where some are is not known";
}

std::string FormatHangTable(const StackDump& dump, int quietest) {
  const std::vector<int> odd = OddRanks(dump);
  std::string out = absl::StrFormat("drun: %-5s %-8s %-8s %-22s %-5s %-7s %s\n", "rank", "host",
                                    "pid", "state", "CPU", "quiet", "where");
  for (const RankStack& r : dump.ranks) {
    const RankTarget& t = r.target;
    std::string mark;
    if (std::find(odd.begin(), odd.end(), t.rank) != odd.end()) mark = "  <- not where the others are";
    if (t.rank == quietest) absl::StrAppend(&mark, mark.empty() ? "  <- " : "; ", "went quiet first");
    std::string state = StateText(r);
    if (state.size() > 22) state = state.substr(0, 21) + "~";
    absl::StrAppend(&out, absl::StrFormat("drun: %-5d %-8s %-8d %-22s %-5s %-7s %s%s\n", t.rank,
                                          t.host, t.pid, state, CpuText(t), QuietText(t),
                                          r.where.empty() ? "?" : r.where, mark));
  }
  return out;
}

DumpJob::DumpJob(std::vector<RankTarget> targets, CaptureFn capture) {
  thread_ = std::thread(&DumpJob::Work, this, std::move(targets), std::move(capture));
}

DumpJob::~DumpJob() {
  if (thread_.joinable()) thread_.join();
}

void DumpJob::Work(std::vector<RankTarget> targets, CaptureFn capture) {
  const auto start = std::chrono::steady_clock::now();
  // Ranks nobody sampled get the CPU they use while the dump is taken.
  std::vector<std::optional<ProcStat>> before;
  for (const RankTarget& t : targets) before.push_back(ReadProcStat(t.pid));
  StackDump dump;
  for (const RankTarget& t : targets) dump.ranks.push_back(capture(t));
  // CPU use over a few milliseconds of capture says nothing: measure at least
  // kCpuWindow (this thread only; the agent's loop goes on).
  if (std::any_of(targets.begin(), targets.end(), [](const RankTarget& t) { return t.cpu_last_interval < 0; })) {
    std::this_thread::sleep_until(start + kCpuWindow);
  }
  const double window =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (size_t i = 0; i < targets.size(); ++i) {
    RankTarget& t = dump.ranks[i].target;
    if (t.cpu_last_interval >= 0 || !before[i]) continue;
    if (std::optional<ProcStat> after = ReadProcStat(t.pid)) {
      t.cpu_last_interval = std::max(0.0, after->cpu_seconds - before[i]->cpu_seconds);
      t.window_s = window;
    }
  }
  std::sort(dump.ranks.begin(), dump.ranks.end(),
            [](const RankStack& a, const RankStack& b) { return a.target.rank < b.target.rank; });
  dump.capture_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  {
    MutexLock lock(&mu_);
    result_ = std::move(dump);
  }
  done_.Signal();
}

std::optional<StackDump> DumpJob::Take() {
  {
    MutexLock lock(&mu_);
    if (!result_) return std::nullopt;
  }
  if (thread_.joinable()) thread_.join();
  MutexLock lock(&mu_);
  return std::move(result_);
}

}  // namespace drun
