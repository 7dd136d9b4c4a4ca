// PollSet: one poll(2) loop where every descriptor registers its own handler,
// instead of a fixed array of pollfds read back by slot (fds[3].revents) or
// an if-chain on the descriptor.
//
//   PollSet set;
//   set.Add(signal_fd, POLLIN, [&](short) { DrainSignalFd(signal_fd, OnSignal); });
//   set.Add(mailbox.fd(), POLLIN, [&](short) { while (auto m = mailbox.Take()) On(*m); });
//   PollSet::Id out = set.Add(pipe.get(), POLLIN, [&](short revents) { ReadPipe(); });
//   for (;;) {
//     if (set.Poll(NextDeadline()) < 0) break;   // runs the ready handlers
//     ... deadlines that are due ...
//   }
//
// Contract:
//  - Add(fd, events, handler) registers `fd` for `events` (POLLIN, POLLOUT,
//    ...) and returns its Id. A negative fd is allowed and never ready, so an
//    optional descriptor needs no special case. The same fd may be added
//    twice (each registration is its own).
//  - Poll(deadline) waits until a registered descriptor is ready or the
//    deadline passes (none: no limit), then runs the handler of each ready
//    one, once, in the order they were added, with poll's revents (POLLHUP
//    and POLLERR included, so a handler sees a closed pipe). Returns how
//    many handlers ran: 0 after a timeout or a signal (EINTR); -1 (errno
//    set) when poll failed.
//  - Handlers may Add, Remove and SetEvents (themselves included) while
//    Poll runs them; a registration removed during a round is not run
//    later in that round, and one added is first polled in the next.
//  - SetEvents(id, 0) keeps a registration without polling it (a stream
//    that waits for something else); SetFd(id, fd) points it at another
//    descriptor (-1: none) after the old one closed.
//  - Not thread-safe: the loop's thread owns it. Other threads wake it
//    through a WakeFd or Mailbox (wake_fd.h) registered here.
#ifndef DRUN_RENDEZVOUS_BASE_POLL_SET_H_
#define DRUN_RENDEZVOUS_BASE_POLL_SET_H_

#include <poll.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "rendezvous/base/clock.h"

namespace drun {

class PollSet {
 public:
  using Handler = std::function<void(short revents)>;
  using Id = uint64_t;

  Id Add(int fd, short events, Handler handler);
  void Remove(Id id);
  void SetEvents(Id id, short events);
  void SetFd(Id id, int fd);
  int Poll(std::optional<TimePoint> deadline);
  size_t size() const;  // live registrations

 private:
  struct Entry {
    Id id;
    int fd;
    short events;
    bool removed;
    Handler handler;
  };
  Entry* Find(Id id);

  // A deque: adding while a handler runs moves no Entry (the running
  // std::function stays where it is); removed entries are erased only
  // between rounds.
  std::deque<Entry> entries_;
  std::vector<pollfd> fds_;
  std::vector<Id> polled_;  // fds_[i] belongs to registration polled_[i]
  Id next_id_ = 1;
};

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_POLL_SET_H_
