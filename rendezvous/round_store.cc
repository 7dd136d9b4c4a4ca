#include "rendezvous/round_store.h"

#include <unistd.h>

#include <utility>

namespace drun {

void RoundStore::ServeThroughListener(int port) {
  std::lock_guard<std::mutex> lock(mu_);
  port_ = port;
  shared_ = true;
}

absl::Status RoundStore::Apply(RendezvousState::Outbox* out) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& o : *out) {
    if (o.msg.has_finish()) {
      StopLocked();
      finished_ = true;
      continue;
    }
    if (!o.msg.has_assignment() || !o.msg.assignment().use_agent_store()) continue;
    auto* a = o.msg.mutable_assignment();
    if (a->round() != round_) {
      store_.reset();  // the old round's keys die with it
      auto started = shared_ ? C10dStoreServer::StartWithoutListener()
                             : C10dStoreServer::Start("", port_);
      if (!started.ok()) return started.status();
      store_ = std::move(*started);
      round_ = a->round();
      // Connections that came before any store existed belong to this one.
      for (UniqueFd& fd : held_) (void)store_->Adopt(std::move(fd));
      held_.clear();
    }
    a->clear_master_addr();
    a->set_master_port(shared_ ? port_ : store_->port());
  }
  return absl::OkStatus();
}

void RoundStore::Adopt(UniqueFd fd) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!shared_ || finished_) return;  // fd closes itself
  if (store_ == nullptr) {
    held_.push_back(std::move(fd));
    return;
  }
  (void)store_->Adopt(std::move(fd));  // closed by the store if it cannot take it
}

void RoundStore::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  StopLocked();
}

void RoundStore::StopLocked() {
  store_.reset();
  held_.clear();  // each closes itself
}

}  // namespace drun
