// RoundStore: gives every rendezvous round a fresh c10d store, served by the
// process that hosts the rendezvous (torchrun 2.x's "agent store"), so no key
// of a failed attempt survives a restart and no worker races to bind
// MASTER_PORT. It rewrites the round's Assignments to point at the store:
// MASTER_PORT is the store's port and MASTER_ADDR is left empty, meaning "the
// host you reach the rendezvous at" (the store lives in the same process), so
// each agent fills in the address it dials, which may differ per host.
// Used by both rendezvous adapters (in-process and gRPC); the state machine
// stays pure.
//
// Where the store listens (a port the user gives is the port that is used,
// docs/architecture.md "One port"):
//  * port 0: a free port, a new one each round;
//  * another port: each round's store binds that port itself (the previous
//    round's store is stopped first, so it is free again);
//  * ServeThroughListener(port): the rendezvous server's own listener, which
//    already holds that port, hands store connections over with Adopt(); each
//    round's store has no socket of its own.
//
// Thread-safety: Apply/Stop run on the rendezvous' thread (under its lock);
// Adopt runs on the acceptor's thread. The store is swapped under an internal
// lock, so an adopted connection goes to exactly one round's store.
#ifndef DRUN_RENDEZVOUS_ROUND_STORE_H_
#define DRUN_RENDEZVOUS_ROUND_STORE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "rendezvous/admission.h"
#include "rendezvous/store/c10d_store.h"
#include "rendezvous/rendezvous_state.h"
#include "rendezvous/base/mutex.h"

namespace drun {

class RoundStore {
 public:
  // `port`: the port to serve on (0: any free one).
  // `bind_addr`: the address each round's own store listens on ("" every
  // interface, as a multi-node job's store must; a single node's: loopback).
  explicit RoundStore(int port = 0, std::string bind_addr = "");
  ~RoundStore() { Stop(); }
  RoundStore(const RoundStore&) = delete;
  RoundStore& operator=(const RoundStore&) = delete;

  // The stores are reached through someone else's listener on `port` (the
  // rendezvous server's): they open no socket; connections arrive by Adopt.
  // Call before the first Apply.
  void ServeThroughListener(int port);

  // For Assignments with use_agent_store, of a round newer than the current
  // store's: starts a fresh store (stopping the previous one) and sets
  // MASTER_ADDR/MASTER_PORT to it. Returns an error if the store cannot start.
  absl::Status Apply(RendezvousState::Outbox* out);

  // Takes ownership of an accepted store connection (only after
  // ServeThroughListener) and gives it to the current round's store. With no
  // store yet (before the first round starts) it is held and given to the
  // next one; held connections are closed when the job finishes.
  void Adopt(UniqueFd fd);

  // Stops the store (and closes held connections) once the job has finished.
  void Stop();

  // Who may connect (rendezvous/admission.h): the current round's nodes'
  // addresses; every store of the job, and Adopt(), admit only them and the host.
  void SetMembers(const std::vector<std::string>& ips) { admission_.SetMembers(ips); }
  uint64_t refused_connections() const { return admission_.refused(); }

 private:
  void StopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Mutex mu_;
  int port_ ABSL_GUARDED_BY(mu_) = 0;
  const std::string bind_addr_;
  bool shared_ ABSL_GUARDED_BY(mu_) = false;  // served through the rendezvous listener
  int64_t round_ ABSL_GUARDED_BY(mu_) = -1;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<C10dStoreServer> store_ ABSL_GUARDED_BY(mu_);
  std::vector<UniqueFd> held_ ABSL_GUARDED_BY(mu_);  // adopted before the first store
  Admission admission_;
};

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_ROUND_STORE_H_
