#include "rendezvous/base/random.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>

#include <filesystem>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace drun {

std::string RandomHex(int bytes) {
  std::vector<unsigned char> b(static_cast<size_t>(bytes));
  size_t got = 0;
  while (got < b.size()) {
    ssize_t r = getrandom(b.data() + got, b.size() - got, 0);
    if (r < 0 && errno == EINTR) continue;
    // getrandom cannot fail on Linux >= 3.17 once the pool is up; never hand out
    // a short token silently.
    if (r <= 0) abort();
    got += static_cast<size_t>(r);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * b.size());
  for (unsigned char c : b) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

absl::StatusOr<std::string> MakeTempDir(absl::string_view prefix) {
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) dir = "/tmp";
  std::string tmpl = (dir / absl::StrCat(prefix, "XXXXXX")).string();
  if (!mkdtemp(tmpl.data())) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create a directory under ", dir.string()));
  }
  return tmpl;
}

}  // namespace drun
