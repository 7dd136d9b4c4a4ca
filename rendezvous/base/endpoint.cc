#include "rendezvous/base/endpoint.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rendezvous/base/unique_fd.h"

namespace drun {

std::string Endpoint::ToString() const {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<Endpoint> ParseEndpoint(absl::string_view text, int default_port, PortZero zero) {
  Endpoint ep;
  ep.port = default_port;
  std::string port_text;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "': missing ']' after the IPv6 address"));
    }
    ep.host = std::string(text.substr(1, close - 1));
    absl::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not [ADDR]:PORT"));
      port_text = std::string(rest.substr(1));
    }
  } else {
    size_t colon = text.rfind(':');
    if (colon != absl::string_view::npos && text.find(':') == colon) {
      ep.host = std::string(text.substr(0, colon));
      port_text = std::string(text.substr(colon + 1));
    } else {
      ep.host = std::string(text);  // a name, or a bare IPv6 literal (no port)
    }
  }
  if (ep.host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' has no host; write HOST:PORT"));
  }
  if (!port_text.empty() || (text.size() && text.back() == ':')) {
    const int lowest = zero == PortZero::kAllow ? 0 : 1;
    int p;
    if (!absl::SimpleAtoi(port_text, &p) || p < lowest || p > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", text, "' has no valid port; write HOST:PORT with PORT in ", lowest, "-65535"));
    }
    ep.port = p;
  }
  return ep;
}

absl::StatusOr<SockAddr> NumericSockAddr(const Endpoint& ep) {
  SockAddr out;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out.storage);
  if (inet_pton(AF_INET, ep.host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(ep.port));
    out.len = sizeof *v4;
    return out;
  }
  out = SockAddr();
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
  if (inet_pton(AF_INET6, ep.host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(ep.port));
    out.len = sizeof *v6;
    return out;
  }
  return absl::InvalidArgumentError(absl::StrCat("'", ep.host, "' is not an IP address"));
}

absl::StatusOr<SockAddr> ResolveSockAddr(const Endpoint& ep) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = absl::StrCat(ep.port);
  int rc = getaddrinfo(ep.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || !res) {
    return absl::NotFoundError(absl::StrCat("cannot resolve host '", ep.host, "': ", gai_strerror(rc)));
  }
  SockAddr out;
  memcpy(&out.storage, res->ai_addr, res->ai_addrlen);
  out.len = res->ai_addrlen;
  freeaddrinfo(res);
  return out;
}

absl::StatusOr<std::string> ResolveHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    return absl::NotFoundError(absl::StrCat("cannot resolve host '", host, "': ", gai_strerror(rc)));
  }
  std::string v4, v6;
  char buf[INET6_ADDRSTRLEN];
  for (addrinfo* a = res; a; a = a->ai_next) {
    if (a->ai_family == AF_INET && v4.empty()) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, buf, sizeof buf);
      v4 = buf;
    } else if (a->ai_family == AF_INET6 && v6.empty()) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, buf, sizeof buf);
      v6 = buf;
    }
  }
  freeaddrinfo(res);
  return v4.empty() ? v6 : v4;
}

