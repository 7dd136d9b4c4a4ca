// The remote launchers' console (ssh, and --launcher slurm through
// launcher/slurm/srun_relay.h): every host's output and drun's own lines go
// through one Console (agent/output.h), the same code that keeps a local
// agent's ranks apart, so
//  - a remote rank's partial line (a prompt, a progress bar) shows within
//    about 40 ms with its prefix (the agent shows it after its own 30 ms,
//    prefixed; this console 5 ms after it arrives, or at once for a stream
//    whose partial pieces arrive whole: HostStream's partial_delay);
//  - two hosts' `\r` bars on a terminal each keep a row of their own (the
//    Console's live region: each host is a source of its own);
//  - a `\r` redraw keeps its prefix (the agent sends it again after '\r');
//  - bytes of two hosts never share a console line: a host's unfinished line
//    is ended when another must write (after Console::kHoldLimit), and goes
//    on under that rank's continuation prefix ("[host:rank0]+ "), learnt
//    from the prefix the agent put at the line's start;
//  - a line the agent itself wrote ("drun: ...") names the host.
// Host threads write (waiting while the console cannot keep up, so a slow
// terminal slows the hosts' streams, never drops them); the launcher's loop
// calls Tick() by NextDeadline() and when wake_fd() is readable.
#ifndef DRUN_LAUNCHER_SSH_SSH_CONSOLE_H_
#define DRUN_LAUNCHER_SSH_SSH_CONSOLE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "agent/output.h"
#include "rendezvous/base/mutex.h"
#include "rendezvous/base/unique_fd.h"
#include "rendezvous/base/wake_fd.h"

namespace drun {

class ConsoleHub {
 public:
  // out_fd/err_fd: this process's stdout and stderr (a test's pipes).
  explicit ConsoleHub(int out_fd = 1, int err_fd = 2);
  // This process's, created on first use and never destroyed: Drain() it
  // before the end.
  static ConsoleHub& Get();

  static constexpr std::chrono::milliseconds kHostPartialDelay{5};
  // A host's stream: no prefix of its own (the agent's lines carry theirs).
  // Its partial lines wait `partial_delay` more here.
  int AddSource(int stream, std::chrono::milliseconds partial_delay = kHostPartialDelay);
  // One remote worker stream whose bytes come unprefixed (relay frames,
  // agent/output.h RelayFrames): this console prefixes them, coloured
  // (colour_index >= 0) as a local agent's when its output is a terminal.
  int AddSource(int stream, std::chrono::milliseconds partial_delay, absl::string_view prefix,
                absl::string_view cont_prefix, int colour_index);
  void SetContinuation(int id, absl::string_view cont_prefix);
  void RemoveSource(int id);
  // From any thread; returns once the console took the bytes.
  void Write(int id, absl::string_view data);
  // drun's own whole lines (stream 2), after ending any open line.
  void Text(absl::string_view text);
  // This process's terminal echoed a typed line (Console::InputEchoed).
  void InputEchoed();

  // The launcher's loop: readable when a host's write may have set a new
  // deadline; Tick shows the partial lines that are due, writes what the
  // console takes, and returns when to call it next.
  int wake_fd() const { return wake_.fd(); }
  std::optional<OutClock::time_point> Tick();
  std::vector<int> BlockedFds();
  // More is queued than the console takes (Console::congested): a caller
  // with one loop stops reading its hosts until it is not, so Write never
  // waits there.
  bool congested();
  // Blocks until everything queued is written (before the end's report).
  void Drain();

 private:
  Mutex mu_;
  Console console_ ABSL_GUARDED_BY(mu_);
  WakeFd wake_;
};

// One stream (1: stdout, 2: stderr) of one host's agent, into the hub.
class HostStream {
 public:
  HostStream(ConsoleHub* hub, int stream, std::string host,
             std::chrono::milliseconds partial_delay = ConsoleHub::kHostPartialDelay);
  ~HostStream();  // what is pending goes out, ended by a newline
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;
  void Feed(absl::string_view data);

 private:
  // Writes bytes that hold none of the agent's own lines.
  void Pass(absl::string_view data);
  // The rank prefix at the start of the current line, once it is whole.
  void Learn(absl::string_view data);

  ConsoleHub* hub_;
  int stream_;
  std::string host_;
  int id_;
  bool at_start_ = true;  // the next byte starts a line
  std::string head_;      // the current line's first bytes, until its prefix is known
  bool head_done_ = false;
  std::string cont_;      // the continuation prefix in force
};

}  // namespace drun

#endif  // DRUN_LAUNCHER_SSH_SSH_CONSOLE_H_
