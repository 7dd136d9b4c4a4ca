// The two halves of a poll + signalfd + deadline loop: wait until a
// descriptor is readable or the deadline passes (PollUntil, for a loop that
// still reads its own pollfd array: the agent's, drun-net's wait), then take
// every pending signal off the signalfd (DrainSignalFd, in every loop). A new
// loop registers its descriptors with their handlers in a PollSet
// (poll_set.h) instead of PollUntil. The loops keep their own state
// machines; only the waiting is here.
#ifndef DRUN_RENDEZVOUS_BASE_EVENT_LOOP_H_
#define DRUN_RENDEZVOUS_BASE_EVENT_LOOP_H_

#include <errno.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <optional>

#include "rendezvous/base/clock.h"

namespace drun {

// poll() until one of `fds` is ready or `deadline` (none: no limit). Returns
// poll's count, 0 when interrupted by a signal, -1 (errno set) on a real error.
inline int PollUntil(pollfd* fds, size_t n, std::optional<TimePoint> deadline) {
  int r = poll(fds, n, PollTimeoutMs(deadline, Clock::now()));
  if (r < 0 && errno == EINTR) return 0;
  return r;
}

// Calls on_signal(signo, siginfo) for every signal waiting on a non-blocking
// signalfd (several may have arrived since the last wake-up).
template <typename F>
void DrainSignalFd(int signal_fd, F&& on_signal) {
  signalfd_siginfo si;
  while (read(signal_fd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
    on_signal(static_cast<int>(si.ssi_signo), si);
  }
}

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_EVENT_LOOP_H_
