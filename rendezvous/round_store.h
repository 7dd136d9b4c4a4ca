// RoundStore: gives every rendezvous round a fresh c10d store, served by the
// process that hosts the rendezvous (torchrun 2.x's "agent store"), so no key
// of a failed attempt survives a restart and no worker races to bind
// MASTER_PORT. It rewrites the round's Assignments to point at the store:
// MASTER_PORT is the store's port and MASTER_ADDR is left empty, meaning "the
// host you reach the rendezvous at" (the store lives in the same process), so
// each agent fills in the address it dials, which may differ per host.
// Used by both rendezvous adapters (in-process and gRPC); the state machine
// stays pure.
#ifndef DRUN_RENDEZVOUS_ROUND_STORE_H_
#define DRUN_RENDEZVOUS_ROUND_STORE_H_

#include <memory>
#include <string>

#include "rendezvous/store/c10d_store.h"
#include "rendezvous/rendezvous_state.h"

namespace drun {

class RoundStore {
 public:
  // `port`: the port to serve on (0: any free one).
  explicit RoundStore(int port = 0) : port_(port) {}
  // For Assignments with use_agent_store, of a round newer than the current
  // store's: starts a fresh store (stopping the previous one) and sets
  // MASTER_ADDR/MASTER_PORT to it. Returns an error if the store cannot start.
  absl::Status Apply(RendezvousState::Outbox* out);
  // Stops the store once the job has finished.
  void Stop() { store_.reset(); }

 private:
  int port_ = 0;
  int64_t round_ = -1;
  std::unique_ptr<C10dStoreServer> store_;
};

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_ROUND_STORE_H_
