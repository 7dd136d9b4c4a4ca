// A stack dump of one node's workers: what `drun stacks` prints and what
// --hang-timeout writes (docs/hangs.md).
//
// The agent knows its workers (rank, pid, what they printed last, how much
// CPU they used in the last interval); where each one is comes from a
// CaptureFn, which the binary provides (agent/stacks/ reads Python frames
// from the process's memory and native frames through eu-stack or gdb), so
// the agent's library does not depend on how stacks are read.
//
// DumpJob runs the captures on one thread of its own, so the agent's loop
// keeps pumping output while it works (ranks that --hang-timeout does not
// sample get their CPU use measured over the capture, 250 ms at least); the thread signals an eventfd when it
// is done and is joined by Take() or the destructor (never detached).
#ifndef DRUN_AGENT_STACK_DUMP_H_
#define DRUN_AGENT_STACK_DUMP_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "rendezvous/base/mutex.h"
#include "rendezvous/base/unique_fd.h"
#include "rendezvous/base/wake_fd.h"

namespace drun {

// One worker to dump, with what the agent knows of it.
struct RankTarget {
  std::string host;
  int rank = -1;
  int local_rank = -1;
  pid_t pid = 0;
  std::string last_line;         // the last line it printed ("" when none)
  double cpu_last_interval = -1;  // CPU seconds used in the last `window_s`; -1: not sampled
  double window_s = 0;
  double quiet_s = -1;            // seconds since it last printed; -1: not known
};

// Where one worker is.
struct RankStack {
  RankTarget target;
  char state = '?';    // R, S, D, T, Z; '?' when the process is gone
  std::string wchan;   // kernel wait channel, "" when running or unknown
  double cpu_seconds = 0;
  // The innermost frame of its main thread: Python "file:line in function"
  // when it runs Python, else the innermost native function; "" when unknown.
  std::string where;
  std::string text;         // every thread's frames, human-readable (indented)
  std::string unavailable;  // why frames are missing, one line ("" when none are)
};

using CaptureFn = std::function<RankStack(const RankTarget&)>;

// The last line a worker printed, from the bytes it writes: a line without
// its newline yet counts (a prompt, a progress bar's latest redraw after '\r').
// Keeps at most kMax bytes of it.
class LastLine {
 public:
  static constexpr size_t kMax = 200;
  void Add(absl::string_view data);
  std::string Get() const;

 private:
  std::string current_;  // the line being written
  std::string last_;     // the last complete, non-empty line
};

struct StackDump {
  std::vector<RankStack> ranks;  // by rank
  double capture_ms = 0;         // from start to the last capture
};

// The full dump: per rank a header line (host, rank, local rank, pid, state,
// wchan, CPU, quiet time, last line) and its frames.
std::string FormatDump(const StackDump& dump);

// The rank that printed last the longest ago (quiet_s) by more than a sample
// interval (window_s) over every other: across nodes, whose samples are taken
// at different moments. -1 when none is known or no one was first.
int QuietestRank(const StackDump& dump);

// The ranks that look unlike the others: a rank in state D; else, when most
// ranks are at the same place, the ones elsewhere. The place is `where` when
// every rank's is known, else the kernel's state and wait channel when every
// rank's is known (frames unreadable: an interpreter drun cannot read, no
// native tool). Sorted; empty when all agree or nothing tells them apart.
std::vector<int> OddRanks(const StackDump& dump);

// The end of a hang's root cause: "rank 2 is at train.py:13 in stuck" for
// `culprit`, with its state and wait channel when its place is unknown; for
// -1 (no rank stands out) why not: "no rank stands out: every one is at X",
// or "drun cannot tell which rank stands out: where some are is not known".
std::string HangVerdict(const StackDump& dump, int culprit);

// The compact per-rank table --hang-timeout prints: one "drun: " line per rank
// (rank, pid, state, CPU, quiet time, where), marking the odd ones and the one
// that went quiet first (`quietest`, -1: none).
std::string FormatHangTable(const StackDump& dump, int quietest);

class DumpJob {
 public:
  // Starts capturing every target on a thread of its own.
  DumpJob(std::vector<RankTarget> targets, CaptureFn capture);
  ~DumpJob();  // joins the thread
  DumpJob(const DumpJob&) = delete;
  DumpJob& operator=(const DumpJob&) = delete;

  // Readable once the dump is complete.
  int done_fd() const { return done_.fd(); }
  // The dump once done_fd() was readable, else nothing; joins the thread.
  std::optional<StackDump> Take();

 private:
  void Work(std::vector<RankTarget> targets, CaptureFn capture);

  WakeFd done_;  // signalled once result_ is set
  Mutex mu_;
  std::optional<StackDump> result_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace drun

#endif  // DRUN_AGENT_STACK_DUMP_H_
