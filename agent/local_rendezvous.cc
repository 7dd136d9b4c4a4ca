#include "agent/local_rendezvous.h"

#include "absl/strings/str_cat.h"

namespace drun {

void LocalRendezvous::Deliver(RendezvousState::Outbox out) {
  if (absl::Status s = store_.Apply(&out); !s.ok()) {
    // Without its store the round cannot run: end the job with the reason.
    out.clear();
    v1::ServerMessage m;
    m.mutable_finish()->set_exit_code(1);
    m.mutable_finish()->set_message(absl::StrCat("cannot start the c10d store: ", s.message()));
    inbox_.push_back(std::move(m));
    return;
  }
  for (auto& o : out) {
    if (o.node == kSelf) inbox_.push_back(std::move(o.msg));
  }
}

void LocalRendezvous::Send(const v1::AgentMessage& msg, TimePoint now) {
  // One node: stacks requests are never sent (relays_stacks() is false),
  // hang reports and node reports have no one to go to.
  if (msg.has_hello()) {
    Deliver(state_.OnHello(kSelf, msg.hello(), "127.0.0.1", now));
  } else if (auto out = state_.OnReport(kSelf, msg, now)) {
    Deliver(std::move(*out));
  }
}

std::optional<v1::ServerMessage> LocalRendezvous::Receive() {
  if (inbox_.empty()) return std::nullopt;
  v1::ServerMessage m = std::move(inbox_.front());
  inbox_.pop_front();
  return m;
}

void LocalRendezvous::OnTick(TimePoint now) { Deliver(state_.OnTick(now)); }

}  // namespace drun
