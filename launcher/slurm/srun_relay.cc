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
  for (const auto& [prefix, id] : sources_) hub_->RemoveSource(id);
  hub_->RemoveSource(plain_id_);
}

void SrunOutputRelay::Feed(absl::string_view data) {
  decoder_.Feed(data, [this](const RelayOrigin& origin, absl::string_view bytes) { Take(origin, bytes); });
}

void SrunOutputRelay::Finish() {
  decoder_.Finish([this](const RelayOrigin& origin, absl::string_view bytes) { Take(origin, bytes); });
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

void SrunOutputRelay::Take(const RelayOrigin& origin, absl::string_view bytes) {
  switch (origin.kind) {
    case RelayOrigin::Kind::kNone:
      hub_->Write(plain_id_, bytes);
      return;
    case RelayOrigin::Kind::kSource: {
      auto it = sources_.find(origin.prefix);
      if (it == sources_.end()) {
        // A frame's partial piece arrives whole, after the agent's own delay: it shows at once.
        it = sources_.emplace(std::string(origin.prefix),
                              hub_->AddSource(stream_, std::chrono::milliseconds(0), origin.prefix,
                                              origin.cont_prefix, origin.colour_index))
                 .first;
      }
      hub_->Write(it->second, bytes);
      return;
    }
    case RelayOrigin::Kind::kAgent: {
      auto it = hosts_.find(origin.host);
      if (it == hosts_.end()) {
        it = hosts_.emplace(std::string(origin.host),
                            std::make_unique<HostStream>(hub_, stream_, std::string(origin.host),
                                                         std::chrono::milliseconds(0)))
                 .first;
      }
      it->second->Feed(bytes);
      return;
    }
  }
}

}  // namespace drun
