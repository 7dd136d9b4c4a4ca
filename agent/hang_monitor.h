// HangMonitor decides that a job hangs: no rank has made progress for
// --hang-timeout. Pure: the agent samples its workers (output byte counts,
// CPU time from /proc) every interval() and passes the samples and the time in.
//
// Progress of a rank between two samples (the signal, documented in
// docs/hangs.md):
//  - its output grew by at least one byte, on either stream; or
//  - its CPU time, plus the time its main thread was runnable but waited for
//    a CPU (/proc/PID/schedstat's run_delay), grew by at least kCpuShare (10 %)
//    of the interval. A rank blocked in a collective, in sleep(), on a lock or
//    on I/O uses none and waits for none; a polling wait stays below (torch
//    1.13's store-based barrier in init_process_group, waiting for a rank that
//    never comes: 3 %); a rank that computes uses most of a core, and one
//    starved on an oversubscribed machine (load 16 on 2 cores: 8 % of a core
//    each) waits for the rest. A busy-waiting library (NCCL
//    spinning on a GPU) counts as progress: such a hang is not detected; nor,
//    while the machine is that oversubscribed, is a polling wait's.
// The job hangs when the last progress of every rank is at least timeout ago.
// Each rank also keeps when it last printed, so the report can say which rank
// went quiet first.
#ifndef DRUN_AGENT_HANG_MONITOR_H_
#define DRUN_AGENT_HANG_MONITOR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "rendezvous/base/clock.h"

namespace drun {

class HangMonitor {
 public:
  static constexpr double kCpuShare = 0.10;

  struct Sample {
    int rank = 0;
    std::uint64_t output_bytes = 0;  // everything it wrote so far
    double cpu_seconds = 0;          // user + system, so far
    double wait_seconds = 0;         // runnable but waiting for a CPU, so far
  };
  struct RankState {
    TimePoint last_progress;
    TimePoint last_output;
    std::uint64_t output_bytes = 0;
    double cpu_seconds = 0;
    double wait_seconds = 0;
    double cpu_last_interval = 0;  // seconds of CPU in the last sampled interval
  };

  explicit HangMonitor(Duration timeout);

  // How often to sample: a fifth of the timeout, between 100 ms and 1 s.
  Duration interval() const { return interval_; }
  Duration timeout() const { return timeout_; }

  // A new round starts: every rank in `samples` counts as having made progress now.
  void Start(const std::vector<Sample>& samples, TimePoint now);
  // A sample of every rank; ranks not seen before start as in Start.
  void Observe(const std::vector<Sample>& samples, TimePoint now);
  bool Hung(TimePoint now) const;
  // When the next sample is due (none before Start).
  std::optional<TimePoint> NextSample() const { return next_sample_; }

  const std::map<int, RankState>& ranks() const { return ranks_; }
  // The rank that printed last the longest ago; -1 when none is watched or
  // several went quiet in the same sample interval (no one was first).
  int QuietestRank() const;

 private:
  Duration timeout_;
  Duration interval_;
  std::map<int, RankState> ranks_;
  std::optional<TimePoint> last_sample_;
  std::optional<TimePoint> next_sample_;
};

}  // namespace drun

#endif  // DRUN_AGENT_HANG_MONITOR_H_
