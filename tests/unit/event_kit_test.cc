// The event-loop kit of rendezvous/base: WakeFd, Mailbox, DeadlineQueue,
// PollSet, and the annotated Mutex/CondVar. Real descriptors and threads;
// every wait is for an event (bounded only as a coarse guard).
#include <poll.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rendezvous/base/deadline_queue.h"
#include "rendezvous/base/mutex.h"
#include "rendezvous/base/poll_set.h"
#include "rendezvous/base/unique_fd.h"
#include "rendezvous/base/wake_fd.h"

namespace drun {
namespace {

using ::testing::ElementsAre;
using std::chrono::milliseconds;

bool Readable(int fd, int timeout_ms = 0) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

TEST(WakeFd, SignalMakesReadableAndClearQuietsEveryPendingSignal) {
  WakeFd w;
  ASSERT_TRUE(w.valid());
  EXPECT_FALSE(Readable(w.fd()));
  w.Signal();
  w.Signal();
  EXPECT_TRUE(Readable(w.fd()));
  w.Clear();
  EXPECT_FALSE(Readable(w.fd()));
  w.Clear();  // nothing pending: no effect, no block
  EXPECT_FALSE(Readable(w.fd()));
}

TEST(WakeFd, WakesAPollInAnotherThread) {
  WakeFd w;
  std::thread t([&] { w.Signal(); });
  EXPECT_TRUE(Readable(w.fd(), 10000));
  t.join();
}

TEST(Mailbox, DeliversInOrderAndIsReadableExactlyWhileMessagesWait) {
  Mailbox<std::string> box;
  ASSERT_TRUE(box.valid());
  EXPECT_FALSE(Readable(box.fd()));
  box.Post("a");
  box.Post("b");
  EXPECT_TRUE(Readable(box.fd()));
  EXPECT_EQ(box.Take(), "a");
  EXPECT_TRUE(Readable(box.fd()));  // "b" still waits
  EXPECT_EQ(box.Take(), "b");
  EXPECT_EQ(box.Take(), std::nullopt);
  EXPECT_FALSE(Readable(box.fd()));
  EXPECT_TRUE(box.empty());
}

TEST(Mailbox, TakeAllEmptiesTheQueue) {
  Mailbox<int> box;
  box.Post(1);
  box.Post(2);
  box.Post(3);
  EXPECT_THAT(box.TakeAll(), ElementsAre(1, 2, 3));
  EXPECT_FALSE(Readable(box.fd()));
  EXPECT_TRUE(box.TakeAll().empty());
}

TEST(Mailbox, NoMessageFromOtherThreadsIsLost) {
  Mailbox<int> box;
  constexpr int kThreads = 4, kEach = 1000;
  std::vector<std::thread> posters;
  for (int t = 0; t < kThreads; ++t) {
    posters.emplace_back([&box, t] {
      for (int i = 0; i < kEach; ++i) box.Post(t * kEach + i);
    });
  }
  std::vector<int> last(kThreads, -1);
  int got = 0;
  while (got < kThreads * kEach) {
    ASSERT_TRUE(Readable(box.fd(), 10000)) << "a Post did not wake the reader (" << got << " taken)";
    while (auto m = box.Take()) {
      const int t = *m / kEach;
      EXPECT_GT(*m, last[t]);  // each poster's messages in its order
      last[t] = *m;
      ++got;
    }
  }
  for (std::thread& t : posters) t.join();
  EXPECT_FALSE(Readable(box.fd()));
}

TEST(DeadlineQueue, TakesDueKeysEarliestFirst) {
  const TimePoint t0{};
  DeadlineQueue<int> q;
  EXPECT_EQ(q.Next(), std::nullopt);
  EXPECT_EQ(q.PollTimeoutMs(t0), -1);
  q.Add(3, t0 + milliseconds(30));
  q.Add(1, t0 + milliseconds(10));
  q.Add(2, t0 + milliseconds(20));
  EXPECT_EQ(q.Next(), t0 + milliseconds(10));
  EXPECT_EQ(q.PollTimeoutMs(t0), 10);
  EXPECT_TRUE(q.TakeDue(t0 + milliseconds(9)).empty());
  EXPECT_THAT(q.TakeDue(t0 + milliseconds(20)), ElementsAre(1, 2));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.PollTimeoutMs(t0 + milliseconds(40)), 0);  // overdue: no wait
  EXPECT_THAT(q.TakeDue(t0 + milliseconds(40)), ElementsAre(3));
  EXPECT_TRUE(q.empty());
}

TEST(DeadlineQueue, CancelForgetsAKeyAndAddMovesIt) {
  const TimePoint t0{};
  DeadlineQueue<uint64_t> q;
  q.Add(7, t0 + milliseconds(5));
  q.Add(8, t0 + milliseconds(6));
  q.Cancel(7);
  q.Cancel(99);  // unknown: nothing
  EXPECT_FALSE(q.Contains(7));
  q.Add(8, t0 + milliseconds(50));  // moved later
  EXPECT_TRUE(q.TakeDue(t0 + milliseconds(10)).empty());
  EXPECT_EQ(q.Next(), t0 + milliseconds(50));
  EXPECT_THAT(q.TakeDue(t0 + milliseconds(50)), ElementsAre(8u));
}

TEST(PollSet, RunsTheHandlerOfEachReadyDescriptorOnly) {
  UniqueFd r1, w1, r2, w2;
  ASSERT_TRUE(MakePipe(&r1, &w1));
  ASSERT_TRUE(MakePipe(&r2, &w2));
  PollSet set;
  std::vector<std::string> ran;
  set.Add(r1.get(), POLLIN, [&](short) { ran.push_back("one"); });
  set.Add(r2.get(), POLLIN, [&](short ev) {
    EXPECT_TRUE(ev & POLLIN);
    ran.push_back("two");
  });
  ASSERT_EQ(write(w2.get(), "x", 1), 1);
  EXPECT_EQ(set.Poll(std::nullopt), 1);
  EXPECT_THAT(ran, ElementsAre("two"));
}

TEST(PollSet, TimesOutAtTheDeadlineWithNothingReady) {
  UniqueFd r, w;
  ASSERT_TRUE(MakePipe(&r, &w));
  PollSet set;
  bool ran = false;
  set.Add(r.get(), POLLIN, [&](short) { ran = true; });
  EXPECT_EQ(set.Poll(Clock::now()), 0);  // a deadline already passed: no wait
  EXPECT_FALSE(ran);
}

TEST(PollSet, NegativeFdsAndZeroEventsAreNeverPolled) {
  UniqueFd r, w;
  ASSERT_TRUE(MakePipe(&r, &w));
  ASSERT_EQ(write(w.get(), "x", 1), 1);
  PollSet set;
  int ran = 0;
  set.Add(-1, POLLIN, [&](short) { ++ran; });
  PollSet::Id id = set.Add(r.get(), POLLIN, [&](short) { ++ran; });
  set.SetEvents(id, 0);
  EXPECT_EQ(set.Poll(Clock::now()), 0);
  set.SetEvents(id, POLLIN);
  EXPECT_EQ(set.Poll(Clock::now()), 1);
  set.SetFd(id, -1);  // its descriptor closed
  EXPECT_EQ(set.Poll(Clock::now()), 0);
  EXPECT_EQ(ran, 1);
}

TEST(PollSet, HandlersMayRemoveAndAddRegistrationsWhileRunning) {
  UniqueFd r1, w1, r2, w2, r3, w3;
  ASSERT_TRUE(MakePipe(&r1, &w1));
  ASSERT_TRUE(MakePipe(&r2, &w2));
  ASSERT_TRUE(MakePipe(&r3, &w3));
  for (int fd : {w1.get(), w2.get(), w3.get()}) ASSERT_EQ(write(fd, "x", 1), 1);
  PollSet set;
  std::vector<std::string> ran;
  PollSet::Id second = 0, self = 0;
  self = set.Add(r1.get(), POLLIN, [&](short) {
    ran.push_back("first");
    set.Remove(second);  // ready too, but removed: not run this round
    set.Remove(self);    // its own registration, while running
    set.Add(r3.get(), POLLIN, [&](short) { ran.push_back("added"); });
  });
  second = set.Add(r2.get(), POLLIN, [&](short) { ran.push_back("second"); });
  EXPECT_EQ(set.Poll(std::nullopt), 1);
  EXPECT_THAT(ran, ElementsAre("first"));
  EXPECT_EQ(set.size(), 1u);
  EXPECT_EQ(set.Poll(std::nullopt), 1);
  EXPECT_THAT(ran, ElementsAre("first", "added"));
}

TEST(PollSet, AHandlerSeesTheOtherEndClose) {
  UniqueFd r, w;
  ASSERT_TRUE(MakePipe(&r, &w));
  PollSet set;
  short seen = 0;
  set.Add(r.get(), POLLIN, [&](short ev) { seen = ev; });
  w.reset();
  EXPECT_EQ(set.Poll(std::nullopt), 1);
  EXPECT_TRUE(seen & POLLHUP);
}

TEST(PollSet, AMailboxWakesTheLoop) {
  Mailbox<int> box;
  PollSet set;
  std::vector<int> got;
  set.Add(box.fd(), POLLIN, [&](short) {
    while (auto m = box.Take()) got.push_back(*m);
  });
  std::thread t([&] { box.Post(42); });
  while (got.empty()) ASSERT_GE(set.Poll(Clock::now() + std::chrono::seconds(10)), 1);
  t.join();
  EXPECT_THAT(got, ElementsAre(42));
}

class Counter {
 public:
  void Add() {
    MutexLock l(&mu_);
    ++n_;
    cv_.SignalAll();
  }
  // Waits until the count reaches `n` or the deadline; the count then.
  int WaitFor(int n, TimePoint deadline) {
    MutexLock l(&mu_);
    while (n_ < n && cv_.WaitUntil(&mu_, deadline)) {
    }
    return n_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int n_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(Mutex, GuardsACounterAndCondVarWakesItsWaiter) {
  Counter c;
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) {
    ts.emplace_back([&c] {
      for (int j = 0; j < 1000; ++j) c.Add();
    });
  }
  EXPECT_EQ(c.WaitFor(4000, Clock::now() + std::chrono::seconds(30)), 4000);
  for (std::thread& t : ts) t.join();
}

TEST(CondVar, WaitUntilReturnsFalseOnceTheDeadlinePassed) {
  Mutex mu;
  CondVar cv;
  MutexLock l(&mu);
  const TimePoint deadline = Clock::now() + milliseconds(20);
  while (cv.WaitUntil(&mu, deadline)) {
  }  // a spurious wake-up only loops
  EXPECT_GE(Clock::now(), deadline);
}

}  // namespace
}  // namespace drun
