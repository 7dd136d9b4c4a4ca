// join_auth: the job token's challenge-response and the sealed job spec, on
// the protocol's own messages (proto/drun/v1/rendezvous.proto). The bytes
// and the cryptography are job_auth.h's; this file says which message fields
// carry them. Docs: docs/architecture.md, "The job token on the wire".
//
// Server side (MakeTokenAuthority, the TokenAuthority RendezvousState asks;
// deterministic: the nonces are its inputs): the stream's Challenge nonce
// and the agent's Hello decide whether the agent holds the token; the
// Welcome proves the server does; each accepted stream gets its own SealKey,
// and every Assignment's spec goes out sealed under it.
//
// Agent side (AgentHandshake, one per stream, used by the gRPC client): it
// answers the Challenge, and lets nothing from the server through before a
// Welcome that proves the token; it opens sealed specs back into `spec`. A
// server that cannot prove the token, or whose sealed spec does not open, is
// refused with an error that says so in one line.
//
// With no token (a job started by hand without --rdzv-token-file or
// DRUN_RDZV_TOKEN) nothing is proven or sealed, as before: the server admits
// any Hello and sends no Welcome; the agent needs none.
#ifndef DRUN_RENDEZVOUS_JOIN_AUTH_H_
#define DRUN_RENDEZVOUS_JOIN_AUTH_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "drun/v1/rendezvous.pb.h"
#include "rendezvous/base/job_auth.h"
#include "rendezvous/rendezvous_state.h"

namespace drun {

// --- server side ---
// What RendezvousState checks Hellos with when the job has a token: proofs
// over the job's run id; each admitted stream's key seals the Assignment's
// spec, bound to the job and the round (associated data), spec left unset.
std::shared_ptr<const TokenAuthority> MakeTokenAuthority(std::string token, std::string run_id);
v1::ServerMessage ChallengeMessage(const std::string& nonce);

// --- agent side ---
class AgentHandshake {
 public:
  explicit AgentHandshake(std::string token) : token_(std::move(token)) {}
  bool has_token() const { return !token_.empty(); }
  // Before the Challenge has come, a Hello cannot be proven: the caller holds it.
  bool challenged() const { return challenge_.has_value(); }
  void OnChallenge(const v1::Challenge& c) { challenge_ = c.nonce(); }
  // Fills hello's agent_nonce and proof (no-op without a token).
  void Answer(v1::Hello* hello);
  // A message from the server, before the agent sees it. OK: pass it on
  // (a sealed spec has been opened into `spec`). kAlreadyExists: handled
  // here, nothing to pass on (Challenge, a good Welcome). Any other error:
  // the server is refused, and the message says why.
  absl::Status Check(v1::ServerMessage* m);

 private:
  absl::Status Open(v1::Assignment* a) const;
  std::string token_;
  std::optional<std::string> challenge_;
  std::optional<Transcript> transcript_;  // once the Hello is answered
  std::optional<SealKey> key_;
  bool proven_ = false;  // the server's Welcome proved the token
};

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_JOIN_AUTH_H_
