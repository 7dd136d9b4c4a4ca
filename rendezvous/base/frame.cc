#include "rendezvous/base/frame.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace drun {
namespace {

bool ReadExactly(int fd, char* buf, std::size_t n) {
  while (n > 0) {
    const ssize_t r = read(fd, buf, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    buf += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace

std::string EncodeFrame(absl::string_view body) {
  const auto n = static_cast<std::uint32_t>(body.size());
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out.append(body.data(), body.size());
  return out;
}

std::optional<std::string> ReadFrame(int fd, std::size_t max_bytes) {
  unsigned char len[4];
  if (!ReadExactly(fd, reinterpret_cast<char*>(len), 4)) return std::nullopt;
  const std::uint32_t n = len[0] | (len[1] << 8) | (len[2] << 16) |
                          (static_cast<std::uint32_t>(len[3]) << 24);
  if (n > max_bytes) return std::nullopt;
  std::string body(n, '\0');
  if (!ReadExactly(fd, body.data(), n)) return std::nullopt;
  return body;
}

}  // namespace drun
