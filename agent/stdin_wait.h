// Whether a worker waits for input on its standard input right now: the
// kernel's word (/proc/PID/task/TID/syscall, readable for one's own
// descendants), for the agent that reads its terminal only while a rank
// waits there (agent.h: type-ahead no rank reads stays in the terminal for
// the shell, as with torchrun or any program that does not read it).
//
// A process waits when one of its threads is blocked in read/readv/pread on
// a descriptor that is the worker's stdin pipe, in poll/ppoll/select/pselect
// asking for that descriptor's input (the descriptor sets are read from the
// process's memory), or in epoll_wait on an instance that watches it for
// input (its /proc fdinfo; asyncio's way). Every process of the worker's
// process group counts (a shell wrapper's child, a subprocess that reads the
// inherited stdin). io_uring reads are not seen.
#ifndef DRUN_AGENT_STDIN_WAIT_H_
#define DRUN_AGENT_STDIN_WAIT_H_

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace drun {

// One line of /proc/PID/task/TID/syscall: the number and the six arguments
// of the call a blocked thread is in. nullopt for "running", "-1 ..." (not
// in a call) or anything unparsable.
struct BlockedCall {
  long nr = -1;
  std::array<uint64_t, 6> args{};
};
std::optional<BlockedCall> ParseSyscallLine(absl::string_view line);

enum class StdinWait {
  kWaiting,     // a process of the group waits for input on the pipe
  kNotWaiting,  // none does
  kUnknown,     // /proc does not say (no permission): assume it waits
};

// `leader`: the worker's pid, leader of its own process group, whose fd 0 is
// the pipe drun feeds.
StdinWait WorkerWaitsForStdin(pid_t leader);

}  // namespace drun

#endif  // DRUN_AGENT_STDIN_WAIT_H_
