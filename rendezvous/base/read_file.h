// ReadSmallFile reads a whole file that a user named on the command line (a host
// file, a job file, an env file, a token file) in one place, so every such file
// gets the same checks and the same messages:
//   "cannot open hostfile '/x': No such file or directory"
//   "cannot read hostfile '/d': Is a directory"
//   "hostfile '/x' is larger than 16 MiB; is it the right file?"
// `what` names the file's role ("hostfile", "job file", "--env-file"). The error
// code is the errno's (absl::ErrnoToStatus) or InvalidArgument for the size.
#ifndef DRUN_RENDEZVOUS_BASE_READ_FILE_H_
#define DRUN_RENDEZVOUS_BASE_READ_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace drun {

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, std::size_t max_bytes,
                                          absl::string_view what);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_READ_FILE_H_
