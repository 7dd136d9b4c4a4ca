#include "rendezvous/base/say.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace drun {

std::string DrunLine(absl::string_view message) { return absl::StrCat("drun: ", message, "\n"); }

void Say(absl::string_view message) { WriteAll(2, DrunLine(message)); }

int WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, -1);
    } else {
      return n < 0 ? errno : EIO;
    }
  }
  return 0;
}

}  // namespace drun
