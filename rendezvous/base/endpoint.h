// Network endpoints as drun's users write them: parsing and formatting
// HOST[:PORT] and [V6]:PORT (one grammar for --rdzv-endpoint, --master-addr,
// the rendezvous server's listen address and the agents' dial target),
// turning them into socket addresses, and asking the kernel which local
// address reaches another host (what the other end sees as ours).
#ifndef DRUN_RENDEZVOUS_BASE_ENDPOINT_H_
#define DRUN_RENDEZVOUS_BASE_ENDPOINT_H_

#include <sys/socket.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace drun {

struct Endpoint {
  std::string host;  // a name or an address; IPv6 literals without brackets
  int port = 0;
  std::string ToString() const;  // "host:port", "[v6]:port"
};

// Port 0 means "pick a free one" where drun listens; users dialling must name one.
enum class PortZero { kRefuse, kAllow };

// "host", "host:port", "[v6]", "[v6]:port"; a missing port becomes default_port.
// A bare IPv6 literal ("::1") is a host without a port. Errors name the text and
// say what to write instead.
absl::StatusOr<Endpoint> ParseEndpoint(absl::string_view text, int default_port,
                                       PortZero zero = PortZero::kRefuse);

// A socket address with its length, ready for bind()/connect().
struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  int family() const { return storage.ss_family; }
};

// The address of a numeric host (IPv4 or IPv6 literal; no DNS), for bind().
absl::StatusOr<SockAddr> NumericSockAddr(const Endpoint& ep);

// The first address getaddrinfo gives for ep (names resolved each call: a host
// that is not in DNS yet may be by the next attempt).
absl::StatusOr<SockAddr> ResolveSockAddr(const Endpoint& ep);

// The first IPv4 (else IPv6) address of `host`, as text.
absl::StatusOr<std::string> ResolveHost(const std::string& host);

// True when `ip` can be bound on this host (an interface or loopback address).
bool IsLocalAddress(const std::string& ip);

// True for an IPv4 or IPv6 literal in the loopback range (127.0.0.0/8, ::1).
bool IsLoopbackAddress(const std::string& ip);

// The address of a socket address as text: "10.0.0.2", "fe80::1"; an
// IPv4-mapped IPv6 address as IPv4. "" for other families.
std::string SockAddrIp(const sockaddr_storage& sa);
// The addresses of a connected socket's two ends ("" when unknown).
std::string PeerIp(int fd);
std::string LocalIp(int fd);

// The source address the kernel picks to reach ip:port ("" if none).
std::string RouteSourceAddress(const std::string& ip, int port);

// The wildcard address to listen on for peers of either family: "::" where
// this kernel has IPv6 (a dual-stack listener takes IPv4 peers too), else
// "0.0.0.0".
std::string AnyAddress();

// The name of the network interface that holds `ip` ("eth0"): the one with
// that address, else the one whose subnet contains it (127.0.0.2 -> "lo");
// "" when none does or `ip` is not a literal.
std::string InterfaceOf(const std::string& ip);

// --iface's value: an interface name ("eth1") or a subnet ("10.0.0.0/24",
// "fd00::/64") that one of the node's addresses lies in.
struct IfaceChoice {
  std::string name;    // set for a name
  std::string subnet;  // set for a subnet, as written
  std::string bytes;   // the subnet's address bytes (4 or 16)
  int prefix = 0;      // its prefix length
};
// A one-line reason when `text` is neither.
absl::StatusOr<IfaceChoice> ParseIfaceChoice(const std::string& text);
// The interface of this machine `choice` picks: the named one when it exists,
// else the first holding an address in the subnet; NotFound with a one-line
// reason otherwise.
absl::StatusOr<std::string> ResolveIface(const IfaceChoice& choice);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_ENDPOINT_H_
