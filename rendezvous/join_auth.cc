#include "rendezvous/join_auth.h"

#include "absl/strings/str_cat.h"

namespace drun {

namespace {

// Associated data of a sealed spec: a spec sealed for one job's round does
// not open as another's.
std::string SpecAad(const std::string& run_id, int64_t round) {
  return absl::StrCat("drun.v1.Assignment.spec/", run_id, "/", round);
}

class SealingKey : public TokenAuthority::StreamKey {
 public:
  SealingKey(SealKey key, std::string run_id) : key_(std::move(key)), run_id_(std::move(run_id)) {}
  void SealSpec(const std::string& spec_bytes, v1::Assignment* a) override {
    a->clear_spec();
    a->set_sealed_spec(key_.Seal(spec_bytes, SpecAad(run_id_, a->round())));
  }

 private:
  SealKey key_;
  const std::string run_id_;
};

class HmacAuthority : public TokenAuthority {
 public:
  HmacAuthority(std::string token, std::string run_id)
      : token_(std::move(token)), run_id_(std::move(run_id)) {}
  std::optional<Admission> Admit(const std::string& challenge, const v1::Hello& hello) const override {
    const Transcript t{run_id_, challenge, hello.agent_nonce()};
    if (!ProofMatches(AgentProof(token_, t), hello.proof())) return std::nullopt;
    Admission a;
    a.welcome.mutable_welcome()->set_proof(ServerProof(token_, t));
    a.key = std::make_unique<SealingKey>(SealKey::ForStream(token_, t), run_id_);
    return a;
  }

 private:
  const std::string token_;
  const std::string run_id_;
};

}  // namespace

std::shared_ptr<const TokenAuthority> MakeTokenAuthority(std::string token, std::string run_id) {
  return std::make_shared<HmacAuthority>(std::move(token), std::move(run_id));
}

v1::ServerMessage ChallengeMessage(const std::string& nonce) {
  v1::ServerMessage m;
  m.mutable_challenge()->set_nonce(nonce);
  return m;
}

void AgentHandshake::Answer(v1::Hello* hello) {
  if (!has_token()) return;
  Transcript t{hello->run_id(), challenge_.value_or(""), NewNonce()};
  hello->set_agent_nonce(t.agent_nonce);
  hello->set_proof(AgentProof(token_, t));
  key_ = SealKey::ForStream(token_, t);
  transcript_ = std::move(t);
}

absl::Status AgentHandshake::Check(v1::ServerMessage* m) {
  const auto handled = absl::AlreadyExistsError("handled by the handshake");
  if (m->has_challenge()) return handled;  // the client answers it (OnChallenge)
  if (!has_token()) return m->has_welcome() ? handled : absl::OkStatus();
  // A refusal needs no proof: anyone who can cut the link can refuse us.
  if (m->has_reject() || m->has_heartbeat()) return absl::OkStatus();
  const auto unproven = absl::PermissionDeniedError(
      "it did not prove that it knows this job's token (a server of another job, or one started "
      "without the token): give every node the same DRUN_RDZV_TOKEN or --rdzv-token-file");
  if (m->has_welcome()) {
    if (proven_ || !transcript_ || !ProofMatches(ServerProof(token_, *transcript_), m->welcome().proof())) {
      return unproven;
    }
    proven_ = true;
    return handled;
  }
  if (!proven_) return unproven;
  if (m->has_assignment()) return Open(m->mutable_assignment());
  return absl::OkStatus();
}

absl::Status AgentHandshake::Open(v1::Assignment* a) const {
  const auto bad = absl::DataLossError(
      "its assignment did not open with this job's token (altered on the way?)");
  if (a->sealed_spec().empty() || a->has_spec()) return bad;  // a token's spec is always sealed
  absl::StatusOr<std::string> plain = key_->Open(a->sealed_spec(), SpecAad(transcript_->run_id, a->round()));
  if (!plain.ok() || !a->mutable_spec()->ParseFromString(*plain)) return bad;
  a->clear_sealed_spec();
  return absl::OkStatus();
}

}  // namespace drun
