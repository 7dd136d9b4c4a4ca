// drun's own lines on standard error, "drun: <message>", written in one place
// so every part formats them alike; and the write loop every writer uses.
// (The agent sends its lines through its Console instead, which keeps them
// out of a worker's unfinished line; it formats them with DrunLine.)
#ifndef DRUN_RENDEZVOUS_BASE_SAY_H_
#define DRUN_RENDEZVOUS_BASE_SAY_H_

#include <string>

#include "absl/strings/string_view.h"

namespace drun {

// "drun: <message>\n".
std::string DrunLine(absl::string_view message);

// Writes DrunLine(message) to stderr.
void Say(absl::string_view message);

// Writes all of `data` to `fd`, retrying on EINTR and short writes (and
// waiting for a non-blocking fd to drain). Returns 0 or the errno that
// stopped it (EPIPE, ENOSPC, ...).
int WriteAll(int fd, absl::string_view data);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_SAY_H_
