#include "rendezvous/round_store.h"

namespace drun {

absl::Status RoundStore::Apply(RendezvousState::Outbox* out) {
  for (auto& o : *out) {
    if (o.msg.has_finish()) {
      store_.reset();
      continue;
    }
    if (!o.msg.has_assignment() || !o.msg.assignment().use_agent_store()) continue;
    auto* a = o.msg.mutable_assignment();
    if (a->round() != round_) {
      store_.reset();  // the old round's keys die with it
      auto started = C10dStoreServer::Start("", port_);
      if (!started.ok()) return started.status();
      store_ = std::move(*started);
      round_ = a->round();
    }
    a->clear_master_addr();
    a->set_master_port(store_->port());
  }
  return absl::OkStatus();
}

}  // namespace drun
