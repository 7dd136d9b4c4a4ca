// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with
// the capability annotations of absl/base/thread_annotations.h, so that
// clang's -Wthread-safety checks every ABSL_GUARDED_BY of drun (libstdc++'s
// std::mutex is no capability: clang rejects ABSL_GUARDED_BY(a std::mutex)).
// The CMake option DRUN_THREAD_SAFETY_CHECK builds drun's lock-holding
// sources with clang and -Wthread-safety -Werror (tests/run.sh runs it).
//
// Rules the analysis enforces (and that drun follows):
//  - every member two threads share is ABSL_GUARDED_BY(its mutex);
//  - a helper called with a lock held says so with
//    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) instead of a "mu_ held" comment;
//  - locks are scoped (MutexLock); Lock()/Unlock() by hand only where a
//    scope cannot say it.
// Same cost and behaviour as the std types they wrap (LevelDB's
// port/port_stdcxx.h does the same); not recursive.
#ifndef DRUN_RENDEZVOUS_BASE_MUTEX_H_
#define DRUN_RENDEZVOUS_BASE_MUTEX_H_

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "rendezvous/base/clock.h"

namespace drun {

class ABSL_LOCKABLE Mutex {
 public:
  constexpr Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Tells the analysis that the caller holds the lock (checked by nothing
  // at run time): for callbacks the analysis cannot follow.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable waited on with a Mutex held; the waits release it
// while they sleep and hold it again when they return (spurious wake-ups
// included: callers re-check their condition).
class CondVar {
 public:
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    cv_.wait(l);
    l.release();  // still held: the caller's scope unlocks it
  }
  // False when `deadline` passed.
  bool WaitUntil(Mutex* mu, TimePoint deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(l, deadline) == std::cv_status::no_timeout;
    l.release();
    return woken;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_MUTEX_H_
