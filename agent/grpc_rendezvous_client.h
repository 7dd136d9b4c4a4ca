// GrpcRendezvousClient: the agent's end of the rendezvous stream. A reader
// thread moves server messages into a queue and signals an eventfd that the
// agent's poll loop watches; writes happen on the agent's thread. Heartbeats
// go out every `heartbeat`; if nothing (not even a heartbeat reply) comes back
// for `silence`, or the stream breaks, the client reports the server lost as a
// Finish with exit code 1 naming the server. Time the agent itself did not run
// (a heartbeat tick more than 50 ms late) does not count as silence.
#ifndef DRUN_AGENT_GRPC_RENDEZVOUS_CLIENT_H_
#define DRUN_AGENT_GRPC_RENDEZVOUS_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/rendezvous_client.h"

namespace drun {

struct GrpcClientOptions {
  std::string target;  // HOST:PORT
  Duration connect_timeout = std::chrono::seconds(60);
  Duration heartbeat = std::chrono::milliseconds(500);
  // Zero: never give up on a silent server (the host's own agent, whose
  // server lives in the same process).
  Duration silence = std::chrono::seconds(2);
};

// Connects (retrying until connect_timeout) and opens the stream.
absl::StatusOr<std::unique_ptr<RendezvousClient>> ConnectRendezvous(const GrpcClientOptions& opt);

}  // namespace drun

#endif  // DRUN_AGENT_GRPC_RENDEZVOUS_CLIENT_H_
