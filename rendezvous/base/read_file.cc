#include "rendezvous/base/read_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "rendezvous/base/quote.h"
#include "rendezvous/base/unique_fd.h"

namespace drun {

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, std::size_t max_bytes,
                                          absl::string_view what) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", what, " ", QuotePath(path)));
  std::string text;
  char buf[65536];
  while (true) {
    const ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", what, " ", QuotePath(path)));
    if (n == 0) return text;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > max_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", QuotePath(path), " is larger than ",
                                                     max_bytes >> 20, " MiB; is it the right file?"));
    }
  }
}

}  // namespace drun
