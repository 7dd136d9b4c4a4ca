// The AgentLaunch framing a launcher writes to a remote `drun agent`'s stdin
// (a little-endian uint32 length, then the message), the signal notices that
// may follow it on the same stream (the lifeline), and the rendezvous
// configuration a JobSpec implies. No network code: the light drun links it.
#ifndef DRUN_AGENT_AGENT_LAUNCH_H_
#define DRUN_AGENT_AGENT_LAUNCH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "drun/v1/job.pb.h"
#include "rendezvous/rendezvous_state.h"

namespace drun {

std::string EncodeAgentLaunch(const v1::AgentLaunch& launch);
absl::StatusOr<v1::AgentLaunch> ReadAgentLaunch(int fd);

// After the launch message a launcher writes notices on the same stream:
//  - 'S' + signal number: one per stop signal it got (SIGINT, SIGTERM, ...),
//    so the agent stops its workers with that very signal rather than taking
//    the stream's end for a SIGHUP (also SIGUSR1/SIGUSR2, for the workers);
//  - 'D' + uint16 little-endian length + bytes: the launcher's own standard
//    input (--stdin), for the workers that read it;
//  - 'E': that input ended (end-of-file);
//  - 'N': the launcher's terminal echoed a typed newline, so the cursor is on
//    a fresh line (the agent's console starts the next output anew).
// The stream's end (EOF) stays the launcher's loss. Unknown bytes are skipped
// one at a time, so a newer launcher's notices cost an older agent nothing
// but those notices (the launch's version check refuses mismatched drun).
std::string EncodeLifelineSignal(int sig);
std::string EncodeLifelineInput(absl::string_view data);  // any size: split as needed
std::string EncodeLifelineInputEnd();
std::string EncodeLifelineEcho();

// What one Feed found on the lifeline, in arrival order within each kind.
struct LifelineNotices {
  std::vector<int> signals;
  std::string input;        // bytes of the launcher's stdin
  bool input_end = false;   // the launcher's stdin ended
  bool echoed = false;      // the launcher's terminal echoed a newline
};

// Splits the lifeline's bytes into notices, however the bytes are split.
class LifelineDecoder {
 public:
  void Feed(const char* data, size_t n, LifelineNotices* out);
  // Only the signals (the rest is decoded and dropped).
  void Feed(const char* data, size_t n, std::vector<int>* signals);

 private:
  enum class State { kTag, kSignal, kLength0, kLength1, kData };
  State state_ = State::kTag;
  size_t length_ = 0;  // of the data notice being read
};

// A launcher's own standard input, relayed to its agents as lifeline notices
// (--stdin other than none). poll fd() for POLLIN, then Read() once: it
// never blocks there, and returns the notices to write on every lifeline.
// A closed stdin, /dev/null, EOF and EIO (a background job reading its
// terminal: SIGTTIN is ignored so the launcher never stops) all end it with
// the 'E' notice; after that fd() is -1 and ended() is true.
class StdinRelay {
 public:
  explicit StdinRelay(bool enabled);
  int fd() const { return ended_ ? -1 : 0; }
  bool ended() const { return ended_; }
  std::string Read();
  // The last Read() took a line the terminal echoed (its 'N' notice): the
  // launcher's own console starts anew too (Console::InputEchoed).
  bool echoed() const { return echoed_; }
  // What an agent started now gets first: the end notice once stdin ended.
  std::string ForNewAgent() const;

 private:
  bool ended_ = false;
  bool tty_ = false;
  bool echoed_ = false;
};

// The checks a launched agent makes on its host before it joins, in place of
// separate pre-flight commands from the launcher (one remote command per
// host is the launch's whole cost): the same drun version as the launcher's
// (when the launch names it), the job's working directory, and its script or
// program path. Each failure is one line, worded for the launcher, which
// prints it after the host's name ("the script X is not there; ...").
absl::Status CheckLaunchHere(const v1::AgentLaunch& launch, const std::string& version);

// RendezvousState::Config for a job described by `spec`.
RendezvousState::Config RendezvousConfigFor(const v1::JobSpec& spec, const std::string& token);

}  // namespace drun

#endif  // DRUN_AGENT_AGENT_LAUNCH_H_
