// RendezvousServer: the gRPC adapter around RendezvousState. Runs inside the
// drun process of the node that hosts the rendezvous. One long-lived
// bidirectional stream per agent (callback API: no thread per stream); a
// timer thread drives the state machine's deadlines.
//
// Transport duties (the state machine knows nothing of them): a stream that
// ends is a lost node; every Heartbeat is answered with a Heartbeat so agents
// can tell a silent server; a Reject closes the stream once written.
#ifndef DRUN_RENDEZVOUS_RENDEZVOUS_SERVER_H_
#define DRUN_RENDEZVOUS_RENDEZVOUS_SERVER_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "rendezvous/rendezvous_state.h"

namespace drun {

class RendezvousServer {
 public:
  // Listens on listen_addr ("HOST:PORT"; PORT 0 picks one). Fails with a
  // one-line reason when the address cannot be bound (e.g. port in use).
  // With config.use_agent_store, each round gets a fresh c10d store served
  // here (see RoundStore).
  static absl::StatusOr<std::unique_ptr<RendezvousServer>> Start(const std::string& listen_addr,
                                                                 RendezvousState::Config config);
  virtual ~RendezvousServer() = default;
  virtual int port() const = 0;

  // What a launcher that runs no agent itself needs to follow the job.
  struct Event {
    enum Kind { kNodeLost, kFinished } kind;
    std::string host;  // kNodeLost
    v1::Finish finish;  // kFinished
  };
  // Readable when NextEvent() may return something.
  virtual int event_fd() const = 0;
  virtual std::optional<Event> NextEvent() = 0;
  // Stops accepting, gives open streams up to `grace` to finish, then cancels.
  virtual void Shutdown(Duration grace) = 0;
};

// "ipv4:10.0.0.2:4711" / "ipv6:[::1]:4711" / "ipv6:%5B::1%5D:4711" -> host.
std::string PeerHost(const std::string& peer);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_RENDEZVOUS_SERVER_H_
