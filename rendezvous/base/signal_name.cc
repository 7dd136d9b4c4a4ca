#include "rendezvous/base/signal_name.h"

#include <string.h>

#include "absl/strings/str_cat.h"

namespace drun {

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", sig);
}

std::string SignalAbbrev(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string(abbrev) : absl::StrCat(sig);
}

}  // namespace drun
