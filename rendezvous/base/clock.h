// The one clock of drun: a monotonic steady_clock, and the conversions every
// timer needs (seconds from the job spec, a poll() timeout from a deadline).
// Pure: no I/O; callers pass `now` in so that state machines stay testable.
#ifndef DRUN_RENDEZVOUS_BASE_CLOCK_H_
#define DRUN_RENDEZVOUS_BASE_CLOCK_H_

#include <chrono>
#include <optional>

namespace drun {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Duration = Clock::duration;

// Seconds as written in a job spec (fractions allowed) -> Duration, and back.
inline Duration SecondsToDuration(double s) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}
inline double DurationToSeconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// The timeout poll() takes to wake at `deadline`: milliseconds rounded up (so the
// caller never wakes just before the deadline and spins), at least 0, at most
// `max_ms`; -1 (wait forever) when there is no deadline.
int PollTimeoutMs(std::optional<TimePoint> deadline, TimePoint now, int max_ms = 1 << 30);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_CLOCK_H_
