// Addresses for the rendezvous: parsing HOST[:PORT], resolving, deciding
// whether an address belongs to this host, and which source address this host
// uses to reach another (what the other end sees as our address).
#ifndef DRUN_LAUNCHER_ENDPOINT_H_
#define DRUN_LAUNCHER_ENDPOINT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace drun {

struct Endpoint {
  std::string host;
  int port = 0;
  std::string ToString() const;  // brackets IPv6 literals
};

// "host", "host:port", "[v6]:port"; a missing port becomes default_port.
absl::StatusOr<Endpoint> ParseEndpoint(absl::string_view text, int default_port);

// The first IPv4 (else IPv6) address of `host`, as text.
absl::StatusOr<std::string> ResolveHost(const std::string& host);

// True when `ip` can be bound on this host (an interface or loopback address).
bool IsLocalAddress(const std::string& ip);

// The source address the kernel picks to reach ip:port ("" if none).
std::string RouteSourceAddress(const std::string& ip, int port);

}  // namespace drun

#endif  // DRUN_LAUNCHER_ENDPOINT_H_
