#include "agent/log_pump.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <system_error>

#include "rendezvous/base/mutex.h"
#include "rendezvous/base/poll_set.h"
#include "rendezvous/base/say.h"  // WriteAll

namespace drun {

namespace {

constexpr size_t kChunk = 1 << 20;  // the most one system call moves

}  // namespace

struct LogPump::Stream {
  int id = -1;
  UniqueFd pipe;    // the worker's pipe, read end
  UniqueFd file;    // the log; none after a failed write
  std::atomic<uint64_t> moved{0};  // read by the owner's thread too
  bool no_splice = false;  // the log's file system refused splice(2)
  bool finishing = false;
  bool ended = false;
  Wait wait = Wait::kNone;
};

LogPump::LogPump()
    : scratch_(new char[kChunk]) {}

LogPump::~LogPump() {
  if (!thread_.joinable()) return;
  control_.Post(Command{-1});
  thread_.join();
}

int LogPump::Add(UniqueFd pipe, UniqueFd file) {
  auto s = std::make_unique<Stream>();
  s->id = static_cast<int>(streams_.size());
  s->pipe = std::move(pipe);
  s->file = std::move(file);
  streams_.push_back(std::move(s));
  return streams_.back()->id;
}

absl::Status LogPump::Start() {
  if (!control_.valid() || !events_.valid()) return absl::ErrnoToStatus(EMFILE, "eventfd");
  // The thread takes no signal: they belong to the agent's signalfd.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  absl::Status started = absl::OkStatus();
  try {
    thread_ = std::thread(&LogPump::Run, this);
  } catch (const std::system_error& e) {
    started = absl::ResourceExhaustedError(e.what());
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return started;
}

uint64_t LogPump::moved(int id) const {
  return streams_[id]->moved.load(std::memory_order_relaxed);
}

void LogPump::Finish(int id) { control_.Post(Command{id}); }

std::vector<LogPump::Event> LogPump::TakeEvents() { return events_.TakeAll(); }

void LogPump::Run() {
  // SCHED_BATCH: a wake-up of this thread does not preempt others (the agent
  // loop, which shows the same bytes on the console a moment later); its
  // share of the CPU is unchanged. Refused: only latency under load suffers.
  const sched_param batch{};
  sched_setscheduler(0, SCHED_BATCH, &batch);  // 0: the calling thread
  PollSet set;
  bool stop = false;
  set.Add(control_.fd(), POLLIN, [&](short) {
    for (const Command& c : control_.TakeAll()) {
      if (c.finish < 0) {
        stop = true;
      } else {
        streams_[c.finish]->finishing = true;
      }
    }
  });
  std::vector<PollSet::Id> ids;
  for (auto& sp : streams_) {
    Stream* s = sp.get();
    ids.push_back(set.Add(s->pipe.get(), POLLIN, [s](short) { s->wait = Wait::kNone; }));
  }
  while (!stop) {
    for (auto& sp : streams_) {
      Stream& s = *sp;
      if (s.ended) continue;
      // A finishing stream that waited for its pipe looks once more: what is
      // there now is drained, then it ends.
      if (s.wait == Wait::kNone || (s.finishing && s.wait == Wait::kPipe)) s.wait = Step(s);
      if (s.wait == Wait::kEnded) set.Remove(ids[s.id]);  // its pipe is closed
    }
    set.Poll(std::nullopt);  // an error (EINTR) only loops
  }
}

LogPump::Wait LogPump::Step(Stream& s) {
  // Bounded, so one busy stream cannot starve the others of this thread.
  for (int i = 0; i < 16; ++i) {
    const Wait w = Move(s);
    if (w == Wait::kPipe && s.finishing) {
      End(s);
      return Wait::kEnded;
    }
    if (w != Wait::kNone) return w;
  }
  return Wait::kNone;
}

LogPump::Wait LogPump::Move(Stream& s) {
  ssize_t n;
  if (s.file && !s.no_splice) {
    n = splice(s.pipe.get(), nullptr, s.file.get(), nullptr, kChunk, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n < 0 && errno == EINVAL) {  // this file system cannot splice: read and write
      s.no_splice = true;
      return Wait::kNone;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      FileFailed(s, errno);  // the bytes that did not fit are dropped from here on
      return Wait::kNone;
    }
  } else {
    n = read(s.pipe.get(), scratch_.get(), kChunk);
    if (n > 0 && s.file) {
      if (int err = WriteAll(s.file.get(), absl::string_view(scratch_.get(), n)); err != 0) {
        FileFailed(s, err);
      }
    }
  }
  if (n > 0) s.moved.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  if (n > 0 || (n < 0 && errno == EINTR)) return Wait::kNone;
  if (n < 0 && errno == EAGAIN) return Wait::kPipe;
  End(s);  // end-of-file (or a broken pipe)
  return Wait::kEnded;
}

void LogPump::FileFailed(Stream& s, int err) {
  s.file.reset();
  events_.Post({s.id, false, err});
}

void LogPump::End(Stream& s) {
  s.pipe.reset();
  s.file.reset();
  s.ended = true;
  events_.Post({s.id, true, 0});
}

}  // namespace drun
