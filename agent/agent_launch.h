// The AgentLaunch framing a launcher writes to a remote `drun agent`'s stdin
// (a little-endian uint32 length, then the message), the signal notices that
// may follow it on the same stream (the lifeline), and the rendezvous
// configuration a JobSpec implies. No network code: the light drun links it.
#ifndef DRUN_AGENT_AGENT_LAUNCH_H_
#define DRUN_AGENT_AGENT_LAUNCH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "drun/v1/job.pb.h"
#include "rendezvous/rendezvous_state.h"

namespace drun {

std::string EncodeAgentLaunch(const v1::AgentLaunch& launch);
absl::StatusOr<v1::AgentLaunch> ReadAgentLaunch(int fd);

// After the launch message a launcher writes one notice per stop signal it
// got (SIGINT, SIGTERM, ...), so the agent stops its workers with that very
// signal rather than taking the stream's end for a SIGHUP: two bytes, a tag
// and the signal number. The stream's end (EOF) stays the launcher's loss.
std::string EncodeLifelineSignal(int sig);

// Splits the lifeline's bytes into signal notices; anything else is skipped
// a byte at a time (a newer launcher's notices an older agent ignores).
class LifelineDecoder {
 public:
  // Appends the signals noticed in `data` to *signals.
  void Feed(const char* data, size_t n, std::vector<int>* signals);

 private:
  bool tag_seen_ = false;
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
