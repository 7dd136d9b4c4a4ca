#include "agent/hang_monitor.h"

#include <algorithm>

namespace drun {

HangMonitor::HangMonitor(Duration timeout) : timeout_(timeout) {
  interval_ = std::clamp<Duration>(timeout / 5, std::chrono::milliseconds(100), std::chrono::seconds(1));
}

void HangMonitor::Start(const std::vector<Sample>& samples, TimePoint now) {
  ranks_.clear();
  for (const Sample& s : samples) {
    RankState& r = ranks_[s.rank];
    r.last_progress = r.last_output = now;
    r.output_bytes = s.output_bytes;
    r.cpu_seconds = s.cpu_seconds;
    r.wait_seconds = s.wait_seconds;
  }
  last_sample_ = now;
  next_sample_ = now + interval_;
}

void HangMonitor::Observe(const std::vector<Sample>& samples, TimePoint now) {
  if (!last_sample_) return Start(samples, now);
  const double elapsed = DurationToSeconds(now - *last_sample_);
  for (const Sample& s : samples) {
    auto [it, fresh] = ranks_.try_emplace(s.rank);
    RankState& r = it->second;
    if (fresh) {
      r.last_progress = r.last_output = now;
    } else {
      r.cpu_last_interval = std::max(0.0, s.cpu_seconds - r.cpu_seconds);
      // Waiting for a CPU is wanting to run: starved, not blocked.
      const double wanted = r.cpu_last_interval + std::max(0.0, s.wait_seconds - r.wait_seconds);
      const bool printed = s.output_bytes > r.output_bytes;
      if (printed) r.last_output = now;
      if (printed || wanted >= kCpuShare * elapsed) r.last_progress = now;
    }
    r.output_bytes = s.output_bytes;
    r.cpu_seconds = s.cpu_seconds;
    r.wait_seconds = s.wait_seconds;
  }
  last_sample_ = now;
  next_sample_ = now + interval_;
}

bool HangMonitor::Hung(TimePoint now) const {
  if (ranks_.empty()) return false;
  return std::all_of(ranks_.begin(), ranks_.end(),
                     [&](const auto& kv) { return now - kv.second.last_progress >= timeout_; });
}

int HangMonitor::QuietestRank() const {
  int best = -1;
  std::optional<TimePoint> oldest;
  bool tie = false;
  for (const auto& [rank, r] : ranks_) {
    if (!oldest || r.last_output < *oldest) {
      oldest = r.last_output;
      best = rank;
      tie = false;
    } else if (r.last_output == *oldest) {
      tie = true;
    }
  }
  return tie ? -1 : best;
}

}  // namespace drun
