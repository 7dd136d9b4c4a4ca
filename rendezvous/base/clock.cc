#include "rendezvous/base/clock.h"

#include <algorithm>
#include <cstdint>

namespace drun {

int PollTimeoutMs(std::optional<TimePoint> deadline, TimePoint now, int max_ms) {
  if (!deadline) return -1;
  const int64_t ms = std::chrono::ceil<std::chrono::milliseconds>(*deadline - now).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, max_ms));
}

}  // namespace drun
