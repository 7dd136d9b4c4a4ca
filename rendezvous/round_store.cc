#include "rendezvous/round_store.h"

#include <unistd.h>

#include <utility>

#include "rendezvous/base/mutex.h"
#include "rendezvous/base/say.h"

namespace drun {

RoundStore::RoundStore(int port, std::string bind_addr)
    : port_(port), bind_addr_(std::move(bind_addr)), admission_([](absl::string_view line) {
        Say(line);
      }) {}

void RoundStore::ServeThroughListener(int port) {
  MutexLock lock(&mu_);
  port_ = port;
  shared_ = true;
}

absl::Status RoundStore::Apply(RendezvousState::Outbox* out) {
  MutexLock lock(&mu_);
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
      C10dStoreServer::Options options;
      options.admit = [this](int fd) { return admission_.Admit(fd); };
      auto started = shared_ ? C10dStoreServer::StartWithoutListener(options)
                             : C10dStoreServer::Start(bind_addr_, port_, options);
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
  if (!admission_.Admit(fd.get())) return;  // fd closes itself
  MutexLock lock(&mu_);
  if (!shared_ || finished_) return;  // fd closes itself
  if (store_ == nullptr) {
    held_.push_back(std::move(fd));
    return;
  }
  (void)store_->Adopt(std::move(fd));  // closed by the store if it cannot take it
}

void RoundStore::Stop() {
  MutexLock lock(&mu_);
  StopLocked();
}

void RoundStore::StopLocked() {
  store_.reset();
  held_.clear();  // each closes itself
}

}  // namespace drun
