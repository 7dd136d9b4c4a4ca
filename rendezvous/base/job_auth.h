// job_auth: the cryptography of the job token on the rendezvous channel, so
// the token itself never crosses the network (docs/architecture.md, "The job
// token on the wire"). Byte strings in, byte strings out: no protobuf, no I/O
// beyond the kernel's random source (through OpenSSL's RAND_bytes).
//
// Contract:
//  - A Transcript names one stream: the job's run id, the nonce the server
//    sent on it (Challenge) and the nonce the agent answered with (Hello).
//    Both nonces are kNonceBytes long; a transcript with any other length is
//    never proven.
//  - AgentProof and ServerProof are HMAC-SHA256 keyed by the token over a
//    label and the transcript. The labels differ, so neither side's proof is
//    ever the other's: a server cannot reflect an agent's proof back, nor an
//    agent a server's. A proof is bound to the server's nonce, fresh per
//    stream, so a proof captured on one stream proves nothing on another.
//  - ProofMatches compares in constant time (CRYPTO_memcmp).
//  - SealKey is AES-256-GCM under HKDF-SHA256(token, salt = both nonces,
//    info = label + run id): one key per stream. Seal numbers its messages
//    (the 96-bit IV is a counter, unique per key, hence per stream); Open
//    refuses anything altered (ciphertext, IV, tag, or the associated data)
//    with an error, never with partial plaintext.
//  - An empty token is never used here: callers with no token do not prove
//    or seal (the job did not ask for it).
#ifndef DRUN_RENDEZVOUS_BASE_JOB_AUTH_H_
#define DRUN_RENDEZVOUS_BASE_JOB_AUTH_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace drun {

constexpr size_t kNonceBytes = 32;

// kNonceBytes from the kernel's random source.
std::string NewNonce();

// RFC 2104 HMAC with SHA-256 (32 bytes).
std::string HmacSha256(absl::string_view key, absl::string_view data);
// RFC 5869 HKDF with SHA-256: `length` bytes (at most 255 * 32).
std::string HkdfSha256(absl::string_view ikm, absl::string_view salt, absl::string_view info,
                       size_t length);

struct Transcript {
  std::string run_id;
  std::string server_nonce;
  std::string agent_nonce;
};

// What the agent sends in Hello.proof, and what the server sends in
// Welcome.proof. Empty when the transcript's nonces have the wrong length.
std::string AgentProof(absl::string_view token, const Transcript& t);
std::string ServerProof(absl::string_view token, const Transcript& t);
// Constant-time equality of two proofs; false when either is empty.
bool ProofMatches(absl::string_view expected, absl::string_view got);

// AES-256-GCM under the stream's key. Sealed text: 12-byte IV, ciphertext,
// 16-byte tag. Copyable; each copy counts its own IVs, so one key must be
// sealed with by one copy only (the server's, for the agent it talks to).
class SealKey {
 public:
  static SealKey ForStream(absl::string_view token, const Transcript& t);
  std::string Seal(absl::string_view plaintext, absl::string_view aad);
  absl::StatusOr<std::string> Open(absl::string_view sealed, absl::string_view aad) const;
  // A key given directly (known-answer tests).
  static SealKey FromBytes(std::string key) { return SealKey(std::move(key)); }
  // Seal with this exact IV (known-answer tests); Seal() uses the counter.
  std::string SealWithIv(absl::string_view iv, absl::string_view plaintext,
                         absl::string_view aad) const;

 private:
  explicit SealKey(std::string key) : key_(std::move(key)) {}
  std::string key_;
  uint64_t sealed_ = 0;  // messages sealed so far: the next IV
};

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_JOB_AUTH_H_
