// RendezvousServer: the gRPC adapter around RendezvousState. Runs inside the
// drun process of the node that hosts the rendezvous. One long-lived
// bidirectional stream per agent (callback API: no thread per stream); a
// timer thread drives the state machine's deadlines.
//
// Transport duties (the state machine knows nothing of them): a stream that
// ends is a lost node; a Heartbeat is answered with a Heartbeat so agents
// can tell a silent server, unless something is queued on that stream
// already (it answers as well: under load, replies are the work that is
// shed); a Reject closes the stream once written.
//
// One port (docs/architecture.md): when config.fixed_master_port is the port
// the server listens on, the workers' c10d store is served on that same port.
// drun's own listener classifies each accepted connection by its first bytes
// (rendezvous/first_bytes.h): the HTTP/2 preface goes to gRPC, a TCPStore
// request stream to the current round's store (RoundStore::Adopt), anything
// else is closed. Waiting for first bytes never holds up accepting others; a
// connection that stays silent longer than Options::first_bytes_timeout is
// closed. On a port of its own the same sorting runs, with only the HTTP/2
// preface going on: garbage and silent connections never reach gRPC.
//
// TLS (config.spec.tls, --rdzv-tls): agents' connections must then start
// with a TLS record; each is handshaken (client certificate required, chain
// to the CA) in a TlsRelay's thread and gRPC gets the relay's plain end
// (rendezvous/base/tls_relay.h). A plain gRPC client is closed unread; the
// workers' store on a shared port stays plain (torch speaks no TLS) and is
// guarded by admission only. Without TLS, a TLS client is garbage.
#ifndef DRUN_RENDEZVOUS_RENDEZVOUS_SERVER_H_
#define DRUN_RENDEZVOUS_RENDEZVOUS_SERVER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "drun/v1/control.pb.h"
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
  struct Options {
    // How long a connection to a shared port may stay silent before it is
    // closed. A gRPC client sends its preface at once; a TCPStore client its
    // first request, except torch 1.13's second ("callback") connection,
    // which speaks only for watchKey() and which the 1.13 client does not
    // miss when closed (measured). 10 s outlasts the TCP retransmissions of
    // a lossy link (1 + 2 + 4 s) and bounds what idle sockets can hold.
    Duration first_bytes_timeout = std::chrono::seconds(10);
  };
  static absl::StatusOr<std::unique_ptr<RendezvousServer>> Start(const std::string& listen_addr,
                                                                 RendezvousState::Config config,
                                                                 Options options);
  virtual ~RendezvousServer() = default;
  virtual int port() const = 0;
  // True when the workers' store is served on port() (see "One port" above).
  virtual bool serves_store() const = 0;

  // What a launcher that runs no agent itself needs to follow the job.
  struct Event {
    enum Kind { kNodeLost, kNodeArrived, kFinished, kStacks, kReport } kind;
    std::string host;  // kNodeLost, kNodeArrived (its Hello was accepted)
    v1::Finish finish;  // kFinished
    uint64_t stacks_id = 0;  // kStacks: AskStacks()'s number, and every node's reply
    std::vector<v1::ControlReply> stacks;
    v1::NodeReport report;  // kReport: what an agent saw, sent as it ends
    std::string addr = {};  // kNodeArrived: the node's address (its Hello's, else its connection's)
  };
  // Readable when NextEvent() may return something.
  virtual int event_fd() const = 0;
  virtual std::optional<Event> NextEvent() = 0;
  // Asks every node's agent for its ranks' stacks (rendezvous/stacks_relay.h);
  // the answer comes as a kStacks event with the returned number.
  virtual uint64_t AskStacks() = 0;
  // Connections refused so far: by the job's store (rendezvous/admission.h),
  // and with --rdzv-tls agents without TLS or whose certificate does not
  // verify against the CA.
  virtual uint64_t refused_connections() const = 0;
  // Stops accepting, gives open streams up to `grace` to finish, then cancels.
  virtual void Shutdown(Duration grace) = 0;
};

// The grace to give Shutdown once the job has finished, for a job of
// `nodes` nodes: every node's Finish is written and its stream ends (30 000
// took about 7 s on a loaded 2-core machine; docs/benchmarks_rendezvous.md).
// 2 s, plus 0.5 ms a node past 4000. It is waited only while streams are
// still open: agents end theirs at their Finish.
Duration FinishGrace(int nodes);

// "ipv4:10.0.0.2:4711" / "ipv6:[::1]:4711" / "ipv6:%5B::1%5D:4711" -> host.
std::string PeerHost(const std::string& peer);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_RENDEZVOUS_SERVER_H_
