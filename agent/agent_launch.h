// The AgentLaunch framing a launcher writes to a remote `drun agent`'s stdin
// (a little-endian uint32 length, then the message), and the rendezvous
// configuration a JobSpec implies. No network code: the light drun links it.
#ifndef DRUN_AGENT_AGENT_LAUNCH_H_
#define DRUN_AGENT_AGENT_LAUNCH_H_

#include <string>

#include "absl/status/statusor.h"
#include "drun/v1/job.pb.h"
#include "rendezvous/rendezvous_state.h"

namespace drun {

std::string EncodeAgentLaunch(const v1::AgentLaunch& launch);
absl::StatusOr<v1::AgentLaunch> ReadAgentLaunch(int fd);

// RendezvousState::Config for a job described by `spec`.
RendezvousState::Config RendezvousConfigFor(const v1::JobSpec& spec, const std::string& token);

}  // namespace drun

#endif  // DRUN_AGENT_AGENT_LAUNCH_H_
