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
  switch (msg.kind_case()) {
    case v1::AgentMessage::kHello:
      Deliver(state_.OnHello(kSelf, msg.hello(), "127.0.0.1", now));
      break;
    case v1::AgentMessage::kJoin:
      Deliver(state_.OnJoin(kSelf, msg.join().free_port(), now));
      break;
    case v1::AgentMessage::kSucceeded:
      Deliver(state_.OnSucceeded(kSelf, msg.succeeded().round(), now));
      break;
    case v1::AgentMessage::kFailed:
      Deliver(state_.OnFailed(kSelf, msg.failed().round(), msg.failed().failure(), now));
      break;
    case v1::AgentMessage::kHeartbeat:
      Deliver(state_.OnHeartbeat(kSelf, now));
      break;
    case v1::AgentMessage::kLeaving:
      Deliver(state_.OnLeaving(kSelf, msg.leaving().signal(), now));
      break;
    case v1::AgentMessage::kStacksRequest:  // one node: never sent (relays_stacks() is false)
    case v1::AgentMessage::kHangQuiet:
    case v1::AgentMessage::kNodeReport:
    case v1::AgentMessage::kStacksReply:
    case v1::AgentMessage::KIND_NOT_SET:
      break;
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
