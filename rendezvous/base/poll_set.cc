#include "rendezvous/base/poll_set.h"

#include <errno.h>

#include <algorithm>
#include <utility>

namespace drun {

PollSet::Id PollSet::Add(int fd, short events, Handler handler) {
  const Id id = next_id_++;
  entries_.push_back(Entry{id, fd, events, false, std::move(handler)});
  return id;
}

PollSet::Entry* PollSet::Find(Id id) {
  // Ids grow with every Add and erasing keeps the order: a binary search.
  auto it = std::lower_bound(entries_.begin(), entries_.end(), id,
                             [](const Entry& e, Id want) { return e.id < want; });
  if (it == entries_.end() || it->id != id || it->removed) return nullptr;
  return &*it;
}

void PollSet::Remove(Id id) {
  Entry* e = Find(id);
  if (e == nullptr) return;
  e->removed = true;  // erased before the next round (its handler may be running)
  e->fd = -1;
}

void PollSet::SetEvents(Id id, short events) {
  if (Entry* e = Find(id)) e->events = events;
}

void PollSet::SetFd(Id id, int fd) {
  if (Entry* e = Find(id)) e->fd = fd;
}

size_t PollSet::size() const {
  return static_cast<size_t>(
      std::count_if(entries_.begin(), entries_.end(), [](const Entry& e) { return !e.removed; }));
}

int PollSet::Poll(std::optional<TimePoint> deadline) {
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.removed; }),
                 entries_.end());
  fds_.clear();
  polled_.clear();
  for (const Entry& e : entries_) {
    if (e.fd < 0 || e.events == 0) continue;
    fds_.push_back(pollfd{e.fd, e.events, 0});
    polled_.push_back(e.id);
  }
  const int n = poll(fds_.data(), fds_.size(), PollTimeoutMs(deadline, Clock::now()));
  if (n < 0) return errno == EINTR ? 0 : -1;
  int ran = 0;
  for (size_t i = 0; i < fds_.size(); ++i) {
    if (fds_[i].revents == 0) continue;
    Entry* e = Find(polled_[i]);
    if (e == nullptr || !e->handler) continue;  // removed by an earlier handler
    ++ran;
    e->handler(fds_[i].revents);
  }
  return ran;
}

}  // namespace drun
