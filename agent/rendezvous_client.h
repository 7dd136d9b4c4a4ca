// RendezvousClient: the agent's view of the rendezvous. The agent sends
// Hello/Join/Succeeded/Failed/Heartbeat and receives Assignment, Stop,
// Finish, Reject and Waiting. `--standalone` satisfies it in-process
// (LocalRendezvous); a multi-node job puts the gRPC server behind it.
#ifndef DRUN_AGENT_RENDEZVOUS_CLIENT_H_
#define DRUN_AGENT_RENDEZVOUS_CLIENT_H_

#include <optional>

#include "drun/v1/rendezvous.pb.h"
#include "rendezvous/rendezvous_state.h"

namespace drun {

class RendezvousClient {
 public:
  virtual ~RendezvousClient() = default;
  virtual void Send(const v1::AgentMessage& msg, TimePoint now) = 0;
  // The next message from the server, if one is ready (never blocks).
  virtual std::optional<v1::ServerMessage> Receive() = 0;
  // A descriptor that becomes readable when Receive() may have something
  // new; -1 when messages only ever follow Send() or OnTick() synchronously.
  virtual int wakeup_fd() const = 0;
  virtual void OnTick(TimePoint now) = 0;
  virtual std::optional<TimePoint> NextDeadline() const = 0;
  // A one-line description of where the rendezvous is, for messages.
  virtual std::string Describe() const = 0;
  // The host this agent dials to reach the server; with the agent store it is
  // also the workers' MASTER_ADDR (the store runs beside the server).
  virtual std::string server_host() const = 0;
  // True when the server relays `drun stacks` to every node (StacksRequest,
  // StacksWanted): a multi-node rendezvous. LocalRendezvous has one node.
  virtual bool relays_stacks() const = 0;
  // False once the server is known lost (its stream ended or went silent).
  virtual bool connected() const = 0;
};

}  // namespace drun

#endif  // DRUN_AGENT_RENDEZVOUS_CLIENT_H_
