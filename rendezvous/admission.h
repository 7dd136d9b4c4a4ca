// Admission: who may connect to a multi-node job's c10d store (issue #14,
// docs/architecture.md "Who may connect"). The store holds the job's keys and
// barriers, and torch's TCPStore clients authenticate nothing, so the
// listener admits only the job's members: the host itself (a peer whose
// address is the connection's own local address, or a loopback address) and
// the addresses of the nodes of the current round (each node's address as the
// rendezvous sees it, and the one it advertises). A node that joins later is
// admitted from the round it joins. Everything else is closed at accept,
// counted, and said once.
//
// Thread-safe: the rendezvous thread sets the members, the store's and the
// rendezvous listener's threads ask.
#ifndef DRUN_RENDEZVOUS_ADMISSION_H_
#define DRUN_RENDEZVOUS_ADMISSION_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "rendezvous/base/mutex.h"

namespace drun {

class Admission {
 public:
  // `say`: receives the one line about the first refused connection.
  explicit Admission(std::function<void(absl::string_view)> say = nullptr) : say_(std::move(say)) {}

  // The current round's nodes' addresses (IP literals). Replaces the last set.
  void SetMembers(const std::vector<std::string>& ips);
  // Whether the connected socket `fd` comes from a member; a refusal is counted.
  bool Admit(int fd);
  // The same decision for a peer and the local address it reached.
  bool Admits(const std::string& peer_ip, const std::string& local_ip);
  uint64_t refused() const;

 private:
  mutable Mutex mu_;
  std::set<std::string> members_ ABSL_GUARDED_BY(mu_);
  uint64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  const std::function<void(absl::string_view)> say_;
};

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_ADMISSION_H_
