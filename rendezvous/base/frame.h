// Length-prefixed frames on a byte stream: a little-endian uint32 length, then
// that many bytes (a serialized protobuf message). Used where drun hands one
// message over a pipe or socket without gRPC: a remote agent's AgentLaunch on
// its stdin, and the control socket's request and reply.
#ifndef DRUN_RENDEZVOUS_BASE_FRAME_H_
#define DRUN_RENDEZVOUS_BASE_FRAME_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace drun {

std::string EncodeFrame(absl::string_view body);

// Reads one frame from a blocking descriptor; nothing when the stream ends or
// fails first, or announces more than `max_bytes`.
std::optional<std::string> ReadFrame(int fd, std::size_t max_bytes);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_FRAME_H_
