#include "launcher/slurm/srun_relay.h"

#include <errno.h>
#include <unistd.h>

#include <chrono>

namespace drun {

SrunOutputRelay::SrunOutputRelay(ConsoleHub* hub, int stream)
    : hub_(hub), stream_(stream), plain_id_(hub->AddSource(stream)) {}

SrunOutputRelay::~SrunOutputRelay() {
  Finish();
  hosts_.clear();
  hub_->RemoveSource(plain_id_);
}

void SrunOutputRelay::Feed(absl::string_view data) {
  decoder_.Feed(data, [this](std::optional<absl::string_view> host, absl::string_view bytes) {
    Take(host, bytes);
  });
}

void SrunOutputRelay::Finish() {
  decoder_.Finish([this](std::optional<absl::string_view> host, absl::string_view bytes) {
    Take(host, bytes);
  });
}

SrunOutputRelay::Read SrunOutputRelay::ReadFrom(int fd) {
  char buf[64 * 1024];
  for (int chunks = 0; chunks < 16;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      Feed(absl::string_view(buf, static_cast<size_t>(n)));
      ++chunks;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return Read::kEmpty;
    } else {
      Finish();
      return Read::kEnded;
    }
  }
  return Read::kMore;
}

void SrunOutputRelay::Take(std::optional<absl::string_view> host, absl::string_view bytes) {
  if (!host) {
    hub_->Write(plain_id_, bytes);
    return;
  }
  auto it = hosts_.find(*host);
  if (it == hosts_.end()) {
    // A frame's partial piece arrives whole, after the agent's own delay:
    // it shows at once.
    it = hosts_.emplace(std::string(*host), std::make_unique<HostStream>(hub_, stream_, std::string(*host),
                                                                         std::chrono::milliseconds(0)))
             .first;
  }
  it->second->Feed(bytes);
}

}  // namespace drun
