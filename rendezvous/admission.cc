#include "rendezvous/admission.h"

#include "absl/strings/str_cat.h"
#include "rendezvous/base/endpoint.h"
#include "rendezvous/base/mutex.h"

namespace drun {

void Admission::SetMembers(const std::vector<std::string>& ips) {
  MutexLock lock(&mu_);
  members_ = std::set<std::string>(ips.begin(), ips.end());
  members_.erase("");
}

bool Admission::Admit(int fd) { return Admits(PeerIp(fd), LocalIp(fd)); }

bool Admission::Admits(const std::string& peer_ip, const std::string& local_ip) {
  if (!peer_ip.empty() && (peer_ip == local_ip || IsLoopbackAddress(peer_ip))) return true;
  uint64_t refused;
  {
    MutexLock lock(&mu_);
    if (members_.count(peer_ip)) return true;
    refused = ++refused_;
  }
  if (refused == 1 && say_) {
    say_(absl::StrCat("the job's c10d store refused a connection from ",
                      peer_ip.empty() ? "an unknown address" : peer_ip,
                      ", which is not a node of the current round (further refusals are only "
                      "counted)"));
  }
  return false;
}

uint64_t Admission::refused() const {
  MutexLock lock(&mu_);
  return refused_;
}

}  // namespace drun