bool IsLocalAddress(const std::string& ip) {
  auto addr = NumericSockAddr(Endpoint{ip, 0});
  if (!addr.ok()) return false;
  UniqueFd fd(socket(addr->family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  return fd.valid() && bind(fd.get(), addr->get(), addr->len) == 0;
}

bool IsLoopbackAddress(const std::string& ip) {
  in_addr v4;
  if (inet_pton(AF_INET, ip.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  return inet_pton(AF_INET6, ip.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

namespace {

// The bytes of an AF_INET/AF_INET6 address ("" for other families).
std::string AddressBytes(const sockaddr* sa) {
  if (sa == nullptr) return "";
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return std::string(reinterpret_cast<const char*>(&in->sin_addr), sizeof in->sin_addr);
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    return std::string(reinterpret_cast<const char*>(&in6->sin6_addr), sizeof in6->sin6_addr);
  }
  return "";
}

bool SameSubnet(const std::string& a, const std::string& b, const std::string& mask) {
  if (a.size() != b.size() || mask.size() != a.size()) return false;
  if (mask.find_first_not_of('\0') == std::string::npos) return false;  // /0 holds everything
  for (size_t i = 0; i < a.size(); ++i) {
    if ((a[i] & mask[i]) != (b[i] & mask[i])) return false;
  }
  return true;
}

}  // namespace

std::string InterfaceOf(const std::string& ip) {
  auto addr = NumericSockAddr(Endpoint{ip, 0});
  if (!addr.ok()) return "";
  const std::string want = AddressBytes(addr->get());
  ifaddrs* list = nullptr;
  if (want.empty() || getifaddrs(&list) != 0) return "";
  std::string exact, subnet;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    const std::string have = AddressBytes(i->ifa_addr);
    if (have.empty() || have.size() != want.size()) continue;
    if (have == want && exact.empty()) exact = i->ifa_name;
    if (subnet.empty() && SameSubnet(have, want, AddressBytes(i->ifa_netmask))) subnet = i->ifa_name;
  }
  freeifaddrs(list);
  return exact.empty() ? subnet : exact;
}

absl::StatusOr<IfaceChoice> ParseIfaceChoice(const std::string& text) {
  IfaceChoice c;
  const size_t slash = text.find('/');
  if (slash == std::string::npos) {
    // Linux names: 1 to 15 bytes, no '/', no space, not "." or "..".
    const bool ok = !text.empty() && text.size() < IF_NAMESIZE && text != "." && text != ".." &&
                    text.find_first_of(" \t\n:/") == std::string::npos;
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not an interface name or a subnet (eth1, 10.0.0.0/24)"));
    c.name = text;
    return c;
  }
  auto addr = NumericSockAddr(Endpoint{text.substr(0, slash), 0});
  int prefix = -1;
  const std::string bytes = addr.ok() ? AddressBytes(addr->get()) : "";
  if (bytes.empty() || !absl::SimpleAtoi(text.substr(slash + 1), &prefix) || prefix < 0 ||
      prefix > static_cast<int>(bytes.size()) * 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a subnet: write ADDRESS/PREFIX (10.0.0.0/24, fd00::/64)"));
  }
  c.subnet = text;
  c.bytes = bytes;
  c.prefix = prefix;
  return c;
}

absl::StatusOr<std::string> ResolveIface(const IfaceChoice& choice) {
  if (!choice.name.empty()) {
    if (if_nametoindex(choice.name.c_str()) != 0) return choice.name;
    return absl::NotFoundError(absl::StrCat("this machine has no network interface ", choice.name));
  }
  std::string mask(choice.bytes.size(), '\0');
  for (int i = 0; i < choice.prefix; ++i) mask[i / 8] = static_cast<char>(mask[i / 8] | (0x80 >> (i % 8)));
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return absl::ErrnoToStatus(errno, "getifaddrs");
  std::string found;
  for (const ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    const std::string have = AddressBytes(i->ifa_addr);
    if (have.size() != choice.bytes.size()) continue;
    bool in = true;
    for (size_t b = 0; b < have.size() && in; ++b) in = (have[b] & mask[b]) == (choice.bytes[b] & mask[b]);
    if (in) found = i->ifa_name;
  }
  freeifaddrs(list);
  if (found.empty()) {
    return absl::NotFoundError(absl::StrCat("no network interface of this machine has an address in ", choice.subnet));
  }
  return found;
}

std::string SockAddrIp(const sockaddr_storage& sa) {
  char text[INET6_ADDRSTRLEN] = "";
  if (sa.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&sa)->sin_addr, text, sizeof text);
  } else if (sa.ss_family == AF_INET6) {
    const in6_addr& a6 = reinterpret_cast<const sockaddr_in6*>(&sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) {
      inet_ntop(AF_INET, &a6.s6_addr[12], text, sizeof text);
    } else {
      inet_ntop(AF_INET6, &a6, text, sizeof text);
    }
  }
  return text;
}

std::string PeerIp(int fd) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  return getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0 ? SockAddrIp(sa) : "";
}

std::string LocalIp(int fd) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  return getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0 ? SockAddrIp(sa) : "";
}

std::string AnyAddress() {
  const UniqueFd s(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  return s.get() >= 0 ? "::" : "0.0.0.0";
}

std::string RouteSourceAddress(const std::string& ip, int port) {
  auto addr = NumericSockAddr(Endpoint{ip, port});
  if (!addr.ok()) return "";
  UniqueFd fd(socket(addr->family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return "";
  // connect() on UDP sends nothing; it only picks the route and source.
  if (connect(fd.get(), addr->get(), addr->len) != 0) return "";
  sockaddr_storage local;
  socklen_t llen = sizeof local;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &llen) != 0) return "";
  char buf[INET6_ADDRSTRLEN];
  if (local.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&local)->sin_addr, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

}  // namespace drun
