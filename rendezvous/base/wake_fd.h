// WakeFd and Mailbox<T>: how one thread wakes another that waits in poll(2)
// or epoll_wait(2).
//
// WakeFd is an eventfd (non-blocking, close-on-exec) that closes itself:
// Signal() from any thread makes it readable, Clear() makes it quiet again.
// Signals are not counted: one Clear() undoes any number of them, so the
// waiter must look at everything it may have been woken for (a Mailbox
// does). valid() is false when the eventfd could not be made (out of
// descriptors); Signal and Clear then do nothing.
//
// Mailbox<T>: a queue from any thread to the one that polls fd(). fd() is
// readable exactly while messages wait (the queue and the fd change under
// one lock, so a Post is never missed between a Take and the next poll).
#ifndef DRUN_RENDEZVOUS_BASE_WAKE_FD_H_
#define DRUN_RENDEZVOUS_BASE_WAKE_FD_H_

#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "rendezvous/base/mutex.h"
#include "rendezvous/base/unique_fd.h"

namespace drun {

class WakeFd {
 public:
  WakeFd() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  bool valid() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  // Any thread: fd() becomes readable.
  void Signal() const {
    const uint64_t one = 1;
    ssize_t r = write(fd_.get(), &one, sizeof one);
    (void)r;  // a counter already non-zero wakes the waiter all the same
  }
  // The waiter: fd() stops being readable (until the next Signal).
  void Clear() const {
    uint64_t v;
    ssize_t r = read(fd_.get(), &v, sizeof v);
    (void)r;  // EAGAIN: nothing was signalled
  }

 private:
  UniqueFd fd_;
};

template <typename T>
class Mailbox {
 public:
  bool valid() const { return wake_.valid(); }
  // Readable while messages wait.
  int fd() const { return wake_.fd(); }

  // Any thread.
  void Post(T message) {
    MutexLock l(&mu_);
    queue_.push_back(std::move(message));
    wake_.Signal();
  }
  // The oldest message; none (and fd() quiet) when the queue is empty.
  std::optional<T> Take() {
    MutexLock l(&mu_);
    if (queue_.empty()) {
      wake_.Clear();
      return std::nullopt;
    }
    T m = std::move(queue_.front());
    queue_.pop_front();
    return m;
  }
  // Every message waiting, oldest first; fd() is quiet after it.
  std::vector<T> TakeAll() {
    MutexLock l(&mu_);
    wake_.Clear();
    std::vector<T> all(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
    queue_.clear();
    return all;
  }
  bool empty() const {
    MutexLock l(&mu_);
    return queue_.empty();
  }

 private:
  WakeFd wake_;
  mutable Mutex mu_;
  std::deque<T> queue_ ABSL_GUARDED_BY(mu_);
};

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_WAKE_FD_H_
