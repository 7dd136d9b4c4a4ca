// DeadlineQueue<Key>: when each of several things expires (connections that
// must speak or finish a handshake in time, ...), for a loop that waits in
// poll(2)/epoll_wait(2) and expires what is due after each wake-up.
//
// Each key has at most one deadline (Add again moves it); Cancel forgets a
// key that no longer needs one (done before its time), so TakeDue returns
// only keys still waiting. Deadlines may come in any order. Pure: time is
// an argument, nothing here reads the clock. Not thread-safe (one loop's).
//
//   queue.Add(id, now + timeout);
//   epoll_wait(..., queue.PollTimeoutMs(Clock::now()));
//   for (uint64_t id : queue.TakeDue(Clock::now())) Expire(id);
#ifndef DRUN_RENDEZVOUS_BASE_DEADLINE_QUEUE_H_
#define DRUN_RENDEZVOUS_BASE_DEADLINE_QUEUE_H_

#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "rendezvous/base/clock.h"

namespace drun {

template <typename Key>
class DeadlineQueue {
 public:
  // `key` expires at `deadline` (replacing a deadline it had).
  void Add(const Key& key, TimePoint deadline) {
    Cancel(key);
    by_key_.emplace(key, deadline);
    by_time_.emplace(deadline, key);
  }
  // `key` no longer expires; nothing when it had no deadline.
  void Cancel(const Key& key) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return;
    by_time_.erase({it->second, key});
    by_key_.erase(it);
  }
  // Removes and returns the keys whose deadline is at or before `now`,
  // earliest first (equal deadlines: in key order).
  std::vector<Key> TakeDue(TimePoint now) {
    std::vector<Key> due;
    while (!by_time_.empty() && by_time_.begin()->first <= now) {
      due.push_back(by_time_.begin()->second);
      by_key_.erase(by_time_.begin()->second);
      by_time_.erase(by_time_.begin());
    }
    return due;
  }
  // The earliest deadline; none when nothing waits.
  std::optional<TimePoint> Next() const {
    if (by_time_.empty()) return std::nullopt;
    return by_time_.begin()->first;
  }
  // poll()'s timeout to wake at Next(): -1 when nothing waits (clock.h).
  int PollTimeoutMs(TimePoint now) const { return drun::PollTimeoutMs(Next(), now); }
  bool Contains(const Key& key) const { return by_key_.count(key) != 0; }
  size_t size() const { return by_key_.size(); }
  bool empty() const { return by_key_.empty(); }

 private:
  std::map<Key, TimePoint> by_key_;
  std::set<std::pair<TimePoint, Key>> by_time_;
};

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_DEADLINE_QUEUE_H_
