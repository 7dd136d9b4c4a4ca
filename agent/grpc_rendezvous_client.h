// GrpcRendezvousClient: the agent's end of the rendezvous stream. A reader
// thread moves server messages into a queue and signals an eventfd that the
// agent's poll loop watches; writes happen on the agent's thread. When the
// stream breaks (the server died, or the kernel gave up on a cut link after
// link_timeout), or nothing at all (not even a reply to the heartbeats sent
// every `heartbeat`) comes back for `silence`, the client reports the server
// lost as a Finish with exit code 1 naming the server. Time the agent itself
// did not run (a heartbeat tick more than 50 ms late) does not count as
// silence. The server's Pace (sent after the Hello) replaces `heartbeat` and
// `silence` with what it chose for the job's size (link_liveness.h);
// heartbeats carry this agent's clock (Heartbeat.sent_us).
//
// The job token (rendezvous/join_auth.h): with one, the client holds the
// agent's Hello (and what follows it) until the server's Challenge has come,
// answers it with a proof instead of the token, and passes nothing from the
// server to the agent before a Welcome that proves the server knows the
// token; sealed specs are opened back into Assignment.spec. A server that
// cannot prove it, or whose spec does not open, is lost like a dead one: a
// Finish with exit code 1 that says why.
//
// A drun rendezvous opens every stream with its Challenge. What answers at
// the endpoint without one is not taken for a server lost later: a plain
// client whose peer closes the connection before saying anything, or says
// nothing within first_word, is told at once that what answers there is not
// a drun rendezvous (another program holds the port; or, for the close, a
// rendezvous started with --rdzv-tls, which closes agents without it).
#ifndef DRUN_AGENT_GRPC_RENDEZVOUS_CLIENT_H_
#define DRUN_AGENT_GRPC_RENDEZVOUS_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/rendezvous_client.h"
#include "drun/v1/job.pb.h"
#include "rendezvous/base/tls_relay.h"

namespace drun {

struct GrpcClientOptions {
  std::string target;  // HOST:PORT
  std::string token;   // the job token; empty: none (nothing proven or sealed)
  // --rdzv-tls (LoadClientTls): the connection is TLS, with this node's
  // certificate, under gRPC; null: plain TCP.
  std::shared_ptr<const TlsContext> tls;
  Duration connect_timeout = std::chrono::seconds(60);
  // Until the server's Pace comes.
  Duration heartbeat = std::chrono::milliseconds(500);
  // The connection breaks when the server's kernel has not answered for
  // this long (link cut, host frozen; see rendezvous/link_liveness.h).
  Duration link_timeout = std::chrono::seconds(2);
  // Give up on a server whose link is alive but that has sent nothing for
  // this long (a stuck process). Zero: never (the host's own agent, whose
  // server lives in the same process).
  Duration silence = std::chrono::seconds(20);
  // A drun rendezvous's Challenge comes at once; without it by then, what
  // answers is something else (the agent's own stalls do not count).
  Duration first_word = std::chrono::seconds(5);
};

// The client side of spec.tls (--rdzv-tls); null when the job has none.
// Errors: a file that does not load, a key that is not the certificate's.
absl::StatusOr<std::shared_ptr<const TlsContext>> LoadClientTls(const v1::JobSpec& spec);

// Connects (retrying until connect_timeout) and opens the stream. With
// opt.tls, the TLS handshake is part of connecting: a refusal ends it with
// "TLS handshake with HOST:PORT failed: <why>; check --rdzv-tls". A stop
// signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) pending while it waits ends the
// wait: Cancelled, with the signal in *stop_signal (0 otherwise).
absl::StatusOr<std::unique_ptr<RendezvousClient>> ConnectRendezvous(const GrpcClientOptions& opt,
                                                                     int* stop_signal);

}  // namespace drun

#endif  // DRUN_AGENT_GRPC_RENDEZVOUS_CLIENT_H_
