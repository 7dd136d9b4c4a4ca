// Unpredictable names: job tokens, run ids and private temporary directories.
// Randomness comes from the kernel (getrandom), never from a seeded PRNG, so
// two launches in the same microsecond or pid never share a token.
#ifndef DRUN_RENDEZVOUS_BASE_RANDOM_H_
#define DRUN_RENDEZVOUS_BASE_RANDOM_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace drun {

// 2 * `bytes` lowercase hex digits from the kernel's random source.
std::string RandomHex(int bytes);

// A new directory `<TMPDIR or /tmp>/<prefix>XXXXXX`, mode 0700 (mkdtemp).
absl::StatusOr<std::string> MakeTempDir(absl::string_view prefix);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_RANDOM_H_
