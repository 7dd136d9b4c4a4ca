#include "rendezvous/link_liveness.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>

namespace drun {

bool SetLinkTimeout(int fd, std::chrono::milliseconds timeout) {
  using std::chrono::milliseconds;
  const int64_t ms = std::max<int64_t>(timeout.count(), 2000);
  // Probes start after `idle` seconds without anything received and repeat
  // every second; the kernel aborts at the first probe check at which
  // nothing has been received for TCP_USER_TIMEOUT. The user timeout is set
  // a little under the timeout, so that check is the one at `timeout`
  // rather than a second later; unacknowledged data (a heartbeat sent into a
  // cut link) is abandoned after the same time.
  const int idle = static_cast<int>(std::max<int64_t>(1, ms / 2000));
  const int interval = 1;
  const int count = 1000;  // the user timeout decides, not the probe count
  const unsigned int user_timeout = static_cast<unsigned int>(ms - 100);
  const int one = 1;
  bool ok = setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) == 0;
  ok &= setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) == 0;
  ok &= setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval) == 0;
  ok &= setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count) == 0;
  ok &= setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout) == 0;
  ok &= setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0;
  return ok;
}

std::chrono::milliseconds LinkTimeout(const v1::JobSpec& spec) {
  return std::chrono::milliseconds(static_cast<int64_t>(1000 * spec.keepalive_timeout_s()));
}

Pace PaceFor(std::chrono::milliseconds link_timeout, int nodes) {
  using std::chrono::milliseconds;
  constexpr int kPerSilence = 4;  // heartbeats per silence bound
  // nodes / kHeartbeatsPerSecond seconds between one node's heartbeats.
  const milliseconds by_size(int64_t{std::max(nodes, 1)} * 1000 * kPerSilence / kHeartbeatsPerSecond);
  const milliseconds silence = std::max({milliseconds(10000), 10 * link_timeout, by_size});
  return {silence / kPerSilence, silence};
}

}  // namespace drun
