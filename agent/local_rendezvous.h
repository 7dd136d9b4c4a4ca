// LocalRendezvous: the rendezvous of a single-node job, in-process. It drives
// the same RendezvousState as the gRPC server does, so restarts, budget and
// completion behave identically on one node and many.
#ifndef DRUN_AGENT_LOCAL_RENDEZVOUS_H_
#define DRUN_AGENT_LOCAL_RENDEZVOUS_H_

#include <deque>
#include <string>
#include <utility>

#include "agent/rendezvous_client.h"
#include "rendezvous/round_store.h"

namespace drun {

class LocalRendezvous : public RendezvousClient {
 public:
  // The store listens only on `store_addr` (every worker is on this machine:
  // 127.0.0.1, or the --master-addr given, an address of this machine).
  // No job token is checked: the agent is this very process, and nothing
  // crosses a wire for a token to protect (join_auth.h is for the network).
  LocalRendezvous(RendezvousState::Config config, std::string store_addr)
      : state_(WithoutToken(config)), store_(config.fixed_master_port, std::move(store_addr)) {}
  void Send(const v1::AgentMessage& msg, TimePoint now) override;
  std::optional<v1::ServerMessage> Receive() override;
  int wakeup_fd() const override { return -1; }
  void OnTick(TimePoint now) override;
  std::optional<TimePoint> NextDeadline() const override { return state_.NextDeadline(); }
  std::string Describe() const override { return "in-process rendezvous"; }
  std::string server_host() const override { return "127.0.0.1"; }
  bool relays_stacks() const override { return false; }
  bool connected() const override { return true; }

 private:
  static RendezvousState::Config WithoutToken(RendezvousState::Config c) {
    c.token.clear();
    return c;
  }
  void Deliver(RendezvousState::Outbox out);
  static constexpr RendezvousState::NodeId kSelf = 1;
  RendezvousState state_;
  RoundStore store_;
  std::deque<v1::ServerMessage> inbox_;
};

}  // namespace drun

#endif  // DRUN_AGENT_LOCAL_RENDEZVOUS_H_
