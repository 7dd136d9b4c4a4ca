// LogPump: a thread that moves worker pipes' bytes into their log files with
// splice(2), so that writing the logs runs beside the agent's event loop (on
// another core) instead of inside it.
//
// Why a thread (the agent loop is otherwise single-threaded and never
// sleeps): a log byte must cross a pipe (drun must survive a full disk for
// the worker, so the worker never writes the file itself) and then be copied
// into the page cache; that copy is as expensive as the worker's own write.
// Done by the single agent thread for every worker, it serialises what
// direct writers do in parallel: measured with 4 writers on 2 cores, the
// loop alone took 1.4-2.2x the direct writers' time, while per-stream
// splicers in parallel, at the same CPU, matched them (docs/benchmarks.md,
// "Worker I/O").
//
// Promises:
//  - the log file gets exactly the bytes of the pipe, in order (when the
//    agent loop also needs the bytes, for the console or a stderr tail, it
//    tee(2)s them into the pump's pipe before reading them itself);
//  - a log write that fails (ENOSPC, EIO) is reported once (an Event with
//    the errno); the stream goes on without its file (its bytes are read and
//    dropped), so the worker is never held back by its log;
//  - the thread waits only in poll(2) (a PollSet), on its pipes and on its
//    control mailbox; it is joined by the destructor, which abandons what is
//    left (the owner finishes streams first when it wants them drained);
//  - the owner's thread and the pump's share only two mailboxes (wake_fd.h):
//    commands to the thread, events back; the streams themselves belong to
//    the thread once Start() returned.
#ifndef DRUN_AGENT_LOG_PUMP_H_
#define DRUN_AGENT_LOG_PUMP_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "rendezvous/base/unique_fd.h"
#include "rendezvous/base/wake_fd.h"

namespace drun {

class LogPump {
 public:
  struct Event {
    int id = -1;
    bool ended = false;  // the stream is finished: its pipe and file are closed
    int error = 0;       // a log write failed with this errno (the file is closed)
  };

  LogPump();
  ~LogPump();  // stops and joins the thread
  LogPump(const LogPump&) = delete;
  LogPump& operator=(const LogPump&) = delete;

  // Before Start(): takes a pipe's read end (non-blocking) and its log file.
  // Returns the stream's id.
  int Add(UniqueFd pipe, UniqueFd file);
  absl::Status Start();

  // Drain what the stream's pipe holds now, then end it (a process that
  // escaped the worker's group may keep the pipe open: never wait for EOF).
  void Finish(int id);
  // Bytes the stream's pipe gave so far (any thread; the hang monitor's
  // sign of life for a worker whose output only the pump sees).
  uint64_t moved(int id) const;
  // Readable when events wait; TakeEvents() clears it.
  int wake_fd() const { return events_.fd(); }
  std::vector<Event> TakeEvents();

 private:
  struct Stream;
  enum class Wait { kNone, kPipe, kEnded };
  void Run();
  Wait Step(Stream& s);
  Wait Move(Stream& s);
  void FileFailed(Stream& s, int err);
  void End(Stream& s);
  // The owner's request: finish stream `finish`, or (-1) stop the thread.
  struct Command {
    int finish = -1;
  };

  std::vector<std::unique_ptr<Stream>> streams_;  // the thread's once started
  std::unique_ptr<char[]> scratch_;               // read/write fallback and discards
  Mailbox<Command> control_;  // the owner -> the thread
  Mailbox<Event> events_;     // the thread -> the owner
  std::thread thread_;
};

}  // namespace drun

#endif  // DRUN_AGENT_LOG_PUMP_H_
